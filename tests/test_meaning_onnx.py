"""The meaning plugin's onnx encoder, on a tiny model each test builds itself.

The model is what an exported sentence encoder is, cut to the bone: a
token-embedding table looked up by ``Gather`` and masked by the attention
mask (the transformer layers left out), a WordLevel ``tokenizers`` file
beside it, and optionally the sentence-transformers pooling and prompt files.
Its vectors are known exactly: a chart word is (1, 0), a mail word (0, 1),
any other word (0, 0).
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import onnx
import pytest
from conftest import make_git_repo
from ctx04_meaning import EncoderError, OnnxEncoder, StaticEncoder, encoder, task_vector
from onnx import TensorProto, helper, numpy_helper
from tokenizers import Tokenizer, models, pre_tokenizers

from ctx04_core.pipeline import retrieve
from ctx04_core.settings import Settings

WORDS = {
    "chart": (1.0, 0.0), "bars": (1.0, 0.0), "height": (1.0, 0.0),
    "mail": (0.0, 1.0), "address": (0.0, 1.0), "header": (0.0, 1.0),
}

REPO: dict[str, str | bytes] = {
    "plots.py": (
        "def redraw(axes, counts):\n"
        '    """Draw the bars of the chart again at their new height."""\n'
        "    axes.bar(range(len(counts)), counts)\n"
    ),
    "mail.py": (
        "def split_header(header):\n"
        '    """Split a mail header into the name and the address."""\n'
        "    return header.rpartition(' ')[::2]\n"
    ),
}


def build_model(folder: Path, cls_pooling: bool | None = None, query_prompt: str = "") -> Path:
    """Save the tiny model (and, when given, its pooling and prompt files) in ``folder``."""
    folder.mkdir(parents=True)
    vocabulary = {"[UNK]": 0, **{word: i for i, word in enumerate(WORDS, 1)}}
    tokenizer = Tokenizer(models.WordLevel(vocabulary, unk_token="[UNK]"))
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    tokenizer.save(str(folder / "tokenizer.json"))
    table = np.array([(0.0, 0.0), *WORDS.values()], dtype=np.float32)
    graph = helper.make_graph(
        [
            helper.make_node("Gather", ["table", "input_ids"], ["tokens"]),
            helper.make_node("Cast", ["attention_mask"], ["mask"], to=TensorProto.FLOAT),
            helper.make_node("Unsqueeze", ["mask", "last_axis"], ["mask_3d"]),
            helper.make_node("Mul", ["tokens", "mask_3d"], ["last_hidden_state"]),
        ],
        "tiny_encoder",
        [
            helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch", "seq"]),
            helper.make_tensor_value_info("attention_mask", TensorProto.INT64, ["batch", "seq"]),
        ],
        [helper.make_tensor_value_info("last_hidden_state", TensorProto.FLOAT,
                                       ["batch", "seq", 2])],
        initializer=[
            numpy_helper.from_array(table, "table"),
            numpy_helper.from_array(np.array([-1], dtype=np.int64), "last_axis"),
        ],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8  # what every onnxruntime since 1.10 reads
    onnx.checker.check_model(model)
    onnx.save(model, str(folder / "model.onnx"))
    if cls_pooling is not None:
        (folder / "1_Pooling").mkdir()
        (folder / "1_Pooling" / "config.json").write_text(json.dumps(
            {"pooling_mode_cls_token": cls_pooling, "pooling_mode_mean_tokens": not cls_pooling}
        ))
    if query_prompt:
        (folder / "config_sentence_transformers.json").write_text(
            json.dumps({"prompts": {"query": query_prompt, "document": ""}})
        )
    return folder


@pytest.fixture
def no_network(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[object]]:
    """Every attempt to open a connection is refused and recorded."""
    attempts: list[object] = []

    def refuse(*args: object, **kwargs: object) -> None:
        attempts.append(args)
        raise OSError("network access in a test")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket.socket, "connect_ex", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    monkeypatch.setattr(socket, "getaddrinfo", refuse)
    yield attempts


def test_vectors_are_the_mean_of_the_token_vectors(tmp_path: Path) -> None:
    model = OnnxEncoder(str(build_model(tmp_path / "m")))
    # One batch pads the short texts to the longest; padding must not count.
    vectors = model.encode(["the chart", "mail address header", "bars mail", "nothing known"])
    assert vectors.tolist() == [[0.5, 0.0], [0.0, 1.0], [0.5, 0.5], [0.0, 0.0]]
    assert model.identity.startswith("onnx:") and model.query_prompt == ""


def test_pooling_and_the_query_prompt_come_from_the_sentence_transformers_files(
    tmp_path: Path,
) -> None:
    cls = OnnxEncoder(str(build_model(tmp_path / "cls", cls_pooling=True, query_prompt="chart")))
    assert cls.encode(["mail chart", "bars mail"]).tolist() == [[0.0, 1.0], [1.0, 0.0]]
    assert cls.query_prompt == "chart"
    mean = OnnxEncoder(str(build_model(tmp_path / "mean", cls_pooling=False)))
    assert mean.encode(["mail chart"]).tolist() == [[0.5, 0.5]]
    # Other files, another identity: their vectors are kept apart in the index.
    assert len({cls.identity, mean.identity, OnnxEncoder(str(tmp_path / "mean")).identity}) == 2
    # The task is encoded after the prompt: (chart + mail) / 2 with mean pooling.
    prompted = build_model(tmp_path / "prompted", query_prompt="chart ")
    assert task_vector("onnx", str(prompted), "mail").tolist() == [0.5, 0.5]


def test_the_onnx_encoder_ranks_a_tiny_repository(tmp_path: Path) -> None:
    root = make_git_repo(tmp_path / "r", REPO)
    settings = Settings(meaning_encoder="onnx", meaning_model=str(build_model(tmp_path / "m")),
                        meaning_weight=1.0)
    for task, first in (("the chart bars lost their height", "plots.redraw"),
                        ("which mail address is in the header", "mail.split_header")):
        result = retrieve(task, root, disable=["pin"], settings=settings)
        ranked = [(r.candidate.qualname, dict(r.signals)["meaning"]) for r in result.candidates]
        second = {"plots.redraw": "mail.split_header", "mail.split_header": "plots.redraw"}[first]
        assert ranked == [(first, 1.0), (second, 0.0)]


def test_both_encoders_load_and_encode_without_the_network(
    tmp_path: Path, no_network: list[object]
) -> None:
    folder = build_model(tmp_path / "m")
    assert OnnxEncoder(str(folder)).encode(["chart"]).tolist() == [[1.0, 0.0]]
    assert StaticEncoder().encode(["a chart"]).shape == (1, 256)
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", 9))  # the guard is in place
    assert len(no_network) == 1


@pytest.mark.parametrize(
    ("model", "message"),
    [
        ("", "meaning_encoder 'onnx' needs meaning_model (CTX04_MEANING_MODEL): "
             "the folder of an exported model with model.onnx and tokenizer.json"),
        ("nomic-ai/CodeRankEmbed",
         "meaning_model 'nomic-ai/CodeRankEmbed' is not a folder on this machine"),
    ],
)
def test_a_model_that_is_not_there_is_a_clear_error(model: str, message: str) -> None:
    with pytest.raises(EncoderError) as caught:
        encoder("onnx", model)
    assert str(caught.value) == message


def test_a_folder_without_the_model_says_what_it_lacks(tmp_path: Path) -> None:
    folder = build_model(tmp_path / "m")
    (folder / "tokenizer.json").unlink()
    with pytest.raises(EncoderError) as caught:
        OnnxEncoder(str(folder))
    assert str(caught.value) == f"meaning_model '{folder}' lacks tokenizer.json"
    (folder / "model.onnx").write_bytes(b"not a model")
    (folder / "tokenizer.json").write_text("{}")
    with pytest.raises(EncoderError) as caught:
        OnnxEncoder(str(folder))
    assert str(caught.value).startswith(f"meaning_model '{folder}' cannot be loaded: ")
    with pytest.raises(EncoderError) as caught:
        encoder("wordllama", str(folder))
    assert str(caught.value) == (
        f"meaning_model '{folder}' is for the onnx encoder; wordllama ships its own"
    )


def test_the_cli_says_a_missing_model_in_one_line(tmp_path: Path) -> None:
    root = make_git_repo(tmp_path / "r", REPO)
    missing = tmp_path / "no-such-model"
    done = subprocess.run(
        [str(Path(sys.executable).parent / "ctx04"), "retrieve", "the chart", "--repo", str(root)],
        capture_output=True, text=True, timeout=120,
        env={"PATH": "/usr/bin:/bin", "XDG_CACHE_HOME": str(tmp_path / "cache"),
             "CTX04_DISABLE": "pin", "CTX04_MEANING_ENCODER": "onnx",
             "CTX04_MEANING_MODEL": str(missing)},
    )
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == (
        f"ctx04: error: meaning_model '{missing}' is not a folder on this machine\n"
    )
