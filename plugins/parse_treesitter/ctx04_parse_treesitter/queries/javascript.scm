; Our additions to tree-sitter-javascript's tags.scm (the TypeScript dialect
; reads this file too): constructors and private methods, which the tags query
; leaves out, and imports: `import ... from`, `export ... from`, `require()`
; and `import()` of a literal path.

(method_definition
  name: [(property_identifier) (private_property_identifier)] @name) @definition.method

(import_statement
  source: (string) @import)

(export_statement
  source: (string) @import)

(call_expression
  function: (identifier) @_require
  arguments: (arguments . (string) @import)
  (#eq? @_require "require"))

(call_expression
  function: (import)
  arguments: (arguments . (string) @import))
