"""Test-only: a retrieval whose task holds ``MARKER`` ends its process at once.

``os._exit`` skips every handler and ``finally``, as the kernel's OOM killer
or a segfault would: what a process pool or a Ray worker sees is a worker
that vanished mid-task. Any other task is left alone (the hook returns None).
When ``CTX04_TEST_EXIT_LOG`` names a file, each death first appends its
process id there, so a test can count the attempts.
"""

from __future__ import annotations

import os

from ctx04_core.hookspecs import hookimpl
from ctx04_core.types import Query, Recall

MARKER = "ctx04-test: end this worker"
EXIT_CODE = 70
LOG_ENV = "CTX04_TEST_EXIT_LOG"


@hookimpl
def recall(query: Query) -> Recall | None:
    if MARKER in query.task_text:
        log = os.environ.get(LOG_ENV)
        if log:
            with open(log, "a", encoding="utf-8") as deaths:
                deaths.write(f"{os.getpid()}\n")
        os._exit(EXIT_CODE)
    return None
