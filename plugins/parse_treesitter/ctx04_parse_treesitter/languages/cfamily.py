"""The C and C++ dialects, C++'s being C's tables plus its own constructs.

tree-sitter-c's tags query captures a function's declarator, in a prototype
as in a definition; ``lift`` climbs from it through the declarators a name
may be wrapped in (``int *(*pick(int))(void)``) to the ``function_definition``,
and drops it when it is a prototype's. ``typedef struct {...} name`` is a
struct named by its typedef. Preprocessor conditionals are blocks, so the
definitions and statements inside ``#ifdef`` stay separate statements.
``/* */`` comments document too: C code uses them more than ``/** */``.

A macro alone on its line between statements (``FMT_BEGIN_NAMESPACE``,
``Q_OBJECT``, ``REDIS_NO_SANITIZE("bounds")`` above a function) is blanked
before parsing: without its expansion it is no C, and tree-sitter's recovery
from it can swallow a whole file into one bogus definition. Only where a
statement may start (after ``;``, ``{``, ``}``, ``:``, a directive or a
comment), so an upper-case argument or enumerator on its own line stays.
"""

from __future__ import annotations

import re

from ctx04_parse_treesitter.engine import Dialect, kinds

# An upper-case name with an underscore, arguments on the same line or none.
_LONE_MACRO = re.compile(
    rb"[ \t]*(?:[A-Z][A-Z0-9]*)?_[A-Z0-9_]*[ \t]*(?:\([^()\n]*\))?[ \t]*\r?\n?"
)
_STATEMENT_ENDS = (b";", b"{", b"}", b":")
_COMMENT_OR_DIRECTIVE = re.compile(rb"[ \t]*(?:#|//|/\*|\*)|.*\*/[ \t]*$")


def _without_lone_macros(data: bytes) -> bytes:
    lines = data.splitlines(keepends=True)
    statement_may_start = True
    for number, line in enumerate(lines):
        if statement_may_start and _LONE_MACRO.fullmatch(line):
            lines[number] = re.sub(rb"[^\r\n]", b" ", line)
            continue
        text = line.rstrip()
        if text:
            statement_may_start = (
                text.endswith(_STATEMENT_ENDS) or _COMMENT_OR_DIRECTIVE.match(text) is not None
            )
    return b"".join(lines)


_DECLARATORS = frozenset({
    "function_declarator", "pointer_declarator", "parenthesized_declarator",
    "attributed_declarator",
})

C = Dialect(
    grammar="tree_sitter_c",
    kinds=kinds({
        "function": "function_definition",
        "struct": "struct_specifier union_specifier",
        "enum": "enum_specifier",
    }),
    blocks=frozenset({
        "compound_statement", "field_declaration_list", "enumerator_list", "case_statement",
        "preproc_if", "preproc_ifdef", "preproc_else", "preproc_elif", "preproc_elifdef",
    }),
    comments=frozenset({"comment"}),
    doc_comment=re.compile(r"//(?!!)|/\*"),
    kind_of_type_field=frozenset({"type_definition"}),
    needs_body=frozenset({"struct_specifier", "union_specifier", "enum_specifier"}),
    lift={"function_declarator": ("function_definition", _DECLARATORS)},
    parsed_bytes=_without_lone_macros,
)

CPP = Dialect(
    grammar="tree_sitter_cpp",
    queries=("c.scm", "cpp.scm"),
    kinds={**C.kinds, **kinds({"class": "class_specifier", "namespace": "namespace_definition"})},
    blocks=C.blocks | {"declaration_list"},
    comments=C.comments,
    doc_comment=C.doc_comment,
    kind_of_type_field=C.kind_of_type_field,
    needs_body=C.needs_body | {"class_specifier"},
    lift={"function_declarator": ("function_definition", _DECLARATORS | {"reference_declarator"})},
    wrappers=frozenset({"template_declaration"}),
    parsed_bytes=_without_lone_macros,
)
