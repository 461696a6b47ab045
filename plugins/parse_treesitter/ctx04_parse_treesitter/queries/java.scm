; Our additions to tree-sitter-java's tags.scm: enums, records, annotation
; types and constructors, and imports (`import a.b.*;` imports `a.b`).

(enum_declaration
  name: (identifier) @name) @definition.class

(record_declaration
  name: (identifier) @name) @definition.class

(annotation_type_declaration
  name: (identifier) @name) @definition.interface

(constructor_declaration
  name: (identifier) @name) @definition.method

(import_declaration
  [(scoped_identifier) (identifier)] @import)
