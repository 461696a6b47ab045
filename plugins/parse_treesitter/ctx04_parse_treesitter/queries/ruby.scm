; Our additions to tree-sitter-ruby's tags.scm: `Foo.new` as a reference to
; Foo, and require, require_relative and load of a literal as imports.

(call
  receiver: (constant) @name
  method: (identifier) @_new
  (#eq? @_new "new")) @reference.class

(call
  !receiver
  method: (identifier) @_require
  arguments: (argument_list . (string (string_content) @import))
  (#any-of? @_require "require" "require_relative" "load"))
