"""Hostile inputs to the vetting gate (issue 26): copies that hide, artifacts that swamp.

Blocks come from real retrievals (``ctx04 retrieve --trace``) over real git
repositories, artifacts from real ``git diff`` runs, and the verdict from the
real ``ctx04 vet`` process, or the real plugin through :func:`vet`.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import anyio
import pytest
from conftest import GIT_ENV, SHOP, make_git_repo
from ctx04_vet import coverage, overlap
from hypothesis import given
from hypothesis import strategies as st
from mcp_types import CallToolResult
from test_mcp_server import call_once, stdio_session, text_of
from test_vet import ACCEPTED, REJECTED, SHIPPING, evidence

from ctx04_core.settings import Settings
from ctx04_core.vetting import MAX_ARTIFACT_BYTES, ArtifactTooLarge, vet

CTX04 = str(Path(sys.executable).parent / "ctx04")
REJECTED_LINE = "rejected: verbatim reproduction of untrusted retrieved content\n"
TASK = "Cart.total() rounds the discounted subtotal wrongly"

# A function the retrieval shows whole; the git diff that appends a route to
# it has the def line in its hunk header and the other three as context, so
# the diff holds the whole block, contiguous, without authoring any of it.
ROUTES = '''from shop.views import cart_view, checkout_view, orders_view


def register_routes(app, prefix):
    app.add_route(prefix + "/cart", cart_view, methods=["GET", "POST"])
    app.add_route(prefix + "/checkout", checkout_view, methods=["POST"])
    app.add_route(prefix + "/orders", orders_view, methods=["GET"])
'''


def ctx04(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([CTX04, *args], capture_output=True, text=True, check=False)


@pytest.fixture
def shop(tmp_path: Path) -> Path:
    return make_git_repo(tmp_path / "shop", {**SHOP, "shop/routes.py": ROUTES})


def retrieved(shop: Path, trace: Path, task: str) -> str:
    """The markdown slice of a real retrieval, its record appended to ``trace``."""
    done = ctx04("retrieve", task, "--repo", str(shop), "--trace", str(trace),
                 "--format", "markdown")
    assert done.returncode == 0, done.stderr
    return done.stdout


def blocks(trace: Path) -> list[str]:
    lines = trace.read_text(encoding="utf-8").splitlines()
    return [ref["text"] for line in lines for ref in json.loads(line)["references"]]


def vetted(artifact: str, trace: Path, tmp_path: Path) -> tuple[int, str, str]:
    path = tmp_path / "artifact.txt"
    path.write_text(artifact, encoding="utf-8")
    done = ctx04("vet", str(path), "--trace", str(trace))
    return done.returncode, done.stdout, done.stderr


def git_diff(repo: Path, path: str, old: str, new: str) -> str:
    """The unified diff (3 lines of context) of replacing ``old`` by ``new`` in ``path``."""
    file = repo / path
    text = file.read_text(encoding="utf-8")
    assert text.count(old) == 1
    file.write_text(text.replace(old, new), encoding="utf-8")
    done = subprocess.run(["git", "diff", "--", path], cwd=repo, env=GIT_ENV,
                          capture_output=True, text=True, check=True)
    file.write_text(text, encoding="utf-8")
    return done.stdout


# --- a retrieved block reproduced whatever surrounds it ----------------------------------


def test_the_rendered_block_under_its_heading_is_rejected(shop: Path, tmp_path: Path) -> None:
    trace = tmp_path / "session.jsonl"
    shown = retrieved(shop, trace, TASK)
    # The first entry as the model read it: its heading, then its lines.
    first = "### " + shown.split("### ")[1].rstrip("\n") + "\n"
    heading, _, body = first.partition("\n")
    assert heading.startswith("### shop.cart.Cart.total [shop/cart.py:41-46, sha256:")
    assert body == blocks(trace)[0]
    assert overlap(first, body) < 0.9  # the heading's tokens hid the copy from the old measure
    assert coverage(first, body) == 1.0
    assert vetted(first, trace, tmp_path) == (1, "", REJECTED_LINE)
    assert vetted(shown, trace, tmp_path) == (1, "", REJECTED_LINE)  # the whole slice


PROSE = "Here is the helper you asked for, ready to paste into the module as it is now. "  # 19


@pytest.mark.parametrize(
    ("before", "after", "share"),
    [
        ("# shipping\n", "\nprint(shipping_cost(9))\n", 50 / 59),  # 2 + 7 other tokens
        (PROSE, f"\n{PROSE}It replaces the old one; run the tests after it.\n", 50 / 100),
    ],
    ids=["15% other text", "50% other text"],
)
def test_a_block_wrapped_in_other_text_is_rejected(before: str, after: str, share: float) -> None:
    artifact = before + SHIPPING + after
    # Only the block's own tokens are shared (the wrappers reuse none of them).
    assert overlap(artifact, SHIPPING) == share
    assert coverage(artifact, SHIPPING) == 1.0
    assert vet(artifact, [evidence(SHIPPING)]) == REJECTED


def test_a_whitespace_reformatted_copy_is_rejected() -> None:
    one_line = " ".join(SHIPPING.split())
    retabbed = SHIPPING.replace("    ", "\t").replace("\n", "\n\n")
    for copy in (one_line, retabbed):
        artifact = f"{PROSE}\n{copy}\n{PROSE}"
        assert coverage(artifact, SHIPPING) == 1.0
        assert vet(artifact, [evidence(SHIPPING)]) == REJECTED


def test_a_copy_with_one_token_changed_is_judged_by_its_longest_run() -> None:
    # The run stops at the change: 39 tokens of 50 before it, 10 after.
    changed = SHIPPING.replace("return 0.0", "return 0.5")
    assert coverage(f"{PROSE}\n{changed}", SHIPPING) == 39 / 50
    assert vet(f"{PROSE}\n{changed}", [evidence(SHIPPING)]) == ACCEPTED


def test_a_new_file_diff_that_adds_a_retrieved_block_is_rejected(
    shop: Path, tmp_path: Path
) -> None:
    trace = tmp_path / "session.jsonl"
    retrieved(shop, trace, TASK)
    block = blocks(trace)[0]
    added = "".join(f"+{line}\n" for line in block.splitlines())
    count = block.count("\n")
    diff = (
        "diff --git a/tools/total.py b/tools/total.py\nnew file mode 100644\n"
        f"--- /dev/null\n+++ b/tools/total.py\n@@ -0,0 +1,{count} @@\n{added}"
    )
    assert vetted(diff, trace, tmp_path) == (1, "", REJECTED_LINE)


# --- what an ordinary edit quotes is not a reproduction ----------------------------------


ORDERS_ROUTE = '    app.add_route(prefix + "/orders", orders_view, methods=["GET"])\n'
COUPONS_ROUTE = '    app.add_route(prefix + "/coupons", coupons_view, methods=["POST"])\n'


def lines_of(repo: Path, path: str, first: int, last: int) -> str:
    text = (repo / path).read_text(encoding="utf-8")
    return "".join(text.splitlines(keepends=True)[first - 1:last])


@pytest.mark.parametrize(
    ("task", "path", "lines", "old", "new", "plain_coverage"),
    [
        # One line of a retrieved function changed, 3 lines of context around it.
        ("apply_discount ignores unknown coupon codes", "shop/pricing.py", (6, 9),
         "    return amount * (1 - rate)\n", "    return round(amount * (1 - rate), 2)\n",
         48 / 56),
        # A line appended to a retrieved function: the hunk header holds its
        # def line and the context its other three, so read as plain text the
        # diff holds the whole block.
        ("register_routes misses the coupons route", "shop/routes.py", (4, 7),
         ORDERS_ROUTE, ORDERS_ROUTE + COUPONS_ROUTE, 1.0),
    ],
    ids=["edit a line", "append a line"],
)
def test_a_git_diff_editing_a_retrieved_function_passes(
    shop: Path, tmp_path: Path, task: str, path: str, lines: tuple[int, int], old: str,
    new: str, plain_coverage: float,
) -> None:
    trace = tmp_path / "session.jsonl"
    retrieved(shop, trace, task)
    function = lines_of(shop, path, *lines)
    # Shown whole, with lines beside it (blank_line_ends, first_run_context).
    assert any(function in block for block in blocks(trace))
    diff = git_diff(shop, path, old, new)
    assert diff.count("\n@@ ") == 1
    assert coverage(diff.replace("\n@@ ", "\n@ @ "), function) == plain_coverage
    code, out, err = vetted(diff, trace, tmp_path)
    assert (code, err) == (0, "")
    assert out == f"accepted: checked against {len(blocks(trace))} retrieved blocks\n"


def test_a_restated_signature_is_not_a_reproduction() -> None:
    # A signature alone (the neighbours' blocks) is under vet_min_block_tokens:
    # an override restates it, and only a bare copy of it is rejected.
    signature = "    def total(self) -> float:\n"
    override = (
        "class Sale(Cart):\n"
        "    def total(self) -> float:\n"
        "        return super().total() * (1 - self.markdown)\n"
    )
    assert coverage(override, signature) == 1.0
    assert vet(override, [evidence(signature, "shop/cart.py", 41)]) == ACCEPTED
    assert vet(signature, [evidence(signature, "shop/cart.py", 41)]) == REJECTED


# --- an artifact too large to vet ---------------------------------------------------------

CAP = 1024 * 1024
TOO_LARGE = (
    "the artifact is over vet_max_artifact_bytes (1048576 bytes): refused, not vetted"
)


def test_the_cap_is_the_setting() -> None:
    assert Settings().vet_max_artifact_bytes == MAX_ARTIFACT_BYTES == CAP


def test_an_artifact_over_the_cap_is_refused_unread(shop: Path, tmp_path: Path) -> None:
    trace = tmp_path / "session.jsonl"
    retrieved(shop, trace, TASK)
    huge = tmp_path / "huge.diff"
    with huge.open("wb") as file:
        file.truncate(50 * 1024 * 1024)  # sparse: 50 MB that cost nothing to write
    just_over = tmp_path / "just-over.txt"
    just_over.write_bytes(b"x" * (CAP + 1))
    for artifact in (huge, just_over):
        done = ctx04("vet", str(artifact), "--trace", str(trace))
        assert (done.returncode, done.stdout) == (2, "")
        assert done.stderr == f"ctx04: error: {TOO_LARGE}\n"
    piped = subprocess.run([CTX04, "vet", "-", "--trace", str(trace)], input=b"x" * (CAP + 1),
                           capture_output=True, check=False)
    assert (piped.returncode, piped.stdout, piped.stderr) == (
        2, b"", f"ctx04: error: {TOO_LARGE}\n".encode()
    )
    # Exactly at the cap it is vetted (one long token, shared with no block).
    at_cap = tmp_path / "at-cap.txt"
    at_cap.write_bytes(b"x" * CAP)
    assert vetted(at_cap.read_text(encoding="utf-8"), trace, tmp_path) == (
        0, f"accepted: checked against {len(blocks(trace))} retrieved blocks\n", ""
    )


def test_the_cap_counts_utf8_bytes() -> None:
    wide = "é" * (CAP // 2)  # 2 bytes each: exactly at the cap
    assert vet(wide, [evidence(SHIPPING)]) == ACCEPTED
    with pytest.raises(ArtifactTooLarge) as caught:
        vet(wide + "x", [evidence(SHIPPING)])
    assert str(caught.value) == TOO_LARGE


def test_an_artifact_over_the_cap_is_a_tool_error_over_mcp(shop: Path, tmp_path: Path) -> None:
    over, after = call_once(
        shop, tmp_path / "cache",
        [("vet", {"artifact": "x" * (CAP + 1)}), ("vet", {"artifact": "x = 1\n"})],
    )
    assert over.is_error
    assert text_of(over) == f"Error executing tool vet: {TOO_LARGE}"
    assert not after.is_error
    assert text_of(after) == "accepted: checked against 0 retrieved blocks"


# --- a long vet over MCP ------------------------------------------------------------------


TIMED_OUT = "Error executing tool vet: no answer within 0.1 s; the artifact is not vetted"


def test_a_vet_past_the_timeout_is_a_tool_error_and_the_server_goes_on(
    shop: Path, tmp_path: Path
) -> None:
    trace = tmp_path / "session.jsonl"
    retrieved(shop, trace, TASK)
    many = 5 * len(blocks(trace))  # five retrievals' worth
    # Just under the cap: a generated module that reproduces no block.
    module = "".join(f"step_{i} = advance(step_{i - 1}, {i})\n" for i in range(1, 30000))
    generated = module[:module.rindex("\n", 0, CAP) + 1]
    assert CAP - 40 < len(generated.encode()) <= CAP
    remembered = 0

    async def run() -> tuple[CallToolResult, float, CallToolResult, CallToolResult]:
        nonlocal remembered
        async with stdio_session(shop, tmp_path / "cache", "--timeout", "0.1") as session:
            # A retrieval past the timeout may still finish and be remembered;
            # one that answers leaves no work behind, so the count is settled.
            with anyio.fail_after(120):
                while remembered < many:
                    if (await session.call_tool("retrieve", {"task": TASK})).is_error:
                        continue
                    check = await session.call_tool("vet", {"artifact": "x = 1\n"})
                    if check.structured_content is not None:
                        remembered = check.structured_content["checked_blocks"]
            started = time.monotonic()
            slow = await session.call_tool("vet", {"artifact": generated})
            waited = time.monotonic() - started
            plugins = await session.call_tool("plugins", {})
            # The abandoned check competes for the GIL until it ends (its work
            # bounded by the cap): a vet answers within the timeout after it.
            with anyio.fail_after(60):
                while True:
                    copied = await session.call_tool("vet", {"artifact": blocks(trace)[0]})
                    if not copied.is_error:
                        return slow, waited, plugins, copied
                    assert text_of(copied) == TIMED_OUT

    slow, waited, plugins, copied = anyio.run(run)
    assert slow.is_error
    assert text_of(slow) == TIMED_OUT
    assert waited < 30  # answered, not hung on the whole check
    assert not plugins.is_error
    assert text_of(copied) == REJECTED_LINE.rstrip("\n")
    assert copied.structured_content == {
        "accepted": False, "reasons": [REJECTED_LINE.removeprefix("rejected: ").rstrip("\n")],
        "checked_blocks": remembered,
    }


def longest_common_run(block: list[str], artifact: list[str]) -> int:
    """Dynamic programming over every pair of positions: the reference for the anchors."""
    best = 0
    previous = [0] * (len(artifact) + 1)
    for token in block:
        current = [0] * (len(artifact) + 1)
        for j, other in enumerate(artifact, start=1):
            if token == other:
                current[j] = previous[j - 1] + 1
                best = max(best, current[j])
        previous = current
    return best


@given(
    st.lists(st.sampled_from("abc"), min_size=1, max_size=30),
    st.lists(st.sampled_from("abcd"), max_size=60),
)
def test_coverage_is_the_longest_common_run(block: list[str], artifact: list[str]) -> None:
    expected = longest_common_run(block, artifact) / len(block)
    assert coverage(" ".join(artifact), "\n".join(block)) == expected
