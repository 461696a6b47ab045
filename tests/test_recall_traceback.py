"""Traceback recall: frames of an error mapped to the repository's definitions."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import ctx04_recall_traceback as traceback
import pytest
from conftest import make_git_repo
from ctx04_recall_traceback import frames

from ctx04_core.pipeline import retrieve
from ctx04_core.repository import Repo
from ctx04_core.settings import Settings
from ctx04_core.stages.query import build_query
from ctx04_core.types import Recall

Indexed = Callable[..., Repo]

FILES: dict[str, str | bytes] = {
    "pkg/__init__.py": "",
    "pkg/loader.py": (
        "def load(path):\n"
        "    return parse(read(path))\n"
        "\n"
        "\n"
        "def read(path):\n"
        "    return open(path).read()\n"
        "\n"
        "\n"
        "class Config:\n"
        "    def load(self):\n"
        "        return load(self.path)\n"
    ),
    "pkg/parse.py": "def parse(text):\n    return text.split('=')[1]\n",
}

ERROR = (
    "Traceback (most recent call last):\n"
    '  File "/home/me/app/main.py", line 3, in <module>\n'
    '  File "/venv/lib/python3.11/site-packages/pkg/loader.py", line 11, in load\n'
    '  File "/venv/lib/python3.11/site-packages/pkg/loader.py", line 2, in load\n'
    '  File "C:\\\\venv\\\\Lib\\\\site-packages\\\\pkg\\\\parse.py", line 2, in parse\n'
    "IndexError: list index out of range\n"
)


def recall(repo: Repo, task: str, error: str | None = None, **overrides: object) -> Recall:
    query = build_query(task, latest_error=error, names=repo.index.names(), settings=Settings())
    result = traceback.recall(
        query=query, repo=repo, settings=Settings().with_overrides(**overrides)
    )
    assert result is not None
    return result


def test_frames_map_to_definitions_innermost_first(tmp_path: Path, indexed: Indexed) -> None:
    repo = indexed(make_git_repo(tmp_path / "r", FILES))
    result = recall(repo, "Loading a config without '=' crashes", ERROR)
    # The Windows path and the site-packages copies resolve by suffix; the
    # frame outside the repository (main.py) is dropped; two frames in
    # functions named load are told apart by their lines.
    assert [(c.qualname, c.terms) for c in result.candidates] == [
        ("pkg.parse.parse", ("parse",)),
        ("pkg.loader.load", ("load",)),
        ("pkg.loader.Config.load", ("load",)),
    ]
    assert {(c.sources, c.pointed_at) for c in result.candidates} == {(("traceback",), True)}


def test_a_traceback_in_the_task_text_counts_too(tmp_path: Path, indexed: Indexed) -> None:
    repo = indexed(make_git_repo(tmp_path / "r", FILES))
    result = recall(repo, "It crashes:\n" + ERROR, traceback_limit=1)
    assert [c.qualname for c in result.candidates] == ["pkg.parse.parse"]


def test_no_frames_no_candidates(tmp_path: Path, indexed: Indexed) -> None:
    repo = indexed(make_git_repo(tmp_path / "r", FILES))
    query = build_query("parse is slow", names=repo.index.names(), settings=Settings())
    assert traceback.recall(query=query, repo=repo, settings=Settings()) is None


COLOUR = {
    "pkg/__init__.py": "",
    "pkg/colour.py": (
        "def plain():\n"
        "    return 0\n"
        "\n"
        "\n"
        "# The colour of a status code.\n"
        "def colour(code):\n"
        "    if code < 200:\n"
        "        return 'red'\n"
        "    return 'white'\n"
    ),
}
LINK = "https://github.com/acme/app/blob/0a1b2c/pkg/colour.py"


@pytest.mark.parametrize(("links", "expected"), [
    # From the comment above colour: the function, not the module the comment
    # lies in; the comment's line is none of colour's.
    ((f"{LINK}#L5-L9",), ("pkg.colour.colour", (6, 7, 8, 9))),
    ((f"{LINK}#L8",), ("pkg.colour.colour", (8,))),
    # Two links into one function: one candidate pointing at both.
    ((f"{LINK}#L9", f"{LINK}#L7"), ("pkg.colour.colour", (7, 9))),
    # Under half of the range in colour: the module holds it.
    ((f"{LINK}#L1-L7",), ("pkg.colour", (1, 2, 3, 4, 5, 6, 7))),
], ids=["range", "line", "two-links", "across"])
def test_a_link_points_at_the_definition_holding_most_of_its_lines(
    tmp_path: Path, indexed: Indexed, links: tuple[str, ...], expected: tuple[str, tuple[int, ...]]
) -> None:
    repo = indexed(make_git_repo(tmp_path / "r", COLOUR))
    result = recall(repo, "Status codes under 200 are red, see " + " and ".join(links))
    assert [(c.qualname, c.pointed_lines) for c in result.candidates] == [expected]


def test_a_link_mostly_past_the_end_of_the_file_points_nowhere(
    tmp_path: Path, indexed: Indexed
) -> None:
    # Lines 8-40 of a 9-line file: another version's; not even the module
    # holds half of them.
    repo = indexed(make_git_repo(tmp_path / "r", COLOUR))
    query = build_query(f"see {LINK}#L8-L40", names=repo.index.names(), settings=Settings())
    assert traceback.recall(query=query, repo=repo, settings=Settings()) == Recall(
        source="traceback", candidates=()
    )


def test_a_frame_from_another_version_points_at_no_line(tmp_path: Path, indexed: Indexed) -> None:
    # The frame names colour, at a line past its end in this tree.
    repo = indexed(make_git_repo(tmp_path / "r", COLOUR))
    error = 'Traceback (most recent call last):\n  File "pkg/colour.py", line 40, in colour\n'
    result = recall(repo, "It fails", error)
    assert [(c.qualname, c.pointed_at, c.pointed_lines) for c in result.candidates] == [
        ("pkg.colour.colour", True, ()),
    ]


def test_a_frame_names_the_file_of_its_longest_suffix_in_the_repository() -> None:
    files = traceback.RepoFiles(frozenset({"pkg/loader.py", "loader.py", "src/pkg/loader.py"}))
    assert files.path_of("/x/src/pkg/loader.py") == "src/pkg/loader.py"
    assert files.path_of("/venv/pkg/loader.py") == "pkg/loader.py"
    assert files.path_of("./loader.py") == "loader.py"
    assert files.path_of("/venv/other.py") is None


def test_else_the_one_file_ending_with_its_longest_tail_outside_a_package() -> None:
    files = traceback.RepoFiles(frozenset({
        "lib/matplotlib/__init__.py", "lib/matplotlib/colors.py", "lib/mpl/utils/io.py",
        "src/pkg/utils/io.py", "gson/src/main/java/com/google/gson/Gson.java",
        "xarray/__init__.py", "xarray/core/__init__.py", "xarray/core/dataset.py",
    }))
    # An installed copy of the package the repository keeps under lib/.
    assert files.path_of("/venv/site-packages/matplotlib/colors.py") == "lib/matplotlib/colors.py"
    # A Java frame's package path, under a Maven module's source root.
    assert files.path_of("com/google/gson/Gson.java") == (
        "gson/src/main/java/com/google/gson/Gson.java"
    )
    # Another package's module whose tail only a subpackage here ends with.
    assert files.path_of("/venv/site-packages/numpy/core/__init__.py") is None
    # Two files end with the tail; a file name alone names none.
    assert files.path_of("/venv/other/utils/io.py") is None
    assert files.path_of("/venv/site-packages/dataset.py") is None


@pytest.mark.parametrize(("trace", "expected"), [
    (
        'Exception in thread "main" java.lang.IllegalStateException: boom\n'
        "\tat com.google.gson.internal.bind.TypeAdapters$16.write(TypeAdapters.java:451)\n"
        "\tat com.google.gson.Gson.<init>(Gson.java:120)\n",
        [("com/google/gson/internal/bind/TypeAdapters.java", 451, "write", 451),
         ("com/google/gson/Gson.java", 120, "", 120)],
    ),
    (
        "TypeError: Cannot read properties of undefined\n"
        "    at Object.mergeConfig (/app/node_modules/axios/lib/core/mergeConfig.js:19:30)\n"
        "    at /app/lib/adapters/http.js:88:5\n"
        "    at async Axios.request (file:///app/lib/core/Axios.js:45:12)\n",
        [("/app/node_modules/axios/lib/core/mergeConfig.js", 19, "mergeConfig", 19),
         ("/app/lib/adapters/http.js", 88, "", 88), ("/app/lib/core/Axios.js", 45, "request", 45)],
    ),
    (
        "goroutine 1 [running]:\ngithub.com/gin-gonic/gin.(*Context).Next(...)\n"
        "\t/go/src/github.com/gin-gonic/gin/context.go:165 +0x3b\nmain.main()\n"
        "\t/app/main.go:12 +0x1d\n",
        [("/go/src/github.com/gin-gonic/gin/context.go", 165, "Next", 165),
         ("/app/main.go", 12, "main", 12)],
    ),
    (
        "thread 'main' panicked at src/parser.rs:88:14:\nindex out of bounds\n"
        "   3: nu_parser::parse::parse_block\n"
        "             at ./crates/nu-parser/src/parse.rs:120:9\n",
        [("./crates/nu-parser/src/parse.rs", 120, "parse_block", 120),
         ("src/parser.rs", 88, "", 88)],
    ),
    (
        "lib/fluent/config.rb:12:in `block in parse': bad (RuntimeError)\n"
        "\tfrom /gems/faker/lib/faker/name.rb:30:in 'Faker::Name#first_name'\n",
        [("lib/fluent/config.rb", 12, "parse", 12),
         ("/gems/faker/lib/faker/name.rb", 30, "first_name", 30)],
    ),
    (
        "PHP Fatal error:  Uncaught Exception in /var/www/src/Kernel.php:55\n"
        "#0 /var/www/src/Http/Request.php(120): App\\Http\\Request->input('x')\n#1 {main}\n",
        [("/var/www/src/Http/Request.php", 120, "input", 120),
         ("var/www/src/Kernel.php", 55, "", 55)],
    ),
    (
        "#0 0x4005d4 in fmt::v9::detail::write_int /src/fmt/include/fmt/format.h:2045:3\n"
        "#1 0x400abc in main /src/test.cc:10\n",
        [("/src/fmt/include/fmt/format.h", 2045, "write_int", 2045),
         ("/src/test.cc", 10, "main", 10)],
    ),
    (
        "see https://github.com/acme/app/blob/main/pkg/loader.py#L5-L6 and\n"
        "https://gitlab.com/g/p/-/blob/release/1.2/src/x.rs#L9, not src/y.rs#L3\n",
        [("pkg/loader.py", 5, "", 6), ("1.2/src/x.rs", 9, "", 9)],
    ),
    (
        "TypeError                                 Traceback (most recent call last)\r\n"
        "File ~/code/seaborn/seaborn/_core/plot.py:1252, in Plotter._setup_scales(self, p)\r\n"
        "   1251 else:\r\n"
        "-> 1252     self._scales[var] = scale._setup(var_df[var], prop)\r\n"
        "\r\n"
        "File ~/code/seaborn/seaborn/_core/scales.py:351, in ContinuousBase._setup(self)\r\n"
        "--> 351 b = forward(vmax) - forward(vmin)\r\n"
        "File ~/env/mpl/__init__.py:1423, in _preprocess_data.<locals>.inner(ax)\r\n",
        [("~/env/mpl/__init__.py", 1423, "inner", 1423),
         ("~/code/seaborn/seaborn/_core/scales.py", 351, "_setup", 351),
         ("~/code/seaborn/seaborn/_core/plot.py", 1252, "_setup_scales", 1252)],
    ),
    (
        "/usr/lib/python3.8/site-packages/sympy/printing/printer.py in _print(self, expr)\r\n"
        "    328                 if printmethod is not None:\r\n"
        "--> 329                     return printmethod(expr, **kwargs)\r\n"
        "    330 \r\n"
        "\r\n"
        "/usr/lib/python3.8/site-packages/sympy/printing/latex.py in _print_Pow(self, expr)\r\n"
        "    650             if expr.base.is_Function:\r\n"
        "--> 651                 return self._print(expr.base, exp=self._print(expr.exp))\r\n"
        "\r\n"
        "~/x/a.py in shown_without_its_line(self)\r\n"
        "\r\n"
        "--> 12 is no frame's line\r\n",
        [("/usr/lib/python3.8/site-packages/sympy/printing/latex.py", 651, "_print_Pow", 651),
         ("/usr/lib/python3.8/site-packages/sympy/printing/printer.py", 329, "_print", 329)],
    ),
], ids=["java", "node", "go", "rust", "ruby", "php", "native", "permalink", "ipython",
        "ipython_before_8"])
def test_frames_of_each_runtime(trace: str, expected: list[tuple[str, int, str, int]]) -> None:
    assert frames(trace) == expected


def test_the_slice_shows_the_lines_a_link_points_at(tmp_path: Path) -> None:
    # send is 62 lines, too long for the budget: it is cut to its best lines
    # (its signature and the line with the task's word "wire") and their
    # neighbours; the linked lines 40-42, which share no word with the task,
    # come with them. The optional plugins are off, as in a default install.
    steps = "    value = value.grow()\n" * 60
    root = make_git_repo(tmp_path / "r", {
        "pkg/__init__.py": "",
        "pkg/adapter.py": "def send(value):\n    wire = value.wire()\n" + steps,
    })
    link = "https://github.com/acme/app/blob/0a1b2c/pkg/adapter.py#L40-L42"
    shown = {}
    for task in ("Sending breaks on the wire", f"Sending breaks on the wire, see {link}"):
        result = retrieve(
            task, root, settings=Settings(budget_tokens=200), index_dir=tmp_path / "ix",
            disable=["dependence", "meaning", "pin"],
        )
        entry = result.context.entries[0]
        shown[task] = (entry.excerpt.shown_as, [n for n, _ in entry.excerpt.lines], entry.included)
    # Each run with three lines either side (first_run_context).
    assert list(shown.values()) == [
        ("pruned", [1, 2, 3, 4, 5, 6, 7], True),
        ("pruned", [1, 2, 3, 4, 5, 6, 7, *range(37, 46)], True),
    ]
