"""Headless watch: report Python files whose content changed, once per burst of events.

Editors save in many ways: in place (modify, often several events), atomically (write a temp
file, rename it over the target), or delete + create.  Every event is mapped to the path it
leaves behind (a rename's destination), debounced per file, and reported only if the file
exists and its content differs from what was last reported.  `kernelstitch watch DIR` builds
on this; the language server uses didSave instead.
"""

from __future__ import annotations

import hashlib
import logging
import os
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path

from watchdog.events import FileSystemEvent, FileSystemEventHandler
from watchdog.observers import Observer

log = logging.getLogger(__name__)

OnChange = Callable[[Path], None]
_IGNORED_PARTS = {"__pycache__", ".git", ".hg", ".svn", ".venv", "node_modules"}
_IGNORED_PREFIXES = (".#",)  # emacs lock files
_IGNORED_SUFFIXES = ("~", ".swp", ".swx", ".tmp")


class _Debounced(FileSystemEventHandler):
    def __init__(self, on_change: OnChange, delay_s: float, suffixes: tuple[str, ...],
                 max_wait_s: float | None = None, on_delete: OnChange | None = None) -> None:
        self.on_change = on_change
        self.on_delete = on_delete
        self.delay_s = delay_s
        # Saves closer together than the delay postponed the call without end: after max_wait_s
        # of a burst it fires anyway (and again after the burst, if the content changed since).
        self.max_wait_s = max_wait_s if max_wait_s is not None else 5 * delay_s
        self.suffixes = suffixes
        self._lock = threading.Lock()
        self._timers: dict[Path, threading.Timer] = {}
        self._burst_start: dict[Path, float] = {}
        self._last_hash: dict[Path, str] = {}
        self._closed = False

    def on_any_event(self, event: FileSystemEvent) -> None:
        if event.is_directory or event.event_type in ("opened", "closed_no_write"):
            return
        # A rename reports where the content ends up (atomic save: temp -> target).
        for raw in (getattr(event, "dest_path", None), event.src_path):
            if raw:
                path = Path(_text(raw))
                if self._wanted(path):
                    self._schedule(path)

    def _wanted(self, path: Path) -> bool:
        name = path.name
        return (name.endswith(self.suffixes)
                and not name.startswith(_IGNORED_PREFIXES)
                and not name.endswith(_IGNORED_SUFFIXES)
                and not _IGNORED_PARTS.intersection(path.parts))

    def _schedule(self, path: Path) -> None:
        with self._lock:
            if self._closed:
                return
            timer = self._timers.pop(path, None)
            if timer is not None:
                timer.cancel()
            now = time.monotonic()
            start = self._burst_start.setdefault(path, now)
            delay = max(0.0, min(self.delay_s, start + self.max_wait_s - now))
            timer = threading.Timer(delay, self._fire, args=(path,))
            timer.daemon = True
            self._timers[path] = timer
            timer.start()

    def _fire(self, path: Path) -> None:
        with self._lock:
            self._timers.pop(path, None)
            self._burst_start.pop(path, None)
            if self._closed:
                return
        digest = _digest(path)
        if digest is None:  # deleted and not re-created within the debounce window
            with self._lock:
                known = self._last_hash.pop(path, None) is not None
            if known and self.on_delete is not None:
                _call(self.on_delete, path)
            return
        with self._lock:
            if self._last_hash.get(path) == digest:
                return  # touched or re-saved unchanged
            self._last_hash[path] = digest
        _call(self.on_change, path)

    def prime(self, paths: Iterable[Path]) -> None:
        """Remember current contents so only later changes are reported."""
        for path in paths:
            digest = _digest(path)
            if digest is not None:
                self._last_hash[path] = digest

    def close(self) -> None:
        with self._lock:
            self._closed = True
            for timer in self._timers.values():
                timer.cancel()
            self._timers.clear()


def _call(callback: OnChange, path: Path) -> None:
    try:
        callback(path)
    except Exception:  # a failing callback must not kill the watcher thread
        log.exception("watch callback %s failed for %s", getattr(callback, "__name__", callback), path)


class DirectoryWatch:
    """A running watch; `stop()` (or leaving the `with` block) ends it."""

    def __init__(self, observer: Observer, handler: _Debounced) -> None:
        self._observer = observer
        self._handler = handler

    def stop(self) -> None:
        self._handler.close()
        self._observer.stop()
        self._observer.join(timeout=5)

    def __enter__(self) -> DirectoryWatch:  # noqa: PYI034 - py3.10 has no typing.Self
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def watch_directory(path: Path | str, on_change: OnChange, *, debounce_s: float = 1.0,
                    suffixes: tuple[str, ...] = (".py",), max_wait_s: float | None = None,
                    on_delete: OnChange | None = None) -> DirectoryWatch:
    """Call `on_change(file)` (from a background thread) after each burst of changes to a file
    under `path` (at the latest `max_wait_s`, default 5 x debounce, into a burst), and
    `on_delete(file)` when a file it knew is gone.  Returns at once; files already there are not
    reported until they change."""
    root = Path(path).resolve()
    handler = _Debounced(on_change, debounce_s, suffixes, max_wait_s, on_delete)
    handler.prime(p for p in _files(root) if handler._wanted(p))
    observer = Observer()
    observer.schedule(handler, str(root), recursive=True)
    observer.daemon = True
    observer.start()
    return DirectoryWatch(observer, handler)


def _files(root: Path) -> Iterable[Path]:
    for folder, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if d not in _IGNORED_PARTS]
        for name in files:
            yield Path(folder) / name


def _digest(path: Path) -> str | None:
    try:
        return hashlib.sha1(path.read_bytes()).hexdigest()
    except OSError:
        return None


def _text(raw: str | bytes) -> str:
    return raw.decode() if isinstance(raw, bytes) else raw
