; Our additions to tree-sitter-go's tags.scm, which does not say which type a
; method's receiver is, nor what a program imports.

(method_declaration
  receiver: (parameter_list
    (parameter_declaration
      type: [
        (type_identifier) @local.scope
        (pointer_type (type_identifier) @local.scope)
        (generic_type type: (type_identifier) @local.scope)
        (pointer_type (generic_type type: (type_identifier) @local.scope))
      ]))
  name: (field_identifier) @name) @definition.method

(import_spec
  path: (_) @import)
