; Our additions to tree-sitter-cpp's tags.scm (after c.scm): namespaces,
; destructors and operators, out-of-line members of class templates and of
; nested scopes, specializations of class templates (`struct formatter<T> {`,
; named by the template), and calls through a scope, of a template, or by `new`.

(namespace_definition
  name: (_) @name) @definition.module

(function_declarator
  declarator: [(destructor_name) (operator_name)] @name) @definition.function

(function_declarator
  declarator: (qualified_identifier
    scope: (_) @local.scope
    name: [(identifier) (destructor_name) (operator_name)] @name)) @definition.method

(function_declarator
  declarator: (qualified_identifier
    scope: (_) @local.scope
    name: (qualified_identifier
      scope: (_) @local.scope
      name: [(identifier) (destructor_name) (operator_name)] @name))) @definition.method

(call_expression
  function: (qualified_identifier
    name: (identifier) @name)) @reference.call

(call_expression
  function: (template_function
    name: (identifier) @name)) @reference.call

(new_expression
  type: (type_identifier) @name) @reference.class

(struct_specifier
  name: (template_type name: (type_identifier) @name)
  body: (_)) @definition.class

(class_specifier
  name: (template_type name: (type_identifier) @name)
  body: (_)) @definition.class
