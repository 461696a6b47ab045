"""The Python parser plugin: definitions, references and statement spans from ``ast``.

A file becomes one ``module`` node plus a node per class, module-level
function, method and class nested directly in a class. Definitions inside a
function are part of that function's body, not nodes of their own. Module
and class bodies are followed into ``if``/``try``/``with`` blocks, so
``if TYPE_CHECKING:`` and ``try: ... except ImportError:`` definitions count.

The module qualname is the dotted repo-relative path without ``.py``; a
package's ``__init__.py`` is named after its folder, and an ``__init__.py``
at the repository root (the root itself is the package) is named
``__init__``.

A file that does not parse for the Python running ctx04 but would for
another (a nested f-string of 3.12, PEP 695 type parameters, a Python 2
``print``) keeps its definitions: the lines that fail are left out, each
keeping its number, and listed in ``error_lines`` (see ``_around_errors``).

Every edge's ``line`` lies inside the span of the node it comes from: that is
how the index tells apart definitions sharing a qualname (a property's getter
and setter). ``invoke`` and ``import`` edges are deduplicated per source node,
keeping the first line; ``contain`` edges are one per child node.
"""

from __future__ import annotations

import ast
import dataclasses
import io
import re
import tokenize
import warnings
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import cast

from ctx04_core.hookspecs import hookimpl
from ctx04_core.parse_budget import ParseBudget
from ctx04_core.settings import Settings
from ctx04_core.text import split_lines
from ctx04_core.types import MODULE, Edge, Node, ParsedFile, Span

LANGUAGE = "python"
MAX_DOCSTRING_CHARS = 200

_Def = ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef
_BLOCKS = (ast.If, ast.Try, ast.TryStar, ast.With, ast.AsyncWith)
_STATEMENTS = frozenset(
    c for c in vars(ast).values() if isinstance(c, type) and issubclass(c, ast.stmt)
)
# Fields that never hold a call or a statement (names, operators, contexts);
# skipping them saves about a third of the walk.
_SCALAR_FIELDS = frozenset({
    "ctx", "id", "attr", "name", "names", "module", "level", "arg", "type_comment", "kind",
    "conversion", "is_async", "simple", "kwd_attrs", "op", "ops", "tag",
})
_CHILD_FIELDS: dict[type, tuple[str, ...]] = {}
_PARAGRAPH_BREAK = re.compile(r"\n[ \t]*\n")
_LONE_CR = re.compile(r"\r(?!\n)")
_POSITIONS = (("lineno", "col_offset"), ("end_lineno", "end_col_offset"))
# Lines a file that does not parse may have left out and still be indexed.
MAX_LEFT_OUT = 32


@hookimpl
def source_globs() -> list[str]:
    return ["*.py"]


@hookimpl
def parse_file(path: str, text: str, settings: Settings) -> ParsedFile | None:
    if not path.endswith(".py"):
        return None
    # CPython refuses nesting past 100 blocks or 200 brackets itself (a
    # SyntaxError): of the budget, only the deadline binds here, on the walk
    # and on the parses again around errors.
    budget = ParseBudget(settings)
    error_lines: tuple[int, ...] = ()
    try:
        with warnings.catch_warnings():
            # Invalid escapes and the like are the repository's to report, not ours.
            warnings.simplefilter("ignore")
            try:
                tree = syntax_tree(text, path)
            except SyntaxError as err:
                tree, text, error_lines = _around_errors(text, path, err, budget)
    except (ValueError, RecursionError) as err:
        # NUL bytes and pathological nesting are files that do not parse, too.
        raise SyntaxError(str(err) or type(err).__name__) from err
    parsed = _Extractor(path, split_lines(text), budget).run(tree)
    return dataclasses.replace(parsed, error_lines=error_lines) if error_lines else parsed


def _around_errors(
    text: str, path: str, error: SyntaxError, budget: ParseBudget
) -> tuple[ast.Module, str, tuple[int, ...]]:
    """The tree of ``text`` with the lines that do not parse left out, that text,
    and those lines.

    A file the running Python cannot parse is often valid for another one (a
    nested f-string of 3.12, a Python 2 ``print``), and the tree-sitter
    parsers keep the definitions around an error: so does this one. The line
    each error names is replaced (see :func:`_stand_in`; blanked if it fails
    again), keeping every line's number, and the file is parsed again.
    ``error`` is raised again when that would leave out more than half the
    file's code or ``MAX_LEFT_OUT`` lines, or passes the parse deadline: what
    remains would say little about the file.
    """
    if _LONE_CR.search(text):
        raise error  # ast numbers such lines its own way; the blanks would miss
    lines = text.split("\n")
    code_lines = sum(1 for line in lines if not _is_blank_or_comment(line))
    left_out: set[int] = set()
    failure = error
    while True:
        number = _culprit(lines, failure.lineno)
        if number is None or len(left_out) >= MAX_LEFT_OUT or budget.expired():
            raise error
        lines[number - 1] = "" if number in left_out else _stand_in(lines[number - 1])
        left_out.add(number)
        if 2 * len(left_out) > code_lines:
            raise error
        repaired = "\n".join(lines)
        try:
            return ast.parse(repaired, filename=path), repaired, tuple(sorted(left_out))
        except SyntaxError as again:
            failure = again


def _culprit(lines: list[str], number: int | None) -> int | None:
    """The line to leave out for an error reported at ``number``: that line, or the
    last line with code before it (an error at a blank line or past the end)."""
    if number is None or number < 1:
        return None
    number = min(number, len(lines))
    while number >= 1 and not lines[number - 1].strip():
        number -= 1
    return number if number >= 1 else None


_GENERIC_HEADER = re.compile(r"^(\s*(?:async\s+)?(?:def|class)\s+\w+)\s*\[")


def _stand_in(line: str) -> str:
    """What a line that does not parse becomes first: a ``def f[T](...)`` or
    ``class C[T]:`` header without its ``[...]``; any other line a ``pass`` at its
    indentation, so that the block it is in keeps a statement (a line inside
    brackets then fails again, and is blanked)."""
    found = _GENERIC_HEADER.match(line)
    if found is not None:
        depth = 0
        for at in range(found.end() - 1, len(line)):
            depth += {"[": 1, "]": -1}.get(line[at], 0)
            if depth == 0:
                return found.group(1) + line[at + 1 :]
    return line[: len(line) - len(line.lstrip())] + "pass"


def syntax_tree(text: str, path: str = "<unknown>") -> ast.Module:
    """``ast.parse`` of ``text``, its positions on the lines of ``split_lines``.

    Python's tokenizer also ends a line at a lone ``\\r`` (an old Mac line
    ending), where ripgrep, git and the index do not: a function after one
    was indexed a line too low. Its nodes are moved onto the file's lines,
    their columns counted from the start of those lines.
    """
    tree = ast.parse(text, filename=path)
    if _LONE_CR.search(text) is None:
        return tree
    # Per line as ast numbers them (from 1): its line of the file and the
    # bytes before it there.
    placed = [(0, 0)]
    for number, line in enumerate(split_lines(text), 1):
        before = 0
        for piece in line.split("\r"):
            placed.append((number, before))
            before += len(piece.encode("utf-8")) + 1
    last = len(placed) - 1
    for node in ast.walk(tree):
        for line_field, column_field in _POSITIONS:
            row: int | None = getattr(node, line_field, None)
            column: int | None = getattr(node, column_field, None)
            if row is not None and column is not None:
                number, before = placed[min(row, last)]
                setattr(node, line_field, number)
                setattr(node, column_field, before + column)
    return tree


def module_qualname(path: str) -> str:
    parts = path.removesuffix(".py").split("/")
    if parts[-1] == "__init__" and len(parts) > 1:
        parts.pop()
    return ".".join(parts)


@dataclass
class _Scope:
    """A node being built, with the references found in it so far."""

    node: Node
    edges: list[Edge] = field(default_factory=list)


class _Extractor:
    def __init__(self, path: str, lines: tuple[str, ...], budget: ParseBudget) -> None:
        self.path = path
        self.lines = lines
        self.budget = budget
        self.module = module_qualname(path)
        # The package relative imports start from; a root __init__.py's package
        # is the root itself, whose modules have top-level names.
        if path == "__init__.py":
            self.package: list[str] = []
        elif path.endswith("/__init__.py"):
            self.package = self.module.split(".")
        else:
            self.package = self.module.split(".")[:-1]
        self.scopes: list[_Scope] = []
        self.statements: set[tuple[int, int]] = set()

    def run(self, tree: ast.Module) -> ParsedFile:
        module = Node(
            qualname=self.module,
            name=self.module.rsplit(".", 1)[-1],
            kind=MODULE,
            span=Span(self.path, 1, max(1, len(self.lines))),
            header_end=0,
            signature="",
            docstring=_first_paragraph(ast.get_docstring(tree)),
        )
        scope = _Scope(module)
        self.scopes.append(scope)
        self._walk_body(tree.body, scope, in_class=False)
        return ParsedFile(
            language=LANGUAGE,
            nodes=tuple(s.node for s in self.scopes),
            edges=tuple(
                sorted(
                    (e for s in self.scopes for e in _dedupe(s.edges)),
                    key=lambda e: (e.line, e.kind, e.target, e.source),
                )
            ),
            multiline_statements=tuple(sorted(self.statements)),
        )

    def _walk_body(self, body: list[ast.stmt], parent: _Scope, in_class: bool) -> None:
        for stmt in body:
            if isinstance(stmt, _Def):
                self._definition(stmt, parent, in_class)
            elif isinstance(stmt, _BLOCKS):
                self._statement(stmt)
                self._block(stmt, parent, in_class)
            else:
                self._scan([stmt], parent)

    def _block(
        self, stmt: ast.If | ast.Try | ast.TryStar | ast.With | ast.AsyncWith,
        parent: _Scope, in_class: bool,
    ) -> None:
        if isinstance(stmt, ast.If):
            self._scan([stmt.test], parent)
            self._walk_body(stmt.body, parent, in_class)
            self._walk_body(stmt.orelse, parent, in_class)
        elif isinstance(stmt, ast.Try | ast.TryStar):
            self._walk_body(stmt.body, parent, in_class)
            for handler in stmt.handlers:
                self._clause(handler.lineno, handler.body)
                if handler.type is not None:
                    self._scan([handler.type], parent)
                self._walk_body(handler.body, parent, in_class)
            self._walk_body(stmt.orelse, parent, in_class)
            self._walk_body(stmt.finalbody, parent, in_class)
        else:
            self._scan(list(stmt.items), parent)
            self._walk_body(stmt.body, parent, in_class)

    def _definition(self, stmt: _Def, parent: _Scope, in_class: bool) -> None:
        kind = "method" if in_class else "function"
        if isinstance(stmt, ast.ClassDef):
            kind = "class"
        start = _start_line(stmt)
        header_end = self._header_end(stmt.lineno, stmt.body[0])
        node = Node(
            qualname=f"{parent.node.qualname}.{stmt.name}",
            name=stmt.name,
            kind=kind,
            span=Span(self.path, start, stmt.end_lineno or stmt.lineno),
            header_end=header_end,
            signature=self._signature(stmt, header_end),
            docstring=_first_paragraph(ast.get_docstring(stmt)),
        )
        parent.edges.append(Edge(parent.node.qualname, "contain", node.qualname, start))
        scope = _Scope(node)
        self.scopes.append(scope)
        if isinstance(stmt, ast.ClassDef):
            self._statement(stmt)
            self._scan([*stmt.decorator_list, *stmt.bases, *stmt.keywords], scope)
            self._walk_body(stmt.body, scope, in_class=True)
        else:
            self._scan([stmt], scope)

    def _scan(self, roots: list[ast.AST], scope: _Scope) -> None:
        """Record the references and statements in ``roots``, all belonging to ``scope``."""
        # A hand-rolled walk instead of ast.walk: this loop is most of the time
        # a cold index build spends outside ast.parse.
        self.budget.check()
        source = scope.node.qualname
        edges = scope.edges
        stack = roots
        push = stack.append
        while stack:
            item = stack.pop()
            kind = type(item)
            if kind is ast.Call:
                func = cast(ast.Call, item).func
                if type(func) is ast.Name:
                    edges.append(Edge(source, "invoke", func.id, func.lineno))
                elif type(func) is ast.Attribute and _is_dotted_name(func.value):
                    edges.append(Edge(source, "invoke", func.attr, func.end_lineno or func.lineno))
            elif kind in _STATEMENTS:
                self._statement(cast(ast.stmt, item))
                if isinstance(item, ast.Import | ast.ImportFrom):
                    self._imports(item, scope)
            elif isinstance(item, ast.ExceptHandler):
                self._clause(item.lineno, item.body)
            elif isinstance(item, ast.match_case):
                self._clause(item.pattern.lineno, item.body)
            for field_name in _child_fields(kind):
                value = getattr(item, field_name)
                if type(value) is list:
                    for element in value:
                        if isinstance(element, ast.AST):
                            push(element)
                elif isinstance(value, ast.AST):
                    push(value)

    def _imports(self, stmt: ast.Import | ast.ImportFrom, scope: _Scope) -> None:
        source = scope.node.qualname
        if isinstance(stmt, ast.Import):
            for alias in stmt.names:
                scope.edges.append(Edge(source, "import", alias.name, alias.lineno))
            return
        base = self._import_base(stmt)
        for alias in stmt.names:
            name = "" if alias.name == "*" else alias.name
            target = ".".join(part for part in (base, name) if part)
            if target:
                scope.edges.append(Edge(source, "import", target, alias.lineno))

    def _import_base(self, stmt: ast.ImportFrom) -> str:
        """The absolute module a ``from ... import`` reads from."""
        if stmt.level == 0:
            return stmt.module or ""
        # Level 1 is this module's package; a level past the top stops at the top.
        package = self.package[: max(0, len(self.package) - (stmt.level - 1))]
        return ".".join([*package, *([stmt.module] if stmt.module else [])])

    def _line(self, number: int) -> str:
        return self.lines[number - 1] if 0 < number <= len(self.lines) else ""

    def _header_end(self, start: int, first: ast.stmt) -> int:
        """The last line of a header starting at ``start``: the line with its colon."""
        if isinstance(first, _Def) and first.decorator_list:
            return self._code_line_before(start, _start_line(first))
        body_line = self._line(first.lineno)
        if body_line.encode("utf-8")[: first.col_offset].strip():
            return max(first.lineno, start)  # the body starts on the header's line
        return self._code_line_before(start, first.lineno)

    def _code_line_before(self, start: int, line: int) -> int:
        """The last line before ``line`` that is not blank or a comment, at least ``start``."""
        end = line - 1
        while end > start and _is_blank_or_comment(self._line(end)):
            end -= 1
        return max(end, start)

    def _signature(self, stmt: _Def, header_end: int) -> str:
        header = [self._line(n) for n in range(stmt.lineno, header_end + 1)]
        first = stmt.body[0]
        if first.lineno == header_end:
            last = header[-1].encode("utf-8")
            header[-1] = last[: first.col_offset].decode("utf-8", "replace")
        text = "\n".join(header)
        if "#" in text:
            text = _without_comments(text)
        return " ".join(text.split())

    def _statement(self, stmt: ast.stmt) -> None:
        """Note the statement's span (a compound statement's header) if it covers lines."""
        end = stmt.end_lineno or stmt.lineno
        if isinstance(stmt, ast.Match):
            end = self._code_line_before(stmt.lineno, stmt.cases[0].pattern.lineno)
        elif body := getattr(stmt, "body", None):
            end = self._header_end(stmt.lineno, body[0])
        self._span(stmt.lineno, end)
        if isinstance(stmt, _Def):
            # Decorators sit outside the header but must not be cut either.
            for decorator in stmt.decorator_list:
                self._span(decorator.lineno, decorator.end_lineno or decorator.lineno)

    def _clause(self, start: int, body: list[ast.stmt]) -> None:
        """Note an ``except``/``case`` header that covers lines (clauses are not statements)."""
        self._span(start, self._header_end(start, body[0]))

    def _span(self, start: int, end: int) -> None:
        if end > start:
            self.statements.add((start, end))


def _start_line(stmt: _Def) -> int:
    """A definition starts at its first decorator."""
    return min([d.lineno for d in stmt.decorator_list] + [stmt.lineno])


def _child_fields(kind: type) -> tuple[str, ...]:
    fields = _CHILD_FIELDS.get(kind)
    if fields is None:
        fields = tuple(f for f in getattr(kind, "_fields", ()) if f not in _SCALAR_FIELDS)
        _CHILD_FIELDS[kind] = fields
    return fields


def _is_dotted_name(expr: ast.expr) -> bool:
    while isinstance(expr, ast.Attribute):
        expr = expr.value
    return isinstance(expr, ast.Name)


def _is_blank_or_comment(line: str) -> bool:
    stripped = line.strip()
    return not stripped or stripped.startswith("#")


def _without_comments(text: str) -> str:
    """The header with its ``#`` comments removed (a ``#`` in a string stays)."""
    lines = text.split("\n")
    readline = io.StringIO(text + "\n").readline
    try:
        comments = [
            tok for tok in tokenize.generate_tokens(readline) if tok.type == tokenize.COMMENT
        ]
    except (tokenize.TokenError, SyntaxError):
        return text
    for tok in reversed(comments):
        row, col = tok.start
        lines[row - 1] = lines[row - 1][:col]
    return "\n".join(lines)


def _first_paragraph(docstring: str | None) -> str:
    if not docstring:
        return ""
    paragraph = _PARAGRAPH_BREAK.split(docstring.strip(), maxsplit=1)[0]
    return " ".join(paragraph.split())[:MAX_DOCSTRING_CHARS].rstrip()


def _dedupe(edges: list[Edge]) -> Iterator[Edge]:
    """One invoke/import edge per (kind, target) of a node, at its first line."""
    first: dict[tuple[str, str], Edge] = {}
    for edge in edges:
        if edge.kind == "contain":
            yield edge
            continue
        key = (edge.kind, edge.target)
        if key not in first or edge.line < first[key].line:
            first[key] = edge
    yield from first.values()
