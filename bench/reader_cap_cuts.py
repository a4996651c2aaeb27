#!/usr/bin/env python3
"""Trial: faithfulness capped on the reader's own contradictions only where it is confident.

The shipped judge caps faithfulness below 0.5 on a lexical contradiction (a changed number, a flipped negation, a
foreign name) but not on a contradiction only the reader finds (``coefficients.CAP_READER_CONTRADICTIONS``): at the
verdict's cut (P(contradicted) >= 0.9) that cap cost held-out AUC. This measures the cap at higher cuts, a claim
counted when P(contradicted) >= cut and above P(supported), as ``formulas.with_contradictions`` caps a lexical one:

- chosen on the reader's **dev** fold of the RAGTruth dev sets (``reader.data.ragtruth_fold``: rows it never
  trained on, used to pick its checkpoint): the cut with the highest mean faithful-vs-unfaithful AUC over the three
  sets (no cap among the candidates);
- reported on its **held-out** fold (faithful-vs-unfaithful and conflict-vs-faithful AUC per set) and on the
  one-edit pairs of held-out rows (``bench/one_edit_pairs.py``: the copy scored lower, the median drop).

The same cuts are also read as the contradiction verdict's cut (today 0.9): the verdict as a yes/no test of "the
answer has a conflict span", its Youden's J per set, the cut chosen on the dev fold, reported on the held-out one.

Nothing ships from here: ``coefficients.py`` is not written.

    PYTHONPATH=. python bench/reader_cap_cuts.py --out docs/reader-trials/2026-12-07-confident-cap.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import one_edit_pairs  # noqa: E402

from bench._benchdata import require  # noqa: E402
from ragmon.calibration import stats  # noqa: E402
from ragmon.scoring.local import LocalJudge  # noqa: E402
from ragmon.scoring.local import model as local_model  # noqa: E402
from ragmon.scoring.metrics import formulas  # noqa: E402
from ragmon.scoring.onnx_runner import cpu_model  # noqa: E402
from ragmon.scoring.reader.data import ragtruth_fold  # noqa: E402
from ragmon.scoring.reader.model import READER_SHA256  # noqa: E402

SETS = ("qa", "summary", "data2txt")
CUTS: tuple[float | None, ...] = (None, 0.9, 0.93, 0.95, 0.96, 0.97)
EDITS = ("negation", "name", "number")


def answer_record(judge: LocalJudge, question: str | None, contexts: list[str], answer: str) -> dict[str, Any] | None:
    """What the cap needs of one answer: the base faithfulness (no cap), its lexical contradictions, its claims,
    and P(contradicted) of each claim the reader read that no lexical check flags and the reader does not read
    as supported."""
    a = judge.analyse(question, contexts, answer)
    if not a.evidence:
        return None
    supports = [local_model.claim_support(e) for e in a.evidence]
    return {
        "base": local_model.faithfulness(a.evidence, supports, a.shape, cap=False),
        "lexical": sum(e.contradiction() is not None for e in a.evidence),
        "claims": sum(not e.about_sources for e in a.evidence),
        "reader_p": [r.contradiction for e, r in zip(a.evidence, a.readings, strict=True)
                     if r is not None and e.contradiction() is None and r.contradiction > r.support],
    }


def capped(record: dict[str, Any], cut: float | None) -> float:
    n = record["lexical"] + (sum(p >= cut for p in record["reader_p"]) if cut is not None else 0)
    return formulas.with_contradictions(record["base"], n, record["claims"]) if n else float(record["base"])


def fold_aucs(rows: list[dict[str, Any]], fold: str, cut: float | None) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name in SETS:
        part = [r for r in rows if r["fold"] == fold and r["set"] == name and r["record"] is not None]
        y = np.array([r["faithful"] for r in part])
        score = np.array([capped(r["record"], cut) for r in part])
        conflict = np.array([r["faithful"] == 1 or r["conflict"] for r in part])
        has_conflicts = bool(np.any(~y[conflict].astype(bool)))
        out[name] = {"rows": len(part), "auc": round(stats.roc_auc(y, score), 4),
                     "conflict_auc": round(stats.roc_auc(y[conflict], score[conflict]), 4) if has_conflicts else None}
    out["mean_auc"] = round(float(np.mean([out[s]["auc"] for s in SETS])), 4)
    return out


def fold_verdicts(rows: list[dict[str, Any]], fold: str, cut: float | None) -> dict[str, Any]:
    """The contradiction verdict as a yes/no test of "the answer has a conflict span" (as
    ``bench/fit_reader_stack.py`` counts it): an answer is flagged when a lexical check or, at this cut, the reader
    reads one of its claims as contradicted (no cut: the lexical checks alone)."""
    out: dict[str, Any] = {}
    for name in SETS:
        part = [r for r in rows if r["fold"] == fold and r["set"] == name and r["record"] is not None]
        flag = np.array([r["record"]["lexical"] > 0
                         or (cut is not None and any(p >= cut for p in r["record"]["reader_p"])) for r in part],
                        dtype=bool)
        conflict = np.array([r["conflict"] for r in part], dtype=bool)
        if not conflict.any():
            out[name] = {"conflicts": 0, "specificity": round(float(np.mean(~flag)), 3)}
            continue
        se, sp = float(np.mean(flag[conflict])), float(np.mean(~flag[~conflict]))
        out[name] = {"conflicts": int(conflict.sum()), "sensitivity": round(se, 3), "specificity": round(sp, 3),
                     "youden": round(se + sp - 1, 3)}
    youdens = [v["youden"] for v in out.values() if "youden" in v]
    out["mean_youden"] = round(float(np.mean(youdens)), 3)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    started = time.monotonic()
    judge = LocalJudge(cache_size=0, reader=True)
    data = require(*(f"ragtruth_{s}_dev.jsonl" for s in SETS))
    rows: list[dict[str, Any]] = []
    for name in SETS:
        for line in (data / f"ragtruth_{name}_dev.jsonl").open(encoding="utf-8"):
            r = json.loads(line)
            fold = ragtruth_fold(r)
            if r["labels"].get("faithful") is None or not r.get("answer") or fold == "train":
                continue
            spans = r["meta"].get("hallucination_spans") or []
            rows.append({"set": name, "fold": fold, "faithful": int(r["labels"]["faithful"]),
                         "conflict": any("Conflict" in s.get("label_type", "") for s in spans),
                         "record": answer_record(judge, r.get("question"), r["contexts"], r["answer"])})
    pairs = [{"set": p["set"], "kind": p["kind"],
              "original": answer_record(judge, p["question"], p["contexts"], p["answer"]),
              "edited": answer_record(judge, p["question"], p["contexts"], p["edited"])}
             for p in one_edit_pairs.load_pairs() if p["kind"] in EDITS]
    dev = {str(cut): fold_aucs(rows, "dev", cut) for cut in CUTS}
    chosen = max(CUTS, key=lambda c: (dev[str(c)]["mean_auc"], c is None))  # ties: no cap
    heldout = {str(cut): fold_aucs(rows, "heldout", cut) for cut in CUTS}
    # the verdict's cut, chosen the same way by the verdict's own yes/no accuracy (no cut: the lexical checks alone)
    verdicts = {fold: {str(cut): fold_verdicts(rows, fold, cut) for cut in CUTS} for fold in ("dev", "heldout")}
    verdict_cut = max(CUTS, key=lambda c: (verdicts["dev"][str(c)]["mean_youden"], c is None))
    edits: dict[str, Any] = {}
    for cut in CUTS:
        cells: dict[str, list[float]] = {}
        for p in pairs:
            if p["original"] is not None and p["edited"] is not None:
                drop = capped(p["original"], cut) - capped(p["edited"], cut)
                cells.setdefault(f"{p['set']}/{p['kind']}", []).append(drop)
        edits[str(cut)] = {k: {"pairs": len(d), "lower": round(float(np.mean(np.array(d) > 1e-9)), 3),
                               "median_drop": round(statistics.median(d), 3)} for k, d in sorted(cells.items())}
    probabilities = np.array([p for r in rows if r["record"] for p in r["record"]["reader_p"]])
    highest = round(float(probabilities.max()), 4) if len(probabilities) else None
    report = {"reader_sha256": READER_SHA256, "cpu": cpu_model(), "cuts": [str(c) for c in CUTS],
              "chosen_on_dev": str(chosen), "dev": dev, "heldout": heldout, "one_edit_heldout": edits,
              "contradiction_verdict": verdicts, "verdict_cut_chosen_on_dev": str(verdict_cut),
              "reader_only_p_contradicted": {"claims": len(probabilities),
                                             "max": highest,
                                             "at_least_0.95": int(np.sum(probabilities >= 0.95))},
              "seconds": round(time.monotonic() - started, 1)}
    if args.out:
        args.out.write_text(json.dumps(report, indent=1) + "\n", encoding="utf-8")
    print(f"chosen on dev: {chosen}")
    for cut in CUTS:
        d, h, e = dev[str(cut)], heldout[str(cut)], edits[str(cut)]
        print(f"cut {cut}: dev mean AUC {d['mean_auc']:.3f} | held-out AUC "
              + " / ".join(f"{h[s]['auc']:.3f}" for s in SETS) + f" ({h['mean_auc']:.3f}), conflicts "
              + " / ".join(f"{h[s]['conflict_auc']:.3f}" for s in SETS) + " | one-edit lower, median drop: "
              + "; ".join(f"{k} {v['lower']:.0%} {v['median_drop']:+.3f}" for k, v in e.items()))
    print(f"contradiction verdict, cut chosen on dev by mean Youden's J: {verdict_cut}")
    for cut in CUTS:
        d, h = verdicts["dev"][str(cut)], verdicts["heldout"][str(cut)]
        print(f"cut {cut}: dev mean J {d['mean_youden']:+.3f} | held-out J "
              + " / ".join(f"{h[s]['youden']:+.3f}" for s in SETS) + f" (mean {h['mean_youden']:+.3f})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
