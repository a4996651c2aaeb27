"""Logging helpers: one warning per kind of problem, then quiet (counted in metrics instead)."""

from __future__ import annotations

import logging
import threading


class LogOnce:
    """Log the first occurrence of each key at WARNING, later ones at DEBUG.

    Bad input is counted in metrics; the log only needs to say once that it happens.
    The key set is bounded so a stream of distinct keys cannot grow memory.
    """

    def __init__(self, logger: logging.Logger, max_keys: int = 1024) -> None:
        self._logger = logger
        self._seen: set[str] = set()
        self._max = max_keys
        self._lock = threading.Lock()

    def warning(self, key: str, msg: str, *args: object, exc_info: bool | BaseException = False) -> None:
        """``exc_info``: True inside an ``except`` block, or the exception itself."""
        with self._lock:
            first = key not in self._seen
            if first and len(self._seen) < self._max:
                self._seen.add(key)
        level = logging.WARNING if first else logging.DEBUG
        self._logger.log(level, msg + ("" if not first else " (further occurrences are only counted)"),
                         *args, exc_info=exc_info if first else False)
