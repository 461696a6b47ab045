"""The meaning signal with the real static embedder, loaded from its wheel."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from pathlib import Path

import pytest
from conftest import make_git_repo
from ctx04_meaning import (
    MAX_TEXT_CHARS,
    EncoderError,
    StaticEncoder,
    candidate_text,
    cosines,
    encoder,
    packed,
    rescaled,
    task_vector,
    unpacked,
    values_key,
)

from ctx04_core.pipeline import retrieve
from ctx04_core.repository import Repo
from ctx04_core.settings import Settings
from ctx04_core.types import Candidate

FILES: dict[str, str | bytes] = {
    "plots.py": (
        "def redraw_histogram(axes, counts):\n"
        '    """Draw the bars again and rescale the y axis to the tallest bar."""\n'
        "    axes.bar(range(len(counts)), counts)\n"
        "    axes.set_ylim(0, max(counts))\n"
    ),
    "mail.py": (
        "def parse_address(header):\n"
        '    """Split an e-mail header into the display name and the address."""\n'
        "    name, _, address = header.rpartition(' ')\n"
        "    return name, address.strip('<>')\n"
    ),
}


def test_the_encoder_loads_from_the_installed_wheel() -> None:
    vectors = StaticEncoder().encode(["a histogram", "an e-mail address"])
    assert vectors.shape == (2, 256)
    assert encoder("wordllama") is encoder("wordllama")  # loaded once per process


def test_a_text_alike_in_meaning_is_closer() -> None:
    close, far = cosines(
        task_vector("wordllama", "", "the bar chart's axis is not rescaled"),
        encoder("wordllama").encode(
            ["draw the histogram bars and set the axis limits", "parse an e-mail header"]
        ),
    )
    assert close > far


def test_values_are_rescaled_over_the_candidates() -> None:
    assert rescaled([0.2, 0.6, 0.4]) == pytest.approx((0.0, 1.0, 0.5))
    assert rescaled([0.3, 0.3]) == (0.0, 0.0)
    assert rescaled([]) == ()


def test_the_signal_lifts_the_candidate_that_means_what_the_task_says(tmp_path: Path) -> None:
    root = make_git_repo(tmp_path / "r", FILES)
    # Both functions hold "the" and "and"; only the meaning tells them apart.
    task = "After new data the bars of the chart keep their old height and the top is cut off"
    result = retrieve(task, root, disable=["pin"], settings=Settings(meaning_weight=1.0))
    meaning = {r.candidate.qualname: dict(r.signals)["meaning"] for r in result.candidates}
    assert meaning == {"plots.redraw_histogram": 1.0, "mail.parse_address": 0.0}
    assert result.candidates[0].candidate.qualname == "plots.redraw_histogram"


def test_an_unknown_encoder_is_a_clear_error() -> None:
    with pytest.raises(EncoderError) as caught:
        encoder("codebert")
    assert str(caught.value) == "unknown meaning_encoder 'codebert'; choose from wordllama, onnx"



def test_a_huge_line_is_cut_before_it_is_encoded(
    tmp_path: Path, indexed: Callable[..., Repo]
) -> None:
    # One 3 MB minified line: padded batch-wide, it would need gigabytes.
    files: dict[str, str | bytes] = {**FILES, "bundle.py": "DATA = '" + "x9," * 1_000_000 + "'\n"}
    root = make_git_repo(tmp_path / "r", files)
    settings = Settings(max_file_bytes=8 * 1024 * 1024)
    result = retrieve("DATA bars of the chart", root, disable=["pin"], settings=settings)
    assert "bundle.py" in {r.candidate.span.path for r in result.candidates}
    repo = indexed(root, max_file_bytes=8 * 1024 * 1024)
    [module] = repo.index.file_nodes("bundle.py")
    text = candidate_text(Candidate(module.span, module.kind, module.qualname, ("test",)), repo)
    assert len(text) == MAX_TEXT_CHARS == 2000


def vectors_of(repo: Repo, path: str) -> dict[str, bytes | None]:
    """The stored wordllama value of each node of ``path``, by qualname."""
    nodes = repo.index.file_nodes(path)
    key = values_key(encoder("wordllama"))
    return {n.qualname: v for n, v in zip(nodes, repo.index.node_values(key, nodes), strict=True)}


def stored_rows(repo: Repo) -> int:
    with sqlite3.connect(repo.index.path) as conn:
        (count,) = conn.execute("SELECT count(*) FROM node_values").fetchone()
    return int(count)


def test_vectors_are_made_at_index_time_and_refreshed_per_file(
    tmp_path: Path, indexed: Callable[..., Repo]
) -> None:
    root = make_git_repo(tmp_path / "r", FILES)
    repo = indexed(root)
    model = encoder("wordllama")
    plots = vectors_of(repo, "plots.py")
    assert list(plots) == ["plots", "plots.redraw_histogram"]
    for path in ("plots.py", "mail.py"):
        nodes = repo.index.file_nodes(path)
        texts = [candidate_text(Candidate(n.span, n.kind, n.qualname, ("test",)), repo)
                 for n in nodes]
        expected = model.encode(texts)
        for node, text, vector in zip(nodes, texts, expected, strict=True):
            stored = unpacked(vectors_of(repo, path)[node.qualname], text)
            assert stored is not None and stored.tobytes() == vector.tobytes()
    assert stored_rows(repo) == 4  # two modules, two functions

    # plots.py changes, mail.py goes: the one's vectors are replaced, the other's dropped.
    mail = vectors_of(repo, "mail.py")
    (root / "plots.py").write_text(str(FILES["plots.py"]) + "\ndef clear(axes):\n    axes.cla()\n")
    (root / "mail.py").unlink()
    (root / "quote.py").write_text("def quote(name):\n    return f'\"{name}\"'\n")
    again = indexed(root)
    replotted = vectors_of(again, "plots.py")
    assert list(replotted) == ["plots", "plots.redraw_histogram", "plots.clear"]
    assert replotted["plots"] != plots["plots"]  # the module's own text grew
    assert replotted["plots.redraw_histogram"] == plots["plots.redraw_histogram"]
    assert vectors_of(again, "mail.py") == {} and all(mail.values())
    assert stored_rows(again) == 5  # plots: 3, quote: 2


def test_a_retrieval_reads_the_stored_vector_of_the_same_text(
    tmp_path: Path, indexed: Callable[..., Repo]
) -> None:
    root = make_git_repo(tmp_path / "r", FILES)
    repo = indexed(root)
    model = encoder("wordllama")
    key = values_key(model)
    [_, parse_address] = repo.index.file_nodes("mail.py")
    [_, redraw] = repo.index.file_nodes("plots.py")
    text = candidate_text(
        Candidate(parse_address.span, parse_address.kind, parse_address.qualname, ("t",)), repo
    )
    histogram = model.encode(["redraw the bars of the histogram chart"])[0]
    task = "After new data the bars of the chart keep their old height and the top is cut off"
    settings = Settings(meaning_weight=1.0)

    def meaning() -> dict[str | None, float]:
        result = retrieve(task, root, disable=["pin"], settings=settings)
        return {r.candidate.qualname: dict(r.signals)["meaning"] for r in result.candidates}

    # The stored vector is what ranks: given a chart's vector, parse_address is closest.
    repo.index.store_node_values(key, [(parse_address, packed(text, histogram * 3))])
    assert meaning()["mail.parse_address"] == 1.0
    # A vector stored for another text is not used: it is encoded again and replaced.
    repo.index.store_node_values(key, [(parse_address, packed("older text", histogram))])
    assert meaning() == {"plots.redraw_histogram": 1.0, "mail.parse_address": 0.0}
    fresh = unpacked(repo.index.node_values(key, [parse_address])[0], text)
    assert fresh is not None and fresh.tobytes() == model.encode([text])[0].tobytes()
    assert repo.index.node_values("meaning:another-encoder", [parse_address, redraw]) == [
        None, None
    ]


def test_vectors_missing_from_the_index_are_made_by_the_retrieval_and_kept(
    tmp_path: Path, indexed: Callable[..., Repo]
) -> None:
    root = make_git_repo(tmp_path / "r", FILES)
    # Indexed with the plugin disabled: no vector is made.
    repo = indexed(root, disable=("pin", "meaning"))
    assert stored_rows(repo) == 0
    task = "After new data the bars of the chart keep their old height and the top is cut off"
    result = retrieve(task, root, disable=["pin"])
    assert [r.candidate.qualname for r in result.candidates] == [
        "plots.redraw_histogram", "mail.parse_address"
    ]
    # The two candidates' vectors, and no others.
    assert stored_rows(repo) == 2
    assert vectors_of(repo, "plots.py")["plots"] is None
    assert vectors_of(repo, "plots.py")["plots.redraw_histogram"] is not None
