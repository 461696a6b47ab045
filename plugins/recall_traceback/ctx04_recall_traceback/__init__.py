"""Traceback recall: the definitions on the stack of an error the task shows.

A frame such as ``File "/venv/site-packages/pkg/mod.py", line 12, in load``
names a file and a function where the failure passed. Each runtime writes
frames its own way, and each way is one pattern in :data:`RUNTIMES`: Python
tracebacks and IPython's (``File ~/x/a.py:12, in m(self)``, or ``~/x/a.py
in m(self)`` over ``--> 12``), Java (``at a.b.C.m(C.java:12)``), Node (``at
f (/x/a.js:3:9)``), Go (``pkg.(*T).M(...)`` over ``\t/x/t.go:12 +0x1d``),
Rust backtraces and panics, Ruby (``/x/a.rb:12:in 'm'``), PHP (``#0
/x/A.php(12): A->m()``), gdb and sanitizer frames for C and C++ (``#1 0x..
in f /x/a.c:12``), a code host's permalink to lines
(``/blob/main/a/b.py#L12-L20``) and, last, any ``path.ext:line`` of those
languages (compiler messages). The frame's path is matched to a repository
file by its longest suffix (installed copies and other machines' checkouts
put the package under another root), or by its longest tail that one file
alone ends with (an installed package whose repository keeps it under
``lib/`` or ``src/``, a Java package under ``src/main/java``: see
:meth:`RepoFiles.path_of`), and the frame's function to the
definition of that name in the file, or else to the innermost definition
holding the line (a link's lines: the innermost holding at least half of
them, since a link often starts at the comment above what it shows). The
reporter's line numbers may come from another version, so a frame's lines
outside its definition are dropped.

Frames are read from the latest error, then the task text; the frame
nearest the failure comes first (the last of a Python traceback, the first
of the others). Cap: at most ``settings.traceback_limit`` definitions.
Each is ``pointed_at``: the task names the place itself, which the re-rank
weighs (``settings.location_boost``); its ``pointed_lines`` are the frame's
line or the link's lines inside it, which the prune shows with its best
lines (gin-3741: a link to a function's lines 81-95 was read as line 81, a
comment in the module, and the changed line four below was never shown).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import NamedTuple

from ctx04_core.hookspecs import hookimpl
from ctx04_core.repository import Repo
from ctx04_core.settings import Settings
from ctx04_core.text import IDENTIFIER, simple_name
from ctx04_core.types import Candidate, Node, Query, Recall

SOURCE = "traceback"
_SOURCE_EXTENSIONS = r"(?:c|cc|cpp|cxx|h|hh|hpp|go|rs|java|kt|[cm]?js|jsx|[cm]?ts|tsx|rb|php)"


@dataclass(frozen=True)
class Runtime:
    """How one runtime writes a frame: a pattern with the groups ``path`` and
    ``line``, and where it has them ``function`` and ``package`` (a Java
    package, which is the folder of the file)."""

    name: str
    pattern: re.Pattern[str]
    innermost_last: bool = False


RUNTIMES = (
    Runtime("python", re.compile(
        r'File "(?P<path>[^"\n]+)", line (?P<line>\d+), in (?P<function>[^\s<>]+|<[^>\s]+>)'
    ), innermost_last=True),
    # IPython and Jupyter (data-science reports paste these): since IPython 8
    # ``File ~/x/pkg/a.py:12, in Klass.m(self)``; before, ``~/x/pkg/a.py in
    # m(self)`` over the code around the line, which is marked ``--> 12``.
    Runtime("ipython", re.compile(
        r"File (?P<path>[^\s\"]+\.py):(?P<line>\d+), in (?P<function>[\w.<>]+)"
    ), innermost_last=True),
    Runtime("ipython_before_8", re.compile(
        r"^(?P<path>[^\s\"]+\.py) in (?P<function>[\w<>]+)\([^\n]*\n"
        # Possessive: a code line read one way only, or a frame with no marked
        # line would be tried in every way of splitting its lines' digits.
        r"(?:[ \t]*+\d++[^\n]*+\n){0,40}?-+> *(?P<line>\d+)", re.MULTILINE
    ), innermost_last=True),
    Runtime("java", re.compile(
        r"\bat (?P<package>(?:[\w$]+\.)*)[\w$]+\.(?P<function>[\w$<>]+)"
        r"\((?P<path>[\w$]+\.(?:java|kt|scala|groovy)):(?P<line>\d+)\)"
    )),
    Runtime("node", re.compile(
        r"\bat (?:(?:async )?(?:new )?(?P<function>[\w$.<>\[\]]+) \()?(?:file://)?"
        r"(?P<path>[^\s()]+?\.[cm]?[jt]sx?):(?P<line>\d+):\d+\)?"
    )),
    Runtime("go", re.compile(
        r"^[ \t]*[\w./*()-]+?\.(?P<function>\w+)\([^\n]*\)\n"
        r"[ \t]+(?P<path>[^\s:]+\.go):(?P<line>\d+)", re.MULTILINE
    )),
    Runtime("rust", re.compile(
        r"^[ \t]*\d+: (?P<function>[\w:<>{}# ]+?)(?:::h[0-9a-f]{16})?\n"
        r"[ \t]+at (?P<path>[^\s:]+\.rs):(?P<line>\d+)", re.MULTILINE
    )),
    # Tried only where a run of path characters starts (here and in "location"):
    # a try inside a run would scan the rest of it again, quadratic on a long word.
    Runtime("ruby", re.compile(
        r"(?<![^\s:'\"`(])"
        r"(?P<path>[^\s:'\"`(]+\.(?:rb|rake)):(?P<line>\d+):in [`'](?P<function>[^'`\n]+)'"
    )),
    Runtime("php", re.compile(
        r"#\d+ (?P<path>[^\s(]+\.php)\((?P<line>\d+)\): (?:[\w\\]+(?:->|::))?(?P<function>\w+)\("
    )),
    Runtime("native", re.compile(
        r"#\d+ 0x[0-9a-fA-F]+ in (?P<function>[\w:~<>]+)(?:\([^)\n]*\))? "
        r"(?P<path>[^\s:]+\.(?:c|cc|cpp|cxx|h|hh|hpp)):(?P<line>\d+)"
    )),
    # A code host's link to lines of a file (``.../blob/<ref>/a/b.py#L12-L20``),
    # in any language; a ref with a slash joins the path, which the longest
    # suffix match ignores.
    Runtime("permalink", re.compile(
        r"/(?:blob|tree)/[^/\s]+/(?P<path>[^\s#?]+)#L(?P<line>\d+)(?:-L(?P<last_line>\d+))?"
    )),
    # Anything else that points at a line: a Rust panic, a compiler error, a Go test.
    # A path starts after a character no path holds, or after a "/" that follows
    # none (``/x/a.rs``); not glued to a line number before it.
    Runtime("location", re.compile(
        r"(?:(?<![\w./-])|(?<=/)(?<![\w.-]/))"
        rf"(?P<path>(?:[\w.-]+/)*+[\w.-]+\.{_SOURCE_EXTENSIONS})(?::|\(| on line )(?P<line>\d+)\b"
    )),
)
_CLOSURE = re.compile(r"^(?:(?:block|rescue|ensure)(?: \(\d+ levels\))? in )+")


class Frame(NamedTuple):
    """A place an error or a link names: ``function`` is "" where it names
    none, or an anonymous one; ``last_line`` is ``line`` but for a link to
    several lines."""

    path: str
    line: int
    function: str
    last_line: int


def frames(text: str) -> list[Frame]:
    """Each frame in ``text``, innermost first, by runtime in :data:`RUNTIMES` order."""
    found: list[Frame] = []
    # Text a runtime's frame took is not read again by a later, looser pattern
    # (``Gson.java:12`` of a Java frame is not also a bare location).
    taken: list[tuple[int, int]] = []
    for runtime in RUNTIMES:
        matched = []
        for match in runtime.pattern.finditer(text):
            if not any(start < match.end() and match.start() < end for start, end in taken):
                matched.append(match)
        taken.extend(m.span() for m in matched)
        frames_of_runtime = [_frame(m) for m in matched]
        found.extend(frames_of_runtime[::-1] if runtime.innermost_last else frames_of_runtime)
    return found


def _frame(match: re.Match[str]) -> Frame:
    groups = match.groupdict()
    path = (groups.get("package") or "").replace(".", "/") + match.group("path")
    line = int(match.group("line"))
    last_line = max(line, int(groups.get("last_line") or line))
    return Frame(path, line, _function_name(groups.get("function") or ""), last_line)


def _function_name(raw: str) -> str:
    """``m`` of ``Klass#m``, ``a::b::m``, ``block in m``; "" for ``<anonymous>``."""
    name = simple_name(_CLOSURE.sub("", raw))
    return name if IDENTIFIER.fullmatch(name) else ""


class RepoFiles:
    """The repository's files, and which of them a frame's path names."""

    def __init__(self, paths: frozenset[str]) -> None:
        self.paths = paths
        self._by_name: dict[str, list[str]] | None = None

    def path_of(self, frame_path: str) -> str | None:
        """The file whose path is the longest suffix of ``frame_path``; else the
        one file that alone ends with the longest tail of ``frame_path`` of two
        parts or more, unless a Python package holds that tail (an installed
        copy's ``site-packages/matplotlib/colors.py`` is the repository's
        ``lib/matplotlib/colors.py``, a Java frame's ``com/google/gson/Gson.java``
        is ``gson/src/main/java/com/google/gson/Gson.java``; numpy's
        ``numpy/core/__init__.py`` is not ``xarray/core/__init__.py``)."""
        parts = [p for p in frame_path.replace("\\", "/").split("/") if p not in ("", ".")]
        for start in range(len(parts)):
            candidate = "/".join(parts[start:])
            if candidate in self.paths:
                return candidate
        return self._ending_with(parts)

    def _ending_with(self, parts: list[str]) -> str | None:
        if len(parts) < 2:
            # A file name alone names the wrong file as often as the right one
            # (docs/benchmarks.md, stop 53).
            return None
        if self._by_name is None:
            self._by_name = {}
            for path in self.paths:
                self._by_name.setdefault(path.rsplit("/", 1)[-1], []).append(path)
        named = self._by_name.get(parts[-1], [])
        for start in range(len(parts) - 1):
            tail = "/".join(parts[start:])
            ending = [path for path in named if path.endswith("/" + tail)]
            if len(ending) > 1:
                return None  # a shorter tail only ends more of them
            if ending:
                return None if self._in_package(ending[0][: -len(tail) - 1]) else ending[0]
        return None

    def _in_package(self, folder: str) -> bool:
        parts = folder.split("/")
        return any(
            "/".join(parts[:end]) + "/__init__.py" in self.paths for end in range(1, len(parts) + 1)
        )


def frame_node(repo: Repo, path: str, frame: Frame) -> Node | None:
    named = [
        n for n in repo.index.file_nodes(path) if n.name == frame.function and n.kind != "module"
    ]
    holding = [n for n in named if n.span.start_line <= frame.line <= n.span.end_line]
    if holding or len(named) == 1:
        return (holding or named)[0]
    return repo.index.innermost(path, frame.line, frame.last_line)


@hookimpl
def recall(query: Query, repo: Repo, settings: Settings) -> Recall | None:
    stack = frames(query.latest_error) + frames(query.task_text)
    if not stack:
        return None
    files = RepoFiles(repo.index.paths())
    # Per definition, in the order first met: its candidate so far.
    found: dict[tuple[str, int], Candidate] = {}
    for frame in stack:
        path = files.path_of(frame.path)
        node = frame_node(repo, path, frame) if path else None
        if node is None:
            continue
        span = node.span
        lines = range(max(frame.line, span.start_line), min(frame.last_line, span.end_line) + 1)
        key = (span.path, span.start_line)
        if key in found:  # another frame, or another link, in the same definition
            met = found[key]
            found[key] = replace(
                met, pointed_lines=tuple(sorted({*met.pointed_lines, *lines}))
            )
            continue
        if len(found) == settings.traceback_limit:
            continue
        found[key] = Candidate(
            span=span, kind=node.kind, qualname=node.qualname, sources=(SOURCE,),
            terms=(frame.function,) if frame.function else (), pointed_at=True,
            pointed_lines=tuple(lines),
        )
    return Recall(source=SOURCE, candidates=tuple(found.values()))
