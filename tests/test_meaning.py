"""The meaning signal with the real static embedder, loaded from its wheel."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from conftest import make_git_repo
from ctx04_meaning import (
    MAX_TEXT_CHARS,
    EncoderError,
    StaticEncoder,
    candidate_text,
    encoder,
    rescaled,
    similarities,
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
    close, far = similarities(
        "the bar chart's axis is not rescaled",
        ["draw the histogram bars and set the axis limits", "parse an e-mail header"],
        encoder("wordllama"),
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
    assert str(caught.value) == "unknown meaning_encoder 'codebert'; choose from wordllama"



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
