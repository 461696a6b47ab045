"""Opening a file the user names (a task, an error, an artifact, a trace).

Only a regular file is opened, and opening never waits: a FIFO blocks
``open`` until a peer opens its other end, and a FIFO or a device may block
a read or never end.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path


class NotRegularFile(OSError):
    """The path names a FIFO, a device, a socket or a folder."""

    def __init__(self) -> None:
        super().__init__("not a regular file")


def open_regular_file(path: Path, flags: int) -> int:
    """A descriptor of ``path`` opened with ``flags`` (``os.O_*``), non-blocking.

    Raises :class:`NotRegularFile` unless ``path`` is a regular file, and
    ``OSError`` when it cannot be opened.
    """
    try:
        descriptor = os.open(path, flags | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as err:
        # Opened for writing without blocking, a FIFO with no reader, a socket
        # or a device with no driver answers ENXIO.
        if err.errno == errno.ENXIO:
            raise NotRegularFile() from err
        raise
    if not stat.S_ISREG(os.fstat(descriptor).st_mode):
        os.close(descriptor)
        raise NotRegularFile()
    return descriptor
