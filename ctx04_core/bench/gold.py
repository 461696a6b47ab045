"""The gold context of a task, from its patch and the base commit's files.

- gold files: the files the patch edits that exist at the base commit (the
  old side is not ``/dev/null``), in patch order;
- gold lines: per file, the old-side lines the patch deletes or modifies;
  for a pure insertion (a run of added lines with no deleted line beside
  it) the line before the insertion point, at least 1. Each hunk is read
  where its old side (context and deleted lines) is in the base file, as
  ``git apply`` places it: where its header says, else at the nearest line
  where the old side is (a patch written against a later commit has
  headers tens of lines off: 7 of the 72 dev multilingual tasks), else
  where its header says;
- gold symbols: per gold line, the innermost function or method of the base
  file containing it, else the innermost type-like definition (a class, or
  another language's struct, enum, interface, trait, impl or namespace:
  ``TYPE_KINDS``), else the file's module node.
  Files are parsed with the plugin manager's ``parse_file`` hook, so any
  language with a parser plugin works; a file that does not parse (or that
  the snapshot lacks) gives the symbol ``(path, None)``: the file itself.

A symbol is identified by ``(path, qualname)``. Its region, used by the
irrelevant-context ratio, is its own lines: a function's or method's whole
span, a type's or module's span minus the definitions nested in it (those
are symbols of their own), the whole file for ``(path, None)``.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pluggy

from ctx04_core.diff import hunk_header
from ctx04_core.settings import Settings
from ctx04_core.stages.regions import node_own_lines, runs
from ctx04_core.text import source_text, split_lines
from ctx04_core.types import FUNCTION_KINDS, MODULE, TYPE_KINDS, Node, ParsedFile

Region = tuple[tuple[int, int], ...]  # inclusive runs of line numbers, sorted


@dataclass(frozen=True)
class GoldSymbol:
    path: str
    qualname: str | None  # None: the file itself, which does not parse
    kind: str  # a Node kind (FUNCTION_KINDS, TYPE_KINDS, module), or file
    region: Region

    @property
    def key(self) -> tuple[str, str | None]:
        return (self.path, self.qualname)


@dataclass(frozen=True)
class Gold:
    files: tuple[str, ...]
    lines: Mapping[str, tuple[int, ...]]  # per gold file, sorted
    symbols: tuple[GoldSymbol, ...]

    def to_json(self) -> dict[str, Any]:
        return {
            "files": list(self.files),
            "lines": {path: list(lines) for path, lines in self.lines.items()},
            "symbols": [
                {"path": s.path, "qualname": s.qualname, "kind": s.kind,
                 "region": [list(run) for run in s.region]}
                for s in self.symbols
            ],
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Gold:
        """The gold a record's ``gold`` field holds (what :meth:`to_json` wrote)."""
        return cls(
            tuple(data["files"]),
            {path: tuple(lines) for path, lines in data["lines"].items()},
            tuple(
                GoldSymbol(s["path"], s["qualname"], s["kind"],
                           tuple((start, end) for start, end in s["region"]))
                for s in data["symbols"]
            ),
        )


class GoldError(ValueError):
    """The patch gives no gold: it edits no file that exists at the base commit."""


def gold_lines(
    patch: str, read: Callable[[str], str | None] = lambda path: None
) -> dict[str, tuple[int, ...]]:
    """Old-side gold lines of every file the patch edits that exists at base, in
    patch order; each hunk placed where ``read(path)`` (the base file's text, None
    when unknown) holds its old side, as the module docstring says."""
    parser = _DiffParser()
    for line in patch.splitlines():
        parser.feed(line)
    parser.close()
    found: dict[str, set[int]] = {path: set() for path in parser.paths}
    texts: dict[str, tuple[str, ...] | None] = {}
    for hunk in parser.hunks:
        if hunk.path not in texts:
            text = read(hunk.path)
            texts[hunk.path] = None if text is None else split_lines(text)
        lines = texts[hunk.path]
        shift = 0 if lines is None else _offset(tuple(hunk.old), hunk.first, lines)
        found[hunk.path].update(max(1, n + shift) for n in hunk.gold)
    return {path: tuple(sorted(lines)) for path, lines in found.items()}


def gold_from_patch(patch: str, tree: Path, pm: pluggy.PluginManager) -> Gold:
    """The gold files, lines and symbols of ``patch`` against the base tree at ``tree``."""
    # Each file is read once: for placing its hunks, then for its symbols.
    text_of = functools.cache(lambda path: _tree_text(tree, path))
    lines = gold_lines(patch, text_of)
    if not lines:
        raise GoldError("the patch edits no file that exists at the base commit")
    symbols: list[GoldSymbol] = []
    for path, numbers in lines.items():
        symbols.extend(file_symbols(path, text_of(path), numbers, pm))
    return Gold(tuple(lines), lines, tuple(symbols))


def _offset(old: tuple[str, ...], first: int, lines: tuple[str, ...]) -> int:
    """How many lines past ``first`` (negative: before it) the file holds a
    hunk's old side: 0 where its header says, the nearest such place (later
    first) when not, 0 when the file holds it nowhere."""
    last = len(lines) - len(old) + 1  # the last line the old side may begin at
    if not old or last < 1:
        return 0
    for distance in range(max(first - 1, last - first) + 1):
        for start in (first + distance, first - distance):
            if 1 <= start <= last and lines[start - 1:start - 1 + len(old)] == old:
                return start - first
    return 0


def file_definitions(tree: Path, path: str, pm: pluggy.PluginManager) -> tuple[Node, ...]:
    """The definitions of the base tree's file ``path``, as the gold reads them;
    none when it does not parse."""
    parsed = _parse(path, _tree_text(tree, path), pm)
    return parsed.nodes if parsed is not None else ()


def _tree_text(tree: Path, path: str) -> str | None:
    root = tree.resolve()
    target = (root / path).resolve()
    # A patch names its files; one naming a path outside the tree reads nothing.
    return _read(target) if target.is_relative_to(root) else None


def file_symbols(
    path: str, text: str | None, lines: tuple[int, ...], pm: pluggy.PluginManager
) -> list[GoldSymbol]:
    """The gold symbols of one file's gold lines, in order of their first gold line."""
    whole = GoldSymbol(path, None, "file", ((1, len(split_lines(text))),) if text else ())
    parsed = _parse(path, text, pm)
    if parsed is None or not lines:
        return [whole]
    chosen: dict[str | None, list[Node]] = {}
    for line in lines:
        node = _enclosing(parsed.nodes, line)
        same = chosen.setdefault(None if node is None else node.qualname, [])
        if node is not None and node not in same:
            same.append(node)
    symbols = []
    for qualname, nodes in chosen.items():
        if qualname is None:
            symbols.append(whole)  # a parser without a module node, past every node
        else:
            own = sorted({n for node in nodes for n in node_own_lines(node, parsed.nodes)})
            symbols.append(GoldSymbol(path, qualname, nodes[0].kind, runs(own)))
    return symbols


def _enclosing(nodes: tuple[Node, ...], line: int) -> Node | None:
    """The innermost function or method holding ``line``, else type, else the module."""
    holding = [n for n in nodes if n.span.start_line <= line <= n.span.end_line]
    for kinds in (FUNCTION_KINDS, TYPE_KINDS, frozenset({MODULE})):
        fitting = [n for n in holding if n.kind in kinds]
        if fitting:
            return min(fitting, key=lambda n: (n.span.end_line - n.span.start_line,
                                               -n.span.start_line))
    return None


def _read(path: Path) -> str | None:
    try:
        return source_text(path.read_bytes())
    except (OSError, UnicodeDecodeError):
        return None


def _parse(path: str, text: str | None, pm: pluggy.PluginManager) -> ParsedFile | None:
    if text is None:
        return None
    try:
        # The index's default parse budget: gold is what the index can know.
        parsed: ParsedFile | None = pm.hook.parse_file(path=path, text=text, settings=Settings())
    except SyntaxError:
        return None
    return parsed


@dataclass
class _Hunk:
    path: str
    first: int  # the old-side line the header gives the hunk's first old line
    old: list[str] = field(default_factory=list)  # its context and deleted lines, in order
    gold: set[int] = field(default_factory=set)  # its gold lines, numbered from ``first``


class _DiffParser:
    """A unified diff, line by line, into hunks with their old-side gold lines."""

    def __init__(self) -> None:
        self.paths: dict[str, None] = {}  # the old-side paths, in patch order
        self.hunks: list[_Hunk] = []
        self.path: str | None = None  # the old-side path of the file being read
        self.old = 0  # the next old-side line number
        self.old_left = self.new_left = 0  # lines still to come in the current hunk
        self.deleted = False  # the current run of changed lines deletes a line
        self.insert_at: int | None = None  # old line before which the run inserts

    def feed(self, line: str) -> None:
        if self.old_left or self.new_left:
            self._hunk_line(line)
        elif line.startswith("diff --git "):
            self.path = None
        elif line.startswith("--- "):
            self.path = _old_path(line[4:])
            if self.path is not None:
                self.paths.setdefault(self.path)
        elif (hunk := hunk_header(line)) and self.path is not None:
            # With no old lines, the hunk inserts after line ``old_start``.
            self.old = hunk.old_start if hunk.old_count else hunk.old_start + 1
            self.old_left, self.new_left = hunk.old_count, hunk.new_count
            self.hunks.append(_Hunk(self.path, self.old))

    def close(self) -> None:
        self._end_run()

    def _hunk_line(self, line: str) -> None:
        hunk = self.hunks[-1]  # a hunk line is only read after its header
        mark = line[:1]
        if mark == "\\":
            return  # "\ No newline at end of file"
        if mark == "-":
            hunk.gold.add(self.old)
            hunk.old.append(line[1:].removesuffix("\r"))
            self.deleted = True
            self.old += 1
            self.old_left -= 1
        elif mark == "+":
            if self.insert_at is None:
                self.insert_at = self.old
            self.new_left -= 1
        else:  # context; a blank line is context whose space was stripped
            self._end_run()
            hunk.old.append(line[1:].removesuffix("\r"))
            self.old += 1
            self.old_left -= 1
            self.new_left -= 1
        if not (self.old_left or self.new_left):
            self._end_run()

    def _end_run(self) -> None:
        if self.insert_at is not None and not self.deleted and self.hunks:
            self.hunks[-1].gold.add(max(1, self.insert_at - 1))
        self.deleted = False
        self.insert_at = None


def _old_path(name: str) -> str | None:
    name = name.split("\t", 1)[0].strip()
    if name == "/dev/null":
        return None
    if name.startswith('"') and name.endswith('"'):
        # git C-quotes a path with special bytes: octal escapes of its UTF-8.
        unquoted = name[1:-1].encode("ascii", "backslashreplace").decode("unicode_escape")
        name = unquoted.encode("latin-1").decode("utf-8", "replace")
    return name[2:] if name.startswith("a/") else name
