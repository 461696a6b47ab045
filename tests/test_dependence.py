"""Dependence: the statements shown lines depend on, over a real index and a real retrieval."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import ctx04_dependence as dependence
import pytest
from conftest import make_git_repo

from ctx04_core.bench.systems import run_ctx04
from ctx04_core.pipeline import retrieve
from ctx04_core.plugins import plugin_manager
from ctx04_core.repository import Repo
from ctx04_core.settings import Settings
from ctx04_core.stages.query import build_query
from ctx04_core.types import Candidate, Excerpt, RankedCandidate

Indexed = Callable[..., Repo]

CODEC = (
    "import re\n"                                     # 1
    "\n"
    "\n"
    "def unfold(raw, folded):\n"                      # 4
    "    text = raw.decode()\n"                       # 5
    "    parts = text.split(':')\n"                   # 6
    "    if folded:\n"                                # 7
    "        value = parts[1].strip()\n"              # 8
    "    else:\n"                                     # 9
    "        value = parts[0]\n"                      # 10
    "    unused = 3\n"                                # 11
    "    return re.sub(' +', ' ', value)\n"           # 12
    "\n"
    "\n"
    "class Cache:\n"                                  # 15
    "    def load(self, key):\n"                      # 16
    "        self.hits = {}\n"                        # 17
    "        try:\n"                                  # 18
    "            found = self.hits[key]\n"            # 19
    "        except KeyError as missing:\n"           # 20
    "            raise LookupError(key) from missing\n"  # 21
    "        return found\n"                          # 22
    "\n"
    "\n"
    "TABLE = [\n"                                     # 25
    "    ('a', 1),\n"
    "    ('b', 2),\n"
    "]\n"                                             # 28
    "LIMIT = len(TABLE)\n"                            # 29
)


@pytest.fixture
def repo(tmp_path: Path, indexed: Indexed) -> Repo:
    return indexed(make_git_repo(tmp_path / "repo", {"codec.py": CODEC, "broken.py": "def (\n"}))


def shown(repo: Repo, qualname: str, lines: list[int], **overrides: object) -> list[int] | None:
    node = next(n for n in repo.index.file_nodes("codec.py") if n.qualname == qualname)
    source = repo.source("codec.py")
    assert source is not None
    excerpt = Excerpt(
        RankedCandidate(Candidate(node.span, node.kind, node.qualname, ("test",)), 1, 1.0),
        tuple((n, source.lines[n - 1]) for n in lines),
    )
    return dependence.dependent_lines(
        excerpt=excerpt, repo=repo, settings=Settings().with_overrides(**overrides)
    )


def test_a_line_brings_its_control_header_its_inputs_and_its_first_reader(repo: Repo) -> None:
    # Line 8 runs under `if folded:` (7), reads `parts` (6), and assigns
    # `value`, first read by the return (12). Line 10, the else branch's
    # `value`, is neither.
    assert shown(repo, "codec.unfold", [4, 8]) == [6, 7, 12]


def test_a_name_read_comes_from_its_nearest_earlier_assignment(repo: Repo) -> None:
    # `value` at 12: the nearest assignment above is the else branch's (10);
    # `re` is the module's, outside the function's scope.
    assert shown(repo, "codec.unfold", [4, 12]) == [10]
    # Two hops are not taken: 6 (parts) reads text (5), which 8 does not.
    assert 5 not in (shown(repo, "codec.unfold", [4, 8]) or [])


def test_attributes_of_a_name_and_exception_handlers(repo: Repo) -> None:
    # 21 raises in `except KeyError as missing:` (20), itself under `try:` (18);
    # `missing` is the handler's name (20), `key` the parameter (signature).
    assert shown(repo, "codec.Cache.load", [16, 21]) == [18, 20]
    # 19 reads `self.hits`, assigned at 17, and assigns `found`, read at 22.
    assert shown(repo, "codec.Cache.load", [16, 19]) == [17, 18, 22]


def test_a_long_statement_adds_its_first_line_only(repo: Repo) -> None:
    # The module's own lines: 29 reads TABLE, a four-line statement (25-28).
    assert shown(repo, "codec", [29]) == [25, 26, 27, 28]
    assert shown(repo, "codec", [29], max_statement_lines=3) == [25]


def test_nothing_for_a_whole_candidate_or_a_file_that_does_not_parse(repo: Repo) -> None:
    assert shown(repo, "codec.unfold", list(range(4, 13))) is None
    source = repo.source("broken.py")
    assert source is not None
    assert dependence.scope_statements(source.digest, "\n".join(source.lines), None) == ()


def test_retrieval_shows_the_dependences_of_a_function_cut_to_its_best_lines(
    tmp_path: Path,
) -> None:
    root = make_git_repo(tmp_path / "repo", {"codec.py": CODEC})
    # No function shown whole, nor as its signature alone: unfold keeps its
    # signature and its best line.
    settings = Settings().with_overrides(
        slice_shape="signatures", whole_function_within=0, neighbours_as_signatures=False
    )
    task = "strip the value of the parts"

    def lines_of(disable: tuple[str, ...]) -> list[int]:
        found = retrieve(task, root, settings=settings, disable=disable, index_dir=tmp_path / "i")
        entry = next(e for e in found.context.entries
                     if e.excerpt.ranked.candidate.qualname == "codec.unfold")
        return [n for n, _ in entry.excerpt.lines]

    assert lines_of(("dependence",)) == [4, 8]
    assert lines_of(()) == [4, 6, 7, 8, 12]


def test_the_signal_is_the_share_of_a_function_flowing_from_what_the_task_names(
    repo: Repo,
) -> None:
    settings = Settings().with_overrides(dependence_weight=1.0)
    candidates = tuple(
        Candidate(n.span, n.kind, n.qualname, ("test",)) for n in repo.index.file_nodes("codec.py")
    )

    def values(task: str) -> dict[str | None, float]:
        query = build_query(task, names=repo.index.names(), settings=settings)
        [signal] = dependence.signals(
            query=query, candidates=candidates, repo=repo, settings=settings
        ) or []
        assert (signal.name, signal.mode, signal.weight) == ("dependence", "scale", 1.0)
        return {c.qualname: v for c, v in zip(candidates, signal.values, strict=True)}

    # load's statements: 17 writes self.hits, 18 try, 19 reads it and writes
    # found, 20 except, 21 raise, 22 returns found: 17, 19 name it, 22 reads
    # what 19 assigned: 3 of 6. Classes and modules are not functions: 0.
    assert values("Cache.load() should not look at self.hits") == {
        "codec": 0.0, "codec.unfold": 0.0, "codec.Cache": 0.0, "codec.Cache.load": 0.5,
    }
    # `.strip()` of parts[1] (8), and the return that reads its value (12): 2 of 7.
    assert values("unfold: parts.strip() loses the folded value")["codec.unfold"] == 2 / 7
    # Weight 0 (the default) contributes no signal at all.
    assert dependence.signals(
        query=build_query("load", names=repo.index.names(), settings=Settings()),
        candidates=candidates, repo=repo, settings=Settings(),
    ) is None
    # A weight given by name in signal_weights counts as the weight: computed.
    named = Settings(signal_weights=("dependence=1",))
    [overridden] = dependence.signals(
        query=build_query("KeyError in load", names=repo.index.names(), settings=named),
        candidates=candidates, repo=repo, settings=named,
    ) or []
    assert overridden.values == (0.0, 0.0, 0.0, 1 / 3)


SHOP = {
    "shop.py": (
        "from pricing import discount\n"              # 1
        "\n"
        "\n"
        "def total(cart):\n"                          # 4
        "    base = items_sum(cart)\n"                # 5
        "    return discount(base) + fee()\n"         # 6
        "\n"
        "\n"
        "def items_sum(cart):\n"                      # 9
        "    return sum(cart)\n"
    ),
    "pricing.py": (
        "def discount(\n"                             # 1
        "    amount,\n"
        "    rate=0.1,\n"
        "):\n"                                        # 4
        "    return amount * (1 - rate)\n"
    ),
    "fees/a.py": "def fee():\n    return 1\n",
    "fees/b.py": "def fee():\n    return 2\n",
}


def called(repo: Repo, lines: list[int]) -> list[str] | None:
    node = next(n for n in repo.index.file_nodes("shop.py") if n.qualname == "shop.total")
    source = repo.source("shop.py")
    assert source is not None
    excerpt = Excerpt(
        RankedCandidate(Candidate(node.span, node.kind, node.qualname, ("test",)), 1, 1.0),
        tuple((n, source.lines[n - 1]) for n in lines),
    )
    found = dependence.called_definitions(excerpt=excerpt, repo=repo, settings=Settings())
    return None if found is None else [n.qualname for n in found]


def test_a_shown_call_names_its_definition_in_the_file_or_the_only_one(
    tmp_path: Path, indexed: Indexed
) -> None:
    repo = indexed(make_git_repo(tmp_path / "repo", SHOP))
    # Line 6 calls discount (defined once, in pricing.py) and fee (defined
    # twice: which one runs cannot be told); line 5's items_sum is not shown.
    assert called(repo, [4, 6]) == ["pricing.discount"]
    assert called(repo, [4, 5, 6]) == ["shop.items_sum", "pricing.discount"]
    assert called(repo, [4]) == []


def test_retrieval_shows_the_signature_of_a_shown_call_after_the_ranked_entries(
    tmp_path: Path,
) -> None:
    root = make_git_repo(tmp_path / "repo", SHOP)
    task = "total() is wrong"
    # Only lexical recall, so the callees are not candidates of their own;
    # total ranks first and is shown whole, calls and all.
    only = ("ripgrep", "python", "rerank", "prune", "assemble", "dependence")

    truncated: list[tuple[str, str, str]] = []

    def entries(**overrides: object) -> list[tuple[int, str | None, tuple[str, ...], list[int]]]:
        # Without the leading file's imports (leading_imports_max), shown last.
        settings = Settings(first_run_context=0, leading_imports_max=0).with_overrides(
            **overrides
        )
        found = retrieve(task, root, settings=settings,
                         only=only, index_dir=tmp_path / "i")
        assert [r.candidate.qualname for r in found.candidates] == ["shop.total"]
        truncated[:] = [(d.kind, d.reason, d.detail) for d in found.diagnostics
                        if d.reason == "truncated"]
        return [
            (e.excerpt.ranked.rank, e.excerpt.ranked.candidate.qualname,
             e.excerpt.ranked.candidate.sources, [n for n, _ in e.excerpt.lines])
            for e in found.context.entries if e.included
        ]

    signatures = [(2, "shop.items_sum", ("called",), [9]),
                  (3, "pricing.discount", ("called",), [1, 2, 3, 4])]
    # total's body with the two blank lines after it (blank_line_ends).
    assert entries() == [(1, "shop.total", ("ripgrep",), [4, 5, 6, 7, 8]), *signatures]
    # A header longer than max_statement_lines shows its first line, as prune does.
    assert entries(max_statement_lines=3)[2] == (3, "pricing.discount", ("called",), [1])
    assert truncated == []
    assert entries(call_signatures_limit=1)[1:] == signatures[:1]
    assert truncated == [("unavailable", "truncated",
                          "2 definitions called from shown lines, kept the first 1 signatures")]
    assert entries(call_signatures_limit=0)[1:] == []
    assert truncated == []
    # With the first candidate's neighbouring lines (first_run_context 3),
    # items_sum's signature (9) is among them and is not shown again.
    assert entries(first_run_context=3) == [
        (1, "shop.total", ("ripgrep",), [1, 2, 3, 4, 5, 6, 7, 8, 9]),
        (2, "pricing.discount", ("called",), [1, 2, 3, 4]),
    ]


def test_the_benchmark_counts_signature_lines_as_shown_not_as_ranked(tmp_path: Path) -> None:
    root = make_git_repo(tmp_path / "repo", SHOP)
    only = ("ripgrep", "python", "rerank", "prune", "assemble", "dependence")
    answer = run_ctx04("total() is wrong", root,
                       Settings(first_run_context=0, leading_imports_max=0),
                       plugin_manager(only=only))
    assert [(r.rank, r.qualname, r.included) for r in answer.ranked] == [(1, "shop.total", True)]
    assert [(s.path, s.lines) for s in answer.shown] == [
        ("shop.py", (4, 5, 6, 7, 8)), ("shop.py", (9,)), ("pricing.py", (1, 2, 3, 4)),
    ]
