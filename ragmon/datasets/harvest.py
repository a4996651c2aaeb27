"""From production: a stratified harvest of the agent's judged traces into eval-set candidates.

The agent writes the judged traces (``ragmon agent --export-judged PATH``, ``export/judged.py``);
this module reads them back.

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
from collections import Counter, defaultdict
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, Final

from ..errors import EvalInputError

__all__ = ["harvest", "read_judged", "score_band"]

log = logging.getLogger("ragmon.datasets.harvest")

UNLABELLED: Final = "unlabelled"


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
