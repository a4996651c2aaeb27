#!/usr/bin/env python3
"""The trained reader inside the local judge's faithfulness, measured and fitted where it never
trained: the RAGTruth dev rows of the reader's held-out fold (``reader.data.ragtruth_fold``; every
answer about one source document on one side).

    python bench/fit_reader_stack.py                        # measure: docs/reader-stack.json + a table
    python bench/fit_reader_stack.py --write-coefficients   # and write coef.READER_WEIGHTS

For every held-out row it takes the base judge's faithfulness (the shipped coefficients, no reader)
and the reader's answer-level features, fits P(faithful) = sigmoid(b + w0 logit(base) + w . reader)
with 5 folds grouped by source document (each set and class weighing the same, as the base model
was fitted), and reports per set, out of fold: faithful-vs-unfaithful AUC and conflict-vs-faithful
AUC (answers whose annotated spans include a conflict against faithful answers), base beside
stacked with bootstrap intervals; and the error rates of the contradiction verdict (an answer with
at least one contradicted claim against the human "conflict" label), lexical checks alone beside
lexical + reader. The coefficients written are the fit on all held-out rows.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import pickle
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from fit_local_judge import with_weight_blocks  # noqa: E402

from bench._benchdata import require  # noqa: E402
from ragmon.calibration import stats  # noqa: E402
from ragmon.calibration.fit import Logistic  # noqa: E402
from ragmon.scoring import claim_verdicts  # noqa: E402
from ragmon.scoring.local import LocalJudge  # noqa: E402
from ragmon.scoring.local import model as local_model  # noqa: E402
from ragmon.scoring.local.coefficients import CAP_CONTRADICTIONS  # noqa: E402
from ragmon.scoring.metrics import formulas  # noqa: E402
from ragmon.scoring.onnx_runner import cpu_model, file_sha256  # noqa: E402
from ragmon.scoring.reader import verdicts as reader_verdicts  # noqa: E402
from ragmon.scoring.reader.data import ragtruth_fold  # noqa: E402

SETS = ("qa", "summary", "data2txt")
SEED = 20261205
FOLDS = 5
L2 = 5.0
CACHE = ROOT / ".cache"
RESULT = ROOT / "docs" / "reader-stack.json"
COEF_FILE = ROOT / "ragmon" / "scoring" / "local" / "coefficients.py"
NAMES = ["base_logit", *reader_verdicts.FEATURES]


def benchdata() -> Path:
    return require(*(f"ragtruth_{s}_dev.jsonl" for s in SETS), "retrieval/wice_claim_dev.jsonl")


def rows(data: Path) -> list[dict[str, Any]]:
    out = []
    for task in SETS:
        for line in (data / f"ragtruth_{task}_dev.jsonl").open(encoding="utf-8"):
            r = json.loads(line)
            if r["labels"].get("faithful") is None or not r.get("answer") or ragtruth_fold(r) != "heldout":
                continue
            spans = r["meta"].get("hallucination_spans") or []
            r["set"] = task
            r["conflict"] = any("Conflict" in s.get("label_type", "") for s in spans)
            out.append(r)
    return out


def wice_rows(data: Path) -> list[dict[str, Any]]:
    """WiCE dev claims (supported vs not supported; partial ones left out), off-domain: never trained
    or fitted on; the article its citation points to is the only context (as bench/judge_fidelity.py)."""
    path = data / "retrieval" / "wice_claim_dev.jsonl"
    out = []
    for line in path.open(encoding="utf-8") if path.is_file() else []:
        r = json.loads(line)
        if r["label"] == "partially_supported":
            continue
        article = "\n".join(x for x in r["evidence"] if x.strip())
        out.append({"set": "wice", "question": None, "contexts": [article], "answer": r["claim"],
                    "labels": {"faithful": int(r["label"] == "supported")}, "conflict": False,
                    "meta": {"source_id": r.get("meta", {}).get("id", len(out)) if isinstance(r.get("meta"), dict)
                             else len(out)}})
    return out


def extract(judge: LocalJudge, r: dict[str, Any]) -> dict[str, Any]:
    """Base faithfulness (the shipped coefficients, lexical caps), the reader features and verdicts."""
    a = judge.analyse(r.get("question"), r["contexts"], r["answer"])
    if not a.evidence:
        return {"base": None}
    supports = [local_model.claim_support(e) for e in a.evidence]
    base = local_model.faithfulness(a.evidence, supports, a.shape, cap=False)  # capped after the stack
    # the claims the reader read (not a statement about the passages, a changed fact, a filler)
    read = [(e, rd) for e, rd in zip(a.evidence, a.readings, strict=True) if rd is not None]
    verdicts = [reader_verdicts.verdict(e.claim, rd, e.contradiction(), e.evidence) for e, rd in read]
    return {"base": base, "reader": reader_verdicts.answer_features(a.readings),
            "claims": sum(not e.about_sources for e in a.evidence),
            "lexical_contradicted": sum(e.contradiction() is not None for e in a.evidence),
            "reader_only_contradicted": sum(v.verdict == claim_verdicts.CONTRADICTED and e.contradiction() is None
                                            for v, (e, _) in zip(verdicts, read, strict=True))}


def extract_all(data_rows: list[dict[str, Any]], judge: LocalJudge) -> list[dict[str, Any]]:
    assert judge.reader is not None
    key = hashlib.sha256((file_sha256(judge.reader.path) + str(len(data_rows))).encode())
    for path in sorted((ROOT / "ragmon" / "scoring").rglob("*.py")):
        if path.name != "coefficients.py":
            key.update(path.read_bytes())
    cache = CACHE / f"reader_stack_{key.hexdigest()[:12]}.pkl"
    if cache.is_file():
        with cache.open("rb") as fh:
            cached: list[dict[str, Any]] = pickle.load(fh)
        return cached
    out, t0 = [], time.perf_counter()
    for i, r in enumerate(data_rows):
        out.append(extract(judge, r))
        if (i + 1) % 100 == 0:
            print(f"  {i + 1}/{len(data_rows)} ({time.perf_counter() - t0:.0f}s)", file=sys.stderr)
    CACHE.mkdir(exist_ok=True)
    with cache.open("wb") as fh:
        pickle.dump(out, fh)
    return out


def group_fold(r: dict[str, Any]) -> int:
    key = f"{SEED}:{r['set']}:{r['meta']['source_id']}"
    return int(hashlib.sha256(key.encode()).hexdigest()[:8], 16) % FOLDS


def balanced(sets: list[str], y: np.ndarray) -> np.ndarray:
    w = np.zeros(len(y))
    names = sorted(set(sets))
    for s in names:
        for lab in (0, 1):
            idx = [i for i, x in enumerate(sets) if x == s and y[i] == lab]
            if idx:
                w[idx] = 1.0 / (2 * len(names) * len(idx))
    return w * len(y)


def matrix(feats: list[dict[str, Any]]) -> np.ndarray:
    return np.array([[local_model.logit(f["base"]), *[f["reader"][k] for k in reader_verdicts.FEATURES]]
                     for f in feats], dtype=float)


def capped(score: np.ndarray, feats: list[dict[str, Any]], reader: bool = False) -> np.ndarray:
    """The judge's contradiction cap after the stack: the lexical contradictions (as shipped), and the
    reader's own with ``reader``."""
    out = []
    for s, f in zip(score, feats, strict=True):
        c = (f["lexical_contradicted"] if CAP_CONTRADICTIONS else 0) + (f["reader_only_contradicted"] if reader else 0)
        out.append(formulas.with_contradictions(float(s), c, f["claims"]) if c else float(s))
    return np.array(out)


def auc_ci(y: np.ndarray, s: np.ndarray, boot: int) -> dict[str, Any]:
    lo, hi = stats.bootstrap_ci(y, s, stats.roc_auc, n=boot, seed=SEED)
    return {"auc": round(stats.roc_auc(y, s), 4), "ci": [round(lo, 4), round(hi, 4)], "n": len(y),
            "unfaithful": int((y == 0).sum())}


def error_rates(flag: np.ndarray, conflict: np.ndarray) -> dict[str, float]:
    return {"sensitivity": round(float(flag[conflict].mean()), 4) if conflict.any() else float("nan"),
            "specificity": round(float(1 - flag[~conflict].mean()), 4), "conflicts": int(conflict.sum())}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--write-coefficients", action="store_true")
    ap.add_argument("--boot", type=int, default=1000)
    args = ap.parse_args(argv)
    data = benchdata()
    data_rows = rows(data)
    judge = LocalJudge(cache_size=0)
    feats_all = extract_all(data_rows, judge)
    wice = wice_rows(data)
    wice_feats = [f for f in extract_all(wice, judge) if f["base"] is not None] if wice else []
    keep = [i for i, f in enumerate(feats_all) if f["base"] is not None]
    rs, feats = [data_rows[i] for i in keep], [feats_all[i] for i in keep]
    y = np.array([r["labels"]["faithful"] for r in rs], dtype=float)
    sets = [r["set"] for r in rs]
    x = matrix(feats)
    fold = np.array([group_fold(r) for r in rs])
    oof = np.zeros(len(rs))
    for k in range(FOLDS):
        tr = fold != k
        w = balanced([sets[i] for i in np.flatnonzero(tr)], y[tr])
        oof[fold == k] = Logistic(NAMES).fit(x[tr], y[tr], l2=L2, weights=w).predict(x[fold == k])
    full = Logistic(NAMES).fit(x, y, l2=L2, weights=balanced(sets, y))
    base = capped(np.array([f["base"] for f in feats]), feats)
    variants = {"base (no reader)": base, "stacked, out of fold": capped(oof, feats),
                "stacked + reader caps, out of fold": capped(oof, feats, reader=True)}
    result: dict[str, Any] = {"rows": "RAGTruth dev halves, the reader's held-out fold (never trained on)",
                              "reader_sha256": file_sha256(judge.reader.path) if judge.reader else None,
                              "cpu": cpu_model(),  # int8 products differ by CPU (reader/seven_bit.py)
                              "weights": full.raw_weights(), "sets": {}}
    conflict = np.array([r["conflict"] for r in rs])
    for s in SETS:
        m = np.array([x == s for x in sets])
        entry: dict[str, Any] = {}
        for name, score in variants.items():
            faithful_vs = auc_ci(y[m], score[m], args.boot)
            cm = m & ((y == 1) | conflict)
            conflict_vs = auc_ci(y[cm], score[cm], args.boot)
            entry[name] = {"faithfulness_auc": faithful_vs, "conflict_vs_faithful_auc": conflict_vs}
        lexical = np.array([f["lexical_contradicted"] > 0 for f in feats])
        with_reader = lexical | np.array([f["reader_only_contradicted"] > 0 for f in feats])
        entry["contradiction_verdict"] = {"lexical": error_rates(lexical[m], conflict[m]),
                                          "lexical + reader": error_rates(with_reader[m], conflict[m])}
        result["sets"][s] = entry
    if wice_feats:
        wy = np.array([r["labels"]["faithful"] for r, f in zip(wice, extract_all(wice, judge), strict=True)
                       if f["base"] is not None], dtype=float)
        result["sets"]["wice (off-domain, never fitted)"] = {
            "base (no reader)": {"faithfulness_auc": auc_ci(
                wy, capped(np.array([f["base"] for f in wice_feats]), wice_feats), args.boot)},
            "stacked (all held-out rows' fit)": {"faithfulness_auc": auc_ci(
                wy, capped(full.predict(matrix(wice_feats)), wice_feats), args.boot)}}
    RESULT.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    for s, entry in result["sets"].items():
        if s.startswith("wice"):
            for name, e in entry.items():
                fa = e["faithfulness_auc"]
                print(f"{s} {name}: AUC {fa['auc']:.3f} [{fa['ci'][0]:.3f}, {fa['ci'][1]:.3f}] (n={fa['n']})")
            continue
        for name in variants:
            fa, co = entry[name]["faithfulness_auc"], entry[name]["conflict_vs_faithful_auc"]
            print(f"{s:9} {name:36} faithfulness AUC {fa['auc']:.3f} [{fa['ci'][0]:.3f}, {fa['ci'][1]:.3f}] "
                  f"(n={fa['n']})  conflict AUC {co['auc']:.3f} [{co['ci'][0]:.3f}, {co['ci'][1]:.3f}]")
        print(f"{s:9} contradiction verdict {entry['contradiction_verdict']}")
    print("weights", {k: round(v, 4) for k, v in full.raw_weights().items()})
    if args.write_coefficients:
        weights = full.raw_weights()
        renamed = {"bias": weights["bias"], "base": weights["base_logit"],
                   **{k: weights[k] for k in reader_verdicts.FEATURES}}
        COEF_FILE.write_text(with_weight_blocks(COEF_FILE.read_text(encoding="utf-8"), [("READER_WEIGHTS", renamed)]),
                             encoding="utf-8")
    _ = CAP_CONTRADICTIONS
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
