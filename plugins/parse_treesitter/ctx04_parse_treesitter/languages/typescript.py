"""The ``typescript`` plugin: JavaScript's dialect plus TypeScript's own constructs.

tree-sitter-typescript's tags query covers only what TypeScript adds
(signatures, abstract classes, interfaces, modules), so JavaScript's tags
query and ours run first. ``*.tsx`` is parsed with the TSX grammar, the rest
with TypeScript's (where ``<T>x`` is a type assertion, not JSX).
"""

from __future__ import annotations

from dataclasses import replace

from ctx04_parse_treesitter.engine import LanguageSpec, hooks, kinds
from ctx04_parse_treesitter.languages.javascript import JAVASCRIPT

TYPESCRIPT = replace(
    JAVASCRIPT,
    grammar="tree_sitter_typescript:language_typescript",
    tags=("tree_sitter_javascript", "tree_sitter_typescript"),
    queries=("javascript.scm", "typescript.scm"),
    kinds={**JAVASCRIPT.kinds, **kinds({
        "function": "function_signature method_signature abstract_method_signature",
        "class": "abstract_class_declaration",
        "interface": "interface_declaration",
        "enum": "enum_declaration",
        "namespace": "module internal_module",
    })},
    blocks=JAVASCRIPT.blocks | {"interface_body", "enum_body"},
    wrappers=JAVASCRIPT.wrappers | {"ambient_declaration"},
)
TSX = replace(TYPESCRIPT, grammar="tree_sitter_typescript:language_tsx")

LANGUAGE = LanguageSpec(
    "typescript",
    (("*.ts", TYPESCRIPT), ("*.tsx", TSX), ("*.mts", TYPESCRIPT), ("*.cts", TYPESCRIPT)),
)
source_globs, parse_file = hooks(LANGUAGE)
