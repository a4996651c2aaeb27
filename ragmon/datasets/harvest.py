"""From production: the agent's judged-trace sink, and a stratified harvest into eval-set candidates.

**Sink** (``ragmon agent --export-judged PATH``): every trace the agent judged becomes one JSON
line — trace id, time, service, pipeline, question, answer, retrieved documents (id, content,
score, rank), scores, verdict, judge. The text is what the agent received, i.e. after the SDK's
redaction hook and content sampling. The sink is bounded: ``max_bytes`` is the cap on all of its
files together; the live file rotates to ``PATH.1`` (``.1`` -> ``.2`` ...) when the next line would
take it over ``max_bytes / (backups + 1)``, and the oldest file is deleted. A single line over
that share is dropped and counted (``dropped``), never written cut in half. Writing never raises
into the agent: an OS error is logged once and counted.

**Harvest** (``ragmon dataset harvest``): reads the sink's files, keeps traces with a question,
drops repeated questions (the first seen wins), and draws ``n`` of them stratified by
(pipeline, verdict, score band): strata take turns (balanced: rare strata such as retrieval
failures are not drowned by the common ``ok``), in a seeded random order within each. Score band
= the lowest of the trace's scores: ``low`` < 0.5 <= ``mid`` < 0.8 <= ``high``. Each candidate
is an eval-set row whose ``ground_truth_docs`` are the retrieved ids (top ``max_docs``), marked
``meta.label_status = "unlabelled"`` for ``ragmon dataset label``.
"""

from __future__ import annotations

import hashlib
import json
import logging
import random
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Iterable, Iterator, Mapping, Sequence
from os import PathLike
from pathlib import Path
from typing import Any, Final

from .._log import LogOnce
from ..errors import EvalInputError
from ..types import RagTrace, Scores

__all__ = ["DEFAULT_MAX_BYTES", "JudgedSink", "harvest", "read_judged", "score_band", "sink_files"]

log = logging.getLogger("ragmon.datasets.harvest")

DEFAULT_MAX_BYTES: Final = 100 * 1024 * 1024
DEFAULT_BACKUPS: Final = 3
UNLABELLED: Final = "unlabelled"


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


def read_judged(paths: Iterable[Path]) -> Iterator[dict[str, Any]]:
    """Records of the sink files; malformed lines are skipped (a rotated file may end mid-write)."""
    for path in paths:
        try:
            with path.open(encoding="utf-8", errors="replace") as fh:
                for line in fh:
                    try:
                        record = json.loads(line)
                    except ValueError:
                        continue
                    if isinstance(record, dict):
                        yield record
        except OSError as exc:
            raise EvalInputError(f"cannot read judged traces {str(path)!r}: {exc}") from exc


def score_band(scores: Mapping[str, Any]) -> str:
    values = [float(v) for v in scores.values() if isinstance(v, int | float) and not isinstance(v, bool)]
    if not values:
        return "none"
    low = min(values)
    return "low" if low < 0.5 else "mid" if low < 0.8 else "high"


def _stratum(record: Mapping[str, Any]) -> tuple[str, str, str]:
    scores = record.get("scores") if isinstance(record.get("scores"), dict) else {}
    return (str(record.get("pipeline") or ""), str(record.get("verdict") or ""), score_band(scores or {}))


def harvest(records: Iterable[Mapping[str, Any]], n: int, *, seed: int = 0, max_docs: int = 10,
            allocation: str = "balanced") -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """``n`` candidate rows stratified by (pipeline, verdict, score band), and a summary."""
    if allocation not in ("balanced", "proportional"):
        raise ValueError("allocation must be balanced or proportional")
    seen: set[str] = set()
    strata: dict[tuple[str, str, str], list[Mapping[str, Any]]] = defaultdict(list)
    skipped: Counter[str] = Counter()
    for record in records:
        question = record.get("question")
        if not isinstance(question, str) or not question.strip():
            skipped["no_question"] += 1
            continue
        key = " ".join(question.lower().split())
        if key in seen:
            skipped["repeated_question"] += 1
            continue
        seen.add(key)
        strata[_stratum(record)].append(record)
    rng = random.Random(seed)
    for members in strata.values():
        rng.shuffle(members)
    picked = _allocate(strata, n, allocation)
    rows = [candidate_row(r, max_docs) for r in picked]
    summary = {
        "traces": sum(len(m) for m in strata.values()) + sum(skipped.values()), "skipped": dict(skipped),
        "strata": {"/".join(k): len(v) for k, v in sorted(strata.items())},
        "picked": dict(Counter("/".join(_stratum(r)) for r in picked)), "candidates": len(rows),
    }
    return rows, summary


def _allocate(strata: Mapping[tuple[str, str, str], Sequence[Mapping[str, Any]]], n: int,
              allocation: str) -> list[Mapping[str, Any]]:
    keys = sorted(strata)
    total = sum(len(strata[k]) for k in keys)
    if allocation == "proportional" and total:
        quota = {k: round(n * len(strata[k]) / total) for k in keys}
    else:
        quota = {k: n for k in keys}  # balanced: round robin until n
    taken = dict.fromkeys(keys, 0)
    out: list[Mapping[str, Any]] = []
    while len(out) < n:
        progressed = False
        for k in keys:
            if len(out) >= n:
                break
            if taken[k] < min(quota[k], len(strata[k])):
                out.append(strata[k][taken[k]])
                taken[k] += 1
                progressed = True
        if not progressed:
            if allocation == "proportional" and any(taken[k] < len(strata[k]) for k in keys):
                quota = {k: len(strata[k]) for k in keys}  # rounding left room: fill round robin
                continue
            break
    return out


def candidate_row(record: Mapping[str, Any], max_docs: int = 10) -> dict[str, Any]:
    docs = [d for d in record.get("documents") or [] if isinstance(d, dict) and d.get("id") is not None]
    docs = docs[:max_docs]
    trace_id = str(record.get("trace_id") or "")
    fallback = hashlib.sha256(str(record.get("question")).encode()).hexdigest()
    return {
        "id": f"prod-{(trace_id or fallback)[:16]}",
        "question": record["question"],
        "ground_truth_docs": [str(d["id"]) for d in docs],
        "meta": {
            "source": "production", "label_status": UNLABELLED, "trace_id": trace_id,
            "service": record.get("service"), "pipeline": record.get("pipeline"), "verdict": record.get("verdict"),
            "score_band": score_band(record.get("scores") or {}), "scores": record.get("scores") or {},
            "answer": record.get("answer"),
            "contexts": [{"id": str(d["id"]), "content": d.get("content"), "score": d.get("score")} for d in docs],
        },
    }
