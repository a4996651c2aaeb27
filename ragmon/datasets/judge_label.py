"""``ragmon dataset label CANDIDATES --mode judge --out LABELS.jsonl``: label what a judge fit needs.

For each harvested trace (``ragmon dataset harvest`` output) the labeller reads the question, the
answer the app gave and the retrieved contexts — never the judge's scores, which would anchor the
answer — and says whether the answer is faithful to the contexts, whether it answers the question,
and which contexts are relevant. ``?`` leaves a label out (null), ``s`` skips, ``q`` quits; the
state file makes the same command resume. Each row is appended at once, in the calibration format
``ragmon calibrate`` reads (bench/data/README.md)::

    {"id", "question", "contexts": [text, ...], "answer",
     "labels": {"faithful", "answer_relevant", "context_relevant"},      1 | 0 | null
     "meta": {"context_labels": [1 | 0, ...], "source_id": trace id, "pipeline", "verdict", "judge_scores", ...}}

``context_relevant`` is 1 when any context is relevant. Candidates come in the order that helps a
fit most (``label_order.fit_order``: scores near the threshold first, pipelines taking turns),
unless ``--order file``. ``--answers FILE`` reads the answers from a file (one per line, as
typed) instead of the terminal: for scripted runs.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, TextIO

from ..calibration.label_order import fit_order
from ..evaluation.types import GoldenRow
from .label import Labeller, SkipCandidate

__all__ = ["JudgeLabeller", "order_candidates"]

_CONTEXT_CHARS = 1200  # shown per context; the whole text is written to the row
_YES_NO = {"y": 1, "yes": 1, "1": 1, "n": 0, "no": 0, "0": 0, "?": None}


def order_candidates(candidates: Sequence[GoldenRow], threshold: float = 0.5) -> list[GoldenRow]:
    """The order that helps a fit most (see ``label_order``)."""
    def scores(c: GoldenRow) -> Mapping[str, Any]:
        value = c.meta.get("scores")
        return value if isinstance(value, Mapping) else {}

    return fit_order(candidates, scores_of=scores, id_of=lambda c: c.id, threshold=threshold,
                     stratum_of=lambda c: str(c.meta.get("pipeline") or ""))


class JudgeLabeller(Labeller):
    def __init__(self, candidates: Sequence[GoldenRow], out: Path, *, read: Callable[[str], str] = input,
                 stream: TextIO | None = None) -> None:
        super().__init__(candidates, out, read=read, stream=stream)

    def _written_ids(self) -> list[str]:
        ids = []
        with self.out.open(encoding="utf-8", errors="replace") as fh:
            for line in fh:
                try:
                    row = json.loads(line)
                except ValueError:
                    continue  # a line cut by a crash: its candidate is offered again
                if isinstance(row, dict) and row.get("id") is not None:
                    ids.append(str(row["id"]))
        return ids

    def _saved_note(self, row: Mapping[str, Any]) -> str:
        labels = row["labels"]
        shown = {1: "yes", 0: "no", None: "?"}
        ctx = row["meta"].get("context_labels")
        return (f"faithful {shown[labels['faithful']]}, answers {shown[labels['answer_relevant']]}, "
                f"relevant contexts {sum(ctx) if ctx else 0}/{len(ctx) if ctx else 0}")

    def _label(self, c: GoldenRow, number: int, total: int) -> dict[str, Any]:
        meta = dict(c.meta)
        contexts = [x for x in meta.get("contexts") or [] if isinstance(x, dict)]
        texts = [str(x.get("content") or "") for x in contexts]
        answer = meta.get("answer") if isinstance(meta.get("answer"), str) else None
        self.say("")
        self.say(f"── {number}/{total} ── {c.id}  pipeline {meta.get('pipeline') or '–'}")
        self.say(f"Question: {c.question}")
        self.say(f"Answer given: {answer or '–'}")
        self.say("Retrieved contexts:")
        for i, text in enumerate(texts, start=1):
            flat = " ".join(text.split())
            cut = flat[:_CONTEXT_CHARS] + ("…" if len(flat) > _CONTEXT_CHARS else "")
            self.say(f"  [{i}] {contexts[i - 1].get('id')}  {cut or '(no text)'}")
        faithful = answers = None
        if answer and any(texts):
            faithful = self._yes_no("faithful? is every claim of the answer supported by the contexts "
                                    "(y · n · ? = can't tell)> ")
        if answer:
            answers = self._yes_no("answers the question? (y · n · ? = can't tell)> ")
        context_labels = self._relevant(len(texts)) if any(texts) else None
        if faithful is None and answers is None and context_labels is None:
            self.say("  nothing labelled")
            raise SkipCandidate()
        keep = {k: v for k, v in meta.items() if k not in ("contexts", "answer", "label_status", "scores")}
        row_meta: dict[str, Any] = {**keep, "source_id": meta.get("trace_id") or c.id,
                                    "judge_scores": meta.get("scores") or {},
                                    "label_status": "labelled", "labelled_at": round(time.time())}
        if context_labels is not None:
            row_meta["context_labels"] = context_labels
        return {"id": c.id, "question": c.question, "contexts": texts, "answer": answer,
                "labels": {"faithful": faithful, "answer_relevant": answers,
                           "context_relevant": None if context_labels is None else int(any(context_labels))},
                "meta": row_meta}

    def _yes_no(self, prompt: str) -> int | None:
        while True:
            answer = self.ask(prompt).lower()
            if answer in _YES_NO:
                return _YES_NO[answer]
            self.say("  y, n or ?; try again")

    def _relevant(self, n: int) -> list[int] | None:
        while True:
            answer = self.ask(f"relevant contexts (numbers 1,3 · Enter = all [1-{n}] · 0 = none · ? = can't tell)> ")
            if answer == "?":
                return None
            if not answer:
                return [1] * n
            if answer == "0":
                return [0] * n
            parts = answer.replace(",", " ").split()
            if all(p.isdigit() and 1 <= int(p) <= n for p in parts):
                picked = {int(p) for p in parts}
                return [int(i in picked) for i in range(1, n + 1)]
            self.say(f"  numbers from 1 to {n}, Enter, 0 or ?; try again")
