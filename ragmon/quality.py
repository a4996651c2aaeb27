"""The quality-metric table: one row per metric that a judge or the evaluator produces.

Every room that needs to know "which quality metrics exist" reads this table instead of naming
metrics itself: ``Scores`` validates its keys against it, diagnosis reads each metric's role and
default threshold, the agent's config generates one threshold setting per online metric, the
calibration report finds the human label to compare with, the demo summary its titles, and the
rule and dashboard generators their alerts and panels. Adding a metric is one row here, its
formula, and the judge code that computes it (docs/architecture.md, "... an online quality metric").

The table is read through functions (``rows``, ``names``, ``online``, ``metric``, ``known``), never
copied at import: ``register`` adds a row at run time (a plugin's metric; the toy metric of
``tests/core/test_metric_seam.py``) and every reader sees it from then on, ``unregister`` takes it
out again. The shipped rows (``SHIPPED``) can be neither replaced nor removed.

This module imports only the standard library and ``semconv`` so that the ops generators
(``deploy/prometheus/generate_rules.py``, ``grafana/generate_dashboard.py``) can load it from a
bare checkout without installing ragmon.

Diagnosis roles (see ``scoring/metrics/diagnosis.py``):

* ``retrieval`` — a low value blames retrieval (the contexts are wrong or incomplete);
* ``grounding`` — a low value blames generation even when retrieval is bad too (the answer
  claims what no context says: a hallucination);
* ``answer`` — a low value blames generation only when retrieval looks fine (an off-topic or
  wrong answer built from the wrong documents is retrieval's fault);
* ``""`` — reported, never used for the verdict.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final

from . import semconv as sc

STAGE_RETRIEVAL: Final = "retrieval"
STAGE_GENERATION: Final = "generation"

ROLE_RETRIEVAL: Final = "retrieval"
ROLE_GROUNDING: Final = "grounding"
ROLE_ANSWER: Final = "answer"
ROLE_NONE: Final = ""


@dataclass(frozen=True, slots=True)
class QualityMetric:
    """One quality metric. Values are ratios in [0, 1]; higher is better for every row."""

    name: str  # the `metric` label value on ragmon_score_ratio and the eval report's key
    title: str  # human wording, lower case ("answer relevancy")
    alert: str  # CamelCase stem of its alert names (RagmonFaithfulnessDrop)
    stage: str  # STAGE_*: the RAG stage a low value points at first
    role: str  # ROLE_*: how diagnosis uses it
    threshold: float  # default diagnosis threshold: below it the metric counts as failed
    floor: float  # absolute floor of the 1h mean for the floor alert (online metrics)
    needs_reference: bool  # needs a reference answer (ground truth): offline only
    online: bool  # judged on live traffic by the agent (recorded on /metrics, alerted on)
    label: str | None  # the human label it is calibrated against (calibration datasets), if any
    description: str


SHIPPED: Final[tuple[QualityMetric, ...]] = (
    QualityMetric(
        sc.METRIC_FAITHFULNESS, "faithfulness", "Faithfulness", STAGE_GENERATION, ROLE_GROUNDING,
        0.5, 0.5, needs_reference=False, online=True, label="faithful",
        description="Share of the answer's claims that the retrieved contexts support.",
    ),
    QualityMetric(
        sc.METRIC_ANSWER_RELEVANCY, "answer relevancy", "AnswerRelevancy", STAGE_GENERATION, ROLE_ANSWER,
        0.5, 0.5, needs_reference=False, online=True, label="answer_relevant",
        description="How directly the answer addresses the question (0 for a refusal).",
    ),
    QualityMetric(
        sc.METRIC_CONTEXT_PRECISION, "context precision", "ContextPrecision", STAGE_RETRIEVAL, ROLE_RETRIEVAL,
        0.5, 0.4, needs_reference=False, online=True, label="context_relevant",
        description="Rank-weighted share of the retrieved contexts that are relevant to the question.",
    ),
    QualityMetric(
        sc.METRIC_CONTEXT_RECALL, "context recall", "ContextRecall", STAGE_RETRIEVAL, ROLE_RETRIEVAL,
        0.5, 0.5, needs_reference=True, online=False, label=None,
        description="Share of the reference answer's claims that the retrieved contexts support.",
    ),
    QualityMetric(
        sc.METRIC_ANSWER_CORRECTNESS, "answer correctness", "AnswerCorrectness", STAGE_GENERATION, ROLE_ANSWER,
        0.5, 0.5, needs_reference=True, online=False, label=None,
        description="Agreement with the reference answer: claim-level F1 blended with semantic similarity.",
    ),
    QualityMetric(
        sc.METRIC_ABSTENTION, "abstention", "Abstention", STAGE_GENERATION, ROLE_ANSWER,
        0.5, 0.5, needs_reference=False, online=False, label=None,
        description="no_answer questions: 1 when the app declined to answer, 0 when it invented one.",
    ),
    QualityMetric(
        sc.METRIC_CITATION_PRESENCE, "citation presence", "CitationPresence", STAGE_GENERATION, ROLE_NONE,
        0.5, 0.5, needs_reference=False, online=False, label=None,
        description="Share of the answer's claims that carry a citation marker.",
    ),
    QualityMetric(
        sc.METRIC_CITATION_CORRECTNESS, "citation correctness", "CitationCorrectness", STAGE_GENERATION,
        ROLE_NONE, 0.5, 0.5, needs_reference=False, online=False, label=None,
        description="Share of cited claims whose cited context supports them.",
    ),
    QualityMetric(
        sc.METRIC_CITATION_COVERAGE, "citation coverage", "CitationCoverage", STAGE_GENERATION, ROLE_NONE,
        0.5, 0.5, needs_reference=False, online=False, label=None,
        description="Share of the answer's claims that are cited and correctly supported by their citation.",
    ),
)

_STAGES: Final = (STAGE_RETRIEVAL, STAGE_GENERATION)
_ROLES: Final = (ROLE_RETRIEVAL, ROLE_GROUNDING, ROLE_ANSWER, ROLE_NONE)
_NAME: Final = re.compile(r"[a-z][a-z0-9_]*")
_ALERT: Final = re.compile(r"[A-Z][A-Za-z0-9]*")


def _checked(row: QualityMetric) -> QualityMetric:
    """``row`` if it can take part everywhere (a bounded label value, an alert stem, ratios); else ValueError."""
    problems = [message for bad, message in (
        (not _NAME.fullmatch(row.name), "the name must be lower-case letters, digits and _ (a label value)"),
        (not _ALERT.fullmatch(row.alert), f"the alert stem {row.alert!r} must be CamelCase letters and digits"),
        (row.stage not in _STAGES, f"the stage must be one of {_STAGES}"),
        (row.role not in _ROLES, f"the role must be one of {_ROLES}"),
        (not 0.0 <= row.threshold <= 1.0 or not 0.0 <= row.floor <= 1.0, "threshold and floor must be in [0, 1]"),
        (row.online and row.needs_reference, "an online metric cannot need a reference answer"),
    ) if bad]
    if problems:
        raise ValueError(f"quality metric {row.name!r}: " + "; ".join(problems))
    return row


_TABLE: Final[dict[str, QualityMetric]] = {m.name: _checked(m) for m in SHIPPED}
_SHIPPED_NAMES: Final = frozenset(_TABLE)


def register(row: QualityMetric) -> QualityMetric:
    """Add a metric row at run time (or replace one added before); a shipped row's name is refused."""
    if row.name in _SHIPPED_NAMES:
        raise ValueError(f"{row.name!r} is a shipped metric: change its row in ragmon/quality.py instead")
    _TABLE[row.name] = _checked(row)
    return row


def unregister(name: str) -> None:
    """Take out a row ``register`` added (nothing if there is none); shipped rows stay."""
    if name in _SHIPPED_NAMES:
        raise ValueError(f"{name!r} is a shipped metric and cannot be unregistered")
    _TABLE.pop(name, None)


def rows() -> tuple[QualityMetric, ...]:
    """Every metric row: the shipped ones in table order, then the registered ones."""
    return tuple(_TABLE.values())


def names() -> tuple[str, ...]:
    return tuple(_TABLE)


def known(name: str) -> bool:
    return name in _TABLE


def online() -> tuple[QualityMetric, ...]:
    """The reference-free metrics the agent judges on live traffic, in table order."""
    return tuple(m for m in _TABLE.values() if m.online)


def online_names() -> tuple[str, ...]:
    return tuple(m.name for m in _TABLE.values() if m.online)


# The drop alerts' significance level, shared by the rule generator (deploy/prometheus/generate_rules.py)
# and power-based sampling (which sizes the sample for that same test): the false pages allowed for per
# 30 days, spread over every chance a test has to fire in a month (Bonferroni) — each window length's episodes
# on noise (below), each test that pages (per online metric the failing share's rise and the mean score's drop;
# the contradiction share's rise) and each pipeline the budget covers.
# ``alert_alpha(pipelines=100, budget_per_30d=0.5)``
# is a fleet of 100 pipelines behind one Alertmanager sharing half a false page a month.
PAGE_BUDGET_PER_30D: Final = 0.5  # the default budget: per pipeline, or for the fleet when pipelines are given
HOURS_PER_30D: Final = 30 * 24
ALERT_WINDOWS_H: Final[tuple[int, ...]] = (1, 6, 12, 24)  # drop tests' windows (generate_rules.py WINDOW, LONG_WINDOWS)
# Prometheus tests a window at every evaluation of its group (the hourly window every minute, the long ones every
# 5 minutes) and an alert fires after `for: 10m`, so a window that moves crosses its level more often than once per
# disjoint window: on Gaussian noise at z = 4.07, 1.15 / 7.95 / 13.3 / 20.2 episodes per disjoint 1 / 6 / 12 /
# 24-hour window (bench/window_episodes.py, 4e8 evaluations each; --every 1 for the hourly window). Counted as
# disjoint windows (720 + 120 + 60 + 30 a month), the long windows fired several times their share of the budget
# (docs/alerts.md); the budget counts episodes. The ratios grow slowly with z (7.3 / 12.6 / 19.9 at 3.79) and then
# hold: 7.95 / 13.15 / 20.19 at 4.5 (4e9 evaluations, 950-1,500 episodes each), so they serve a fleet's z (5.05 at
# 100 pipelines) too.
EPISODES_PER_WINDOW: Final[dict[int, float]] = {1: 1.15, 6: 7.95, 12: 13.3, 24: 20.2}


def alert_tests() -> int:
    """The tests that page in each window: per online metric its failing share's rise and its mean
    score's drop (two views of one change: the share counts answers past the threshold, the mean sees
    a shift wherever in the score range it falls), and the contradiction share's rise."""
    return 2 * len(online()) + 1


def episodes_per_30d() -> float:
    """A test's chances to fire on noise in 30 days, over every window length: its disjoint windows times the
    episodes a moving window has per disjoint window (EPISODES_PER_WINDOW)."""
    return sum(HOURS_PER_30D / hours * EPISODES_PER_WINDOW[hours] for hours in ALERT_WINDOWS_H)


def alert_alpha(pipelines: int = 1, budget_per_30d: float = PAGE_BUDGET_PER_30D) -> float:
    """One-sided level of each window's test so that ``pipelines`` pipelines share ``budget_per_30d``
    false pages per 30 days (over the online metrics of the table as it is now)."""
    if pipelines < 1 or budget_per_30d <= 0:
        raise ValueError(f"need pipelines >= 1 and a positive budget, got {pipelines}, {budget_per_30d}")
    return budget_per_30d / (pipelines * alert_tests() * episodes_per_30d())


# A judge's error rates correct the shares the alerts test (Rogan-Gladen: the flagged rise divided by
# Youden's J = sensitivity + specificity - 1) only where J is at least this. Under it the correction is
# noise: at J = 0.02 (the local judge's contradiction check on RAGTruth's conflicts) a flagged rise of
# 1 point reads as 50, and any rise at all clears the minimum effect. There the rules, the sampler and
# the simulation use the flagged share as it is, and the alert says so.
MIN_CORRECTABLE_YOUDEN: Final = 0.1


def correction_divisor(youden: float | None) -> float:
    """What a judge's flagged shares are divided by: its J where it declares a usable one
    (``MIN_CORRECTABLE_YOUDEN``), else 1 (uncorrected)."""
    return youden if youden is not None and youden >= MIN_CORRECTABLE_YOUDEN else 1.0


def is_failing(score: float, threshold: float | None) -> bool:
    """A judged trace fails a metric when its score is below the threshold (the failing-share alerts)."""
    return threshold is not None and score < threshold


def metric(name: str) -> QualityMetric:
    """The table row of ``name``; KeyError naming the known metrics otherwise."""
    try:
        return _TABLE[name]
    except KeyError:
        raise KeyError(f"unknown quality metric {name!r}; known: {', '.join(_TABLE)}") from None


def default_thresholds() -> dict[str, float]:
    """Diagnosis thresholds of every metric, from the table."""
    return {m.name: m.threshold for m in _TABLE.values()}
