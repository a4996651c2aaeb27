#!/usr/bin/env python3
"""One-edit pairs: faithful answers of the RAGTruth dev sets, each beside a copy that differs in
exactly one edit — a number changed to one the sources do not hold, one verb negated, a name
swapped for another name the sources hold, a month swapped, a unit swapped — and how the local
judge scores the copy against its original.

    python bench/one_edit_pairs.py --build     # rewrite bench/data/one_edit_pairs.jsonl (deterministic)
    python bench/one_edit_pairs.py             # score the pairs and RAGTruth conflict vs baseless:
                                               # docs/one-edit-pairs.json and a Markdown table

Only faithful answers (``labels.faithful == 1``) are edited, and only where the edited span is
held by the contexts (so the original claim is supported and the edit contradicts it). A number
is a quantity: list markers ("3. Place the potatoes") and source references ("Passage 4",
"[2]", "Question 6") are not edited — changing one is a citation or layout error, not a fact. A pair is
kept when its edit changes exactly one span. Nothing here is fitted: the pairs measure.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
import re
import statistics
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from bench._benchdata import benchdata_dir, require  # noqa: E402
from ragmon.scoring.onnx_runner import cpu_model  # noqa: E402
from ragmon.scoring.reader.model import READER_SHA256  # noqa: E402
from ragmon.scoring.text import STOPWORDS  # noqa: E402

BENCHDATA = benchdata_dir()  # RAGMON_BENCHDATA or .cache/benchdata (`make benchdata`)
PAIRS = ROOT / "bench" / "data" / "one_edit_pairs.jsonl"
RESULT = ROOT / "docs" / "one-edit-pairs.json"
SETS = ("qa", "summary", "data2txt")
KINDS = ("number", "negation", "name", "date", "unit")
PER_KIND = 60  # pairs per (set, kind) at most

_NUMBER = re.compile(r"(?<![\w.,$])(\d{1,3}(?:,\d{3})+|\d+)(\.\d+)?(?![\w,]?\d)")
# not a quantity: a list marker ("\n3. Place the potatoes"), a source reference ("Passage 4", "[2]",
# "Question 6"): changing one is a citation or layout error, not a fact the sources contradict
_MARKER_BEFORE = re.compile(r"(?:^|\n)\s*$|\b(?:passages?|documents?|sources?|contexts?|questions?|steps?|"
                            r"parts?|sections?|chapters?)\s*#?\s*$|\[\s*$", re.IGNORECASE)
_MARKER_AFTER = re.compile(r"^[.)]\s")
_NEGATABLE = re.compile(r"\b(is|are|was|were|can|will|should|could|would|must|may)\s+(?!not\b|n't)(?=[a-z])")
_NEGATION = re.compile(r"\b(not|no|never|none|cannot|n't|without)\b|n't", re.IGNORECASE)
_NAME = re.compile(r"(?<=[a-z] )([A-Z][a-z]{2,}(?: [A-Z][a-z]{2,})?)")  # after a lower-case word: mid-sentence
MONTHS = ("January", "February", "March", "April", "May", "June", "July", "August", "September", "October",
          "November", "December")
_MONTH = re.compile(r"\b(" + "|".join(MONTHS) + r")\b")
UNIT_FAMILIES = (
    ("second", "minute", "hour", "day", "week", "month", "year"),
    ("inch", "foot", "mile", "meter", "kilometer", "centimeter"),
    ("ounce", "pound", "gram", "kilogram", "ton"),
    ("cup", "tablespoon", "teaspoon", "liter", "gallon", "pint"),
    ("dollar", "euro", "cent"),
    ("Fahrenheit", "Celsius"),
)
_UNIT = re.compile(r"\b(" + "|".join(u for f in UNIT_FAMILIES for u in f) + r")(s|es)?\b")
_NOT_NAMES = frozenset({*MONTHS, "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday",
                        "The", "This", "That", "These", "Those", "However", "Additionally", "Also", "Overall",
                        "Based", "According", "Passage", "Passages", "Yes", "No"})


def _pick(key: str) -> int:
    return int(hashlib.sha256(key.encode()).hexdigest()[:8], 16)


def _edits(kind: str, answer: str, context: str, key: str) -> Iterator[tuple[int, int, str]]:
    """Candidate (start, end, replacement) edits of ``answer``, in answer order."""
    if kind == "number":
        for m in _NUMBER.finditer(answer):
            text = m.group(0)
            listed = _MARKER_AFTER.match(answer[m.end():m.end() + 2]) and "\n" in answer[m.start() - 3:m.start()]
            if text not in context or len(text) > 9 or _MARKER_BEFORE.search(answer[:m.start()][-40:]) or listed:
                continue
            value = float(text.replace(",", ""))
            for factor in (2, 3, 5, 7):
                new = value * factor + (factor if value == 0 else 0)
                candidate = f"{new:.{len(m.group(2)) - 1}f}" if m.group(2) else f"{int(new):,}" if "," in text \
                    else str(int(new))
                if candidate not in context:
                    yield m.start(), m.end(), candidate
                    break
    elif kind == "negation":
        for m in _NEGATABLE.finditer(answer):
            sentence = answer[answer.rfind(".", 0, m.start()) + 1:answer.find(".", m.end()) % (len(answer) + 1)]
            if _NEGATION.search(sentence):
                continue
            verb = m.group(1)
            yield m.start(1), m.end(1), "cannot" if verb == "can" else f"{verb} not"
    elif kind == "name":
        # proper names only: capitalised mid-sentence and never written in lower case in the contexts
        # ("When", "Growing Tips" are not names), swapped for another such name with nothing in common
        lowered = context.lower()

        def proper(n: str) -> bool:
            lower_case = re.search(rf"(?<![\w]){re.escape(n.lower())}(?![\w])", context.replace(n, ""))
            return n not in _NOT_NAMES and n.split()[0].lower() not in STOPWORDS and not lower_case
        in_context = [n for n in dict.fromkeys(_NAME.findall(context)) if proper(n)]
        for m in _NAME.finditer(answer):
            name = m.group(1)
            if name not in context or not proper(name):
                continue
            others = [n for n in in_context if n not in answer and n[:5].lower() != name[:5].lower()
                      and len(n.split()) == len(name.split())]
            if others and lowered:
                yield m.start(1), m.end(1), others[_pick(key + name) % len(others)]
    elif kind == "date":
        for m in _MONTH.finditer(answer):
            if m.group(1) not in context:
                continue
            choices = [x for x in MONTHS if x != m.group(1) and x not in context]
            if choices:
                yield m.start(1), m.end(1), choices[_pick(key + m.group(1)) % len(choices)]
    elif kind == "unit":
        for m in _UNIT.finditer(answer):
            if m.group(0) not in context:
                continue
            family = next(f for f in UNIT_FAMILIES if m.group(1) in f)
            choices = [u for u in family if u != m.group(1) and u not in context]
            if choices:
                unit = choices[_pick(key + m.group(0)) % len(choices)]
                plural = m.group(2) and unit not in ("Fahrenheit", "Celsius")
                yield m.start(), m.end(), unit + ("es" if plural and unit.endswith("ch") else "s" if plural else "")


def build() -> list[dict[str, Any]]:
    pairs: list[dict[str, Any]] = []
    for name in SETS:
        rows = [json.loads(line) for line in (BENCHDATA / f"ragtruth_{name}_dev.jsonl").open(encoding="utf-8")]
        faithful = sorted((r for r in rows if r["labels"].get("faithful") == 1 and r.get("answer")),
                          key=lambda r: _pick(r["id"]))
        for kind in KINDS:
            kept = 0
            for r in faithful:
                context = "\n".join(r["contexts"])
                candidates = list(_edits(kind, r["answer"], context, r["id"]))
                if not candidates:
                    continue
                start, end, new = candidates[_pick(r["id"] + kind) % len(candidates)]
                edited = r["answer"][:start] + new + r["answer"][end:]
                if edited == r["answer"]:
                    continue
                pairs.append({"id": f"{r['id']}:{kind}", "row": r["id"], "set": name, "kind": kind,
                              "edit": {"from": r["answer"][start:end], "to": new, "at": start}})
                kept += 1
                if kept >= PER_KIND:
                    break
    return pairs


def load_pairs(path: Path = PAIRS, benchdata: Path = BENCHDATA) -> list[dict[str, Any]]:
    """The pairs with their question, contexts, answer and edited answer (the file holds only the
    edits; the texts are read from the RAGTruth dev sets, which it must match)."""
    rows: dict[str, dict[str, Any]] = {}
    for name in SETS:
        for line in (benchdata / f"ragtruth_{name}_dev.jsonl").read_text(encoding="utf-8").splitlines():
            r = json.loads(line)
            rows[r["id"]] = r
    out = []
    for line in path.read_text(encoding="utf-8").splitlines():
        p = json.loads(line)
        r = rows[p["row"]]
        if HELDOUT_ONLY and not heldout(r):
            continue
        e = p["edit"]
        answer = r["answer"]
        if answer[e["at"]:e["at"] + len(e["from"])] != e["from"]:
            raise ValueError(f"{p['id']}: the dev set's answer does not hold {e['from']!r} at {e['at']}")
        out.append({**p, "question": r["question"], "contexts": r["contexts"], "answer": answer,
                    "edited": answer[:e["at"]] + e["to"] + answer[e["at"] + len(e["from"]):]})
    return out


def heldout(row: dict[str, Any]) -> bool:
    """A row the trained reader never saw (its held-out fold, by source document)."""
    from ragmon.scoring.reader.data import ragtruth_fold

    return ragtruth_fold(row) == "heldout"


HELDOUT_ONLY = True  # --all-rows: every dev row, including those the reader trained on
READER = True  # --no-reader: the judge without the trained reader, for the side-by-side table


def faithfulness_scorer() -> Callable[[str, list[str], str], tuple[float | None, dict[str, Any]]]:
    from ragmon.scoring.local import LocalJudge
    from ragmon.scoring.local._online import online_values

    judge = LocalJudge(cache_size=0, reader=READER)

    def score(question: str, contexts: list[str], answer: str) -> tuple[float | None, dict[str, Any]]:
        details: dict[str, Any] = {}
        values = online_values(judge.analyse(question, contexts, answer), details)
        return values.get("faithfulness"), details

    return score


def auc(positives: list[float], negatives: list[float]) -> float | None:
    """P(a positive scores above a negative), ties 1/2."""
    if not positives or not negatives:
        return None
    wins = sum((p > n) + 0.5 * (p == n) for p in positives for n in negatives)
    return wins / (len(positives) * len(negatives))


def score_pairs(pairs: list[dict[str, Any]]) -> dict[str, Any]:
    score = faithfulness_scorer()
    by: dict[tuple[str, str], list[tuple[float, float, bool]]] = {}
    t0 = time.process_time()
    for p in pairs:
        original, before = score(p["question"], p["contexts"], p["answer"])
        edited, details = score(p["question"], p["contexts"], p["edited"])
        if original is None or edited is None:
            continue

        def contradicted(d: dict[str, Any]) -> int:
            return sum(v.get("verdict") == "contradicted" for v in d.get("claim_verdicts", []))
        # the edit made a contradiction the original did not have (not one the original had already)
        caught = contradicted(details) > contradicted(before)
        by.setdefault((p["set"], p["kind"]), []).append((original, edited, caught))
    cpu_ms = 1000 * (time.process_time() - t0) / max(1, 2 * len(pairs))
    out: dict[str, Any] = {"cpu_ms_per_trace": round(cpu_ms, 1), "cells": []}
    for (name, kind), rows in sorted(by.items()):
        drops = [o - e for o, e, _ in rows]
        out["cells"].append({
            "set": name, "kind": kind, "pairs": len(rows),
            "lower": round(sum(d > 1e-9 for d in drops) / len(rows), 3),
            "median_drop": round(statistics.median(drops), 3),
            "auc": round(auc([o for o, _, _ in rows], [e for _, e, _ in rows]) or 0.0, 3),
            "contradicted": round(sum(c for _, _, c in rows) / len(rows), 3),
        })
    return out


def conflict_vs_baseless() -> list[dict[str, Any]]:
    """AUC of faithful answers against answers with a conflict span, and with baseless spans only."""
    score = faithfulness_scorer()
    out = []
    for name in SETS:
        rows = [json.loads(line) for line in (BENCHDATA / f"ragtruth_{name}_dev.jsonl").open(encoding="utf-8")]
        rows = [r for r in rows if heldout(r) or not HELDOUT_ONLY]
        groups: dict[str, list[float]] = {"faithful": [], "conflict": [], "baseless": []}
        for r in rows:
            s, _ = score(r["question"], r["contexts"], r["answer"])
            if s is None:
                continue
            kinds = {span.get("label_type", "") for span in r["meta"].get("hallucination_spans") or []}
            if r["labels"].get("faithful") == 1:
                groups["faithful"].append(s)
            elif any("Conflict" in k for k in kinds):
                groups["conflict"].append(s)
            elif kinds:
                groups["baseless"].append(s)
        unfaithful = groups["conflict"] + groups["baseless"]
        rng = random.Random(0)
        boot = sorted(auc(rng.choices(groups["faithful"], k=len(groups["faithful"])),
                          rng.choices(unfaithful, k=len(unfaithful))) or 0.0 for _ in range(200))
        out.append({"set": name, **{f"n_{k}": len(v) for k, v in groups.items()},
                    "auc_conflict": round(auc(groups["faithful"], groups["conflict"]) or 0.0, 3),
                    "auc_baseless": round(auc(groups["faithful"], groups["baseless"]) or 0.0, 3),
                    "auc_all": round(auc(groups["faithful"], unfaithful) or 0.0, 3),
                    "auc_all_ci95": [round(boot[5], 3), round(boot[194], 3)]})
    return out


def markdown(result: dict[str, Any]) -> str:
    lines = ["| set | edit | pairs | copy scored lower | median drop | AUC | a new contradicted claim |",
             "|---|---|---:|---:|---:|---:|---:|"]
    for c in result["pairs"]["cells"]:
        lines.append(f"| {c['set']} | {c['kind']} | {c['pairs']} | {c['lower']:.0%} | {c['median_drop']:.3f} | "
                     f"{c['auc']:.2f} | {c['contradicted']:.0%} |")
    lines += ["", "| set | faithful | conflict | baseless only | AUC faithful vs conflict | AUC vs baseless | "
              "AUC vs all unfaithful [95 %] |", "|---|---:|---:|---:|---:|---:|---:|"]
    for c in result["ragtruth"]:
        lo, hi = c["auc_all_ci95"]
        lines.append(f"| {c['set']} | {c['n_faithful']} | {c['n_conflict']} | {c['n_baseless']} | "
                     f"{c['auc_conflict']:.3f} | {c['auc_baseless']:.3f} | {c['auc_all']:.3f} [{lo:.3f}, {hi:.3f}] |")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--build", action="store_true", help="rebuild the pairs file from the RAGTruth dev sets")
    parser.add_argument("--no-ragtruth", action="store_true", help="skip RAGTruth conflict vs baseless")
    parser.add_argument("--no-reader", action="store_true", help="the local judge without the trained reader")
    parser.add_argument("--all-rows", action="store_true",
                        help="every dev row (default: only the reader's held-out fold, rows it never trained on)")
    parser.add_argument("--out", type=Path, default=RESULT)
    args = parser.parse_args()
    require(*(f"ragtruth_{name}_dev.jsonl" for name in SETS))
    global READER, HELDOUT_ONLY
    READER, HELDOUT_ONLY = not args.no_reader, not args.all_rows
    if args.build:
        pairs = build()
        PAIRS.parent.mkdir(parents=True, exist_ok=True)
        PAIRS.write_text("".join(json.dumps(p, ensure_ascii=False) + "\n" for p in pairs), encoding="utf-8")
        counts: dict[str, int] = {}
        for p in pairs:
            counts[f"{p['set']}/{p['kind']}"] = counts.get(f"{p['set']}/{p['kind']}", 0) + 1
        print(f"wrote {len(pairs)} pairs to {PAIRS}: {counts}")
        return 0
    result = {"pairs": score_pairs(load_pairs())}
    result["ragtruth"] = [] if args.no_ragtruth else conflict_vs_baseless()
    result["judge"] = "local, with the trained reader" if READER else "local, without the reader"
    result["rows"] = "reader's held-out fold" if HELDOUT_ONLY else "all dev rows"
    # the file and the CPU: the reader's int8 products, so its verdicts near the cut, differ a little by CPU
    result["reader_sha256"] = READER_SHA256 if READER else None
    result["cpu"] = cpu_model()
    args.out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    print(markdown(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
