"""The ``go`` plugin.

A method is named after its receiver's type (``geo.Point.Dist``), wherever
that type is declared. ``type T struct {...}`` and ``type T interface
{...}`` are a ``struct`` and an ``interface``; other named types (``type ID
int``) are not nodes.
"""

from __future__ import annotations

from ctx04_parse_treesitter.engine import SLASH_DOCS, Dialect, LanguageSpec, hooks, kinds

GO = Dialect(
    grammar="tree_sitter_go",
    kinds=kinds({
        "function": "function_declaration",
        "method": "method_declaration",
        "struct": "struct_type",
        "interface": "interface_type",
    }),
    blocks=frozenset({
        "block", "statement_list", "field_declaration_list", "expression_case", "type_case",
        "default_case", "communication_case",
    }),
    comments=frozenset({"comment"}),
    doc_comment=SLASH_DOCS,
    kind_of_type_field=frozenset({"type_spec"}),
    wrappers=frozenset({"type_declaration"}),
)

LANGUAGE = LanguageSpec("go", (("*.go", GO),))
source_globs, parse_file = hooks(LANGUAGE)
