"""Content-hash cache: an identical (question, contexts, answer) is not judged twice.

Keys are sha256 digests of a canonical JSON encoding of everything that determines the
verdict (judge mode, model, question, contexts in order, answer), so no user text is kept
as a key. Entries expire after ``ttl_s``; the least recently used entry goes when full.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Generic, TypeVar

V = TypeVar("V")


def content_key(
    *, mode: str, model: str, question: str, contexts: Sequence[str], answer: str,
    extra: Mapping[str, Any] | None = None,
) -> str:
    """``extra``: anything else the verdict depends on (offline evaluation's reference, citation
    pattern, document ids); left out of the encoding when None, so online keys never change."""
    fields: dict[str, Any] = {
        "mode": mode, "model": model, "question": question, "contexts": list(contexts), "answer": answer,
    }
    if extra is not None:
        fields["extra"] = dict(extra)
    canonical = json.dumps(fields, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


class TtlCache(Generic[V]):
    """A bounded LRU map whose entries expire ``ttl_s`` after they were stored."""

    def __init__(self, max_size: int, ttl_s: float, *, clock: Callable[[], float] = time.monotonic) -> None:
        self.max_size = max_size
        self.ttl_s = ttl_s
        self._clock = clock
        self._data: OrderedDict[str, tuple[float, V]] = OrderedDict()

    @property
    def enabled(self) -> bool:
        return self.max_size > 0 and self.ttl_s > 0

    def __len__(self) -> int:
        return len(self._data)

    def get(self, key: str) -> V | None:
        item = self._data.get(key)
        if item is None:
            return None
        expires, value = item
        if self._clock() >= expires:
            del self._data[key]
            return None
        self._data.move_to_end(key)
        return value

    def put(self, key: str, value: V) -> None:
        if not self.enabled:
            return
        self._data[key] = (self._clock() + self.ttl_s, value)
        self._data.move_to_end(key)
        while len(self._data) > self.max_size:
            self._data.popitem(last=False)
