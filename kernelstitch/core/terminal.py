"""The CLI's rich consoles and the escaping of text it did not write.

Off a terminal (a log file, a pipe, CI) rich wrapped every line at 80 columns and split paths;
and it read `[torch.randn(...)]` in a message as markup and dropped it (issue 27).  Every CLI
console comes from `console()`, and every message, path or name interpolated into markup goes
through `plain()`."""

from __future__ import annotations

import sys
from typing import Any


def console(stderr: bool = False) -> Any:
    """A rich Console; off a terminal it never wraps (soft wrap: one output line per line)."""
    from rich.console import Console

    stream = sys.stderr if stderr else sys.stdout
    is_tty = hasattr(stream, "isatty") and stream.isatty()
    return Console(stderr=stderr, soft_wrap=not is_tty)


def plain(text: Any) -> str:
    """`text` as literal characters inside rich markup (brackets escaped)."""
    from rich.markup import escape

    return escape(str(text))
