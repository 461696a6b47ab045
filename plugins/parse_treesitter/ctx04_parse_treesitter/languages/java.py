"""The ``java`` plugin: classes, records, enums, interfaces, their methods and constructors."""

from __future__ import annotations

from ctx04_parse_treesitter.engine import SLASH_DOCS, Dialect, LanguageSpec, hooks, kinds

JAVA = Dialect(
    grammar="tree_sitter_java",
    kinds=kinds({
        "class": "class_declaration record_declaration",
        "interface": "interface_declaration annotation_type_declaration",
        "enum": "enum_declaration",
        "function": "method_declaration constructor_declaration",
    }),
    blocks=frozenset({
        "block", "class_body", "interface_body", "enum_body", "enum_body_declarations",
        "constructor_body", "annotation_type_body", "switch_block",
        "switch_block_statement_group",
    }),
    comments=frozenset({"line_comment", "block_comment"}),
    doc_comment=SLASH_DOCS,
)

LANGUAGE = LanguageSpec("java", (("*.java", JAVA),))
source_globs, parse_file = hooks(LANGUAGE)
