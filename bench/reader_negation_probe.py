#!/usr/bin/env python3
"""Trial: does the reader contradict a negated claim only where it reads the claim's positive form as supported?

Most of the reader's false contradictions on the dev fold are negated claims whose premise supports them only by
inference ("does not take reservations" against ``"RestaurantsReservations": false``; "women could not own property"
against "women fought for the right to own property"), while a one-edit negation is a claim whose positive form the
premise states. A premise contradicts a negated claim "not X" exactly when it entails X, so this reads X — the claim
with its negation removed — for every negated claim the reader reads as contradicted, and asks whether the reader's
P(supported) of X separates the one-edit negations (true contradictions) from the supported RAGTruth claims it
flags (false ones). Measured on the stage-2 dev pairs (``data.build_pairs``; never a held-out row). Nothing ships from
here.

    PYTHONPATH=. python bench/reader_negation_probe.py --data-dir DIR --out docs/reader-trials/X.json
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench._benchdata import benchdata_dir  # noqa: E402
from ragmon import env as ragmon_env  # noqa: E402
from ragmon.calibration.stats import roc_auc  # noqa: E402
from ragmon.scoring import local as _local  # noqa: E402,F401  (imports the judge's modules in their order)
from ragmon.scoring.onnx_runner import cpu_model  # noqa: E402
from ragmon.scoring.reader.data import build_pairs, has_negation  # noqa: E402
from ragmon.scoring.reader.model import Reader, bundled_path  # noqa: E402
from ragmon.scoring.reader.verdicts import CONTRADICTION_THRESHOLD  # noqa: E402

_CONTRACTED = {"doesn't": "does", "don't": "do", "didn't": "did", "isn't": "is", "aren't": "are", "wasn't": "was",
               "weren't": "were", "hasn't": "has", "haven't": "have", "hadn't": "had", "can't": "can",
               "cannot": "can", "won't": "will", "wouldn't": "would", "couldn't": "could", "shouldn't": "should",
               "mustn't": "must"}
_STEPS = (
    (re.compile(r"\b(\w+n't|cannot)\b", re.I), lambda m: _CONTRACTED.get(m.group(1).lower(), m.group(1))),
    (re.compile(r"\bno longer\s+|\bnever\s+|\bnot\s+|\bno\s+"), lambda m: ""),
)
CUTS = (0.3, 0.5, 0.7)


def positive_form(claim: str) -> str | None:
    """The claim with its negations removed ("does not offer" -> "does offer", "no WiFi" -> "WiFi"), or None."""
    plain = text = claim.replace("’", "'")
    for pattern, repl in _STEPS:
        text = pattern.sub(repl, text)
    return text if text != plain else None


def kind(source: str, label: int) -> str | None:
    if source == "edit-rag-negation":
        return "one-edit negation"
    if source.startswith("ragtruth"):
        return {0: "supported RAGTruth claim", 2: "contradicted RAGTruth claim"}.get(label)
    return None


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--model", type=Path, default=bundled_path())
    ap.add_argument("--data-dir", type=Path,
                    default=Path(os.environ.get(ragmon_env.READER_DATA, ROOT / ".cache" / "reader-data")))
    ap.add_argument("--out", type=Path, default=None, metavar="RESULT.json")
    args = ap.parse_args(argv)
    reader = Reader(args.model, sha256=None, threads=2)
    dev = [p for p in build_pairs(args.data_dir, benchdata_dir(), stage=2, download=False) if p.split == "dev"]
    probs = np.asarray(reader.read([(p.premise, p.claim) for p in dev]))
    flagged = [i for i, p in enumerate(dev)
               if probs[i, 2] >= CONTRADICTION_THRESHOLD and probs[i, 2] > probs[i, 0]
               and has_negation(p.claim) and kind(p.source, p.label)]
    forms = {i: positive_form(dev[i].claim) for i in flagged}
    readable = [i for i in flagged if forms[i]]
    positive = dict(zip(readable, np.asarray(reader.read([(dev[i].premise, str(forms[i])) for i in readable])),
                        strict=True))
    rows = [{"kind": kind(dev[i].source, dev[i].label), "claim": dev[i].claim, "positive_form": forms[i],
             "p_contradicted": round(float(probs[i, 2]), 4),
             "positive_probs": [round(float(x), 4) for x in positive[i]] if i in positive else None}
            for i in flagged]
    kinds = sorted({str(r["kind"]) for r in rows})

    def stands(r: dict[str, Any], cut: float) -> bool:
        """The contradiction stands: the positive form reads as supported (or none could be made)."""
        p = r["positive_probs"]
        return p is None or (p[0] >= cut and p[0] >= p[2])

    kept = {str(cut): {k: [sum(1 for r in rows if r["kind"] == k and stands(r, cut)),
                           sum(1 for r in rows if r["kind"] == k)] for k in kinds} for cut in CUTS}
    true_ = [r for r in rows if r["kind"] == "one-edit negation" and r["positive_probs"]]
    false_ = [r for r in rows if r["kind"] == "supported RAGTruth claim" and r["positive_probs"]]
    y = np.r_[np.ones(len(true_)), np.zeros(len(false_))]
    features = {
        "P(supported) of the positive form": [r["positive_probs"][0] for r in true_ + false_],
        "-P(contradicted) of the positive form": [-r["positive_probs"][2] for r in true_ + false_],
        "P(contradicted) of the claim itself": [r["p_contradicted"] for r in true_ + false_],
    }
    result: dict[str, Any] = {
        "model": str(args.model), "sha256": reader.sha256, "cpu": cpu_model(), "dev_pairs": len(dev),
        "flagged_negated_claims": {k: sum(1 for r in rows if r["kind"] == k) for k in kinds},
        "kept_if_positive_form_supported": kept,
        "auc_true_vs_false_contradictions": {k: round(roc_auc(y, np.asarray(v)), 3) for k, v in features.items()},
        "rows": rows,
    }
    print(json.dumps({k: v for k, v in result.items() if k != "rows"}, indent=1))
    if args.out:
        args.out.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
