"""The ``php`` plugin.

``namespace X { ... }`` is a ``namespace`` node holding its definitions;
``namespace X;`` without braces is not (it names the rest of the file, whose
qualnames stay path-based). A trait is a ``trait``.
"""

from __future__ import annotations

import re

from ctx04_parse_treesitter.engine import Dialect, LanguageSpec, hooks, kinds

PHP = Dialect(
    grammar="tree_sitter_php:language_php",
    kinds=kinds({
        "namespace": "namespace_definition",
        "class": "class_declaration",
        "interface": "interface_declaration",
        "trait": "trait_declaration",
        "enum": "enum_declaration",
        "function": "function_definition method_declaration",
    }),
    blocks=frozenset({
        "compound_statement", "declaration_list", "enum_declaration_list", "switch_block",
        "case_statement", "default_statement", "colon_block",
    }),
    comments=frozenset({"comment"}),
    doc_comment=re.compile(r"//|#(?!\[)|/\*\*(?!/)"),
    needs_body=frozenset({"namespace_definition"}),
    identifier=re.compile(r"(?!\d)\w+"),  # a call of `$fn()` names a variable, not a function
)

LANGUAGE = LanguageSpec("php", (("*.php", PHP),))
source_globs, parse_file = hooks(LANGUAGE)
