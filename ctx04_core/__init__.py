"""ctx04: given a task and a repository, the few lines of code a model must see.

The Python API an agent harness imports::

    from ctx04_core import retrieve
    result = retrieve("QuerySet.only() crashes after select_related()", "path/to/repo")
    prompt_context = result.context.text

``retrieve`` takes ``disable=`` / ``only=`` to choose plugins by entry-point
name. Plugin authors import ``hookimpl`` and the data types from here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ctx04_core.hookspecs import hookimpl

if TYPE_CHECKING:
    from ctx04_core.pipeline import Retrieval, retrieve
    from ctx04_core.vetting import vet

__all__ = ["Retrieval", "hookimpl", "retrieve", "vet"]


def __getattr__(name: str) -> Any:
    # The pipeline pulls in SQLite and the tokenizer; import it only when asked.
    if name in ("retrieve", "Retrieval"):
        from ctx04_core import pipeline

        return getattr(pipeline, name)
    if name == "vet":
        from ctx04_core.vetting import vet

        return vet
    raise AttributeError(f"module 'ctx04_core' has no attribute {name!r}")
