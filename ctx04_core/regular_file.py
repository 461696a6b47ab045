"""The one way ctx04 opens a file: a repository's (the index, the renderer)
and one its user names (a task, an error, an artifact, a trace).

A repository changes while it is read (an agent edits, renames, replaces
files), so whatever a walk or a ``stat`` saw may be something else by the
time the file is opened: a FIFO, whose open waits for a writer that never
comes; a device, whose read never ends; a link to anywhere. A file is
opened without blocking (and a repository's without following a link), and
only what the open descriptor says it is counts: a race costs that one
file, never the whole read. A file the user names may be a link they made,
but never a FIFO or a device.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path


class NotRegularFile(OSError):
    """The path names a FIFO, device, socket, folder or (not followed) a link."""

    def __init__(self) -> None:
        super().__init__("not a regular file")


class FileTooLarge(Exception):
    """The file holds more bytes than the reader may take."""

    def __init__(self, size: int) -> None:
        super().__init__(f"{size} bytes")
        self.size = size


def open_regular_file(path: str | Path, flags: int, *, follow_links: bool = True) -> int:
    """A descriptor of ``path`` opened with ``flags`` (``os.O_*``), non-blocking
    and close-on-exec.

    Raises :class:`NotRegularFile` unless ``path`` is a regular file (and,
    without ``follow_links``, when its last part is a link), and ``OSError``
    when it cannot be opened.
    """
    extra = os.O_NONBLOCK | os.O_CLOEXEC | (0 if follow_links else os.O_NOFOLLOW)
    try:
        descriptor = os.open(path, flags | extra)
    except OSError as err:
        # ELOOP: O_NOFOLLOW met a link (or links loop). ENXIO: opened for
        # writing without blocking, a FIFO with no reader, a socket or a
        # device with no driver.
        if err.errno in (errno.ELOOP, errno.ENXIO):
            raise NotRegularFile() from err
        raise
    if not stat.S_ISREG(os.fstat(descriptor).st_mode):
        os.close(descriptor)
        raise NotRegularFile()
    return descriptor


def read_regular_file(path: str, max_bytes: int) -> bytes:
    """The bytes of the repository's regular file at ``path`` (a link is not
    followed), at most ``max_bytes`` of them.

    Raises :class:`NotRegularFile`, :class:`FileTooLarge` (also when the file
    grows past ``max_bytes`` while it is read), or ``OSError`` when it cannot
    be opened or read.
    """
    fd = open_regular_file(path, os.O_RDONLY, follow_links=False)
    try:
        size = os.fstat(fd).st_size
        if size > max_bytes:
            raise FileTooLarge(size)
        handle = os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise
    with handle:
        # One byte past the limit tells a file that grew since the fstat.
        data = handle.read(max_bytes + 1)
        if len(data) > max_bytes:
            raise FileTooLarge(os.fstat(fd).st_size)
        return data
