"""``ragmon calibrate FILE --fit PROFILE.json``: fit the local judge to a user's labelled rows.

For faithfulness and answer relevancy a logistic model is fitted over the shipped model's own
score (its logit) plus the interpretable features it is built from, with an L2 penalty and
classes weighted equally (so 0.5 stays the balanced cut): with few labels it stays close to a
recalibration of the default, with more it re-weights the evidence. Everything reported is out
of fold (5 folds grouped by ``meta.source_id`` when rows have one): balanced accuracy and AUC of
the default against the refit, their difference with a paired bootstrap interval (the project's one
bootstrap, ``stats.bootstrap_ci``), and a learning curve (the refit trained on 25, 50, 100, ... random
rows of each training part, and on the first 25, 50, 100, ... in the order ``ragmon dataset label
--mode judge`` offers them). Pure numpy; the rows' features come from the judge passed in.

Context relevance (rows with ``meta.context_labels``, per context): either its threshold — the raw
relevance probability above which a context counts as relevant, chosen for the best balanced
accuracy on the training folds (the ranking, hence AUC and MAP, stays the shipped one) — or a
logistic model over the shipped logit and the context features (which can fix the ranking), the
one with the better out-of-fold balanced accuracy. Out of fold like the others, grouped by row.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..scoring.local import JudgeProfile, LocalJudge, online_values
from ..scoring.local import coefficients as coef
from ..scoring.local import model as local_model
from ..types import ScoreDetails
from . import stats
from .dataset import LabelledRow
from .label_order import fit_order

MIN_ROWS = 40  # labelled rows per metric
MIN_PER_CLASS = 10  # of each class
FOLDS = 5
L2 = 4.0  # on standardised features: strong, the fit starts from the shipped score
CURVE_SIZES = (25, 50, 100, 200, 400, 800)

FAITH_FEATURES = ["shipped_logit", "log_novel_total", "min_coverage", "max_novel_run", "min_rare_coverage",
                  "log_soft_novel_total", "max_soft_novel_share", "min_cos", "mean_coverage", "any_contradiction"]
RELEVANCY_FEATURES = ["shipped_logit", *local_model.RELEVANCY_FEATURES]


class TooFewLabels(ValueError):
    """Not enough labelled rows to fit anything (the message says how many are needed)."""


@dataclass
class RowFeatures:
    group: str
    pipeline: str | None = None
    faithful: int | None = None
    relevant: int | None = None
    faith: dict[str, float] | None = None
    faith_default: float | None = None
    relevancy: dict[str, float] | None = None
    relevancy_default: float | None = None
    abstained: bool = False
    context_labels: tuple[int, ...] | None = None
    context_raw: list[float] | None = None  # raw P(relevant) per context (no threshold shift)
    context_default: list[float] | None = None  # the shipped relevance per context
    context_x: list[dict[str, float]] | None = None  # per context: the shipped logit and the features


def label_of(metric: str, r: RowFeatures) -> int | None:
    return r.faithful if metric == "faithfulness" else r.relevant


def feats_of(metric: str, r: RowFeatures) -> dict[str, float] | None:
    return r.faith if metric == "faithfulness" else r.relevancy


def default_of(metric: str, r: RowFeatures) -> float | None:
    return r.faith_default if metric == "faithfulness" else r.relevancy_default


def _logit(p: float) -> float:
    p = min(max(p, 1e-6), 1 - 1e-6)
    return math.log(p / (1 - p))


def row_features(judge: LocalJudge, row: LabelledRow) -> RowFeatures:
    """The shipped scores of one row and the features a refit reads."""
    analysis = judge.analyse(row.question, row.contexts, row.answer)
    details: ScoreDetails = {}
    values = online_values(analysis, details)  # the shipped default, whatever profile the judge has
    out = RowFeatures(group=row.group or row.id, pipeline=row.pipeline, faithful=row.labels.get("faithful"),
                      relevant=row.labels.get("answer_relevant"))
    faith = values.get("faithfulness")
    if faith is not None and analysis.evidence and analysis.n_contexts:
        supports = [local_model.claim_support(e) for e in analysis.evidence]
        out.faith = {**local_model.answer_features(analysis.evidence, supports, analysis.shape),
                     "shipped_logit": _logit(faith)}
        out.faith_default = faith
    rel = values.get("answer_relevancy")
    relevancy_features = details.get("answer_relevancy_features")
    if rel is not None and relevancy_features:
        out.relevancy = {**relevancy_features, "shipped_logit": _logit(rel)}
        out.relevancy_default = rel
        out.abstained = details.get("abstained", False)
    if row.context_labels is not None and analysis.context_features:
        out.context_labels = row.context_labels
        out.context_raw = [local_model.context_relevance(f, 0.5) for f in analysis.context_features]
        out.context_default = list(details.get("context_relevance", []))
        out.context_x = [{**{n: float(f[n]) for n in local_model.CONTEXT_FEATURES}, "shipped_logit": _logit(p)}
                         for f, p in zip(analysis.context_features, out.context_raw, strict=True)]
    return out


# --- the one logistic regression (Newton steps, L2, sample weights): calibrate --fit and the benches --
@dataclass
class Logistic:
    names: list[str]
    mean: np.ndarray = field(default_factory=lambda: np.zeros(0))
    std: np.ndarray = field(default_factory=lambda: np.ones(0))
    w: np.ndarray = field(default_factory=lambda: np.zeros(0))
    b: float = 0.0

    def fit(self, x: np.ndarray, y: np.ndarray, l2: float = L2, weights: np.ndarray | None = None) -> Logistic:
        """``weights``: one per row; by default classes weighted equally (a balanced fit: 0.5 is the
        balanced-accuracy cut). The benches that fit the shipped coefficients pass their own."""
        if weights is None:
            n_pos, n_neg = float((y == 1).sum()), float((y == 0).sum())
            sw = np.where(y == 1, len(y) / (2 * max(n_pos, 1)), len(y) / (2 * max(n_neg, 1)))
        else:
            sw = np.asarray(weights, dtype=float)
        self.mean = x.mean(axis=0)
        self.std = x.std(axis=0)
        self.std[self.std < 1e-9] = 1.0
        a = np.c_[(x - self.mean) / self.std, np.ones(len(y))]
        beta = np.zeros(a.shape[1])
        reg = np.eye(a.shape[1]) * l2
        reg[-1, -1] = 0.0
        for _ in range(50):
            p = 1.0 / (1.0 + np.exp(-np.clip(a @ beta, -30, 30)))
            grad = a.T @ (sw * (p - y)) + reg @ beta
            hess = (a * (sw * p * (1 - p))[:, None]).T @ a + reg
            step = np.linalg.solve(hess, grad)
            beta -= step
            if np.abs(step).max() < 1e-8:
                break
        self.w, self.b = beta[:-1], float(beta[-1])
        return self

    def predict(self, x: np.ndarray) -> np.ndarray:
        z = ((x - self.mean) / self.std) @ self.w + self.b
        out: np.ndarray = 1.0 / (1.0 + np.exp(-np.clip(z, -30, 30)))
        return out

    def raw_weights(self) -> dict[str, float]:
        w = self.w / self.std
        out = {"bias": self.b - float((self.w * self.mean / self.std).sum())}
        out.update({n: float(v) for n, v in zip(self.names, w, strict=True)})
        return out


def _fold(group: str, seed: int) -> int:
    return int.from_bytes(hashlib.sha256(f"{seed}:{group}".encode()).digest()[:4], "big") % FOLDS


def _ba(y: np.ndarray, s: np.ndarray) -> float:
    return stats.balanced_accuracy(stats.confusion(y, s, 0.5))


def _oof_ba(y: np.ndarray, pred: np.ndarray) -> float:
    """Balanced accuracy of the rows that have an out-of-fold prediction (NaN unless both classes do)."""
    good = ~np.isnan(pred)
    return _ba(y[good], pred[good]) if good.sum() and len(set(y[good])) == 2 else math.nan


def _learning_curve(y: np.ndarray, n_rows: int, oof: Callable[[int | None, int], np.ndarray],
                    in_label_order: Callable[[int], np.ndarray] | None = None) -> list[dict[str, float]]:
    """Out-of-fold balanced accuracy of the refit trained on ``CURVE_SIZES`` random rows of each
    training part (the mean of 3 draws: ``oof(size, draw)``) and on all of it (``oof(None, 0)``);
    with ``in_label_order``, also trained on the first ``size`` rows in label order."""
    curve = []
    train_size = int(n_rows * (FOLDS - 1) / FOLDS)
    for size in [s for s in CURVE_SIZES if s < train_size] + [train_size]:
        part = size < train_size
        draws = [_oof_ba(y, oof(size if part else None, rep)) for rep in range(3 if part else 1)]
        bas = [ba for ba in draws if not math.isnan(ba)]
        if not bas:
            continue
        point = {"train_rows": size, "balanced_accuracy": float(np.mean(bas))}
        if part and in_label_order is not None and not math.isnan(ba := _oof_ba(y, in_label_order(size))):
            point["label_order_balanced_accuracy"] = ba
        curve.append(point)
    return curve


@dataclass
class MetricFit:
    metric: str
    n: int
    failures: int
    default: dict[str, float]
    refit: dict[str, float]
    gain_ci95: tuple[float, float]
    curve: list[dict[str, float]]
    weights: dict[str, float]  # raw weights over the judge's features (shipped_logit expanded)
    threshold: float | None = None  # context relevance: the fitted raw-probability cut ...
    note: str = ""  # ... or weights: which, and why


def _expand(raw: dict[str, float], shipped: dict[str, float], shipped_shift: float) -> dict[str, float]:
    """Weights over the judge's own features: the shipped logit is itself linear in them
    (``shipped_shift`` = the logit of the shipped threshold, subtracted at runtime)."""
    a = raw.pop("shipped_logit", 0.0)
    out = dict(raw)
    for k, v in shipped.items():
        out[k] = out.get(k, 0.0) + a * v
    out["bias"] = out.get("bias", 0.0) - a * shipped_shift
    return out


def fit_metric(
    metric: str, rows: Sequence[RowFeatures], names: Sequence[str], boot: int, seed: int,
    shipped: dict[str, float], shipped_shift: float,
) -> MetricFit:
    use = [r for r in rows if label_of(metric, r) is not None and feats_of(metric, r) is not None]
    y = np.array([label_of(metric, r) for r in use], dtype=np.int64)
    n_fail, n_good = int((y == 0).sum()), int((y == 1).sum())
    if len(use) < MIN_ROWS or min(n_fail, n_good) < MIN_PER_CLASS:
        raise TooFewLabels(
            f"{metric}: {len(use)} labelled rows ({n_fail} failures, {n_good} passes); --fit needs at least "
            f"{MIN_ROWS} rows with {MIN_PER_CLASS} of each class"
        )
    x = np.array([[(feats_of(metric, r) or {})[n] for n in names] for r in use], dtype=np.float64)
    default = np.array([default_of(metric, r) for r in use], float)
    capped = np.array([metric == "answer_relevancy" and r.abstained for r in use])
    fold = np.array([_fold(r.group, seed) for r in use])
    # each row's place in the order `ragmon dataset label --mode judge` offers traces in, by the
    # shipped score: the curve's "label order" column trains on the first n of each training part
    place = np.empty(len(use), dtype=np.int64)
    place[fit_order(list(range(len(use))), scores_of=lambda i: {metric: default[i]},
                    stratum_of=lambda i: use[i].pipeline or "", id_of=lambda i: f"{use[i].group}:{i}")] = \
        np.arange(len(use))

    def oof(limit: int | None, rep: int, ordered: bool = False) -> np.ndarray:
        pred = np.full(len(use), np.nan)
        for k in range(FOLDS):
            train = np.flatnonzero((fold != k) & ~capped)
            if limit is not None:
                if limit > len(train):
                    return pred
                train = (train[np.argsort(place[train], kind="stable")][:limit] if ordered else
                         np.random.default_rng(seed + 97 * rep + k).choice(train, limit, replace=False))
            if (y[train] == 0).sum() < 2 or (y[train] == 1).sum() < 2:
                continue
            model = Logistic(list(names)).fit(x[train], y[train].astype(float))
            pred[fold == k] = model.predict(x[fold == k])
        return np.where(capped, np.minimum(pred, local_model.REFUSAL_CAP), pred)

    refit = oof(None, 0)
    ok = ~np.isnan(refit)
    curve = _learning_curve(y, len(use), oof, lambda size: oof(size, 0, ordered=True))
    model = train_model(metric, use, names)
    gain_ci = stats.bootstrap_ci(y[ok], refit[ok], _ba, n=boot, seed=seed, baseline=default[ok])

    def summary(s: np.ndarray) -> dict[str, float]:
        # sensitivity / specificity at the agent's threshold (0.5), out of fold: what the agent exports
        # for the drop alerts' correction (scoring/error_rates.py, meta.error_rates of the profile)
        return {"auc": stats.roc_auc(y[ok], s[ok]), "balanced_accuracy": _ba(y[ok], s[ok]),
                "best_balanced_accuracy": stats.best_threshold(y[ok], s[ok])[1],
                "sensitivity": float(np.mean(s[ok][y[ok] == 0] < 0.5)),
                "specificity": float(np.mean(s[ok][y[ok] == 1] >= 0.5)),
                # mean score of passing minus failing answers: turns a mean drop into failing-share points
                "score_gap": float(np.mean(s[ok][y[ok] == 1]) - np.mean(s[ok][y[ok] == 0]))}

    return MetricFit(metric, len(use), n_fail, summary(default), summary(refit), gain_ci, curve,
                     _expand(model.raw_weights(), shipped, shipped_shift))


def train_model(metric: str, rows: Sequence[RowFeatures], names: Sequence[str] | None = None) -> Logistic:
    """The refit of ``metric`` on the labelled ``rows`` (refusals left out of answer relevancy: their
    score is capped whatever the model says)."""
    names = list(names or (FAITH_FEATURES if metric == "faithfulness" else RELEVANCY_FEATURES))
    use = [r for r in rows if label_of(metric, r) is not None and feats_of(metric, r) is not None
           and not (metric == "answer_relevancy" and r.abstained)]
    x = np.array([[(feats_of(metric, r) or {})[n] for n in names] for r in use], dtype=np.float64)
    y = np.array([label_of(metric, r) for r in use], dtype=np.float64)
    return Logistic(names).fit(x, y)


def predict_rows(model: Logistic, metric: str, rows: Sequence[RowFeatures]) -> np.ndarray:
    """The refit's scores of ``rows`` (rows without features: NaN; refusals capped as at runtime)."""
    out = np.full(len(rows), np.nan)
    for i, r in enumerate(rows):
        feats = feats_of(metric, r)
        if feats is None:
            continue
        p = float(model.predict(np.array([[feats[n] for n in model.names]], dtype=np.float64))[0])
        out[i] = min(p, local_model.REFUSAL_CAP) if metric == "answer_relevancy" and r.abstained else p
    return out


MIN_CONTEXT_ROWS = 20  # rows with per-context labels


def _context_threshold(labels: np.ndarray, raw: np.ndarray) -> float:
    t = stats.best_threshold(labels, raw)[0]
    return float(min(max(t, 0.01), 0.99)) if not math.isnan(t) else 0.5


def _shift(raw: np.ndarray, t: float) -> np.ndarray:
    z = np.log(np.clip(raw, 1e-6, 1 - 1e-6) / (1 - np.clip(raw, 1e-6, 1 - 1e-6))) - _logit(t)
    out: np.ndarray = 1.0 / (1.0 + np.exp(-z))
    return out


def fit_context(rows: Sequence[RowFeatures], boot: int, seed: int) -> MetricFit:
    """Context relevance, out of fold (grouped by row): the threshold on the raw relevance probability,
    or a logistic model over the shipped logit and the context features — whichever has the better
    out-of-fold balanced accuracy (the threshold keeps the shipped ranking; the weights can fix it)."""
    use = [r for r in rows if r.context_labels is not None and r.context_raw is not None
           and r.context_default is not None and r.context_x is not None
           and len(r.context_raw) == len(r.context_labels)]
    y = np.array([v for r in use for v in r.context_labels or ()], dtype=np.int64)
    n_fail, n_good = int((y == 0).sum()), int((y == 1).sum())
    if len(use) < MIN_CONTEXT_ROWS or min(n_fail, n_good) < MIN_PER_CLASS:
        raise TooFewLabels(
            f"context_relevance: {len(use)} rows with meta.context_labels ({n_fail} irrelevant, {n_good} relevant "
            f"contexts); --fit needs at least {MIN_CONTEXT_ROWS} rows with {MIN_PER_CLASS} contexts of each class")
    names = list(local_model.CONTEXT_PROFILE_FEATURES)
    raw = np.array([v for r in use for v in r.context_raw or ()], dtype=np.float64)
    x = np.array([[f[n] for n in names] for r in use for f in r.context_x or ()], dtype=np.float64)
    default = np.array([v for r in use for v in r.context_default or ()], dtype=np.float64)
    row_of = np.array([i for i, r in enumerate(use) for _ in r.context_labels or ()])
    fold = np.array([_fold(r.group, seed) for r in use])[row_of]

    def oof(limit: int | None, rep: int, weights: bool) -> np.ndarray:
        pred = np.full(len(y), np.nan)
        for k in range(FOLDS):
            train_rows = np.unique(row_of[fold != k])
            if limit is not None:
                if limit > len(train_rows):
                    return pred
                train_rows = np.random.default_rng(seed + 97 * rep + k).choice(train_rows, limit, replace=False)
            train = np.isin(row_of, train_rows)
            if (y[train] == 0).sum() < 2 or (y[train] == 1).sum() < 2:
                continue
            if weights:
                pred[fold == k] = Logistic(names).fit(x[train], y[train].astype(float)).predict(x[fold == k])
            else:
                pred[fold == k] = _shift(raw[fold == k], _context_threshold(y[train], raw[train]))
        return pred

    by_threshold, by_weights = oof(None, 0, False), oof(None, 0, True)
    ba_t, ba_w = _oof_ba(y, by_threshold), _oof_ba(y, by_weights)
    use_weights = ba_w > ba_t
    refit = by_weights if use_weights else by_threshold
    ok = ~np.isnan(refit)
    curve = _learning_curve(y, len(use), lambda limit, rep: oof(limit, rep, use_weights))
    gain_ci = stats.bootstrap_ci(y[ok], refit[ok], _ba, n=boot, seed=seed, baseline=default[ok])

    def summary(s: np.ndarray) -> dict[str, float]:
        return {"auc": stats.roc_auc(y[ok], s[ok]), "balanced_accuracy": _ba(y[ok], s[ok]),
                "best_balanced_accuracy": stats.best_threshold(y[ok], s[ok])[1]}

    chosen = "weights over the shipped logit and the context features" if use_weights else "the threshold"
    note = (f"context_relevance: refit = {chosen} (out-of-fold balanced accuracy: weights {ba_w:.3f}, "
            f"threshold only {ba_t:.3f}; chosen on these folds)")
    if use_weights:
        return MetricFit("context_relevance", len(y), n_fail, summary(default), summary(refit), gain_ci, curve,
                         Logistic(names).fit(x, y.astype(float)).raw_weights(), note=note)
    return MetricFit("context_relevance", len(y), n_fail, summary(default), summary(refit), gain_ci, curve,
                     {}, threshold=_context_threshold(y, raw), note=note)


def fit_profile(
    judge: LocalJudge, rows: Sequence[LabelledRow], boot: int = 1000, seed: int = 0, name: str | None = None
) -> tuple[JudgeProfile, list[MetricFit], list[str]]:
    """Fit every metric that has enough labels; the messages say which were refused and why.
    Raises ``TooFewLabels`` when no metric can be fitted."""
    feats = [row_features(judge, r) for r in rows]
    fits: list[MetricFit] = []
    refused: list[str] = []
    shipped_faith = dict(coef.ANSWER_WEIGHTS)
    for metric, names, shipped, shift in (
        ("faithfulness", FAITH_FEATURES, shipped_faith, _logit(coef.FAITHFULNESS_THRESHOLD)),
        ("answer_relevancy", RELEVANCY_FEATURES, dict(coef.RELEVANCY_WEIGHTS), 0.0),
    ):
        try:
            fits.append(fit_metric(metric, feats, names, boot, seed, shipped, shift))
        except TooFewLabels as exc:
            refused.append(str(exc))
    try:
        fits.append(fit_context(feats, boot, seed))
    except TooFewLabels as exc:
        refused.append(str(exc))
    if not fits:
        raise TooFewLabels("; ".join(refused))
    by = {f.metric: f for f in fits}
    meta: dict[str, Any] = {"rows": len(rows), "fits": {f.metric: {"n": f.n, "failures": f.failures,
                                                                "default": f.default, "refit": f.refit}
                                                     for f in fits}}
    if name:
        meta["name"] = name
    # the refit's out-of-fold error rates at the threshold: the agent exports them and the drop alerts
    # estimate the true failing share with them (scoring/error_rates.py)
    meta["error_rates"] = {f.metric: {k: f.refit[k] for k in ("sensitivity", "specificity", "score_gap")}
                           for f in fits if f.metric in ("faithfulness", "answer_relevancy")}
    profile = JudgeProfile(
        faithfulness_weights=by["faithfulness"].weights if "faithfulness" in by else None,
        relevancy_weights=by["answer_relevancy"].weights if "answer_relevancy" in by else None,
        context_threshold=by["context_relevance"].threshold if "context_relevance" in by else None,
        context_weights=by["context_relevance"].weights or None if "context_relevance" in by else None,
        source="fitted",
        meta=meta,
    )
    return profile, fits, refused


def format_fits(fits: Sequence[MetricFit]) -> str:
    lines = ["out of fold (5 folds grouped by meta.source_id), failure = score < 0.5 "
             "(context_relevance: per labelled context):",
             f"{'metric':18s} {'n (fail)':>10s} {'AUC default':>11s} {'AUC refit':>9s} {'BA default':>10s} "
             f"{'BA refit':>8s}  gain [95% CI]"]
    for f in fits:
        gain = f.refit["balanced_accuracy"] - f.default["balanced_accuracy"]
        lines.append(f"{f.metric:18s} {f'{f.n} ({f.failures})':>10s} {f.default['auc']:11.3f} {f.refit['auc']:9.3f} "
                     f"{f.default['balanced_accuracy']:10.3f} {f.refit['balanced_accuracy']:8.3f}  "
                     f"{gain:+.3f} [{f.gain_ci95[0]:+.3f}, {f.gain_ci95[1]:+.3f}]")
    for f in fits:
        gain = f.refit["balanced_accuracy"] - f.default["balanced_accuracy"]
        if gain <= 0 or f.gain_ci95[0] <= 0 <= f.gain_ci95[1]:
            lines.append(f"{f.metric}: the refit is not clearly better than the shipped default on these rows "
                         f"(the interval includes 0 or the gain is negative): prefer the default, or label more rows")
    for f in fits:
        curve = ", ".join(f"{c['train_rows']}: {c['balanced_accuracy']:.3f}" for c in f.curve)
        lines.append(f"learning curve, {f.metric} (training rows: balanced accuracy): {curve}")
        ordered = ", ".join(f"{c['train_rows']}: {c['label_order_balanced_accuracy']:.3f}" for c in f.curve
                            if "label_order_balanced_accuracy" in c)
        if ordered:
            lines.append(f"  the first rows in label order (nearest the threshold, pipelines taking turns) "
                         f"instead of random ones: {ordered}")
    for f in fits:
        if f.note:
            lines.append(f.note)
        if f.threshold is not None:
            lines.append(f"{f.metric}: a context counts as relevant from raw probability {f.threshold:.3f} on "
                         "(the shipped cut applies when the profile has none)")
    return "\n".join(lines)
