"""Bounded reads of source files for the server: regular files only, up to a size.

The server reads files the client names (documents not open in the editor, generated files,
a module's saved source).  A URI of a FIFO blocked the whole event loop in open(); /dev/zero
was read until memory ran out (issue 25).  Every read goes through `read_source`."""

from __future__ import annotations

import os
import stat
from pathlib import Path

MAX_SOURCE_BYTES = 8 * 1024 * 1024  # far beyond any module file; a bigger one is not a source


class NotASourceFile(OSError):
    """Not a regular file, or larger than MAX_SOURCE_BYTES (the message says which)."""


def read_source(path: Path | str, limit: int = MAX_SOURCE_BYTES) -> str:
    """UTF-8 text of a regular file of at most `limit` bytes.  Raises OSError (NotASourceFile
    for a FIFO, device, directory or oversized file) and UnicodeDecodeError, never blocks."""
    path = Path(path)
    before = os.stat(path)  # follows symlinks; a FIFO is not opened at all
    _check(path, before, limit)
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    try:
        _check(path, os.fstat(fd), limit)  # the file opened is the file checked
        chunks, total = [], 0
        while True:
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                break
            total += len(chunk)
            if total > limit:  # grew while being read
                raise NotASourceFile(f"{path}: larger than {limit} bytes")
            chunks.append(chunk)
    finally:
        os.close(fd)
    return b"".join(chunks).decode("utf-8")


def _check(path: Path, st: os.stat_result, limit: int) -> None:
    if not stat.S_ISREG(st.st_mode):
        raise NotASourceFile(f"{path}: not a regular file")
    if st.st_size > limit:
        raise NotASourceFile(f"{path}: {st.st_size} bytes, larger than {limit}")
