"""Running git on a repository nobody vetted.

A repository's files, history and ``.git/config`` are the attacker's: git
reads that config on every call, and several keys in it name a program git
runs (``gpg.program`` when ``log.showSignature`` is on, a diff driver's
``textconv`` or ``command`` that the repository's ``.gitattributes`` names,
``core.fsmonitor``, hooks, the transport a lazy fetch of a partial clone
would use). Command-line config outranks the repository's, so every call
carries :data:`HARDENING`, and diffs are asked for with ``--no-ext-diff
--no-textconv``. The user's global and system config are not read either,
so git's output has one shape whatever the machine (``diff.noprefix`` or a
log encoding would change what ctx04 parses). Variables such as
``GIT_DIR`` or ``GIT_EXTERNAL_DIFF`` in ctx04's own environment are dropped
for the same reason.

Arguments that came from data (a revision from a setting or a dataset, a
commit id read from git's own output) follow ``--end-of-options`` and are
checked with :func:`object_id` where an object id is expected, so none can
be read as an option. docs/threat-model.md says what this protects.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from pathlib import Path

from ctx04_core.subprocesses import ChildResult, run_bounded

HARDENING = (
    "--no-pager",
    "-c", "core.fsmonitor=false",
    "-c", "core.hooksPath=/dev/null",
    "-c", "log.showSignature=false",
    "-c", "protocol.allow=never",
    "-c", "core.quotePath=false",
    "-c", "i18n.logOutputEncoding=UTF-8",
)
# A full object id, SHA-1 or SHA-256.
_OBJECT_ID = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")


def environment(base: Mapping[str, str] | None = None) -> dict[str, str]:
    """``base`` (default: this process's environment) without git's own
    variables, and with the user's and the system's git config unread."""
    env = {k: v for k, v in (os.environ if base is None else base).items()
           if not k.startswith("GIT_")}
    env.update({
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_CONFIG_GLOBAL": os.devnull,
        "GIT_TERMINAL_PROMPT": "0",
        "GIT_NO_LAZY_FETCH": "1",
        "GIT_OPTIONAL_LOCKS": "0",
    })
    return env


def argv(location: Sequence[str], *args: str) -> list[str]:
    """``git`` with its location (``-C ROOT`` or ``--git-dir=DIR``), the
    hardening, then ``args``."""
    return ["git", *location, *HARDENING, *args]


def run_git(
    location: Sequence[str], *args: str, cwd: Path, timeout_s: float, max_stdout_bytes: int
) -> ChildResult:
    """:func:`ctx04_core.subprocesses.run_bounded` of :func:`argv` in the
    cleaned :func:`environment`. Raises OSError when git cannot start."""
    return run_bounded(argv(location, *args), cwd=cwd, timeout_s=timeout_s,
                       max_stdout_bytes=max_stdout_bytes, env=environment())


def object_id(text: str) -> str | None:
    """``text`` if it is a full lowercase hex object id, else None."""
    return text if _OBJECT_ID.fullmatch(text) else None
