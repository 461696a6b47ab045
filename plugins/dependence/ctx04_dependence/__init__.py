"""Dependence: the statements a shown line depends on, and those that depend on it.

A line kept for the words it shares with the task rarely stands alone:
``return value.strip()`` means little without ``value = raw.decode()``
above it, and a line inside ``if header.folded:`` is only reached under
that test. Spec §2 row 8 (the statement-level program-dependence graph,
GraphCoder) and §3.5 rule 3: prune keeps the lines the matched lines depend
on and that depend on them.

Python through ``ast``, within the candidate's own scope (a function's body,
a class's or a module's own statements; nested definitions are statements
that define their name, never entered). A statement is a simple statement,
or a compound statement's header (``if x:``, ``for a in b:``,
``except E as e:``). For each statement holding a shown line that is not the
signature, one hop each way:

- control: the headers of the compound statements it is nested in;
- data, backward: for each name it reads, the nearest earlier statement of
  the scope that assigns it (``self.x`` counts as a name of its own);
- data, forward: for each name it assigns, the nearest later statement that
  reads it.

A statement added longer than ``settings.max_statement_lines`` adds its
first line only, as prune does. Files that do not parse, and other
languages, add nothing.

Called definitions (the ``called_definitions`` hook, §3.5 rule 3: a
retained call site pulls its one-line signature, not its body), in every
language the index has call edges for: each name the candidate's ``invoke``
edges call and a shown line writes as a call (``name(``) resolves to its
definitions in the same file when there are any, else to the only one in
the repository; a name defined more than once elsewhere is left out (which
``get`` is meant cannot be told), and so is the candidate itself.

Signal ``dependence`` (scale, weight ``settings.dependence_weight``): of a
function or method, the share of its statements that depend, directly or
through others (data or control, forward), on a statement naming one of the
task's identifiers; 0 for other candidates. A function whose computation
flows from what the task names, not one that mentions it in passing.
"""

from __future__ import annotations

import ast
import functools
import re
from collections.abc import Iterator
from dataclasses import dataclass
from itertools import islice

from ctx04_core.graph import by_position, definitions
from ctx04_core.hookspecs import hookimpl
from ctx04_core.index.python_parser import syntax_tree
from ctx04_core.repository import Repo
from ctx04_core.settings import Settings
from ctx04_core.stages.regions import node_of
from ctx04_core.stages.shapes import statement_lines
from ctx04_core.text import simple_name
from ctx04_core.types import FUNCTION_KINDS, Candidate, Excerpt, Node, Query, Signal

SIGNAL = "dependence"
PYTHON = (".py", ".pyi")

_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
_BODIES = frozenset({"body", "orelse", "finalbody", "handlers", "cases"})


@dataclass(frozen=True)
class Statement:
    first: int
    last: int  # a compound statement's header ends here, not its body
    reads: frozenset[str]
    writes: frozenset[str]
    controls: tuple[int, ...]  # indices of the enclosing compound statements


@hookimpl
def dependent_lines(excerpt: Excerpt, repo: Repo, settings: Settings) -> list[int] | None:
    candidate = excerpt.ranked.candidate
    span = candidate.span
    if not span.path.endswith(PYTHON):
        return None
    shown = {n for n, _ in excerpt.lines}
    if shown >= set(range(span.start_line, span.end_line + 1)):
        return None  # shown whole: nothing to add
    statements = _statements(candidate, repo)
    if not statements:
        return None
    added: set[int] = set()
    for index in related(statements, shown):
        stmt = statements[index]
        added.update(statement_lines(stmt.first, stmt.last, settings.max_statement_lines))
    return sorted(added - shown)


@hookimpl
def called_definitions(excerpt: Excerpt, repo: Repo, settings: Settings) -> list[Node] | None:
    node = node_of(excerpt.ranked.candidate, repo)
    if node is None:
        return None
    shown = "\n".join(text for _, text in excerpt.lines)
    found: list[Node] = []
    for edge in repo.index.edges_from(node):
        name = simple_name(edge.target)
        if edge.kind != "invoke" or not re.search(rf"(?<![\w$]){re.escape(name)}\s*\(", shown):
            continue
        named = definitions(repo.index.lookup(name))
        local = [n for n in named if n.span.path == node.span.path]
        chosen = local or (named if len(named) == 1 else [])
        found.extend(n for n in by_position(chosen) if n != node)
    return found


@hookimpl
def signals(
    query: Query, candidates: tuple[Candidate, ...], repo: Repo, settings: Settings
) -> list[Signal] | None:
    if settings.signal_weight(SIGNAL, settings.dependence_weight) == 0:
        return None
    names = frozenset(simple_name(i) for i in (*query.identifiers, *query.unresolved))
    values = tuple(_reach(c, names, repo) if names else 0.0 for c in candidates)
    return [Signal(SIGNAL, values, settings.dependence_weight, "scale")]


def _reach(candidate: Candidate, names: frozenset[str], repo: Repo) -> float:
    """The share of the function's statements that depend on one naming ``names``."""
    if candidate.kind not in FUNCTION_KINDS or not candidate.span.path.endswith(PYTHON):
        return 0.0
    statements = _statements(candidate, repo)
    reached: set[int] = set()
    flowing: set[str] = set()  # what the reached statements so far assign
    for i, stmt in enumerate(statements):
        if (names & _simple(stmt.reads | stmt.writes) or stmt.reads & flowing
                or reached.intersection(stmt.controls)):
            reached.add(i)
            flowing |= stmt.writes
    return len(reached) / len(statements) if statements else 0.0


def _statements(candidate: Candidate, repo: Repo) -> tuple[Statement, ...]:
    """The statements of the candidate's scope (a module's own for a module)."""
    source = repo.source(candidate.span.path)
    if source is None:
        return ()
    scope = None if candidate.kind == "module" else candidate.span.start_line
    return scope_statements(source.digest, "\n".join(source.lines), scope)


def _simple(keys: frozenset[str]) -> set[str]:
    return {key.rsplit(".", 1)[-1] for key in keys}


def related(statements: tuple[Statement, ...], shown: set[int]) -> set[int]:
    """Indices of the statements the shown ones depend on or that depend on them."""
    holding = [i for i, s in enumerate(statements) if any(s.first <= n <= s.last for n in shown)]
    found: set[int] = set()
    for i in holding:
        stmt = statements[i]
        found.update(stmt.controls)
        # The nearest writer of each name read, the nearest reader of each written.
        for name in stmt.reads:
            found.update(islice((j for j in range(i - 1, -1, -1)
                                 if name in statements[j].writes), 1))
        for name in stmt.writes:
            found.update(islice((j for j in range(i + 1, len(statements))
                                 if name in statements[j].reads), 1))
    return found - set(holding)


@functools.lru_cache(maxsize=8)
def _parsed(digest: str, text: str) -> ast.Module:
    """One parse per file version, however many of its candidates are shown in part."""
    return syntax_tree(text)


@functools.lru_cache(maxsize=64)
def scope_statements(digest: str, text: str, start_line: int | None) -> tuple[Statement, ...]:
    """The statements of the definition that starts at ``start_line``, or the
    module's own for None, in source order; none when it is not found.
    ``digest`` keys the cache."""
    found: list[Statement] = []
    try:
        tree = _parsed(digest, text)
        body: list[ast.stmt] = tree.body if start_line is None else []
        if start_line is not None:
            body = next((node.body for node in ast.walk(tree)
                         if isinstance(node, _SCOPES) and _first_line(node) == start_line), [])
        _collect(body, (), found)
    except (SyntaxError, ValueError, RecursionError):
        return ()  # the index has recorded why the file does not parse
    return tuple(found)  # a pre-order walk: source order, and ``controls`` index into it


def _collect(body: list[ast.stmt], controls: tuple[int, ...], found: list[Statement]) -> None:
    for stmt in body:
        nested = _nested_bodies(stmt)
        header = list(_header_nodes(stmt))
        last = max((n.end_lineno or stmt.lineno for n in header), default=stmt.lineno) \
            if nested else (stmt.end_lineno or stmt.lineno)
        reads, writes = _names(stmt, header if nested else _own_parts(stmt))
        found.append(Statement(_first_line(stmt), last, reads, writes, controls))
        inner = (*controls, len(found) - 1)
        for block in nested:
            for item in block:
                if isinstance(item, ast.ExceptHandler):
                    h_reads, h_writes = _names(item, [item.type] if item.type else [])
                    if item.name:
                        h_writes = h_writes | {item.name}
                    found.append(Statement(item.lineno, _header_end(item), h_reads, h_writes,
                                           inner))
                    _collect(item.body, (*inner, len(found) - 1), found)
                elif isinstance(item, ast.match_case):
                    _collect(item.body, inner, found)
                elif isinstance(item, ast.stmt):
                    _collect([item], inner, found)


def _nested_bodies(stmt: ast.stmt) -> list[list[ast.AST]]:
    """The statement lists inside a compound statement; none for a definition,
    whose body is another scope."""
    if isinstance(stmt, _SCOPES):
        return []
    return [value for field, value in ast.iter_fields(stmt)
            if field in _BODIES and isinstance(value, list) and value]


def _header_nodes(stmt: ast.stmt) -> Iterator[ast.expr]:
    """The expressions of a compound statement's header (a ``with`` item's too)."""
    for field, value in ast.iter_fields(stmt):
        if field in _BODIES:
            continue
        for child in value if isinstance(value, list) else [value]:
            if isinstance(child, ast.expr):
                yield child
            elif isinstance(child, ast.withitem):
                yield child.context_expr
                if child.optional_vars is not None:
                    yield child.optional_vars


def _own_parts(stmt: ast.stmt) -> list[ast.AST]:
    """What a simple statement evaluates; of a nested definition, its decorators."""
    return list(stmt.decorator_list) if isinstance(stmt, _SCOPES) else [stmt]


def _header_end(handler: ast.ExceptHandler) -> int:
    return handler.type.end_lineno or handler.lineno if handler.type else handler.lineno


def _first_line(node: ast.stmt) -> int:
    decorators: list[ast.expr] = getattr(node, "decorator_list", [])
    return min([node.lineno, *(d.lineno for d in decorators)])


def _names(stmt: ast.AST, parts: list[ast.expr] | list[ast.AST]
           ) -> tuple[frozenset[str], frozenset[str]]:
    """What the statement's own expressions read and assign: plain names,
    ``a.b`` for an attribute of a name, ``.b`` for an attribute of anything else."""
    reads: set[str] = set()
    writes: set[str] = set()
    if isinstance(stmt, _SCOPES):
        writes.add(stmt.name)
    elif isinstance(stmt, (ast.Import, ast.ImportFrom)):
        writes.update((a.asname or a.name).split(".")[0] for a in stmt.names)
    if isinstance(stmt, ast.AugAssign):
        reads.update(_targets(stmt.target))
    for part in parts:
        for node in _walk(part):
            key = _key(node)
            if key is None:
                continue
            ctx = getattr(node, "ctx", None)
            (writes if isinstance(ctx, (ast.Store, ast.Del)) else reads).add(key)
    return frozenset(reads), frozenset(writes)


def _walk(node: ast.AST) -> Iterator[ast.AST]:
    """``ast.walk`` that does not enter a nested definition or lambda."""
    yield node
    for child in ast.iter_child_nodes(node):
        if not isinstance(child, (*_SCOPES, ast.Lambda)):
            yield from _walk(child)


def _targets(node: ast.AST) -> set[str]:
    return {key for n in _walk(node) if (key := _key(n)) is not None}


def _key(node: ast.AST) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        # Of a name's attribute, both; of any other value's (``parts[1].strip``),
        # the attribute alone: it can still name what the task names.
        return f"{node.value.id}.{node.attr}" if isinstance(node.value, ast.Name) else \
            f".{node.attr}"
    return None
