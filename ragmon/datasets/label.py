"""``ragmon dataset label CANDIDATES --out GOLDEN.jsonl``: a person labels candidates in the terminal.

For each candidate (``ragmon dataset harvest`` output, or any golden-set rows): the question, the
answer the app gave and the retrieved documents are shown; the labeller confirms or picks the gold
documents (numbers of the shown documents and/or other ids; ``0`` = none, a no-answer question),
accepts the app's answer as the reference or writes one (``-`` = none), and sets the question type
and difficulty — or skips (``s``) or quits (``q``, Ctrl-D, Ctrl-C). Each labelled row is appended
to the golden set at once; decisions (labelled or skipped) are kept in ``GOLDEN.jsonl.label-state.json``
so that running the same command again resumes where the labeller stopped.

``--mode judge`` (``judge_label.JudgeLabeller``) asks instead what a judge fit needs and writes the
calibration format ``ragmon calibrate`` reads.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, TextIO

from ..evaluation.goldenset import load_golden_set
from ..evaluation.types import GoldenRow

__all__ = ["Labeller", "QuitLabelling", "SkipCandidate", "state_path"]

_TYPES = {"": "factoid", "f": "factoid", "s": "summary", "m": "multi_hop", "n": "no_answer",
          "factoid": "factoid", "summary": "summary", "multi_hop": "multi_hop", "no_answer": "no_answer"}
_DIFFICULTIES = {"": None, "e": "easy", "m": "medium", "h": "hard", "easy": "easy", "medium": "medium",
                 "hard": "hard"}
_SNIPPET = 160


class QuitLabelling(Exception):
    """q, Ctrl-D or Ctrl-C: stop here; the same command resumes."""


class SkipCandidate(Exception):
    """s: no row for this candidate; it is not offered again."""


def state_path(out: Path) -> Path:
    return out.with_name(out.name + ".label-state.json")


class Labeller:
    def __init__(self, candidates: Sequence[GoldenRow], out: Path, *, read: Callable[[str], str] = input,
                 stream: TextIO | None = None) -> None:
        self.candidates = list(candidates)
        self.out = out
        self.state_file = state_path(out)
        self._read = read
        self._stream = stream or sys.stdout
        self.decisions: dict[str, str] = self._load_state()
        if out.exists():
            for row_id in self._written_ids():
                self.decisions.setdefault(row_id, "labelled")

    def _written_ids(self) -> list[str]:
        """Ids of the rows already in the output file (labelled before the state file was kept)."""
        return [row.id for row in load_golden_set(self.out).rows]

    def _load_state(self) -> dict[str, str]:
        try:
            data = json.loads(self.state_file.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}
        decided = data.get("decided") if isinstance(data, dict) else None
        return {str(k): str(v) for k, v in decided.items()} if isinstance(decided, dict) else {}

    def _save_state(self) -> None:
        tmp = self.state_file.with_name(f".{self.state_file.name}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps({"decided": self.decisions, "updated": time.time()}, indent=1), encoding="utf-8")
        tmp.replace(self.state_file)

    def say(self, text: str = "") -> None:
        print(text, file=self._stream, flush=True)

    def ask(self, prompt: str) -> str:
        try:
            answer = self._read(prompt).strip()
        except (EOFError, KeyboardInterrupt):
            raise QuitLabelling() from None
        if answer.lower() in ("q", "quit"):
            raise QuitLabelling()
        if answer.lower() in ("s", "skip") and not prompt.startswith("type"):
            raise SkipCandidate()
        return answer

    def run(self) -> dict[str, int]:
        todo = [c for c in self.candidates if c.id not in self.decisions]
        counts = {"labelled": 0, "skipped": 0, "left": len(todo)}
        self.say(f"{len(self.candidates)} candidate(s), {len(todo)} to label, "
                 f"{len(self.candidates) - len(todo)} already done. q = quit (resume later), s = skip.")
        for number, candidate in enumerate(todo, start=1):
            try:
                row = self._label(candidate, number, len(todo))
            except SkipCandidate:
                self.decisions[candidate.id] = "skipped"
                counts["skipped"] += 1
                self.say(f"skipped {candidate.id}")
            except QuitLabelling:
                break
            else:
                self._append(row)
                self.decisions[candidate.id] = "labelled"
                counts["labelled"] += 1
                self.say(f"saved {candidate.id} ({self._saved_note(row)})")
            counts["left"] -= 1
            self._save_state()
        self._save_state()
        if counts["left"]:
            self.say(f"stopped: {counts['labelled']} labelled, {counts['skipped']} skipped, {counts['left']} left; "
                     "run the same command to resume.")
        else:
            self.say(f"done: {counts['labelled']} labelled, {counts['skipped']} skipped.")
        return counts

    def _saved_note(self, row: Mapping[str, Any]) -> str:
        return f"{len(row.get('ground_truth_docs', []))} gold document(s)"

    def _label(self, c: GoldenRow, number: int, total: int) -> dict[str, Any]:
        meta = dict(c.meta)
        contexts = [x for x in meta.get("contexts") or [] if isinstance(x, dict)]
        shown = [str(x.get("id")) for x in contexts] or list(c.ground_truth_docs)
        self.say("")
        self.say(f"── {number}/{total} ── {c.id}  pipeline {meta.get('pipeline') or '–'} · verdict "
                 f"{meta.get('verdict') or '–'} · scores {meta.get('score_band') or '–'}")
        self.say(f"Question: {c.question}")
        given = meta.get("answer") if isinstance(meta.get("answer"), str) else c.ground_truth_answer
        self.say(f"Answer given: {given or '–'}")
        self.say("Retrieved documents:")
        by_id = {str(x.get("id")): x for x in contexts}
        for i, doc_id in enumerate(shown, start=1):
            text = " ".join(str((by_id.get(doc_id) or {}).get("content") or "").split())
            self.say(f"  [{i}] {doc_id}  {text[:_SNIPPET]}{'…' if len(text) > _SNIPPET else ''}")
        gold = self._gold(shown)
        reference = self._reference(given)
        qtype = self._choice("type (Enter/f factoid · s summary · m multi_hop · n no_answer)> ", _TYPES,
                             default="no_answer" if not gold else None)
        difficulty = self._choice("difficulty (Enter none · e easy · m medium · h hard)> ", _DIFFICULTIES)
        keep = {k: v for k, v in meta.items() if k not in ("contexts", "answer", "label_status")}
        row: dict[str, Any] = {"id": c.id, "question": c.question, "ground_truth_docs": gold}
        if reference:
            row["ground_truth_answer"] = reference
        row["question_type"] = qtype
        if difficulty:
            row["difficulty"] = difficulty
        row["meta"] = {**keep, "label_status": "labelled", "labelled_at": round(time.time())}
        return row

    def _gold(self, shown: list[str]) -> list[str]:
        hint = f"1-{len(shown)}" if shown else "none shown"
        while True:
            answer = self.ask(f"gold documents (Enter = all [{hint}] · numbers 1,3 · other ids · 0 = none)> ")
            if not answer:
                return list(shown)
            if answer == "0":
                return []
            picked: list[str] = []
            bad = []
            for part in answer.replace(",", " ").split():
                if part.isdigit():
                    i = int(part)
                    if 1 <= i <= len(shown):
                        picked.append(shown[i - 1])
                    else:
                        bad.append(part)
                else:
                    picked.append(part)
            if bad:
                self.say(f"  no document number {', '.join(bad)}; try again")
                continue
            return list(dict.fromkeys(picked))

    def _reference(self, given: str | None) -> str | None:
        prompt = "reference answer (Enter = accept the answer given · type one · - = none)> " if given else \
            "reference answer (type one · Enter or - = none)> "
        answer = self.ask(prompt)
        if answer == "-":
            return None
        return answer or given

    def _choice(self, prompt: str, options: Mapping[str, str | None], default: str | None = None) -> str | None:
        while True:
            answer = self.ask(prompt).lower()
            if not answer and default is not None:
                return default
            if answer in options:
                return options[answer]
            self.say("  not one of the choices; try again")

    def _append(self, row: Mapping[str, Any]) -> None:
        self.out.parent.mkdir(parents=True, exist_ok=True)
        with self.out.open("a", encoding="utf-8") as fh:
            fh.write(json.dumps(row, ensure_ascii=False) + "\n")
            fh.flush()
            os.fsync(fh.fileno())
