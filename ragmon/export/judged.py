"""The agent's judged-trace file (``ragmon agent --export-judged PATH``), read back by ``ragmon
dataset harvest`` (``datasets/harvest.py``).

Every trace the agent judged becomes one JSON
line — trace id, time, service, pipeline, question, answer, retrieved documents (id, content,
score, rank), scores, verdict, judge. The text is what the agent received, i.e. after the SDK's
redaction hook and content sampling. The sink is bounded: ``max_bytes`` is the cap on all of its
files together; the live file rotates to ``PATH.1`` (``.1`` -> ``.2`` ...) when the next line would
take it over ``max_bytes / (backups + 1)``, and the oldest file is deleted. A single line over
that share is dropped and counted (``dropped``), never written cut in half. Writing never raises
into the agent: an OS error is logged once and counted.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from os import PathLike
from pathlib import Path
from typing import Any, Final

from .._log import LogOnce
from ..types import RagTrace, Scores

__all__ = ["DEFAULT_BACKUPS", "DEFAULT_MAX_BYTES", "JudgedSink", "judged_record", "sink_files"]

log = logging.getLogger("ragmon.export.judged")

DEFAULT_MAX_BYTES: Final = 100 * 1024 * 1024
DEFAULT_BACKUPS: Final = 3


class JudgedSink:
    """A ``ScoreListener`` (``Agent.add_listener``) writing judged traces to a bounded JSONL file set."""

    def __init__(self, path: str | PathLike[str], max_bytes: int = DEFAULT_MAX_BYTES,
                 backups: int = DEFAULT_BACKUPS, *, clock: Any = time.time) -> None:
        if max_bytes < 1024:
            raise ValueError(f"max_bytes must be >= 1024, got {max_bytes}")
        self.path = Path(path)
        self.backups = backups
        self.file_cap = max_bytes // (backups + 1)
        self.written = 0
        self.dropped = 0  # lines over the per-file share
        self.errors = 0
        self._clock = clock
        self._lock = threading.Lock()
        self._log_once = LogOnce(log)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._size = self.path.stat().st_size if self.path.exists() else 0

    def __call__(self, trace: RagTrace, scores: Scores, verdict: str) -> None:
        line = (json.dumps(judged_record(trace, scores, verdict, self._clock()), ensure_ascii=False) + "\n")
        data = line.encode("utf-8")
        if len(data) > self.file_cap:
            self.dropped += 1
            self._log_once.warning("oversize", "judged trace of %d bytes is over the sink's per-file share "
                                   "(%d bytes); dropped", len(data), self.file_cap)
            return
        with self._lock:
            try:
                if self._size + len(data) > self.file_cap:
                    self._rotate()
                with self.path.open("ab") as fh:
                    fh.write(data)
                self._size += len(data)
                self.written += 1
            except OSError as exc:
                self.errors += 1
                self._log_once.warning("oserror", "cannot write judged traces to %s: %s", self.path, exc)

    def _rotate(self) -> None:
        if self.backups == 0:
            self.path.unlink(missing_ok=True)
        else:
            oldest = self.path.with_name(f"{self.path.name}.{self.backups}")
            oldest.unlink(missing_ok=True)
            for i in range(self.backups - 1, 0, -1):
                src = self.path.with_name(f"{self.path.name}.{i}")
                if src.exists():
                    src.replace(self.path.with_name(f"{self.path.name}.{i + 1}"))
            if self.path.exists():
                self.path.replace(self.path.with_name(f"{self.path.name}.1"))
        self._size = 0


def judged_record(trace: RagTrace, scores: Scores, verdict: str, now: float) -> dict[str, Any]:
    return {
        "trace_id": trace.trace_id, "time": round(now, 3), "service": trace.service, "pipeline": trace.pipeline,
        "question": trace.question, "answer": trace.answer,
        "documents": [{"id": d.id, "content": d.content, "score": d.score, "rank": d.rank} for d in trace.documents],
        "scores": dict(scores.values), "verdict": verdict, "judge": scores.judge,
    }


def sink_files(path: str | PathLike[str]) -> list[Path]:
    """The sink's files, oldest first (``PATH.N`` .. ``PATH.1``, ``PATH``); a directory: its *.jsonl*."""
    base = Path(path)
    if base.is_dir():
        return sorted(p for p in base.iterdir() if p.is_file() and ".jsonl" in p.name)
    rotated = sorted((p for p in base.parent.glob(base.name + ".*") if p.suffix[1:].isdigit()),
                     key=lambda p: -int(p.suffix[1:]))
    return [*rotated, *([base] if base.exists() else [])]
