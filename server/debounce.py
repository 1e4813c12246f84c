"""Per-key debouncing on the asyncio loop: a burst of triggers runs the action once, at the end."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Hashable

log = logging.getLogger(__name__)

Action = Callable[[], None | Awaitable[None]]


class Debouncer:
    def __init__(self, delay_s: float) -> None:
        self.delay_s = delay_s
        self._pending: dict[Hashable, tuple[asyncio.TimerHandle, Action]] = {}

    def trigger(self, key: Hashable, action: Action) -> None:
        """(Re)start the key's timer; the latest action wins."""
        loop = asyncio.get_running_loop()
        self.cancel(key)
        handle = loop.call_later(self.delay_s, self._fire, key)
        self._pending[key] = (handle, action)

    def pending(self, key: Hashable) -> bool:
        return key in self._pending

    def flush(self, key: Hashable) -> None:
        """Run a pending action now (a request needs its result before the timer fires)."""
        entry = self._pending.get(key)
        if entry is not None:
            entry[0].cancel()
            self._fire(key)

    def cancel(self, key: Hashable) -> None:
        entry = self._pending.pop(key, None)
        if entry is not None:
            entry[0].cancel()

    def cancel_all(self) -> None:
        for key in list(self._pending):
            self.cancel(key)

    def _fire(self, key: Hashable) -> None:
        entry = self._pending.pop(key, None)
        if entry is None:
            return
        try:
            result = entry[1]()
            if asyncio.iscoroutine(result):
                task = asyncio.ensure_future(result)
                task.add_done_callback(_log_failure)
        except Exception:  # one failing action must not stop later ones
            log.exception("debounced action for %r failed", key)


def _log_failure(task: asyncio.Future) -> None:
    if not task.cancelled() and task.exception() is not None:
        log.error("debounced action failed", exc_info=task.exception())
