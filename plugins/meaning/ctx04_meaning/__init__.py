"""Meaning signal: how close each candidate's text is to the task's, by embedding.

Lexical signals need the task and the code to share words; a report says
"the histogram is not rescaled" of code that says ``autoscale_view``. A text
embedding places both near each other when they mean alike, in any
language. Here it is one signal among the others, never a ranking alone.

Encoder: ``settings.meaning_encoder`` names it. ``wordllama`` (the default)
is a static embedder, token vectors averaged, whose weights and tokenizer
ship inside its PyPI wheel: loaded from the installed package folder, never
downloaded, so it works offline and costs milliseconds per retrieval.

Signal ``meaning`` (scale, weight ``settings.meaning_weight``): the cosine
similarity between the task text and each candidate's qualified name and
first ``MAX_LINES`` own lines (a class less its methods, as BM25 sees it;
at most ``MAX_TEXT_CHARS`` characters, and the task's first
``MAX_TASK_CHARS``), rescaled over the merged candidates so the least
similar is 0 and the most similar 1. With fewer than two candidates, or all
alike, every value is 0.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from pathlib import Path
from typing import Protocol

import numpy as np
import numpy.typing as npt

from ctx04_core.hookspecs import hookimpl
from ctx04_core.repository import Repo
from ctx04_core.settings import Settings
from ctx04_core.stages.regions import own_text
from ctx04_core.types import Candidate, Query, Signal

SOURCE = "meaning"
MAX_LINES = 80  # a long definition's head says what it is; its tail adds little but time
# The encoders pad a batch to its longest text, so one minified line would
# cost gigabytes: every text is cut to a bound first, and batches are small.
MAX_TASK_CHARS = 4000
MAX_TEXT_CHARS = 2000
BATCH = 16

Vectors = npt.NDArray[np.float32]


class EncoderError(ValueError):
    """The encoder named in the settings cannot be loaded."""


class Encoder(Protocol):
    """Turns texts into vectors of one dimension; similar meaning, similar direction."""

    def encode(self, texts: Sequence[str]) -> Vectors:
        """One row per text."""
        ...


class StaticEncoder:
    """WordLlama's ``l2_supercat`` model at 256 dimensions, from its installed wheel.

    ``WordLlama.load`` looks for the tokenizer in a ``tokenizer`` folder while
    the wheel ships ``tokenizers``, and then downloads it; the files are read
    here from where the wheel puts them, so nothing is ever fetched.
    """

    MODEL = "l2_supercat"
    DIM = 256

    def __init__(self) -> None:
        import wordllama
        from safetensors import safe_open
        from tokenizers import Tokenizer
        from wordllama.inference import WordLlamaInference

        package = Path(wordllama.__file__).parent
        tokenizer_file = package / "tokenizers" / f"{self.MODEL}_tokenizer_config.json"
        weights_file = package / "weights" / f"{self.MODEL}_{self.DIM}.safetensors"
        for needed in (tokenizer_file, weights_file):
            if not needed.is_file():
                raise EncoderError(f"the wordllama wheel lacks {needed.name} (in {package})")
        tokenizer = Tokenizer.from_file(str(tokenizer_file))
        with safe_open(str(weights_file), framework="np") as weights:
            embedding = weights.get_tensor("embedding.weight")
        self._model = WordLlamaInference(embedding, tokenizer)

    def encode(self, texts: Sequence[str]) -> Vectors:
        vectors: Vectors = np.asarray(
            self._model.embed(list(texts), batch_size=BATCH), dtype=np.float32
        )
        return vectors


ENCODERS = {"wordllama": StaticEncoder}


@functools.lru_cache(maxsize=2)
def encoder(name: str) -> Encoder:
    """The named encoder, loaded once per process."""
    if name not in ENCODERS:
        raise EncoderError(f"unknown meaning_encoder {name!r}; choose from {', '.join(ENCODERS)}")
    return ENCODERS[name]()


def similarities(task: str, texts: Sequence[str], model: Encoder) -> list[float]:
    """Cosine similarity of each text to the task."""
    vectors = model.encode([task[:MAX_TASK_CHARS], *texts])
    norms = np.linalg.norm(vectors, axis=1)
    norms[norms == 0] = 1.0
    unit = vectors / norms[:, None]
    return [float(v) for v in unit[1:] @ unit[0]]


def rescaled(values: Sequence[float]) -> tuple[float, ...]:
    """Values mapped onto [0, 1], least to most; all 0 when they do not differ."""
    low, high = min(values, default=0.0), max(values, default=0.0)
    if high - low <= 1e-12:
        return tuple(0.0 for _ in values)
    return tuple((v - low) / (high - low) for v in values)


def candidate_text(candidate: Candidate, repo: Repo) -> str:
    """The qualified name and the first own lines: a class without its methods,
    which are candidates of their own, as BM25 sees it."""
    lines = [text for _, text in own_text(candidate, repo)[:MAX_LINES]]
    return "\n".join([candidate.qualname or candidate.span.path, *lines])[:MAX_TEXT_CHARS]


@hookimpl
def signals(
    query: Query, candidates: tuple[Candidate, ...], repo: Repo, settings: Settings
) -> list[Signal]:
    texts = [candidate_text(c, repo) for c in candidates]
    values = (
        rescaled(similarities(query.task_text, texts, encoder(settings.meaning_encoder)))
        if texts else ()
    )
    return [Signal(SOURCE, values, settings.meaning_weight, "scale")]
