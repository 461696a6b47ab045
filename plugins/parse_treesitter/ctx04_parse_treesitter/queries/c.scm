; Our additions to tree-sitter-c's tags.scm, which names definitions only:
; unions, the calls a function makes, and #include paths as imports.
; (The C++ dialect reads this file too: these node types are C++'s as well.)

(union_specifier
  name: (type_identifier) @name
  body: (_)) @definition.class

(call_expression
  function: (identifier) @name) @reference.call

(call_expression
  function: (field_expression
    field: (field_identifier) @name)) @reference.call

(preproc_include
  path: (_) @import)
