; Our additions to tree-sitter-typescript's tags.scm (after JavaScript's tags
; query and ours): `namespace X {}`, enums, and `import x = require("y")`.

(internal_module
  name: (_) @name) @definition.module

(enum_declaration
  name: (identifier) @name) @definition.enum

(import_require_clause
  source: (string) @import)
