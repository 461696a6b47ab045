"""Meaning signal: how close each candidate's text is to the task's, by embedding.

Lexical signals need the task and the code to share words; a report says
"the histogram is not rescaled" of code that says ``autoscale_view``. A text
embedding places both near each other when they mean alike, in any
language. Here it is one signal among the others, never a ranking alone.

Encoders (``settings.meaning_encoder``, or ``CTX04_MEANING_ENCODER``):

- ``wordllama`` (the default) is a static embedder, token vectors averaged,
  whose weights and tokenizer ship inside its PyPI wheel: loaded from the
  installed package folder, never downloaded, so it works offline.
- ``onnx`` runs a transformer exported to ONNX (a code encoder such as
  CodeRankEmbed or SweRankEmbed) from the folder ``settings.meaning_model``
  (or ``CTX04_MEANING_MODEL``) names: ``model.onnx`` (or ``onnx/model.onnx``)
  and ``tokenizer.json``, and, where sentence-transformers saved them,
  ``1_Pooling/config.json`` (CLS or mean pooling; mean without it) and
  ``config_sentence_transformers.json`` (its ``prompts.query`` is put before
  the task). Needs the extra ``ctx04-meaning[onnx]`` (onnxruntime). Nothing
  is ever fetched: a name that is not a folder is an error.

Vectors are made at index time: for every file the index (re)parses, each
definition's text is encoded and stored with its node under
``meaning:<encoder identity>`` (the encoder's name and a digest of its model
files, so vectors of two encoders never mix); the index replaces them when
the file is parsed again and drops them with the file. A retrieval reads its
candidates' vectors and encodes only those missing (a file indexed while the
plugin was disabled, a run of lines that is no definition), storing those of
definitions. Each stored vector carries a digest of the text it was made
from, and is used only for that same text.

Signal ``meaning`` (scale, weight ``settings.meaning_weight``): the cosine
similarity between the task text and each candidate's qualified name and
first ``MAX_LINES`` own lines (a class less its methods, as BM25 sees it;
at most ``MAX_TEXT_CHARS`` characters, and the task's first
``MAX_TASK_CHARS``), rescaled over the merged candidates so the least
similar is 0 and the most similar 1. With fewer than two candidates, or all
alike, every value is 0.

Licence of the default weights. The wordllama wheel (0.4.0.post1) is
MIT-licensed (its METADATA and ``licenses/LICENSE``, © 2024 Lee Miller) and
the model card of the weights it ships (``dleemiller/word-llama-l2-supercat``)
says MIT too. No file in the wheel states terms for the weights separately.
Those weights were trained from the token-embedding codebooks of Llama 2 70B
and other models that share the Llama 2 tokenizer (its training config,
``wordllama/config/train/l2_supercat.toml``, names
``meta-llama/Llama-2-70b-hf``), and the tokenizer file is Llama 2's; whether
Meta's Llama 2 Community License reaches such a derived embedding table the
wheel does not say. A distributor who must be sure should read that licence;
ctx04 ships neither file, it only loads them from the user's install.
"""

from __future__ import annotations

import functools
import hashlib
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

from ctx04_core.hookspecs import hookimpl
from ctx04_core.plugins import PluginError
from ctx04_core.repository import Repo
from ctx04_core.settings import Settings
from ctx04_core.stages.regions import node_of, own_text
from ctx04_core.types import (
    CONTAINER_KINDS,
    Candidate,
    Node,
    NodeValues,
    ParsedFile,
    Query,
    Signal,
)

SOURCE = "meaning"
MAX_LINES = 80  # a long definition's head says what it is; its tail adds little but time
# The encoders pad a batch to its longest text, so one minified line would
# cost gigabytes: every text is cut to a bound first, and batches are small.
MAX_TASK_CHARS = 4000
MAX_TEXT_CHARS = 2000
BATCH = 16
# A transformer's cost grows with its input; a text's head says what it is.
MAX_TOKENS = 512
TEXT_DIGEST_BYTES = 16

Vectors = npt.NDArray[np.float32]


class EncoderError(PluginError):
    """The encoder named in the settings cannot be loaded."""


class Encoder(Protocol):
    """Turns texts into vectors of one dimension; similar meaning, similar direction."""

    # Name and a digest of the model files: vectors stored under one identity
    # are never read back for another.
    identity: str
    query_prompt: str  # put before the task, for models trained with one

    def encode(self, texts: Sequence[str]) -> Vectors:
        """One row per text (at least one text)."""
        ...


class StaticEncoder:
    """WordLlama's ``l2_supercat`` model at 256 dimensions, from its installed wheel.

    ``WordLlama.load`` looks for the tokenizer in a ``tokenizer`` folder while
    the wheel ships ``tokenizers``, and then downloads it; the files are read
    here from where the wheel puts them, so nothing is ever fetched.
    """

    MODEL = "l2_supercat"
    DIM = 256
    query_prompt = ""

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
        self.identity = f"wordllama:{files_digest(tokenizer_file, weights_file)}"
        tokenizer = Tokenizer.from_file(str(tokenizer_file))
        with safe_open(str(weights_file), framework="np") as weights:
            embedding = weights.get_tensor("embedding.weight")
        self._model = WordLlamaInference(embedding, tokenizer)

    def encode(self, texts: Sequence[str]) -> Vectors:
        vectors: Vectors = np.asarray(
            self._model.embed(list(texts), batch_size=BATCH), dtype=np.float32
        )
        return vectors


class OnnxEncoder:
    """A transformer exported to ONNX, from a local folder, on the CPU."""

    def __init__(self, folder: str) -> None:
        if not folder:
            raise EncoderError(
                "meaning_encoder 'onnx' needs meaning_model (CTX04_MEANING_MODEL): "
                "the folder of an exported model with model.onnx and tokenizer.json"
            )
        root = Path(folder).expanduser()
        if not root.is_dir():
            raise EncoderError(f"meaning_model {folder!r} is not a folder on this machine")
        model_file = next(
            (f for f in (root / "model.onnx", root / "onnx" / "model.onnx") if f.is_file()), None
        )
        tokenizer_file = root / "tokenizer.json"
        if model_file is None or not tokenizer_file.is_file():
            raise EncoderError(
                f"meaning_model {folder!r} lacks "
                + ("model.onnx" if model_file is None else "tokenizer.json")
            )
        try:
            import onnxruntime
        except ImportError:
            raise EncoderError(
                "meaning_encoder 'onnx' needs onnxruntime: pip install 'ctx04-meaning[onnx]'"
            ) from None
        from tokenizers import Tokenizer

        pooling_file = root / "1_Pooling" / "config.json"
        prompts_file = root / "config_sentence_transformers.json"
        self._cls = bool(_json(pooling_file).get("pooling_mode_cls_token"))
        prompts = _json(prompts_file).get("prompts") or {}
        self.query_prompt = str(prompts.get("query", ""))
        self.identity = "onnx:" + files_digest(
            model_file, tokenizer_file, pooling_file, prompts_file
        )
        try:
            self._session = onnxruntime.InferenceSession(
                str(model_file), providers=["CPUExecutionProvider"]
            )
            self._tokenizer = Tokenizer.from_file(str(tokenizer_file))
        except Exception as err:  # both report a bad file with their own exception types
            raise EncoderError(f"meaning_model {folder!r} cannot be loaded: {err}") from None
        self._tokenizer.no_padding()
        self._tokenizer.enable_truncation(MAX_TOKENS)
        self._inputs = {i.name for i in self._session.get_inputs()}

    def encode(self, texts: Sequence[str]) -> Vectors:
        pooled = []
        for start in range(0, len(texts), BATCH):
            encodings = self._tokenizer.encode_batch(list(texts[start : start + BATCH]))
            width = max(1, *(len(e.ids) for e in encodings))
            ids = np.zeros((len(encodings), width), dtype=np.int64)
            mask = np.zeros_like(ids)
            for row, encoding in enumerate(encodings):
                ids[row, : len(encoding.ids)] = encoding.ids
                mask[row, : len(encoding.ids)] = 1
            feeds = {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
            output = self._session.run(
                None, {name: value for name, value in feeds.items() if name in self._inputs}
            )[0]
            hidden = np.asarray(output, dtype=np.float32)
            if hidden.ndim == 2:  # the model pools itself
                pooled.append(hidden)
            elif self._cls:
                pooled.append(hidden[:, 0])
            else:
                weights = mask[..., None].astype(np.float32)
                pooled.append((hidden * weights).sum(axis=1) / np.maximum(weights.sum(axis=1), 1))
        vectors: Vectors = np.concatenate(pooled).astype(np.float32)
        return vectors


def _json(path: Path) -> dict[str, Any]:
    if not path.is_file():
        return {}
    try:
        found = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as err:
        raise EncoderError(f"cannot read {path}: {err}") from None
    return found if isinstance(found, dict) else {}


def files_digest(*files: Path) -> str:
    """What identifies a model: the bytes of its files (a missing one counts as absent)."""
    digest = hashlib.sha256()
    for file in files:
        if file.is_file():
            with file.open("rb") as handle:
                digest.update(hashlib.file_digest(handle, "sha256").digest())
        else:
            digest.update(b"absent")
    return digest.hexdigest()[:16]


@functools.lru_cache(maxsize=2)
def encoder(name: str, model: str = "") -> Encoder:
    """The named encoder, loaded once per process."""
    if name == "wordllama":
        if model:
            raise EncoderError(
                f"meaning_model {model!r} is for the onnx encoder; wordllama ships its own"
            )
        return StaticEncoder()
    if name == "onnx":
        return OnnxEncoder(model)
    raise EncoderError(f"unknown meaning_encoder {name!r}; choose from wordllama, onnx")


def values_key(model: Encoder) -> str:
    """The key the index keeps this encoder's vectors under."""
    return f"{SOURCE}:{model.identity}"


@functools.lru_cache(maxsize=4)
def task_vector(name: str, model: str, task: str) -> Vectors:
    """The task's vector by the named encoder; the signals hook runs twice a
    retrieval with one task."""
    loaded = encoder(name, model)
    vector: Vectors = loaded.encode([loaded.query_prompt + task[:MAX_TASK_CHARS]])[0]
    return vector


def cosines(task: Vectors, vectors: Vectors) -> list[float]:
    """Cosine similarity of each row of ``vectors`` to ``task``."""
    stacked = np.vstack([task[None, :], vectors])
    norms = np.linalg.norm(stacked, axis=1)
    norms[norms == 0] = 1.0
    unit = stacked / norms[:, None]
    return [float(v) for v in unit[1:] @ unit[0]]


def rescaled(values: Sequence[float]) -> tuple[float, ...]:
    """Values mapped onto [0, 1], least to most; all 0 when they do not differ."""
    low, high = min(values, default=0.0), max(values, default=0.0)
    if high - low <= 1e-12:
        return tuple(0.0 for _ in values)
    return tuple((v - low) / (high - low) for v in values)


def definition_text(title: str, lines: Sequence[str]) -> str:
    """The text encoded for a definition: its title, then its first own lines."""
    return "\n".join([title, *lines[:MAX_LINES]])[:MAX_TEXT_CHARS]


def candidate_text(candidate: Candidate, repo: Repo) -> str:
    """The qualified name and the first own lines: a class without its methods,
    which are candidates of their own, as BM25 sees it."""
    lines = [text for _, text in own_text(candidate, repo)]
    return definition_text(candidate.qualname or candidate.span.path, lines)


def node_texts(lines: Sequence[str], parsed: ParsedFile) -> list[str]:
    """What :func:`candidate_text` gives for each node of a file as it is parsed.

    A container's own lines are its span less its children's, the children
    being the nodes its ``contain`` edges name, as the index links them.
    """
    by_start = {(n.qualname, n.span.start_line): n for n in parsed.nodes}
    children: dict[str, list[Node]] = {}
    for edge in parsed.edges:
        child = by_start.get((edge.target, edge.line))
        if edge.kind == "contain" and child is not None:
            children.setdefault(edge.source, []).append(child)
    texts = []
    for node in parsed.nodes:
        start, end = node.span.start_line, node.span.end_line
        numbers: Sequence[int] = range(start, min(end, len(lines)) + 1)
        if node.kind in CONTAINER_KINDS:
            nested = {
                n for child in children.get(node.qualname, ())
                if start <= child.span.start_line <= end
                for n in range(child.span.start_line, child.span.end_line + 1)
            }
            numbers = [n for n in numbers if n not in nested]
        texts.append(definition_text(node.qualname, [lines[n - 1] for n in numbers]))
    return texts


def text_digest(text: str) -> bytes:
    return hashlib.sha256(text.encode("utf-8")).digest()[:TEXT_DIGEST_BYTES]


def packed(text: str, vector: Vectors) -> bytes:
    """A stored value: the digest of the text, then the vector as little-endian float32."""
    return text_digest(text) + np.asarray(vector, dtype="<f4").tobytes()


def unpacked(value: bytes | None, text: str) -> Vectors | None:
    """The stored vector, if it was made from ``text``."""
    if value is None or value[:TEXT_DIGEST_BYTES] != text_digest(text):
        return None
    vector: Vectors = np.frombuffer(value[TEXT_DIGEST_BYTES:], dtype="<f4").astype(np.float32)
    return vector


def candidate_vectors(candidates: Sequence[Candidate], repo: Repo, model: Encoder) -> Vectors:
    """One vector per candidate: read from the index where it holds the vector of
    the same text, else encoded now and, for a definition, stored."""
    key = values_key(model)
    texts = [candidate_text(c, repo) for c in candidates]
    nodes = [node_of(c, repo) for c in candidates]
    known = [(i, node) for i, node in enumerate(nodes) if node is not None]
    stored = repo.index.node_values(key, [node for _, node in known])
    found: dict[int, Vectors] = {}
    for (i, _), value in zip(known, stored, strict=True):
        vector = unpacked(value, texts[i])
        if vector is not None:
            found[i] = vector
    missing = [i for i in range(len(candidates)) if i not in found]
    if missing:
        fresh = model.encode([texts[i] for i in missing])
        found.update(zip(missing, fresh, strict=True))
        repo.index.store_node_values(key, [
            (node, packed(texts[i], found[i])) for i in missing
            if (node := nodes[i]) is not None
        ])
    return np.vstack([found[i] for i in range(len(candidates))])


@hookimpl
def node_values(
    lines: tuple[str, ...], parsed: ParsedFile, settings: Settings
) -> list[NodeValues] | None:
    if not parsed.nodes:
        return None
    model = encoder(settings.meaning_encoder, settings.meaning_model)
    texts = node_texts(lines, parsed)
    vectors = model.encode(texts)
    return [NodeValues(values_key(model), tuple(map(packed, texts, vectors)))]


@hookimpl
def signals(
    query: Query, candidates: tuple[Candidate, ...], repo: Repo, settings: Settings
) -> list[Signal]:
    values: tuple[float, ...] = ()
    if candidates:
        name, path = settings.meaning_encoder, settings.meaning_model
        similarity = cosines(task_vector(name, path, query.task_text),
                             candidate_vectors(candidates, repo, encoder(name, path)))
        values = rescaled(similarity)
    return [Signal(SOURCE, values, settings.meaning_weight, "scale")]
