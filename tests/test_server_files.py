"""server/files.py: bounded reads of regular files only (issue 25)."""

from __future__ import annotations

import os

import pytest
from kernelstitch.server.files import NotASourceFile, read_source


def test_regular_files_are_read_and_everything_else_refused(tmp_path):
    ok = tmp_path / "m.py"
    ok.write_text("x = 1\n")
    assert read_source(ok) == "x = 1\n"
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    for path in (fifo, tmp_path, "/dev/zero"):
        with pytest.raises(NotASourceFile):
            read_source(path)
    big = tmp_path / "big.py"
    big.write_bytes(b"#" * 2000)
    with pytest.raises(NotASourceFile, match="larger than 1000"):
        read_source(big, limit=1000)
    bad = tmp_path / "bad.py"
    bad.write_bytes(b"\xff\xfe")
    with pytest.raises(UnicodeDecodeError):
        read_source(bad)
