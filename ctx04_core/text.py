"""Splitting code and prose into the terms every scorer in ctx04 compares.

One tokenizer serves the re-rank, the line prune and the description index,
so a term means the same thing at every stage.
"""

from __future__ import annotations

import functools
import re

IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# How languages qualify a name: a.b (Python, Go, Java, JS), a::b (Rust, C++,
# PHP statics), a->b (PHP, C), A\B (PHP namespaces), A#b (Ruby instance methods).
QUALIFIER = re.compile(r"::|->|[.\\#]")
_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*|[0-9]+")
# A checker's or linter's code for a message or rule (``E108``, ``W0611``,
# ``PIE800``): capitals then digits. Linters, compilers and frameworks name
# their messages so in every language, and write the code where they define
# or document it and hardly anywhere else.
RULE_CODE = re.compile(r"[A-Z]{1,6}[0-9]{2,5}")
_RULE_CODE_WORD = re.compile(rf"(?<![\w-]){RULE_CODE.pattern}(?![\w-])")
# Boundaries inside an identifier: snake_case, camelCase, HTTPServer, v2Beta.
_PART = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|[0-9]+")


def tokenize(text: str) -> list[str]:
    """Lower-cased terms: each identifier whole, then its parts if it has several.

    ``select_related`` gives ``select_related, select, related`` so a task that
    names the identifier matches it exactly and prose that says "related"
    still matches a part.
    """
    terms: list[str] = []
    for word in _WORD.findall(text):
        terms.extend(_word_terms(word))
    return terms


# Distinct words whose terms are kept: a warm django retrieval tokenizes
# some hundred thousand words, most of them repeats of a few thousand.
WORDS_CACHED = 1 << 14


@functools.lru_cache(maxsize=WORDS_CACHED)
def _word_terms(word: str) -> tuple[str, ...]:
    """The word lower-cased, then its parts if it has several."""
    parts = _PART.findall(word)
    if len(parts) > 1:
        return (word.lower(), *(part.lower() for part in parts))
    return (word.lower(),)


# Words so common in English prose that they say nothing about which code a
# task concerns; dropping them keeps a search's term budget for the words that do.
_STOPWORD_TEXT = """
a about above after again against all also am an and any are as at be because been before
being below between both but by can could did do does doing down during each few for from
further had has have having he her here hers him his how i if in into is it its itself just
me more most my no nor not now of off on once only or other our ours out over own same she
should so some such than that the their theirs them then there these they this those through
to too under until up very was we were what when where which while who whom why will with
would you your yours
"""
STOPWORDS = frozenset(_STOPWORD_TEXT.split())


def content_terms(text: str) -> list[str]:
    """The distinct terms of ``text`` less stopwords, in first-seen order."""
    return [term for term in dict.fromkeys(tokenize(text)) if term not in STOPWORDS]


def rule_codes(text: str) -> frozenset[str]:
    """The rule codes ``text`` writes as words (``auth.E003`` writes ``E003``)."""
    return frozenset(_RULE_CODE_WORD.findall(text))


def simple_name(qualified: str) -> str:
    """The last name of a qualified one: ``b`` of ``a.b``, ``a::b``, ``$a->b``."""
    return QUALIFIER.split(qualified)[-1]


def dotted(qualified: str) -> str:
    """The qualified name as the code index writes it: ``a::b::C`` is ``a.b.C``."""
    return QUALIFIER.sub(".", qualified.lstrip("$"))


# The one definition of a line in ctx04: text ending with ``\n`` (a ``\r``
# before it is part of the ending). ripgrep, git and tree-sitter number lines
# so; str.splitlines also breaks at \r, \x0b, \x0c, \x1c-\x1e, \x85 and
# \u2028-\u2029, and Python's own tokenizer at a lone \r (see
# ``ctx04_core.index.python_parser.syntax_tree``), which none of them do.
def split_lines(text: str) -> tuple[str, ...]:
    """The lines of ``text`` as ripgrep and git number them: split on ``\\n`` only."""
    lines = text.split("\n")
    if lines[-1] == "":
        lines.pop()
    return tuple(line.removesuffix("\r") for line in lines)


BYTE_ORDER_MARK = "\ufeff"


def source_text(data: bytes) -> str:
    """A source file's bytes as text: UTF-8, less a leading byte-order mark.

    The mark says the encoding and is no character of line 1: Python, Go,
    Rust and JavaScript skip it, and left in, it made ``ast`` refuse a valid
    file and shifted line 1's columns. UnicodeDecodeError's ``start`` counts
    the bytes of ``data``, mark included (``utf-8-sig`` counts after it).
    """
    return data.decode("utf-8").removeprefix(BYTE_ORDER_MARK)
