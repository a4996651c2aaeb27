"""How far the local judge's scores hold up across data sets: the cross-dataset table.

    python bench/judge_fidelity.py [--data DIR] [--no-write] [--bootstrap 500]   # data: make benchdata
    python bench/judge_fidelity.py --fit [--write-coefficients]   # refit across all dev sets

Every human-labelled dev set x metric (see ``bench/data/README.md``):

- faithfulness: RAGTruth QA, summaries and data-to-text (JSON contexts) — ``labels.faithful``;
  WiCE — a Wikipedia claim (the "answer") against the article its citation points to (the only
  context): supported (1) vs not supported (0), and supported vs the rest (partial counts as 0);
- answer relevancy: WikiQA sentences read as answers (human label: the sentence answers the
  question) and *constructed* negatives on RAGTruth QA — each real answer to its own question
  (positive) against an answer to another question, an echo of the question and a refusal;
- context relevance: WikiQA sentences, once as the trace's contexts (all of one article) and once
  each alone (a trace with a single context: the absolute scale).

Columns: n (failures), ROC AUC with a bootstrap 95% interval, balanced accuracy at the default
threshold 0.5 (interval), the best balanced accuracy over all thresholds (chosen in-sample: an
upper bound) and the gap between the two. Without ``--fit`` the *shipped* judge is measured; with
``--fit`` the faithfulness and answer-relevancy combinations are refitted across all sets with
5-fold cross-validation grouped by source (a source's rows never straddle folds) and every number
is out of fold; ``--write-coefficients`` then writes the model fitted on all rows.

Per-row features are cached in ``.cache/judge_fidelity_*.pkl`` (keyed by the scoring code's hash)
and embeddings in ``.cache/judge_fidelity_tokens.npz``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import pickle
import random
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from fit_local_judge import fold_of, persist_embeddings, with_weight_blocks  # noqa: E402

from bench._benchdata import require  # noqa: E402
from ragmon import semconv as sc  # noqa: E402
from ragmon.calibration import stats  # noqa: E402
from ragmon.calibration.fit import Logistic  # noqa: E402
from ragmon.scoring.local import LocalJudge  # noqa: E402
from ragmon.scoring.local import model as local_model  # noqa: E402
from ragmon.scoring.local._online import online_values  # noqa: E402

NEEDS = ("ragtruth_qa_dev.jsonl", "ragtruth_summary_dev.jsonl", "ragtruth_data2txt_dev.jsonl",
         "wikiqa_ranked_dev.jsonl", "retrieval/wice_claim_dev.jsonl")  # bench data (bench/_benchdata.py)
DOC = ROOT / "docs" / "judges.md"
START, END = "<!-- judge-fidelity:start -->", "<!-- judge-fidelity:end -->"
SEED = 20261201
CACHE = ROOT / ".cache"


@dataclass
class Case:
    """One judged trace and the human (or constructed) label of one metric."""

    set: str
    metric: str  # faithfulness | answer_relevancy | context_relevance
    group: str  # rows of one source share a fold
    question: str | None
    contexts: list[str]
    answer: str | None
    label: int
    kind: str = ""  # constructed negatives: other_answer | echo | refusal; WiCE: partial
    context_labels: list[int] = field(default_factory=list)


def _load(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


ECHO_TEMPLATES = (
    "{q}?",
    "You asked: {q}. That is a good question about {q}.",
    "The question is {q}. Here is what I can say about {q}.",
    "Regarding {q}: this is about {q}.",
)
REFUSAL_TEMPLATES = (
    "I'm sorry, but I don't know {q}.",
    "The provided context does not contain information about {q}.",
    "I cannot answer that question based on the available information.",
    "Unfortunately, there is no information in the passages about {q}.",
)


def load_cases(data: Path | None = None) -> list[Case]:
    """Every labelled case of the dev sets in ``data`` (default: the bench data folder)."""
    data = require(*NEEDS, directory=data)
    cases: list[Case] = []
    for task in ("qa", "summary", "data2txt"):
        for r in _load(data / f"ragtruth_{task}_dev.jsonl"):
            if r["labels"]["faithful"] is None or not r.get("answer"):
                continue
            cases.append(Case(f"ragtruth_{task}", "faithfulness", f"{task}:{r['meta']['source_id']}",
                              r.get("question"), list(r["contexts"]), r["answer"], int(r["labels"]["faithful"])))
    for k, r in enumerate(_load(data / "retrieval" / "wice_claim_dev.jsonl")):
        article = "\n".join(s for s in r["evidence"] if s.strip())
        group = str(r.get("meta", {}).get("id", k)).split("-")[0] if isinstance(r.get("meta"), dict) else str(k)
        cases.append(Case("wice", "faithfulness", f"wice:{group}", None, [article], r["claim"],
                          int(r["label"] == "supported"), kind="partial" if r["label"] == "partially_supported"
                          else ""))
    wikiqa = _load(data / "wikiqa_ranked_dev.jsonl")
    for r in wikiqa:
        labels = [int(v) for v in r["meta"]["context_labels"]]
        cases.append(Case("wikiqa", "context_relevance", f"wikiqa:{r['id']}", r["question"], list(r["contexts"]),
                          None, int(any(labels)), context_labels=labels))
        for sent, lab in zip(r["contexts"], labels, strict=True):
            cases.append(Case("wikiqa_single", "context_relevance", f"wikiqa:{r['id']}", r["question"], [sent],
                              None, lab, context_labels=[lab]))
            cases.append(Case("wikiqa_as_answer", "answer_relevancy", f"wikiqa:{r['id']}", r["question"], [],
                              sent, lab))
    # constructed answer-relevancy negatives on RAGTruth QA
    qa = _load(data / "ragtruth_qa_dev.jsonl")
    rng = random.Random(SEED)
    for i, r in enumerate(qa):
        group = f"qa:{r['meta']['source_id']}"
        q = r["question"].strip().rstrip("?")
        cases.append(Case("ragtruth_qa_relevancy", "answer_relevancy", group, r["question"], [], r["answer"], 1))
        if i % 3:  # one constructed negative of each kind per three answers: classes stay comparable
            continue
        other = qa[rng.randrange(len(qa))]
        while other["meta"]["source_id"] == r["meta"]["source_id"]:
            other = qa[rng.randrange(len(qa))]
        cases.append(Case("ragtruth_qa_relevancy", "answer_relevancy", group, r["question"], [], other["answer"], 0,
                          kind="other_answer"))
        cases.append(Case("ragtruth_qa_relevancy", "answer_relevancy", group, r["question"], [],
                          rng.choice(ECHO_TEMPLATES).format(q=q), 0, kind="echo"))
        cases.append(Case("ragtruth_qa_relevancy", "answer_relevancy", group, r["question"], [],
                          rng.choice(REFUSAL_TEMPLATES).format(q=q), 0, kind="refusal"))
    return cases


# --- extraction ----------------------------------------------------------------------------------
def code_hash() -> str:
    h = hashlib.sha256()
    for path in sorted((ROOT / "ragmon" / "scoring").rglob("*.py")):
        h.update(path.read_bytes())
    return h.hexdigest()[:12]


def extract(judge: LocalJudge, c: Case) -> dict[str, Any]:
    """The shipped judge's scores and the features the refit reads."""
    analysis = judge.analyse(c.question, c.contexts, c.answer)
    details: dict[str, Any] = {}
    values = online_values(analysis, details)
    out: dict[str, Any] = {"values": values, "context_relevance": details.get("context_relevance")}
    if c.metric == "faithfulness" and analysis.evidence:
        supports = [local_model.claim_support(e) for e in analysis.evidence]
        out["faith"] = local_model.answer_features(analysis.evidence, supports, analysis.shape)
        out["contradiction"] = any(e.contradiction() for e in analysis.evidence)
    if c.metric == "answer_relevancy":
        out["relevancy"] = details.get("answer_relevancy_features")
        out["abstained"] = bool(details.get("abstained"))
    return out


def extract_all(cases: Sequence[Case], tag: str) -> list[dict[str, Any]]:
    path = CACHE / f"judge_fidelity_{tag}_{code_hash()}.pkl"
    if path.is_file():
        with path.open("rb") as fh:
            cached: list[dict[str, Any]] = pickle.load(fh)
        if len(cached) == len(cases):
            return cached
    judge = LocalJudge(cache_size=0)
    save = persist_embeddings(judge, CACHE / "judge_fidelity_tokens.npz")
    out = []
    t0 = time.perf_counter()
    for i, c in enumerate(cases):
        out.append(extract(judge, c))
        if (i + 1) % 200 == 0:
            print(f"  {i + 1}/{len(cases)} ({time.perf_counter() - t0:.0f}s)", file=sys.stderr)
            if (i + 1) % 1000 == 0:
                save()
    save()
    CACHE.mkdir(exist_ok=True)
    with path.open("wb") as fh:
        pickle.dump(out, fh)
    return out


# --- statistics ----------------------------------------------------------------------------------
def row_stats(labels: Sequence[int], scores: Sequence[float], boot: int, threshold: float = 0.5) -> dict[str, Any]:
    y = np.asarray(labels, dtype=np.int64)
    s = np.asarray(scores, dtype=np.float64)

    def ba(yy: np.ndarray, ss: np.ndarray) -> float:
        return stats.balanced_accuracy(stats.confusion(yy, ss, threshold))

    auc_ci = stats.bootstrap_ci(y, s, stats.roc_auc, n=boot, seed=SEED)
    ba_ci = stats.bootstrap_ci(y, s, ba, n=boot, seed=SEED)
    best_t, best_ba = stats.best_threshold(y, s)
    return {
        "n": len(y), "failures": int((y == 0).sum()),
        "auc": stats.roc_auc(y, s), "auc_ci": list(auc_ci),
        "ba": ba(y, s), "ba_ci": list(ba_ci),
        "best_ba": best_ba, "best_threshold": best_t,
    }


def table_rows(cases: Sequence[Case], scores: Sequence[float | None], boot: int) -> dict[str, dict[str, Any]]:
    """(set, metric) -> statistics; ``scores`` aligned with ``cases`` (None = not scored)."""
    out: dict[str, dict[str, Any]] = {}
    keys: dict[str, list[int]] = {}
    for i, c in enumerate(cases):
        if c.set == "wikiqa":
            continue  # per-sentence entries are added by context_rows
        name = f"{c.set}|{c.metric}"
        if c.set == "wice" and c.kind == "partial":
            keys.setdefault("wice_vs_partial|faithfulness", []).append(i)
            continue
        keys.setdefault(name, []).append(i)
        if c.set == "wice":
            keys.setdefault("wice_vs_partial|faithfulness", []).append(i)
        if c.kind:
            keys.setdefault(f"{c.set}:{c.kind}|{c.metric}", []).append(i)
    for name, idx in keys.items():
        if name.startswith("ragtruth_qa_relevancy:"):  # each constructed kind against the real answers
            idx = idx + [i for i in keys["ragtruth_qa_relevancy|answer_relevancy"] if cases[i].label == 1]
        pairs = [(cases[i].label if cases[i].kind != "partial" else 0, scores[i]) for i in idx
                 if scores[i] is not None]
        if pairs:
            out[name] = row_stats([p[0] for p in pairs], [float(p[1]) for p in pairs if p[1] is not None], boot)
    return out


def context_rows(cases: Sequence[Case], rel: Sequence[Sequence[float] | None], boot: int) -> dict[str, dict[str, Any]]:
    labels, scores, lab_lists, score_lists = [], [], [], []
    for c, r in zip(cases, rel, strict=True):
        if c.set != "wikiqa" or r is None:
            continue
        labels += c.context_labels
        scores += list(r)
        lab_lists.append(c.context_labels)
        score_lists.append(list(r))
    entry = row_stats(labels, scores, boot)
    entry["map"] = stats.ranking_metrics(lab_lists, score_lists, k=5)["map"]
    return {"wikiqa_in_trace|context_relevance": entry}


# --- the refit -----------------------------------------------------------------------------------
FAITH_SETS = ("ragtruth_qa", "ragtruth_summary", "ragtruth_data2txt", "wice")


def balanced_weights(cases: Sequence[Case]) -> np.ndarray:
    """Each set weighs the same, and within a set both classes weigh the same: the fitted
    probability then means the same thing in every domain, and 0.5 is its balanced cut."""
    w = np.zeros(len(cases))
    sets = sorted({c.set for c in cases})
    for s in sets:
        for lab in (0, 1):
            idx = [i for i, c in enumerate(cases) if c.set == s and c.label == lab]
            if idx:
                w[idx] = 1.0 / (2 * len(sets) * len(idx))
    return w * len(cases)


def grouped_oof(
    cases: Sequence[Case], x: np.ndarray, names: Sequence[str], folds: int, l2: float = 1.0
) -> np.ndarray:
    y = np.array([c.label for c in cases], float)
    w = balanced_weights(cases)
    fold = np.array([fold_of(c.group, folds) for c in cases])
    pred = np.zeros(len(cases))
    for k in range(folds):
        tr, te = fold != k, fold == k
        model = Logistic(list(names)).fit(x[tr], y[tr], l2=l2, weights=w[tr] / w[tr].mean())
        pred[te] = model.predict(x[te])
    return pred


def fit_all(cases: Sequence[Case], x: np.ndarray, names: Sequence[str], l2: float = 1.0) -> Logistic:
    y = np.array([c.label for c in cases], float)
    w = balanced_weights(cases)
    return Logistic(list(names)).fit(x, y, l2=l2, weights=w / w.mean())


_ALL = [f for f in local_model.FAITHFULNESS_PROFILE_FEATURES
        if "*" not in f and f not in ("min_support", "mean_support", "share_unsupported")]
FAITH_CANDIDATES: dict[str, list[str]] = {
    "shipped features (RAGTruth QA selection)": ["log_novel_total", "min_coverage", "max_novel_run",
                                                 "min_rare_coverage", "log_soft_novel_total"],
    "+ trace shape (no question, JSON, context length, one claim)": [
        "log_novel_total", "min_coverage", "max_novel_run", "min_rare_coverage", "log_soft_novel_total",
        "no_question", "structured", "log_context_words", "single_claim"],
    "+ shares, cosine, contradictions": [
        "log_novel_total", "min_coverage", "max_novel_run", "min_rare_coverage", "log_soft_novel_total",
        "no_question", "structured", "log_context_words", "single_claim", "novel_share_total",
        "max_soft_novel_share", "mean_soft_novel_share", "max_novel_share", "min_cos", "mean_cos",
        "any_contradiction", "share_contradicted", "mean_coverage", "min_bigram", "log_answer_tokens"],
    "all features": _ALL,
    "all features + interactions with no-question / JSON flags": [
        *_ALL, *[f"{n}*{k}" for k in ("nq", "st") for n in _ALL if n not in local_model.SHAPE_FEATURES]],
}
L2_FAITH = 5.0  # ridge penalty on standardised features (1, 5, 20 compared: within 0.01 mean AUC)


def oof_model(
    cases: Sequence[Case], x: np.ndarray, names: Sequence[str], fit_mask: np.ndarray, folds: int = 5,
    l2: float = 1.0,
) -> tuple[np.ndarray, Logistic]:
    """Out-of-fold predictions for every case (folds by source group; fitted on ``fit_mask`` rows
    of the other folds, balanced per set and class), and the model fitted on all masked rows."""
    y = np.array([c.label for c in cases], float)
    fold = np.array([fold_of(c.group, folds) for c in cases])
    pred = np.zeros(len(cases))
    for k in range(folds):
        tr = (fold != k) & fit_mask
        sub = [cases[i] for i in np.flatnonzero(tr)]
        w = balanced_weights(sub)
        model = Logistic(list(names)).fit(x[tr], y[tr], l2=l2, weights=w)
        pred[fold == k] = model.predict(x[fold == k])
    sub = [cases[i] for i in np.flatnonzero(fit_mask)]
    full = Logistic(list(names)).fit(x[fit_mask], y[fit_mask], l2=l2, weights=balanced_weights(sub))
    return pred, full


def refit(cases: Sequence[Case], feats: Sequence[dict[str, Any]], boot: int) -> tuple[
        dict[str, dict[str, dict[str, Any]]], dict[str, Any]]:
    """Cross-validated refits; returns per candidate the table entries, and the chosen models."""
    tables: dict[str, dict[str, dict[str, Any]]] = {}
    chosen: dict[str, Any] = {}
    fi = [i for i, c in enumerate(cases) if c.metric == "faithfulness" and "faith" in feats[i]]
    fcases = [cases[i] for i in fi]
    mask = np.array([c.kind != "partial" for c in fcases])
    contra = np.array([bool(feats[i]["contradiction"]) for i in fi])
    best = (-1.0, "", np.zeros(0), None)
    for name, names in FAITH_CANDIDATES.items():
        x = np.array([[local_model.with_interactions(feats[i]["faith"])[n] for n in names] for i in fi], float)
        pred, model = oof_model(fcases, x, names, mask, l2=L2_FAITH)
        for cap in (False, True):
            scores = np.where(contra, np.minimum(pred, local_model.CONTRADICTION_CAP), pred) if cap else pred
            key = f"{name}{' + contradiction cap' if cap else ''}"
            tables[key] = table_rows(fcases, scores.tolist(), boot)
            mean_auc = float(np.mean([tables[key][f"{s}|faithfulness"]["auc"] for s in FAITH_SETS]))
            tables[key]["_mean_auc"] = {"auc": mean_auc}
            print(f"faithfulness {key}: mean AUC {mean_auc:.3f} " + " ".join(
                f"{s}={tables[key][f'{s}|faithfulness']['auc']:.3f}/{tables[key][f'{s}|faithfulness']['ba']:.3f}"
                for s in FAITH_SETS), file=sys.stderr)
            if cap and mean_auc > best[0]:  # what ships keeps the explicit-contradiction cap
                best = (mean_auc, key, scores, (model, cap))
    chosen["faithfulness"] = best[3]
    chosen["faithfulness_name"] = best[1]
    ri = [i for i, c in enumerate(cases) if c.metric == "answer_relevancy" and feats[i].get("relevancy")]
    rcases = [cases[i] for i in ri]
    names = list(local_model.RELEVANCY_FEATURES)
    x = np.array([[feats[i]["relevancy"][n] for n in names] for i in ri], float)
    abst = np.array([feats[i]["abstained"] for i in ri])
    # refusals are capped by rule; the model learns from the rest
    pred, model = oof_model(rcases, x, names, ~abst)
    scores = np.where(abst, np.minimum(pred, local_model.REFUSAL_CAP), pred)
    tables["answer relevancy refit"] = table_rows(rcases, scores.tolist(), boot)
    chosen["relevancy"] = model
    return tables, chosen


def domain_transfer(cases: Sequence[Case], feats: Sequence[dict[str, Any]], rows: int = 200, reps: int = 5
                    ) -> list[dict[str, Any]]:
    """Item 5's goal, measured: for each faithfulness set D, a "default" fitted on the *other*
    sets only (D is a new domain to it), then ``ragmon calibrate --fit``'s refit
    (``ragmon.calibration.fit``) on ``rows`` labelled rows of D (whole source groups), both scored
    on the rest of D. Repeated ``reps`` times with different draws."""
    from ragmon.calibration import fit as user_fit

    names = FAITH_CANDIDATES["all features + interactions with no-question / JSON flags"]
    fi = [i for i, c in enumerate(cases) if c.metric == "faithfulness" and "faith" in feats[i] and c.kind != "partial"]
    out = []
    for target in FAITH_SETS:
        other = [i for i in fi if cases[i].set != target]
        mine = [i for i in fi if cases[i].set == target]
        x_other = np.array([[local_model.with_interactions(feats[i]["faith"])[n] for n in names] for i in other])
        base = Logistic(list(names)).fit(x_other, np.array([cases[i].label for i in other], float), l2=L2_FAITH,
                                         weights=balanced_weights([cases[i] for i in other]))
        x_mine = np.array([[local_model.with_interactions(feats[i]["faith"])[n] for n in names] for i in mine])
        contra = np.array([feats[i]["contradiction"] for i in mine])
        default = base.predict(x_mine)
        default = np.where(contra, np.minimum(default, local_model.CONTRADICTION_CAP), default)
        y = np.array([cases[i].label for i in mine])
        groups = sorted({cases[i].group for i in mine})
        n_train = min(rows, len(mine) * 2 // 3)
        gains, bas_default, bas_refit = [], [], []
        for rep in range(reps):
            rng = random.Random(f"{SEED}:{target}:{rep}")
            rng.shuffle(groups)
            train_groups: set[str] = set()
            count = 0
            for g in groups:
                if count >= n_train:
                    break
                train_groups.add(g)
                count += sum(cases[i].group == g for i in mine)
            tr = np.array([cases[i].group in train_groups for i in mine])
            feats_fit = np.array([[math.log(max(min(d, 1 - 1e-6), 1e-6) / max(1 - d, 1e-6)) if n == "shipped_logit"
                                   else feats[i]["faith"][n] for n in user_fit.FAITH_FEATURES]
                                  for i, d in zip(mine, default, strict=True)])
            model = user_fit.Logistic(list(user_fit.FAITH_FEATURES)).fit(feats_fit[tr], y[tr].astype(float))
            refit = model.predict(feats_fit[~tr])
            ba_d = stats.balanced_accuracy(stats.confusion(y[~tr], default[~tr], 0.5))
            ba_r = stats.balanced_accuracy(stats.confusion(y[~tr], refit, 0.5))
            bas_default.append(ba_d)
            bas_refit.append(ba_r)
            gains.append(ba_r - ba_d)
        out.append({"set": target, "train_rows": n_train, "test_rows": int(len(mine) - n_train),
                    "default_auc": stats.roc_auc(y, default),
                    "default_ba": float(np.mean(bas_default)), "refit_ba": float(np.mean(bas_refit)),
                    "gain": float(np.mean(gains)), "gain_min": float(np.min(gains)), "gain_max": float(np.max(gains))})
        print(f"transfer {target}: {out[-1]}", file=sys.stderr)
    return out


COEF_FILE = ROOT / "ragmon" / "scoring" / "local" / "coefficients.py"


def write_coefficients(chosen: dict[str, Any]) -> None:
    import re

    text = COEF_FILE.read_text(encoding="utf-8")
    model, _cap = chosen["faithfulness"]

    text = with_weight_blocks(text, (("ANSWER_WEIGHTS", model.raw_weights()),
                                     ("RELEVANCY_WEIGHTS", chosen["relevancy"].raw_weights())))
    text = re.sub(r"FAITHFULNESS_THRESHOLD = [0-9.]+", "FAITHFULNESS_THRESHOLD = 0.5", text)
    COEF_FILE.write_text(text, encoding="utf-8")
    print(f"wrote {COEF_FILE}: faithfulness '{chosen['faithfulness_name']}'", file=sys.stderr)


# --- report ---------------------------------------------------------------------------------------
LABELS = {
    "ragtruth_qa|faithfulness": "RAGTruth QA",
    "ragtruth_summary|faithfulness": "RAGTruth summaries",
    "ragtruth_data2txt|faithfulness": "RAGTruth data-to-text (JSON)",
    "wice|faithfulness": "WiCE claims: supported vs not",
    "wice_vs_partial|faithfulness": "WiCE claims: supported vs rest",
    "ragtruth_qa_relevancy|answer_relevancy": "RAGTruth QA answers vs constructed negatives",
    "ragtruth_qa_relevancy:other_answer|answer_relevancy": "  of which: answer to another question",
    "ragtruth_qa_relevancy:echo|answer_relevancy": "  of which: question echo",
    "ragtruth_qa_relevancy:refusal|answer_relevancy": "  of which: refusal",
    "wikiqa_as_answer|answer_relevancy": "WikiQA sentences read as answers (human)",
    "wikiqa_in_trace|context_relevance": "WikiQA, all sentences of the article in one trace",
    "wikiqa_single|context_relevance": "WikiQA, each sentence alone (single context)",
}
ORDER = list(LABELS)


def fmt_table(results: dict[str, dict[str, Any]], title: str) -> list[str]:
    lines = [f"{title}", "",
             "| set | metric | n (fail) | AUC [95% CI] | bal. acc. @0.5 [95% CI] | best bal. acc. (thr.) | gap |",
             "| --- | --- | ---: | --- | --- | --- | ---: |"]
    for key in ORDER:
        if key not in results:
            continue
        m = results[key]
        metric = key.split("|")[1].replace("_", " ")
        lines.append(
            f"| {LABELS[key]} | {metric} | {m['n']} ({m['failures']}) | {m['auc']:.3f} "
            f"[{m['auc_ci'][0]:.2f}, {m['auc_ci'][1]:.2f}] | {m['ba']:.3f} [{m['ba_ci'][0]:.2f}, {m['ba_ci'][1]:.2f}] "
            f"| {m['best_ba']:.3f} ({m['best_threshold']:.2f}) | {m['best_ba'] - m['ba']:.3f} |"
        )
    return lines


def shipped_scores(cases: Sequence[Case], feats: Sequence[dict[str, Any]]) -> tuple[list[float | None], list[Any]]:
    metric_key = {"faithfulness": sc.METRIC_FAITHFULNESS, "answer_relevancy": sc.METRIC_ANSWER_RELEVANCY}
    scores: list[float | None] = []
    rel: list[Any] = []
    for c, f in zip(cases, feats, strict=True):
        if c.metric == "context_relevance":
            r = f["context_relevance"]
            scores.append(r[0] if (r and c.set == "wikiqa_single") else None)
            rel.append(r)
        else:
            scores.append(f["values"].get(metric_key[c.metric]))
            rel.append(None)
    return scores, rel


def measure(cases: Sequence[Case], feats: Sequence[dict[str, Any]], boot: int) -> dict[str, dict[str, Any]]:
    scores, rel = shipped_scores(cases, feats)
    results = table_rows(cases, scores, boot)
    results.update(context_rows(cases, rel, boot))
    return results


def write_doc(lines: Sequence[str]) -> None:
    text = DOC.read_text(encoding="utf-8")
    block = "\n".join([START, *lines, END])
    if START in text and END in text:
        head, rest = text.split(START, 1)
        text = head + block + rest.split(END, 1)[1]
    else:
        text = text.rstrip("\n") + "\n\n" + block + "\n"
    DOC.write_text(text, encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", type=Path, help="bench data folder (default: $RAGMON_BENCHDATA, else .cache/benchdata)")
    ap.add_argument("--bootstrap", type=int, default=500)
    ap.add_argument("--no-write", action="store_true", help="do not update docs/judges.md")
    ap.add_argument("--out", type=Path, default=CACHE / "judge_fidelity.json")
    ap.add_argument("--fit", action="store_true", help="refit across all dev sets (grouped 5-fold CV)")
    ap.add_argument("--write-coefficients", action="store_true", help="with --fit: write the refitted models")
    ap.add_argument("--transfer", action="store_true", help="leave-one-domain-out default vs a 200-row refit")
    ap.add_argument("--limit", type=int, default=0, help="only every N-th case (a quick look; 0: all)")
    args = ap.parse_args(argv)
    cases = load_cases(args.data)
    if args.limit:
        cases = cases[:: args.limit]
    t0 = time.perf_counter()
    feats = extract_all(cases, "all" if not args.limit else f"every{args.limit}")
    print(f"{len(cases)} cases analysed in {time.perf_counter() - t0:.0f}s", file=sys.stderr)
    if args.transfer:
        transfer = domain_transfer(cases, feats)
        print("| set (new domain) | labelled rows used | default bal. acc. | refit bal. acc. "
              "| gain (min, max over 5 draws) |")
        print("| --- | ---: | ---: | ---: | --- |")
        for t in transfer:
            print(f"| {t['set']} | {t['train_rows']} | {t['default_ba']:.3f} | {t['refit_ba']:.3f} | "
                  f"{t['gain']:+.3f} ({t['gain_min']:+.3f}, {t['gain_max']:+.3f}) |")
        return 0
    if args.fit:
        tables, chosen = refit(cases, feats, args.bootstrap)
        for name, table in tables.items():
            print("\n".join(fmt_table(table, f"\nOUT OF FOLD: {name}")))
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.with_suffix(".fit.json").write_text(json.dumps(tables, indent=2, default=float))
        if args.write_coefficients:
            write_coefficients(chosen)
        return 0
    results = measure(cases, feats, args.bootstrap)
    lines = fmt_table(results, "Shipped local judge on the dev sets (`python bench/judge_fidelity.py`). **In-sample** "
                      "for faithfulness, answer relevancy and context relevance (the shipped models were fitted on "
                      "these rows; the out-of-fold numbers are the tables above):")
    print("\n".join(lines))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2, default=float))
    if not args.no_write and not args.limit:
        write_doc(lines)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
