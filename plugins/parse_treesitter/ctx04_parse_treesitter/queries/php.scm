; Our additions to tree-sitter-php's tags.scm, which matches calls and `new`
; only of qualified names: calls and `new` of a plain name, enums, and imports:
; `use` (a group `use A\{B, C}` imports `A`) and require/include of a literal.

(enum_declaration
  name: (name) @name) @definition.enum

(function_call_expression
  function: (name) @name) @reference.call

(object_creation_expression
  (name) @name) @reference.class

(namespace_use_declaration
  (namespace_use_clause . [(qualified_name) (name)] @import))

(namespace_use_declaration
  (namespace_name) @import)

[
  (require_expression (string) @import)
  (require_once_expression (string) @import)
  (include_expression (string) @import)
  (include_once_expression (string) @import)
]
