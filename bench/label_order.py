"""Do 100 labels chosen by ``ragmon dataset label``'s order reach what 200 random ones do? And what
``ragmon calibrate --fit`` gains for answer relevance and context relevance, held out.

    python bench/label_order.py [--data DIR] [--splits 12] [--draws 4] [--json out.json]   # data: make benchdata

Held out throughout: each data set's source groups (``meta.source_id``; WikiQA: the question) are cut
in two halves at random; labels are drawn from one half (the pool), the refit is measured on the
other, then the halves swap; ``--splits`` cuts, both directions, means reported. Never fit and
measure on the same rows.

- faithfulness (RAGTruth QA, summaries, data-to-text): the pool's rows are ordered the way ``ragmon
  dataset label --mode judge`` offers them (``calibration.label_order.fit_order``: nearest the threshold
  first, the generator standing in for the pipeline, generators taking turns) and the first 50, 100,
  200 labelled; against 50, 100 and 200 drawn at random (``--draws`` each). Also: verdicts taking
  turns too (the shipped verdict, faithfulness < 0.5, as a second stratum: not chosen), and the
  whole pool.
- answer relevancy: WikiQA sentences read as answers (label: the sentence answers the question).
- context relevance: WikiQA sentences as the contexts of one trace (per-context labels), and HotpotQA's
  ten paragraphs per question (2 gold, 8 distractors; a domain the context model never saw); the
  two refits ``calibration.fit.fit_context`` chooses between: the threshold (AUC does not move,
  balanced accuracy does) and weights over the shipped logit and the context features.

Caveat: the shipped coefficients were fitted on these dev sets (docs/judges.md), so the *default*
column is in-sample for the shipped model and flatters it; the refits are all held out.
Features are cached in ``.cache/label_order_*.pkl``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import pickle
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench._benchdata import require  # noqa: E402
from ragmon.calibration import stats  # noqa: E402
from ragmon.calibration.dataset import LabelledRow, read_rows  # noqa: E402
from ragmon.calibration.fit import (  # noqa: E402
    Logistic,
    RowFeatures,
    _context_threshold,
    _shift,
    predict_rows,
    row_features,
    train_model,
)
from ragmon.calibration.label_order import fit_order  # noqa: E402
from ragmon.scoring.local import LocalJudge  # noqa: E402
from ragmon.scoring.local import model as local_model  # noqa: E402
from ragmon.scoring.local._profile import JUDGE_VERSION  # noqa: E402

CACHE = ROOT / ".cache"
FAITH_SETS = ("ragtruth_qa", "ragtruth_summary", "ragtruth_data2txt")
NEEDS = (*(f"{name}_dev.jsonl" for name in FAITH_SETS), "wikiqa_ranked_dev.jsonl",
         "retrieval/hotpotqa_dev_103.json")  # bench data (bench/_benchdata.py)


def features(judge: LocalJudge, path: Path, tag: str) -> tuple[list[RowFeatures], list[dict[str, Any]]]:
    metas = [json.loads(line).get("meta") or {} for line in path.read_text(encoding="utf-8").splitlines()
             if line.strip()]
    cache = CACHE / f"label_order_{tag}_{JUDGE_VERSION}.pkl"
    if cache.exists():
        return pickle.loads(cache.read_bytes()), metas
    rows = [r for r in read_rows(path) if isinstance(r, LabelledRow)]
    assert len(rows) == len(metas), f"{path}: malformed rows"
    feats = [row_features(judge, r) for r in rows]
    CACHE.mkdir(exist_ok=True)
    cache.write_bytes(pickle.dumps(feats))
    return feats, metas


def halves(groups: Sequence[str], seed: int) -> np.ndarray:
    return np.array([hashlib.sha256(f"{seed}:{g}".encode()).digest()[0] % 2 for g in groups])


def score(metric: str, model_rows: list[RowFeatures], test: list[RowFeatures]) -> tuple[float, float] | None:
    y = np.array([(r.faithful if metric == "faithfulness" else r.relevant) for r in model_rows])
    if (y == 0).sum() < 2 or (y == 1).sum() < 2:
        return None
    pred = predict_rows(train_model(metric, model_rows), metric, test)
    yt = np.array([(r.faithful if metric == "faithfulness" else r.relevant) for r in test])
    ok = ~np.isnan(pred)
    return stats.balanced_accuracy(stats.confusion(yt[ok], pred[ok], 0.5)), stats.roc_auc(yt[ok], pred[ok])


def default_score(metric: str, test: list[RowFeatures]) -> tuple[float, float]:
    d = np.array([(r.faith_default if metric == "faithfulness" else r.relevancy_default) for r in test], float)
    yt = np.array([(r.faithful if metric == "faithfulness" else r.relevant) for r in test])
    return stats.balanced_accuracy(stats.confusion(yt, d, 0.5)), stats.roc_auc(yt, d)


def mean(pairs: list[tuple[float, float] | None]) -> tuple[float, float, int]:
    good = [p for p in pairs if p is not None]
    return float(np.mean([p[0] for p in good])), float(np.mean([p[1] for p in good])), len(good)


def label_order(pool: list[tuple[RowFeatures, dict[str, Any]]], verdicts: bool = False) -> list[RowFeatures]:
    """The pool as ``ragmon dataset label --mode judge`` offers it: the generator stands in for the
    pipeline; ``verdicts``: the shipped verdict takes turns too (the variant not chosen)."""
    indexed = list(enumerate(pool))
    ranked = fit_order(
        indexed, scores_of=lambda c: {"faithfulness": c[1][0].faith_default},
        stratum_of=lambda c: (str(c[1][1].get("generator")), verdicts and c[1][0].faith_default < 0.5),
        id_of=lambda c: f"{c[1][0].group}:{c[0]}")
    return [c[1][0] for c in ranked]


def faithfulness(feats: list[RowFeatures], metas: list[dict[str, Any]], splits: int, draws: int) -> dict[str, Any]:
    use = [(r, m) for r, m in zip(feats, metas, strict=True) if r.faithful is not None and r.faith is not None]
    results: dict[str, list[tuple[float, float] | None]] = {k: [] for k in (
        "default", "pool", "random50", "random100", "random200", "ordered50", "ordered100", "ordered200",
        "ordered_verdicts100")}
    pool_sizes = []
    for seed in range(splits):
        side = halves([r.group for r, _ in use], seed)
        for a in (0, 1):
            pool = [(r, m) for (r, m), s in zip(use, side, strict=True) if s == a]
            test = [r for (r, _), s in zip(use, side, strict=True) if s != a]
            pool_sizes.append(len(pool))
            results["default"].append(default_score("faithfulness", test))
            results["pool"].append(score("faithfulness", [r for r, _ in pool], test))
            rng = np.random.default_rng(1000 * seed + a)
            for n in (50, 100, 200):
                for _ in range(draws):
                    pick = rng.choice(len(pool), min(n, len(pool)), replace=False)
                    results[f"random{n}"].append(score("faithfulness", [pool[i][0] for i in pick], test))
            ordered = label_order(pool)
            for n in (50, 100, 200):
                results[f"ordered{n}"].append(score("faithfulness", ordered[:n], test))
            results["ordered_verdicts100"].append(score("faithfulness", label_order(pool, verdicts=True)[:100], test))
    out: dict[str, Any] = {k: dict(zip(("balanced_accuracy", "auc", "fits"), mean(v), strict=True))
                           for k, v in results.items()}
    out["rows"] = len(use)
    out["pool_rows_mean"] = float(np.mean(pool_sizes))
    return out


def answer_relevancy(feats: list[RowFeatures], splits: int, draws: int) -> dict[str, Any]:
    use = [r for r in feats if r.relevant is not None and r.relevancy is not None]
    res: dict[str, list[tuple[float, float] | None]] = {"default": [], "pool": [], "random200": []}
    for seed in range(splits):
        side = halves([r.group for r in use], seed)
        for a in (0, 1):
            pool = [r for r, s in zip(use, side, strict=True) if s == a]
            test = [r for r, s in zip(use, side, strict=True) if s != a]
            res["default"].append(default_score("answer_relevancy", test))
            res["pool"].append(score("answer_relevancy", pool, test))
            rng = np.random.default_rng(seed * 10 + a)
            for _ in range(draws):
                pick = rng.choice(len(pool), min(200, len(pool)), replace=False)
                res["random200"].append(score("answer_relevancy", [pool[i] for i in pick], test))
    out = {k: dict(zip(("balanced_accuracy", "auc", "fits"), mean(v), strict=True)) for k, v in res.items()}
    out["rows"] = len(use)
    return out


def context_relevance(feats: list[RowFeatures], splits: int) -> dict[str, Any]:
    use = [r for r in feats if r.context_labels is not None and r.context_raw is not None]
    # the two refits --fit chooses between, from the whole pool and from only 20 of its rows
    res: dict[str, list[tuple[float, float] | None]] = {k: [] for k in (
        "default", "threshold", "threshold_rows20", "weights", "weights_rows20")}
    names = list(local_model.CONTEXT_PROFILE_FEATURES)
    thresholds = []

    def flat(rows: list[RowFeatures], what: str) -> np.ndarray:
        return np.array([v for r in rows for v in getattr(r, what)], dtype=float)

    for seed in range(splits):
        side = halves([r.group for r in use], seed)
        for a in (0, 1):
            pool = [r for r, s in zip(use, side, strict=True) if s == a]
            test = [r for r, s in zip(use, side, strict=True) if s != a]
            yt, raw_t = flat(test, "context_labels"), flat(test, "context_raw")
            d = flat(test, "context_default")
            res["default"].append((stats.balanced_accuracy(stats.confusion(yt, d, 0.5)), stats.roc_auc(yt, d)))
            for key, rows in (("threshold", pool), ("threshold_rows20", pool[:20])):
                t = _context_threshold(flat(rows, "context_labels"), flat(rows, "context_raw"))
                thresholds.append(t)
                p = _shift(raw_t, t)
                res[key].append((stats.balanced_accuracy(stats.confusion(yt, p, 0.5)), stats.roc_auc(yt, p)))
            for key, rows in (("weights", pool), ("weights_rows20", pool[:20])):
                x = np.array([[f[n] for n in names] for r in rows for f in r.context_x or ()])
                model = Logistic(names).fit(x, flat(rows, "context_labels"))
                p = model.predict(np.array([[f[n] for n in names] for r in test for f in r.context_x or ()]))
                res[key].append((stats.balanced_accuracy(stats.confusion(yt, p, 0.5)), stats.roc_auc(yt, p)))
    out = {k: dict(zip(("balanced_accuracy", "auc", "fits"), mean(v), strict=True)) for k, v in res.items()}
    out["rows"] = len(use)
    out["contexts"] = int(sum(len(r.context_labels or ()) for r in use))
    return out


def wikiqa_as_answers(data: Path, tmp: Path) -> Path:
    """WikiQA sentences read as answers: one row per sentence, the human label as answer_relevant."""
    out = tmp / "wikiqa_as_answer.jsonl"
    with out.open("w", encoding="utf-8") as fh:
        for line in (data / "wikiqa_ranked_dev.jsonl").read_text(encoding="utf-8").splitlines():
            r = json.loads(line)
            for i, (sent, lab) in enumerate(zip(r["contexts"], r["meta"]["context_labels"], strict=True)):
                fh.write(json.dumps({"id": f"{r['id']}-{i}", "question": r["question"], "contexts": [],
                                     "answer": sent, "labels": {"answer_relevant": lab},
                                     "meta": {"source_id": r["id"]}}) + "\n")
    return out


def hotpotqa_contexts(data: Path, tmp: Path) -> Path:
    """HotpotQA (distractor setting) as context-relevance rows: the ten paragraphs of a question are its
    contexts, the two gold paragraphs (supporting_facts) relevant, the eight distractors not — a
    domain the context model was not fitted on (it was fitted on WikiQA)."""
    out = tmp / "hotpotqa_contexts.jsonl"
    items = json.loads((data / "retrieval" / "hotpotqa_dev_103.json").read_text(encoding="utf-8"))
    with out.open("w", encoding="utf-8") as fh:
        for item in items:
            gold = {title for title, _ in item["supporting_facts"]}
            contexts = [f"{title}: " + "".join(sentences).strip() for title, sentences in item["context"]]
            labels = [int(title in gold) for title, _ in item["context"]]
            fh.write(json.dumps({"id": item["_id"], "question": item["question"], "contexts": contexts,
                                 "answer": None, "labels": {"context_relevant": int(any(labels))},
                                 "meta": {"context_labels": labels, "source_id": item["_id"]}}) + "\n")
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--data", type=Path,
                        help="bench data folder (default: $RAGMON_BENCHDATA, else .cache/benchdata)")
    parser.add_argument("--splits", type=int, default=12)
    parser.add_argument("--draws", type=int, default=4)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args(argv)
    args.data = require(*NEEDS, directory=args.data)
    judge = LocalJudge()
    report: dict[str, Any] = {}
    for name in FAITH_SETS:
        feats, metas = features(judge, args.data / f"{name}_dev.jsonl", name)
        report[name] = faithfulness(feats, metas, args.splits, args.draws)
    with tempfile.TemporaryDirectory() as tmp:
        feats, _ = features(judge, wikiqa_as_answers(args.data, Path(tmp)), "wikiqa_as_answer")
    report["wikiqa_as_answer|answer_relevancy"] = answer_relevancy(feats, args.splits, args.draws)
    feats, _ = features(judge, args.data / "wikiqa_ranked_dev.jsonl", "wikiqa")
    report["wikiqa|context_relevance"] = context_relevance(feats, args.splits)
    with tempfile.TemporaryDirectory() as tmp:
        feats, _ = features(judge, hotpotqa_contexts(args.data, Path(tmp)), "hotpotqa_contexts")
    report["hotpotqa|context_relevance"] = context_relevance(feats, args.splits)
    print(json.dumps(report, indent=1))
    if args.json:
        args.json.write_text(json.dumps(report, indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
