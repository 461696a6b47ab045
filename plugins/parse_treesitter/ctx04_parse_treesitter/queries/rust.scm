; Our additions to tree-sitter-rust's tags.scm: impl blocks (named after the
; type they implement, so their methods are Type.method), trait method
; signatures, calls through a path or with turbofish (`Self::new()`,
; `fs::read()`, `parse::<T>()`), and imports: `use`, `extern crate`, `mod m;`.

(impl_item
  type: [
    (type_identifier) @name
    (generic_type type: (type_identifier) @name)
    (scoped_type_identifier name: (type_identifier) @name)
    (generic_type type: (scoped_type_identifier name: (type_identifier) @name))
  ]) @definition.impl

(function_signature_item
  name: (identifier) @name) @definition.method

(call_expression
  function: (scoped_identifier
    name: (identifier) @name)) @reference.call

(call_expression
  function: (generic_function
    function: [
      (identifier) @name
      (scoped_identifier name: (identifier) @name)
      (field_expression field: (field_identifier) @name)
    ])) @reference.call

(use_declaration
  argument: (_) @import)

(extern_crate_declaration
  name: (identifier) @import)

(mod_item
  !body
  name: (identifier) @import)
