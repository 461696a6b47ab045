"""The ``javascript`` plugin (JSX included: the grammar reads it).

Functions are what the tags query names: declarations, named function
expressions, and arrow functions or function expressions assigned to a
``const``/``let``/``var``, a property or an object key. A ``const f = () =>
{}`` node spans its whole declaration (``export const ...`` included).
"""

from __future__ import annotations

from ctx04_parse_treesitter.engine import SLASH_DOCS, Dialect, LanguageSpec, hooks, kinds

JAVASCRIPT = Dialect(
    grammar="tree_sitter_javascript",
    kinds=kinds({
        "function": "function_declaration generator_function_declaration function_expression "
                    "generator_function method_definition variable_declarator "
                    "assignment_expression pair",
        "class": "class_declaration class",
    }),
    blocks=frozenset({"statement_block", "class_body", "switch_body", "switch_case",
                      "switch_default"}),
    comments=frozenset({"comment"}),
    doc_comment=SLASH_DOCS,
    wrappers=frozenset({"export_statement", "lexical_declaration", "variable_declaration"}),
    attributes=frozenset({"decorator"}),
)

LANGUAGE = LanguageSpec(
    "javascript", tuple((glob, JAVASCRIPT) for glob in ("*.js", "*.jsx", "*.mjs", "*.cjs"))
)
source_globs, parse_file = hooks(LANGUAGE)
