"""The CI gate: rules over a run's metrics, optionally against a baseline run. Pure, no I/O.

Rule grammar (``--fail-if`` text; whitespace around the operator is optional)::

    rule     := METRIC OP NUMBER                     absolute:  "recall@5 < 0.85", "retrieval_p95_s > 0.5"
              | METRIC "drop" DROP_OP NUMBER [TEST]  baseline:  "faithfulness drop > 0.08",
                                                                "recall@5 drop > 0.1 (p < 0.05)"
    TEST     := "(" "p" "<" ALPHA ")"             this rule's own significance level, 0 < ALPHA < 1
    METRIC   := [A-Za-z_][A-Za-z0-9_.@-]*
    OP       := "<" | "<=" | ">" | ">="
    DROP_OP  := ">" | ">="

A rule describes the *bad* condition: when it holds the rule fails the gate (severity ``fail``)
or only warns (severity ``warn``). The gate passes when no rule has status ``failed``.

Values of a metric in one run (:class:`RunMetrics`):

* a per-question metric (``recall@5``, ``faithfulness``, ``composite``...) is the mean of its
  finite per-question values (None = not computable, skipped);
* otherwise an aggregate such as ``retrieval_p95_s`` (a percentile, not a mean of questions)
  is read from ``RunMetrics.aggregates``.

Drop rules compare with the baseline. ``drop = baseline - current`` for higher-is-better metrics
and ``drop = current - baseline`` for lower-is-better ones (a metric ending in ``_s`` or
``_seconds``: latency), so a drop is always "got worse". For per-question metrics the comparison
is the paired bootstrap over the question ids that have a value in both runs
(:func:`ragmon.evaluation.stats.paired_bootstrap`): observed and baseline are the means over those
shared ids, ``delta = observed - baseline``, with its 95% interval and p-value. A drop rule that
is tested — by the run's ``significance`` or by its own ``(p < ALPHA)``; with both, the smaller
level — fails only when the drop exceeds its threshold **and** ``p`` is below that level; a drop
that cannot be tested (aggregate-only metric, fewer than two pairs) never fails a tested rule.
Comparisons allow 1e-9 of floating-point slack, so a drop of 0.80 - 0.75 is not "> 0.05".

A rule whose metric is missing in the run (or, for a drop rule, in the baseline, or with no shared
question ids) is ``skipped`` with the reason in its message — never an error.

``composite`` (:func:`composite_score`): per question, the unweighted mean of the values that are
available among the question type's primary retrieval metric (:func:`ir.primary_metric`) and the
quality metrics of :func:`composite_metrics`; the run's composite is the mean of the
per-question composites. The runner stores it in each row's metrics under ``"composite"``.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from .. import quality
from ..errors import GateRuleError
from . import ir, stats

SEVERITY_FAIL: Final = "fail"
SEVERITY_WARN: Final = "warn"
SEVERITIES: Final = (SEVERITY_FAIL, SEVERITY_WARN)

KIND_ABSOLUTE: Final = "absolute"
KIND_DROP: Final = "drop"

STATUS_PASSED: Final = "passed"
STATUS_FAILED: Final = "failed"
STATUS_WARNED: Final = "warned"
STATUS_SKIPPED: Final = "skipped"
STATUSES: Final = (STATUS_PASSED, STATUS_FAILED, STATUS_WARNED, STATUS_SKIPPED)

COMPOSITE: Final = "composite"


def composite_metrics() -> tuple[str, ...]:
    """The quality metrics averaged into "composite", in table order: those that take part in the
    diagnosis verdict (faithfulness, answer relevancy, context precision and recall, answer correctness,
    abstention). Metrics the verdict leaves out (role ``""``: the citation metrics, which exist only when
    answers carry citation markers) would change the composite's meaning from run to run."""
    return tuple(m.name for m in quality.rows() if m.role != quality.ROLE_NONE)


EPSILON: Final = 1e-9

_OPS: Final[Mapping[str, Callable[[float, float], bool]]] = {
    "<": lambda x, t: x - t < -EPSILON,
    "<=": lambda x, t: x - t <= EPSILON,
    ">": lambda x, t: x - t > EPSILON,
    ">=": lambda x, t: x - t >= -EPSILON,
}
_NUMBER: Final = r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?"
_RULE_RE: Final = re.compile(
    r"^\s*(?P<metric>[A-Za-z_][A-Za-z0-9_.@-]*)(?:\s+(?P<drop>drop))?\s*(?P<op><=|>=|<|>)\s*"
    rf"(?P<number>{_NUMBER})(?:\s*\(\s*p\s*<\s*(?P<alpha>{_NUMBER})\s*\))?\s*$"
)
_LOWER_IS_BETTER_SUFFIXES: Final = ("_s", "_seconds")


def higher_is_better(metric: str) -> bool:
    """False for latency-like metrics (names ending in ``_s`` or ``_seconds``), True otherwise."""
    return not metric.endswith(_LOWER_IS_BETTER_SUFFIXES)


@dataclass(frozen=True, slots=True)
class GateRule:
    """One parsed rule. ``text`` is the normalised form, e.g. ``"faithfulness drop > 0.08"``."""

    metric: str
    kind: str  # KIND_ABSOLUTE | KIND_DROP
    op: str  # "<" | "<=" | ">" | ">="
    threshold: float
    severity: str = SEVERITY_FAIL
    significance: float | None = None  # drop rules: fail only when the paired test's p is below it

    @property
    def text(self) -> str:
        middle = f" {KIND_DROP} " if self.kind == KIND_DROP else " "
        test = f" (p < {self.significance:g})" if self.significance is not None else ""
        return f"{self.metric}{middle}{self.op} {self.threshold:g}{test}"

    def holds(self, value: float) -> bool:
        """Whether the bad condition holds for ``value`` (the observed value, or the drop)."""
        return _OPS[self.op](value, self.threshold)


def parse_rule(text: str, severity: str = SEVERITY_FAIL) -> GateRule:
    """Parse ``"METRIC OP NUMBER"`` or ``"METRIC drop > NUMBER [(p < ALPHA)]"``; GateRuleError when it
    does not."""
    if severity not in SEVERITIES:
        raise GateRuleError(f"unknown severity {severity!r} for rule {text!r}; expected one of {SEVERITIES}")
    match = _RULE_RE.match(text)
    if match is None:
        raise GateRuleError(
            f"cannot parse gate rule {text!r}: expected 'METRIC OP NUMBER' (OP one of < <= > >=), "
            "e.g. 'recall@5 < 0.85', or 'METRIC drop > NUMBER', e.g. 'faithfulness drop > 0.08'"
        )
    metric, op, threshold = match["metric"], match["op"], float(match["number"])
    if not math.isfinite(threshold):
        raise GateRuleError(f"gate rule {text!r}: the threshold must be a finite number")
    kind = KIND_DROP if match["drop"] else KIND_ABSOLUTE
    if kind == KIND_DROP and op not in (">", ">="):
        raise GateRuleError(f"gate rule {text!r}: a drop rule must use '>' or '>=', e.g. '{metric} drop > 0.05'")
    alpha = None if match["alpha"] is None else float(match["alpha"])
    if alpha is not None:
        if kind != KIND_DROP:
            raise GateRuleError(f"gate rule {text!r}: '(p < ALPHA)' belongs to a drop rule, which has a paired test")
        if not 0.0 < alpha < 1.0:
            raise GateRuleError(f"gate rule {text!r}: the significance level must be between 0 and 1 (exclusive)")
    return GateRule(metric=metric, kind=kind, op=op, threshold=threshold, severity=severity, significance=alpha)


DEFAULT_PRIMARY_K: Final = 5
# The significance level of the default fail rules on large drops (docs/evaluation.md, "The gate").
DEFAULT_DROP_SIGNIFICANCE: Final = 0.05


def default_rules(primary_k: int = DEFAULT_PRIMARY_K) -> tuple[GateRule, ...]:
    """The gate's defaults; the recall rule is at the run's primary cut-off. Why each: docs/evaluation.md.

    The seeds' steps (a composite drop of 0.05 warns, a faithfulness drop of 0.08 fails) and the
    latency ceiling, then fail rules for a large drop of a core metric — each with the paired
    test, so a collapse of retrieval fails the build while a re-run's noise does not.
    """
    alpha = f"(p < {DEFAULT_DROP_SIGNIFICANCE:g})"
    return (
        parse_rule("composite drop > 0.05", SEVERITY_WARN),
        parse_rule("faithfulness drop > 0.08", SEVERITY_FAIL),
        parse_rule("retrieval_p95_s > 0.5", SEVERITY_FAIL),
        parse_rule(f"composite drop > 0.1 {alpha}", SEVERITY_FAIL),
        parse_rule(f"recall@{primary_k} drop > 0.1 {alpha}", SEVERITY_FAIL),
        parse_rule(f"context_precision drop > 0.1 {alpha}", SEVERITY_FAIL),
    )


DEFAULT_RULES: Final = default_rules()


def composite_score(metrics: Mapping[str, float | None], question_type: str, k: int = 5) -> float | None:
    """Unweighted mean of the finite values among the primary retrieval metric and :func:`composite_metrics`.

    ``metrics`` is one row's metric dict (report name -> value). None when none is available.
    """
    primary = ir.primary_metric(question_type, k)
    names = ([primary] if primary is not None else []) + list(composite_metrics())
    values = [v for name in names if (v := metrics.get(name)) is not None and math.isfinite(v)]
    return sum(values) / len(values) if values else None


@dataclass(frozen=True, slots=True)
class RunMetrics:
    """One run's values for the gate.

    ``per_question``: row id -> metric name -> value (None = not computable), the report's rows.
    ``aggregates``: run-level values that are not means of questions, e.g. ``retrieval_p95_s``.
    """

    per_question: Mapping[str, Mapping[str, float | None]] = field(default_factory=dict)
    aggregates: Mapping[str, float | None] = field(default_factory=dict)

    def column(self, metric: str) -> dict[str, float | None]:
        """row id -> value for the rows that have a finite value of ``metric``."""
        return {
            row_id: value
            for row_id, row in self.per_question.items()
            if (value := row.get(metric)) is not None and math.isfinite(value)
        }

    def aggregate(self, metric: str) -> float | None:
        value = self.aggregates.get(metric)
        return value if value is not None and math.isfinite(value) else None


@dataclass(frozen=True, slots=True)
class RuleOutcome:
    """What one rule found. ``delta`` is observed - baseline; ``ci95``/``p_value`` describe it for
    drop rules (and ``ci95`` the observed mean for absolute ones)."""

    rule: str
    metric: str
    kind: str
    threshold: float
    severity: str
    status: str  # STATUSES
    observed: float | None = None
    baseline: float | None = None
    delta: float | None = None
    ci95: tuple[float, float] | None = None
    p_value: float | None = None
    message: str = ""
    n: int | None = None  # questions behind the value (shared ids for drop rules); None for aggregates
    significance: float | None = None  # the level a drop was tested at; None when untested

    def to_dict(self) -> dict[str, Any]:
        return {
            "rule": self.rule,
            "metric": self.metric,
            "kind": self.kind,
            "threshold": self.threshold,
            "severity": self.severity,
            "status": self.status,
            "observed": self.observed,
            "baseline": self.baseline,
            "delta": self.delta,
            "ci95": None if self.ci95 is None else list(self.ci95),
            "p_value": self.p_value,
            "n": self.n,
            "significance": self.significance,
            "message": self.message,
        }


@dataclass(frozen=True, slots=True)
class GateResult:
    passed: bool
    rules: tuple[RuleOutcome, ...]

    def to_dict(self) -> dict[str, Any]:
        """The report's ``gate`` section: ``{"passed": bool, "rules": [...]}``."""
        return {"passed": self.passed, "rules": [outcome.to_dict() for outcome in self.rules]}


@dataclass(frozen=True, slots=True)
class _Options:
    significance: float | None
    n_resamples: int
    seed: int


def _outcome(rule: GateRule, status: str, message: str, **values: Any) -> RuleOutcome:
    return RuleOutcome(
        rule=rule.text,
        metric=rule.metric,
        kind=rule.kind,
        threshold=rule.threshold,
        severity=rule.severity,
        status=status,
        message=message,
        **values,
    )


def _violated(rule: GateRule) -> str:
    return STATUS_FAILED if rule.severity == SEVERITY_FAIL else STATUS_WARNED


def _run_value(run: RunMetrics, metric: str, opts: _Options) -> tuple[float, stats.MeanEstimate | None] | None:
    column = run.column(metric)
    if column:
        estimate = stats.bootstrap_mean(column.values(), n_resamples=opts.n_resamples, seed=opts.seed)
        assert estimate.mean is not None
        return estimate.mean, estimate
    value = run.aggregate(metric)
    return None if value is None else (value, None)


def _absolute(rule: GateRule, current: RunMetrics, baseline: RunMetrics | None, opts: _Options) -> RuleOutcome:
    found = _run_value(current, rule.metric, opts)
    if found is None:
        return _outcome(rule, STATUS_SKIPPED, f"skipped: {rule.metric} is not in this run")
    observed, estimate = found
    base_found = _run_value(baseline, rule.metric, opts) if baseline is not None else None
    base = base_found[0] if base_found is not None else None
    values: dict[str, Any] = {
        "observed": observed,
        "baseline": base,
        "delta": None if base is None else observed - base,
        "ci95": estimate.ci95 if estimate is not None else None,
        "n": estimate.n if estimate is not None else None,
    }
    if rule.holds(observed):
        return _outcome(rule, _violated(rule), f"{rule.metric} = {observed:.4g} ({rule.text})", **values)
    return _outcome(rule, STATUS_PASSED, f"{rule.metric} = {observed:.4g}, not {rule.op} {rule.threshold:g}", **values)


def _level(rule: GateRule, opts: _Options) -> float | None:
    """The significance level a drop rule is tested at: the smaller of the run's and the rule's own."""
    levels = [a for a in (opts.significance, rule.significance) if a is not None]
    return min(levels) if levels else None


def _drop(rule: GateRule, current: RunMetrics, baseline: RunMetrics | None, opts: _Options) -> RuleOutcome:
    if baseline is None:
        return _outcome(rule, STATUS_SKIPPED, "skipped: no baseline to compare with")
    sign = 1.0 if higher_is_better(rule.metric) else -1.0
    cur_col, base_col = current.column(rule.metric), baseline.column(rule.metric)
    values: dict[str, Any]
    if cur_col and base_col:
        paired = stats.paired_bootstrap(cur_col, base_col, n_resamples=opts.n_resamples, seed=opts.seed)
        if paired.mean_delta is None:
            return _outcome(rule, STATUS_SKIPPED, f"skipped: no question has {rule.metric} in both runs")
        observed, base, delta = paired.current_mean, paired.baseline_mean, paired.mean_delta
        values = {"ci95": paired.ci95, "p_value": paired.p_value, "n": paired.n}
        where = f"over {paired.n} shared questions"
    else:
        cur_val = _run_value(current, rule.metric, opts)
        base_val = _run_value(baseline, rule.metric, opts)
        if cur_val is None or base_val is None:
            missing = "this run" if cur_val is None else "the baseline"
            return _outcome(rule, STATUS_SKIPPED, f"skipped: {rule.metric} is not in {missing}")
        observed, base, delta = cur_val[0], base_val[0], cur_val[0] - base_val[0]
        values, where = {}, "(run-level values)"
    level = _level(rule, opts)
    values.update(observed=observed, baseline=base, delta=delta, significance=level)
    drop = -sign * delta
    change = f"{rule.metric} {base:.4g} -> {observed:.4g} {where}, drop {drop:.4g}"
    if not rule.holds(drop):
        return _outcome(rule, STATUS_PASSED, f"{change}; limit {rule.op} {rule.threshold:g} not reached", **values)
    if level is not None:
        p = values.get("p_value")
        if p is None:
            why = "cannot be tested for significance"
            return _outcome(rule, STATUS_PASSED, f"{change} exceeds the limit but {why}; not failed", **values)
        if p >= level:
            why = f"not significant (p = {p:.3g} >= {level:g})"
            return _outcome(rule, STATUS_PASSED, f"{change} exceeds the limit but is {why}", **values)
    p_text = f", p = {values['p_value']:.3g}" if values.get("p_value") is not None else ""
    return _outcome(rule, _violated(rule), f"{change}{p_text} ({rule.text})", **values)


def evaluate_gate(
    rules: Sequence[GateRule],
    current: RunMetrics,
    baseline: RunMetrics | None = None,
    *,
    significance: float | None = None,
    n_resamples: int = stats.DEFAULT_RESAMPLES,
    seed: int = stats.DEFAULT_SEED,
) -> GateResult:
    """Evaluate ``rules`` in order; the gate passes when none has status ``failed``.

    ``significance`` (e.g. 0.05): drop rules fail only when the paired bootstrap p-value is below it
    (a rule's own ``(p < ALPHA)`` applies with or without it; with both, the smaller level).
    """
    if significance is not None and not 0.0 < significance < 1.0:
        raise ValueError(f"significance must be between 0 and 1 (exclusive), got {significance}")
    opts = _Options(significance=significance, n_resamples=n_resamples, seed=seed)
    outcomes = tuple((_drop if rule.kind == KIND_DROP else _absolute)(rule, current, baseline, opts) for rule in rules)
    return GateResult(passed=all(o.status != STATUS_FAILED for o in outcomes), rules=outcomes)
