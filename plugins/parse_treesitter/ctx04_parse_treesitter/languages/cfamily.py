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
comment, a line's own trailing comment aside), so an upper-case argument or
enumerator on its own line stays.

Macros that stand for specifiers (``FMT_CONSTEXPR auto f()``, ``class
FMT_API format_error``, ``static REDIS_INLINE int``) are blanked where a
declaration's specifiers go: at a line's start or after a specifier keyword,
when a type and a name still follow (or, a constructor's, the name of a class
or struct of the file; after ``class`` or ``struct``, any name). tree-sitter
reads the macro as the type and the real type as the name; in fmt's format.h
88 of 320 functions broke, and one struct swallowed 800 lines of them.
An upper-case type followed by a name alone (``YY_BUFFER_STATE
yy_create_buffer(...)``, ``YY_CHAR c;``) stays: it is the type. In C++, a
macro call as a template parameter (``template <typename T,
FMT_ENABLE_IF(cond)>``, an enable_if in disguise) is read as the unnamed
parameter ``int``.
"""

from __future__ import annotations

import functools
import re

from ctx04_parse_treesitter.engine import Dialect, kinds

# An upper-case name with an underscore, arguments on the same line or none.
_LONE_MACRO = re.compile(
    rb"[ \t]*(?:[A-Z][A-Z0-9]*)?_[A-Z0-9_]*[ \t]*(?:\([^()\n]*\))?[ \t]*\r?\n?"
)
_STATEMENT_ENDS = (b";", b"{", b"}", b":")
_COMMENT_OR_DIRECTIVE = re.compile(rb"[ \t]*(?:#|//|/\*|\*)|.*\*/[ \t]*$")
_TRAILING_COMMENT = re.compile(rb"[ \t]*//.*$")
_MACRO_NAME = rb"[A-Z][A-Z0-9]*_[A-Z0-9_]*"
# With its arguments, if any, on the line: parentheses nest one level.
_MACRO = _MACRO_NAME + rb"(?:\([^()\n]*(?:\([^()\n]*\)[^()\n]*)*\))?"
_SPECIFIER_KEYWORDS = frozenset({
    b"template", b"static", b"inline", b"extern", b"const", b"constexpr", b"friend", b"virtual",
    b"explicit", b"typedef",
})
_TYPE_KEYWORDS = frozenset({b"class", b"struct", b"union", b"enum"})
# A run of macros, each with its arguments, and what follows it: a type
# (qualified, with template arguments, pointers) and a name; or a name and "(".
_MACRO_RUN = re.compile(
    rb"(?<![\w$])((?:" + _MACRO + rb"[ \t\r\n]+)+)"
    rb"(?:(?P<type_then_name>(?:[A-Za-z_][\w:]*(?:<[^;{}()\n]{0,200}>)?[ \t*&]+)+[A-Za-z_~])"
    rb"|(?P<name>[A-Za-z_]\w*)[ \t]*\(|(?P<word>[A-Za-z_]))"
)
_WORD_BEFORE = re.compile(rb"(?:^|[^\w$])(\w+)[ \t]+$")
_CLASS_NAME = re.compile(rb"\b(?:class|struct)[ \t]+(?:" + _MACRO_NAME + rb"[ \t]+)*([A-Za-z_]\w*)")
_MACRO_CALL_AFTER_BRACKET_OR_COMMA = re.compile(rb"(?<=[<,])[ \t\r\n]*(" + _MACRO_NAME + rb")\(")
_TEMPLATE_HEAD = re.compile(rb"\btemplate[ \t\r\n]*<")


def _blank(text: bytes) -> bytes:
    return re.sub(rb"[^\r\n]", b" ", text)


def _without_lone_macros(data: bytes) -> bytes:
    lines = data.splitlines(keepends=True)
    statement_may_start = True
    in_directive = False
    for number, line in enumerate(lines):
        if statement_may_start and not in_directive and _LONE_MACRO.fullmatch(line):
            lines[number] = _blank(line)
            continue
        text = line.rstrip()
        if in_directive:
            in_directive = text.endswith(b"\\")
            continue
        if text:
            in_directive = text.lstrip().startswith(b"#") and text.endswith(b"\\")
            code = text if _COMMENT_OR_DIRECTIVE.match(text) else _TRAILING_COMMENT.sub(b"", text)
            statement_may_start = (
                code.endswith(_STATEMENT_ENDS) or _COMMENT_OR_DIRECTIVE.match(code) is not None
            )
    return b"".join(lines)


def _without_specifier_macros(data: bytes) -> bytes:
    @functools.cache
    def class_names() -> frozenset[bytes]:
        # Read only for a macro before a name and "(": most files have none.
        return frozenset(_CLASS_NAME.findall(data))

    parsed = bytearray(data)
    for found in _MACRO_RUN.finditer(data):
        line_start = data.rfind(b"\n", 0, found.start()) + 1
        before = data[line_start : found.start()]
        keyword = _WORD_BEFORE.search(before)
        after_type_keyword = keyword is not None and keyword[1] in _TYPE_KEYWORDS
        at_declaration_start = not before.strip() or (
            keyword is not None and keyword[1] in _SPECIFIER_KEYWORDS
        )
        if after_type_keyword or (
            at_declaration_start
            and (found["type_then_name"] is not None or found["name"] in class_names())
        ):
            parsed[found.start(1) : found.end(1)] = _blank(found[1])
    return bytes(parsed)


def _without_template_parameter_macros(data: bytes) -> bytes:
    parsed = bytearray(data)
    for found in _MACRO_CALL_AFTER_BRACKET_OR_COMMA.finditer(data):
        if not _inside_template_head(data, found.start()):
            continue
        end = _closing_parenthesis(data, found.end())
        if end is not None:
            start = found.start(1)
            parsed[start:end] = b"int" + _blank(data[start + 3 : end])
    return bytes(parsed)


def _inside_template_head(data: bytes, at: int) -> bool:
    # A template head is short; 400 bytes back finds its "template <".
    heads = list(_TEMPLATE_HEAD.finditer(data, max(0, at - 400), at))
    if not heads:
        return False
    between = data[heads[-1].end() : at]
    return between.count(b"<") >= between.count(b">")


def _closing_parenthesis(data: bytes, after_open: int) -> int | None:
    depth = 1
    for at in range(after_open, min(len(data), after_open + 1000)):
        if data[at] == ord("("):
            depth += 1
        elif data[at] == ord(")"):
            depth -= 1
            if depth == 0:
                return at + 1
    return None


def _c_parsed(data: bytes) -> bytes:
    return _without_specifier_macros(_without_lone_macros(data))


def _cpp_parsed(data: bytes) -> bytes:
    return _without_template_parameter_macros(_c_parsed(data))


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
    parsed_bytes=_c_parsed,
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
    parsed_bytes=_cpp_parsed,
)
