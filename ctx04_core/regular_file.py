"""The one way ctx04 reads a repository file's bytes: the index and the renderer both.

A repository changes while it is read (an agent edits, renames, replaces
files), so whatever a walk or a ``stat`` saw may be something else by the
time the file is opened: a FIFO, whose open waits for a writer that never
comes; a device, whose read never ends; a link to anywhere. The file is
opened without blocking and without following a link, and only what the
open descriptor says it is counts: a race costs that one file, never the
whole read.
"""

from __future__ import annotations

import errno
import os
import stat

# Non-blocking, so opening a FIFO returns at once; a regular file ignores it.
_OPEN_FLAGS = os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC


class NotRegularFile(Exception):
    """The path names a FIFO, device, socket, folder or symbolic link."""

    def __init__(self) -> None:
        super().__init__("not a regular file")


class FileTooLarge(Exception):
    """The file holds more bytes than the reader may take."""

    def __init__(self, size: int) -> None:
        super().__init__(f"{size} bytes")
        self.size = size


def read_regular_file(path: str, max_bytes: int) -> bytes:
    """The bytes of the regular file at ``path``, at most ``max_bytes`` of them.

    Raises :class:`NotRegularFile`, :class:`FileTooLarge` (also when the file
    grows past ``max_bytes`` while it is read), or ``OSError`` when it cannot
    be opened or read.
    """
    try:
        fd = os.open(path, _OPEN_FLAGS)
    except OSError as err:
        if err.errno == errno.ELOOP:  # O_NOFOLLOW met a link where the file was
            raise NotRegularFile from None
        raise
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise NotRegularFile
        if st.st_size > max_bytes:
            raise FileTooLarge(st.st_size)
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
