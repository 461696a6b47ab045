"""The code index: definitions, references and descriptions of a repository, in SQLite.

:class:`CodeIndex` builds and refreshes the index per file and answers the
stages' questions (which names exist, where a name is defined, what a
definition contains and calls, which definitions a description matches).
The Python parser behind it is the ``python`` plugin in
:mod:`ctx04_core.index.python_parser`; other languages plug in through the
``parse_file`` hook.
"""

from ctx04_core.index.opening import IndexUnavailable
from ctx04_core.index.refresh import RefreshStats
from ctx04_core.index.store import CodeIndex

__all__ = ["CodeIndex", "IndexUnavailable", "RefreshStats"]
