"""The one engine behind every language: a tree-sitter parse, one query pass, tables.

A language is data (a :class:`Dialect` per grammar, see ``languages/``); this
module turns a file into a :class:`~ctx04_core.types.ParsedFile` the same way
for all of them.

Definitions come from the grammar wheel's own ``queries/tags.scm``
(``@definition.*`` with its ``@name``) plus a small query of ours per language
(``queries/<language>.scm``) for what the tags query leaves out. The captured
node's type, not the tags query's coarse label, decides the kind, through the
dialect's ``kinds`` table; a captured type missing from it (constants, fields,
type aliases, macros) is not a node. ``@local.scope`` captures name the type a
definition belongs to although it is written outside it (a Go receiver, C++'s
``void Circle::grow()``): they are put between the enclosing qualname and the
name, and make a function a method.

Qualnames: the module is the repo-relative path without its extension, ``/``
turned into ``.``; a definition is its enclosing definition's qualname, its
owners, its name. A name written with ``::``, ``\\`` or ``.`` (C++ ``a::b``,
PHP ``App\\Models``, TypeScript ``A.B``) is split, its last part being the
name. A function directly inside a container whose kind is in the dialect's
``method_containers`` (or with owners) is a ``method``. Definitions inside a
function are part of its body, not nodes, as in the Python parser.

Spans run from the first attribute or decorator written before the definition
(Rust ``#[derive]``, TypeScript ``@cached()``) to its end, and cover a
wrapper that holds just this definition (``export``, ``template <...>``, the
``const`` of ``const f = () => {}``, Go's ``type``). The header ends with the
last token before the body (a block, a ``body`` field, else the first
``{``); the signature is the header's text without comments, whitespace
folded. The docstring is the first paragraph of the doc comment alone on the
lines directly above the definition: a ``/** */`` block or a run of line
comments, in the dialect's ``doc_comment`` style; a line starting with ``@``
(``@param``) ends the paragraph too.

Statements are the named children of the dialect's ``blocks`` (and of the
file): one covering several lines is listed whole, or, when it holds a block
(a function, an ``if``, a callback), from its first line to its header's end.
A node directly holding a block (``else if (...) {``) lists its header too.

Every edge's line lies inside its source node's span: references and imports
belong to the innermost node containing them. ``invoke`` edges come from
``@reference.call`` and ``@reference.class`` captures (the last part of the
name, if it is an identifier), ``import`` edges from our ``@import`` captures,
the path or module as written without quotes; both are deduplicated per source
node, keeping the first line.

A file with syntax errors keeps everything tree-sitter recovered, with the
first lines of its ERROR and MISSING nodes in ``error_lines``.
"""

from __future__ import annotations

import bisect
import importlib
import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from functools import cache
from importlib.resources import files

import tree_sitter as ts

from ctx04_core.hookspecs import hookimpl
from ctx04_core.parse_budget import ParseBudget
from ctx04_core.settings import Settings
from ctx04_core.text import split_lines
from ctx04_core.types import FUNCTION_KINDS, TYPE_KINDS, Edge, Node, ParsedFile, Span

MAX_DOCSTRING_CHARS = 200
MAX_ERROR_LINES = 20
# What tree-sitter is handed at a time: a few calls for the largest file indexed.
READ_CHUNK_BYTES = 64 * 1024

# Doc comment styles: the comment's text must match from its start.
SLASH_DOCS = re.compile(r"//(?!!)|/\*\*(?!/)")  # `//`, `///`, `/** */`; not `//!`
HASH_DOCS = re.compile(r"#(?![!\[])")  # not a shebang nor a PHP attribute

_IDENTIFIER = re.compile(r"(?!\d)[\w$]+")
_NAME_SEPARATORS = re.compile(r"::|\\|\.")
_REFERENCE_SEPARATORS = re.compile(r"::|\\|\.|->")
_TEMPLATE_ARGUMENTS = re.compile(r"<[^<>]*>")
_COMMENT_HEAD = re.compile(r"^\s*(?:/\*+|//+|#+|\*+)")
_COMMENT_TAIL = re.compile(r"\*+/\s*$")
_QUOTES = "\"'`<>"
_INVOKES = frozenset({"reference.call", "reference.class"})
_SKIPPED = -2  # the scope of a definition inside a function, which is no node
# Captures the engine reads; a pattern with none of them only costs time (Go's
# tags query captures every type identifier as a type reference).
_USED = re.compile(rb"@(?:definition\.|reference\.(?:call|class)\b|import\b)")


@dataclass(frozen=True, eq=False)
class Dialect:
    """How to read one grammar's trees: everything that differs between languages."""

    grammar: str  # "module" or "module:function" of the grammar wheel giving the language
    kinds: Mapping[str, str]  # definition node type -> node kind (see ``kinds``)
    blocks: frozenset[str]  # node types whose named children are statements
    comments: frozenset[str]
    doc_comment: re.Pattern[str]
    # Grammar modules whose TAGS_QUERY is used, and our own query files in
    # queries/, in order; by default the grammar module's, and tree_sitter_x's x.scm.
    tags: tuple[str, ...] | None = None
    queries: tuple[str, ...] | None = None
    # Definitions whose kind is that of their anonymous ``type`` field (Go's
    # ``type Point struct {...}``, C's ``typedef struct {...} point_t``).
    kind_of_type_field: frozenset[str] = frozenset()
    # Types that declare rather than define without a ``body`` (``struct s;``, ``mod m;``).
    needs_body: frozenset[str] = frozenset()
    # A captured type -> (the definition type above it, the types passed on the way):
    # C's tags query captures the declarator, a prototype's as well as a definition's.
    lift: Mapping[str, tuple[str, frozenset[str]]] = field(default_factory=dict)
    wrappers: frozenset[str] = frozenset()
    attributes: frozenset[str] = frozenset()  # written before a definition, part of its span
    method_containers: frozenset[str] = TYPE_KINDS - {"namespace"}
    identifier: re.Pattern[str] = _IDENTIFIER  # what an invoke edge's target must be
    # The bytes tree-sitter reads, made from the file's and as long (so every
    # position holds for both): C's lone macro lines blanked.
    parsed_bytes: Callable[[bytes], bytes] | None = None


@dataclass(frozen=True)
class LanguageSpec:
    """One plugin: its name, and the dialect each file-name glob is parsed with."""

    name: str
    dialects: tuple[tuple[str, Dialect], ...]  # (glob, dialect), the first match wins

    def dialect_for(self, path: str) -> Dialect | None:
        name = path.rsplit("/", 1)[-1]
        return next((d for glob, d in self.dialects if fnmatchcase(name, glob)), None)


def kinds(node_types: Mapping[str, str]) -> dict[str, str]:
    """A ``kinds`` table from each kind's node types: ``{"struct": "struct_item union_item"}``."""
    return {t: kind for kind, types in node_types.items() for t in types.split()}


def hooks(
    spec: LanguageSpec,
) -> tuple[Callable[[], list[str]], Callable[[str, str, Settings], ParsedFile | None]]:
    """The ``source_globs`` and ``parse_file`` hookimpls of one language's module."""

    @hookimpl
    def source_globs() -> list[str]:
        return [glob for glob, _ in spec.dialects]

    @hookimpl
    def parse_file(path: str, text: str, settings: Settings) -> ParsedFile | None:
        return parse(spec, path, text, settings)

    return source_globs, parse_file


def parse(spec: LanguageSpec, path: str, text: str, settings: Settings) -> ParsedFile | None:
    dialect = spec.dialect_for(path)
    if dialect is None:
        return None
    budget = ParseBudget(settings)
    parser, query = _compiled(dialect)
    data = text.encode("utf-8", "surrogatepass")
    parsed = data if dialect.parsed_bytes is None else dialect.parsed_bytes(data)
    try:
        # Read through a callback: tree-sitter asks the progress callback
        # whether to stop only then, never while parsing one bytestring.
        tree = parser.parse(
            lambda at, _point: parsed[at : at + READ_CHUNK_BYTES],
            progress_callback=lambda _at, _has_error: budget.expired(),
        )
    except ValueError as err:  # tree-sitter's "Parsing failed": stopped, or no tree at all
        budget.check()
        raise SyntaxError(f"tree-sitter could not parse the file: {err}") from err
    extraction = _Extraction(spec.name, dialect, path, data, len(split_lines(text)), budget)
    return extraction.run(tree, query)


def module_qualname(path: str) -> str:
    folder, _, name = path.rpartition("/")
    stem = name.rsplit(".", 1)[0] if "." in name[1:] else name
    return ".".join([*(folder.split("/") if folder else []), stem])


@cache
def _compiled(dialect: Dialect) -> tuple[ts.Parser, ts.Query]:
    """The dialect's parser and its one query; grammars load on first use."""
    module, _, function = dialect.grammar.partition(":")
    grammar = ts.Language(getattr(importlib.import_module(module), function or "language")())
    tags = (module,) if dialect.tags is None else dialect.tags
    queries = (
        (module.removeprefix("tree_sitter_") + ".scm",) if dialect.queries is None
        else dialect.queries
    )
    sources: list[str] = [importlib.import_module(m).TAGS_QUERY for m in tags]
    ours = files(__package__).joinpath("queries")
    sources += [ours.joinpath(name).read_text(encoding="utf-8") for name in queries]
    source = "\n".join(sources)
    query = ts.Query(grammar, source + _alternatives(dialect.blocks, "block")
                     + _alternatives(dialect.comments, "comment"))
    encoded = source.encode("utf-8")  # patterns are located by byte offset
    for index in range(query.pattern_count):
        # "#is-not? local" (Ruby: an identifier that is not a local variable is
        # a call) needs scope tracking we do not do: every variable would be a call.
        non_local = query.pattern_assertions(index).get("local") == (None, False)
        start = query.start_byte_for_pattern(index)
        unused = start < len(encoded) and not _USED.search(
            encoded, start, query.end_byte_for_pattern(index)
        )
        if non_local or unused:
            query.disable_pattern(index)
    return ts.Parser(grammar), query


def _alternatives(types: frozenset[str], capture: str) -> str:
    return "\n[" + " ".join(f"({t})" for t in sorted(types)) + f"] @{capture}\n"


@dataclass
class _Found:
    """A definition the query captured, before it is placed in the file's tree."""

    node: ts.Node  # the definition itself
    outer: ts.Node  # with the wrappers around it
    top: ts.Node  # its first attribute, or ``outer``
    kind: str
    name: str
    owners: tuple[str, ...]


@dataclass
class _Scope:
    """A node of the file, with the references found in it."""

    node: Node
    start: int  # byte range of its span
    end: int
    parent: int  # index of the enclosing scope; -1 for the module
    contains: list[Edge] = field(default_factory=list)
    references: list[tuple[str, str, int]] = field(default_factory=list)  # kind, target, line


class _Extraction:
    def __init__(
        self, language: str, dialect: Dialect, path: str, data: bytes, line_count: int,
        budget: ParseBudget,
    ) -> None:
        self.budget = budget
        self.language = language
        self.dialect = dialect
        self.path = path
        self.data = data
        self.line_count = max(1, line_count)
        self.blocks: list[ts.Node] = []
        self.comments: list[ts.Node] = []
        self.doc_above: dict[int, ts.Node] = {}  # last line -> a comment alone on its lines

    def run(self, tree: ts.Tree, query: ts.Query) -> ParsedFile:
        root = tree.root_node
        # The query and every walk below step through parents and siblings,
        # which tree-sitter finds from the root down: each step costs the
        # depth. The query cannot be stopped at the deadline (tree_sitter
        # 0.26.1 crashes calling a query's progress callback), so the depth
        # is bounded first.
        _check_depth(root, self.budget)
        found: dict[int, _Found] = {}
        references: list[ts.Node] = []
        imports: list[ts.Node] = []
        for _, captures in ts.QueryCursor(query).matches(root):
            self.budget.check()
            for capture, nodes in captures.items():
                if capture.startswith("definition."):
                    self._found(nodes[0], captures, found)
                elif capture in _INVOKES:
                    references += captures.get("name", ())
                elif capture == "import":
                    imports += nodes
                elif capture == "block":
                    self.blocks += nodes
                elif capture == "comment":
                    self.comments += nodes
        self.blocks.sort(key=lambda n: n.start_byte)
        self.comments.sort(key=lambda n: n.start_byte)
        self.doc_above = {
            _last_line(c): c for c in self.comments if self._alone_on_its_lines(c)
        }
        module = module_qualname(self.path)
        scopes = [_Scope(
            Node(module, module.rsplit(".", 1)[-1], "module",
                 Span(self.path, 1, self.line_count), 0, "", ""),
            root.start_byte, root.end_byte, -1,
        )]
        self._place(found.values(), scopes)
        for kind, nodes, target_of in (
            ("invoke", references, self._target), ("import", imports, self._module),
        ):
            for node in nodes:
                self.budget.check()
                target = target_of(node)
                if target:
                    self._scope_of(node, scopes).references.append(
                        (kind, target, _first_line(node))
                    )
        return ParsedFile(
            language=self.language,
            nodes=tuple(s.node for s in scopes),
            edges=tuple(sorted(
                (e for s in scopes for e in _edges(s)),
                key=lambda e: (e.line, e.kind, e.target, e.source),
            )),
            multiline_statements=tuple(sorted(self._statements(root))),
            error_lines=_error_lines(root),
        )

    # Definitions

    def _found(
        self, captured: ts.Node, captures: dict[str, list[ts.Node]], found: dict[int, _Found]
    ) -> None:
        names = captures.get("name")
        node = self._lift(captured)
        kind = None if node is None else self._kind(node)
        if not names or node is None or kind is None:
            return
        parts = _NAME_SEPARATORS.split("".join(self._text(names[0]).split()))
        scopes = captures.get("local.scope", ())
        owners = tuple(_without_template_arguments(self._text(s)) for s in scopes)
        owners += tuple(p for p in parts[:-1] if p)
        previous = found.get(node.id)
        # Several patterns may capture one definition; the one naming its owners wins.
        if parts[-1] and (previous is None or len(owners) > len(previous.owners)):
            outer = self._outer(node)
            found[node.id] = _Found(node, outer, self._top(outer), kind, parts[-1], owners)

    def _lift(self, node: ts.Node) -> ts.Node | None:
        rule = self.dialect.lift.get(node.type)
        if rule is None:
            return node
        target, through = rule
        parent = node.parent
        while parent is not None and parent.type in through:
            parent = parent.parent
        return parent if parent is not None and parent.type == target else None

    def _kind(self, node: ts.Node) -> str | None:
        if node.type in self.dialect.kind_of_type_field:
            inner = node.child_by_field_name("type")
            if inner is None or inner.child_by_field_name("name") is not None:
                return None  # an alias, or a named type that is a definition of its own
            node = inner
        kind = self.dialect.kinds.get(node.type)
        if node.type in self.dialect.needs_body and node.child_by_field_name("body") is None:
            return None
        return kind

    def _outer(self, node: ts.Node) -> ts.Node:
        parent = node.parent
        while (
            parent is not None
            and parent.type in self.dialect.wrappers
            and sum(c.type == node.type for c in parent.named_children) == 1
        ):
            node, parent = parent, parent.parent
        return node

    def _top(self, outer: ts.Node) -> ts.Node:
        top, before = outer, outer.prev_named_sibling
        while before is not None and before.type in self.dialect.attributes:
            top, before = before, before.prev_named_sibling
        return top

    def _place(self, found: Iterable[_Found], scopes: list[_Scope]) -> None:
        """Nest the definitions in file order and make them nodes, inside functions not."""
        ordered = sorted(found, key=lambda f: (f.top.start_byte, -f.outer.end_byte))
        open_: list[tuple[int, int]] = []  # (end byte, scope index or _SKIPPED)
        for item in ordered:
            self.budget.check()
            start, end = item.top.start_byte, item.outer.end_byte
            while open_ and open_[-1][0] <= start:
                open_.pop()
            parent = open_[-1][1] if open_ else 0
            if parent == _SKIPPED or scopes[parent].node.kind in FUNCTION_KINDS:
                open_.append((end, _SKIPPED))
                continue
            scopes.append(self._scope(item, scopes[parent], parent))
            open_.append((end, len(scopes) - 1))

    def _scope(self, item: _Found, container: _Scope, parent: int) -> _Scope:
        kind = item.kind
        if kind == "function" and (
            item.owners or container.node.kind in self.dialect.method_containers
        ):
            kind = "method"
        qualname = ".".join([container.node.qualname, *item.owners, item.name])
        start = _first_line(item.top)
        body = self._body(item.node)
        last = None if body is None else self._token_before(body, item.outer)
        header_end, header_bytes = (
            (_last_line(item.outer), item.outer.end_byte) if last is None
            else (_last_line(last), last.end_byte)
        )
        node = Node(
            qualname, item.name, kind, Span(self.path, start, _last_line(item.outer)),
            header_end, self._signature(item.outer.start_byte, header_bytes),
            self._docstring(start),
        )
        container.contains.append(Edge(container.node.qualname, "contain", qualname, start))
        return _Scope(node, item.top.start_byte, item.outer.end_byte, parent)

    def _body(self, node: ts.Node) -> ts.Node | None:
        """What the header ends before: a ``body`` field, a block, else the first ``{``."""
        body = node.child_by_field_name("body")
        if body is not None:
            return body
        for child in node.children:
            if (child.is_named and child.type in self.dialect.blocks) or child.type == "{":
                return child
        # The body of `const f = () => {}`, `x.f = function () {}` or Go's `type T
        # struct {}` is the assigned value's or the declared type's (never a
        # parameter's: `f(o: {a: 1}): void;` has none).
        for name in ("value", "right", "type"):
            inner = node.child_by_field_name(name)
            if inner is not None:
                return self._body(inner)
        return None

    def _token_before(self, node: ts.Node, within: ts.Node) -> ts.Node | None:
        """The last node before ``node`` inside ``within`` that is not a comment."""
        while node != within:
            before = node.prev_sibling
            while before is not None and before.type in self.dialect.comments:
                before = before.prev_sibling
            if before is not None:
                return before
            parent = node.parent
            if parent is None:
                break
            node = parent
        return None

    def _signature(self, start: int, end: int) -> str:
        pieces = []
        index = bisect.bisect_left(self.comments, start, key=lambda c: c.start_byte)
        while index < len(self.comments) and self.comments[index].start_byte < end:
            comment = self.comments[index]
            pieces.append(self.data[start:comment.start_byte])
            start = max(start, comment.end_byte)
            index += 1
        pieces.append(self.data[start:end])
        # A declaration without body ends with `;`, which closes it rather than its header.
        return " ".join(b"".join(pieces).decode("utf-8", "replace").split()).removesuffix(";")

    def _docstring(self, line: int) -> str:
        comment = self.doc_above.get(line - 1)
        if comment is None or not self.dialect.doc_comment.match(self._text(comment)):
            return ""
        texts = [self._text(comment)]
        # A run of line comments documents together; a block comment stands alone.
        while not texts[-1].startswith("/*"):
            above = self.doc_above.get(_first_line(comment) - 1)
            if above is None:
                break
            text = self._text(above)
            if text.startswith("/*") or not self.dialect.doc_comment.match(text):
                break
            texts.append(text)
            comment = above
        return _first_paragraph("\n".join(reversed(texts)))

    def _alone_on_its_lines(self, comment: ts.Node) -> bool:
        line_start = comment.start_byte - comment.start_point.column
        before = self.data[line_start:comment.start_byte]
        if comment.end_point.column == 0:  # it ends with its newline (Rust's `///`)
            return not before.strip()
        line_end = self.data.find(b"\n", comment.end_byte)
        after = self.data[comment.end_byte:line_end if line_end >= 0 else len(self.data)]
        return not before.strip() and not after.strip()

    # References

    def _target(self, name: ts.Node) -> str:
        target = _REFERENCE_SEPARATORS.split(self._text(name).strip())[-1]
        return target if self.dialect.identifier.fullmatch(target) else ""

    def _module(self, spec: ts.Node) -> str:
        return " ".join(self._text(spec).split()).strip(_QUOTES)

    def _scope_of(self, node: ts.Node, scopes: list[_Scope]) -> _Scope:
        """The innermost scope containing ``node``: scopes nest, so walk up from
        the last one starting before it."""
        at = node.start_byte
        index = bisect.bisect_right(scopes, at, lo=1, key=lambda s: s.start) - 1
        while index > 0 and not scopes[index].start <= at < scopes[index].end:
            index = scopes[index].parent
        return scopes[max(index, 0)]

    # Statements

    def _statements(self, root: ts.Node) -> set[tuple[int, int]]:
        """Multi-line statements whole, or up to their first block; and block holders' headers."""
        spans: set[tuple[int, int]] = set()
        blocks = self.dialect.blocks
        for block in [root, *self.blocks]:
            self.budget.check()
            for statement in block.named_children:
                if statement.type in blocks or statement.type in self.dialect.comments:
                    continue
                first, last = _first_line(statement), _last_line(statement)
                inner = self._first_block_in(statement) if last > first else None
                if inner is not None:
                    before = self._token_before(inner, statement)
                    last = first if before is None else _last_line(before)
                if last > first:
                    spans.add((first, last))
        for block in self.blocks:
            self.budget.check()
            parent = block.parent
            if parent is not None and parent.type not in blocks and parent.parent is not None:
                before = self._token_before(block, parent)
                if before is not None and _last_line(before) > _first_line(parent):
                    spans.add((_first_line(parent), _last_line(before)))
        return spans

    def _first_block_in(self, node: ts.Node) -> ts.Node | None:
        index = bisect.bisect_left(self.blocks, node.start_byte, key=lambda b: b.start_byte)
        for block in self.blocks[index:]:
            if block.start_byte >= node.end_byte:
                break
            # A block with the statement's own range is the block holding it.
            if block.end_byte <= node.end_byte and (
                block.start_byte, block.end_byte) != (node.start_byte, node.end_byte):
                return block
        return None

    def _text(self, node: ts.Node) -> str:
        return self.data[node.start_byte:node.end_byte].decode("utf-8", "replace")


def _first_line(node: ts.Node) -> int:
    return node.start_point.row + 1


def _last_line(node: ts.Node) -> int:
    """A node ending at the start of a line (a comment or ``#include`` with its
    newline) ends on the line before."""
    end = node.end_point
    return end.row if end.column == 0 and end.row > node.start_point.row else end.row + 1


def _check_depth(root: ts.Node, budget: ParseBudget) -> None:
    """Raise TooComplex at the first node deeper in the tree than the budget allows.

    A walk of every node with one cursor, which never looks up a parent:
    a tenth of the time the rest of the extraction takes.
    """
    cursor = root.walk()
    depth, limit = 0, budget.max_depth
    while True:
        if cursor.goto_first_child():
            depth += 1
            if depth > limit:
                raise budget.too_deep(cursor.node.start_point.row + 1 if cursor.node else 1)
            continue
        while not cursor.goto_next_sibling():
            if depth == 0 or not cursor.goto_parent():
                return
            depth -= 1


def _without_template_arguments(name: str) -> str:
    while (shorter := _TEMPLATE_ARGUMENTS.sub("", name)) != name:
        name = shorter
    return name


def _first_paragraph(comment: str) -> str:
    lines: list[str] = []
    for raw in comment.split("\n"):
        line = _COMMENT_HEAD.sub("", _COMMENT_TAIL.sub("", raw)).strip()
        if line.startswith("@") or (not line and lines):
            break
        if line:
            lines.append(line)
    return " ".join(" ".join(lines).split())[:MAX_DOCSTRING_CHARS].rstrip()


def _error_lines(root: ts.Node) -> tuple[int, ...]:
    """First lines of the ERROR and MISSING nodes, walking only where errors are."""
    if not root.has_error:
        return ()
    lines: set[int] = set()
    stack = [root]
    while stack:
        node = stack.pop()
        if node.is_error or node.is_missing:
            lines.add(_first_line(node))
        else:
            stack += [c for c in node.children if c.has_error]
    return tuple(sorted(lines)[:MAX_ERROR_LINES])


def _edges(scope: _Scope) -> Iterator[Edge]:
    """The scope's contain edges, and its invoke and import edges one per
    target, at their first line."""
    yield from scope.contains
    first: dict[tuple[str, str], int] = {}
    for kind, target, line in scope.references:
        first[kind, target] = min(line, first.get((kind, target), line))
    for (kind, target), line in first.items():
        yield Edge(scope.node.qualname, kind, target, line)
