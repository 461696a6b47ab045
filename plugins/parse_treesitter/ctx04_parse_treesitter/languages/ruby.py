"""The ``ruby`` plugin: ``*.rb``, ``*.rake`` and ``Rakefile``.

A ``module`` is a ``namespace``; unlike other languages' namespaces it is a
mixin, so functions defined in it are methods. Calls are the tags query's
``call`` nodes: a call without receiver, arguments or parentheses (``foo``)
reads like a local variable and is not an edge (the tags query tells them
apart by scope tracking, which the engine does not do).
"""

from __future__ import annotations

import re

from ctx04_core.types import TYPE_KINDS
from ctx04_parse_treesitter.engine import HASH_DOCS, Dialect, LanguageSpec, hooks, kinds

RUBY = Dialect(
    grammar="tree_sitter_ruby",
    kinds=kinds({"function": "method singleton_method", "class": "class",
                 "namespace": "module"}),
    blocks=frozenset({"body_statement", "block_body", "then", "else", "do", "begin", "ensure"}),
    comments=frozenset({"comment"}),
    doc_comment=HASH_DOCS,
    method_containers=TYPE_KINDS,
    identifier=re.compile(r"(?!\d)\w+[?!]?"),
)

LANGUAGE = LanguageSpec("ruby", (("*.rb", RUBY), ("*.rake", RUBY), ("Rakefile", RUBY)))
source_globs, parse_file = hooks(LANGUAGE)
