"""Push an evaluation run's aggregates to a Prometheus Pushgateway, so scheduled evaluations land
on the Grafana dashboard beside the online scores and feed the offline-regression alerts.

One push per run, with ``PUT`` semantics (``prometheus_client.push_to_gateway``): the run's
group — job ``ragmon_eval`` and grouping key ``{evalset: <evalset_name>}`` plus any extra
grouping labels — is replaced as a whole, so a metric missing from this run does not linger from
the previous one. Prometheus must scrape the Pushgateway with ``honor_labels: true`` so the
pushed ``job`` and ``evalset`` labels are kept.

Pushed gauges (label values are bounded: report metric names, question types, problem reasons,
verdicts, gate statuses)::

    ragmon_eval_score_ratio{metric, question_type}              mean ("all" = every question)
    ragmon_eval_score_ci95_lower_ratio{metric, question_type}   bootstrap 95% interval, when known
    ragmon_eval_score_ci95_upper_ratio{metric, question_type}
    ragmon_eval_questions                                       rows evaluated
    ragmon_eval_problems{reason}                                rows with a problem (every known reason, 0 included)
    ragmon_eval_verdicts{verdict}                               retrieval-vs-generation diagnosis counts
    ragmon_eval_gate_passed                                     1 passed, 0 failed
    ragmon_eval_gate_rules{status}                              gate rules by status (passed/failed/warned/skipped)
    ragmon_eval_retrieval_latency_p95_seconds
    ragmon_eval_pipeline_latency_p95_seconds
    ragmon_eval_last_run_timestamp_seconds                      the run's created_at (Unix time)

A metric whose value is unknown (mean None, no interval) is left out rather than pushed as NaN.
Every failure to push — gateway down, refused, timed out, a bad URL — raises
:class:`PushgatewayError` (``raise ... from`` the urllib error), never a raw urllib exception.
"""

from __future__ import annotations

import http.client
import math
import time
import urllib.error
import urllib.parse
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any, Final

from prometheus_client import CollectorRegistry, Gauge, push_to_gateway

from .. import semconv as sc
from ..errors import PushgatewayError
from . import types as et

DEFAULT_JOB: Final = "ragmon_eval"
DEFAULT_TIMEOUT_S: Final = 10.0
QUESTION_TYPE_ALL: Final = "all"

M_SCORE: Final = sc.M_EVAL_SCORE
M_SCORE_CI_LOWER: Final = sc.M_EVAL_SCORE_CI_LOWER
M_SCORE_CI_UPPER: Final = sc.M_EVAL_SCORE_CI_UPPER
M_QUESTIONS: Final = sc.M_EVAL_QUESTIONS
M_PROBLEMS: Final = sc.M_EVAL_PROBLEMS
M_VERDICTS: Final = sc.M_EVAL_VERDICTS
M_GATE_PASSED: Final = sc.M_EVAL_GATE_PASSED
M_GATE_RULES: Final = sc.M_EVAL_GATE_RULES
M_RETRIEVAL_P95: Final = sc.M_EVAL_RETRIEVAL_P95
M_PIPELINE_P95: Final = sc.M_EVAL_PIPELINE_P95
M_LAST_RUN: Final = sc.M_EVAL_LAST_RUN
METRIC_NAMES: Final = (
    M_SCORE,
    M_SCORE_CI_LOWER,
    M_SCORE_CI_UPPER,
    M_QUESTIONS,
    M_PROBLEMS,
    M_VERDICTS,
    M_GATE_PASSED,
    M_GATE_RULES,
    M_RETRIEVAL_P95,
    M_PIPELINE_P95,
    M_LAST_RUN,
)

L_EVALSET: Final = "evalset"
# Label names the pushed metrics carry; a grouping key may not reuse them (or "job").
METRIC_LABELS: Final = frozenset({"metric", "question_type", "reason", "verdict", "status"})

KNOWN_PROBLEM_REASONS: Final = (
    et.PROBLEM_MALFORMED_ROW,
    et.PROBLEM_DUPLICATE_ID,
    et.PROBLEM_APP_ERROR,
    et.PROBLEM_APP_TIMEOUT,
    et.PROBLEM_NO_TRACE,
    et.PROBLEM_MISSING_RESPONSE,
    et.PROBLEM_UNKNOWN_ID,
    et.PROBLEM_MALFORMED_RESPONSE,
    et.PROBLEM_JUDGE_FAILED,
)
VERDICTS: Final = sc.VERDICTS
GATE_STATUSES: Final = ("passed", "failed", "warned", "skipped")




def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return None
    return float(value)


def run_timestamp(report: Mapping[str, Any]) -> float:
    """The run's ``created_at`` as Unix seconds (naive times are taken as UTC); now if missing."""
    created = report.get("created_at")
    if isinstance(created, str):
        try:
            parsed = datetime.fromisoformat(created)
        except ValueError:
            return time.time()
        if parsed.tzinfo is None:
            parsed = parsed.replace(tzinfo=UTC)
        return parsed.timestamp()
    return time.time()


def _set_scores(report: Mapping[str, Any], score: Gauge, lower: Gauge, upper: Gauge) -> None:
    sections: list[tuple[str, Mapping[str, Any]]] = [(QUESTION_TYPE_ALL, report.get("metrics") or {})]
    for qtype, section in (report.get("by_question_type") or {}).items():
        sections.append((str(qtype), section.get("metrics") or {}))
    for qtype, metrics in sections:
        for name, value in metrics.items():
            mean = _number((value or {}).get("mean"))
            if mean is None:
                continue
            score.labels(metric=name, question_type=qtype).set(mean)
            ci95 = (value or {}).get("ci95")
            if isinstance(ci95, list | tuple) and len(ci95) == 2:
                lo, hi = _number(ci95[0]), _number(ci95[1])
                if lo is not None and hi is not None:
                    lower.labels(metric=name, question_type=qtype).set(lo)
                    upper.labels(metric=name, question_type=qtype).set(hi)


def build_registry(report: Mapping[str, Any]) -> CollectorRegistry:
    """A fresh registry holding the run's gauges (pure: no I/O; what :func:`push_report` sends)."""
    registry = CollectorRegistry()

    def gauge(name: str, doc: str, labels: tuple[str, ...] = ()) -> Gauge:
        return Gauge(name, doc, labels, registry=registry)

    _set_scores(
        report,
        gauge(M_SCORE, "Mean of an evaluation metric over the golden set (question_type=all: every question).",
              ("metric", "question_type")),
        gauge(M_SCORE_CI_LOWER, "Lower bound of the bootstrap 95% interval of the metric's mean.",
              ("metric", "question_type")),
        gauge(M_SCORE_CI_UPPER, "Upper bound of the bootstrap 95% interval of the metric's mean.",
              ("metric", "question_type")),
    )
    gauge(M_QUESTIONS, "Golden-set rows evaluated in the last run.").set(int(report.get("questions") or 0))

    problems = gauge(M_PROBLEMS, "Rows of the last run with a problem, by reason.", ("reason",))
    by_reason: Mapping[str, Any] = (report.get("problems") or {}).get("by_reason") or {}
    for reason in (*KNOWN_PROBLEM_REASONS, *(r for r in by_reason if r not in KNOWN_PROBLEM_REASONS)):
        problems.labels(reason=reason).set(_number(by_reason.get(reason)) or 0)

    verdicts = gauge(M_VERDICTS, "Questions of the last run by retrieval-vs-generation verdict.", ("verdict",))
    counts: Mapping[str, Any] = report.get("verdicts") or {}
    for verdict in (*VERDICTS, *(v for v in counts if v not in VERDICTS)):
        verdicts.labels(verdict=verdict).set(_number(counts.get(verdict)) or 0)

    gate = report.get("gate") or {}
    gauge(M_GATE_PASSED, "1 when the last run passed its gate, 0 when it failed.").set(1 if gate.get("passed") else 0)
    rules = gauge(M_GATE_RULES, "Gate rules of the last run by status.", ("status",))
    statuses = [str(rule.get("status")) for rule in gate.get("rules") or []]
    for status in (*GATE_STATUSES, *(s for s in dict.fromkeys(statuses) if s not in GATE_STATUSES)):
        rules.labels(status=status).set(statuses.count(status))

    latency = report.get("latency") or {}
    for name, key, doc in (
        (M_RETRIEVAL_P95, "retrieval_p95_s", "P95 retrieval latency of the last run."),
        (M_PIPELINE_P95, "pipeline_p95_s", "P95 end-to-end pipeline latency of the last run."),
    ):
        value = _number(latency.get(key))
        if value is not None:
            gauge(name, doc).set(value)
    gauge(M_LAST_RUN, "Unix time the last evaluation run was made (its created_at).").set(run_timestamp(report))
    return registry


def grouping_key(report: Mapping[str, Any], grouping: Mapping[str, str] | None = None) -> dict[str, str]:
    """``{"evalset": <evalset_name>}`` plus ``grouping``; raises ValueError for a label that
    would clash with the pushed metrics' own labels."""
    key = {L_EVALSET: str(report.get("evalset_name") or "unnamed")}
    for name, value in (grouping or {}).items():
        if name in METRIC_LABELS or name == "job":
            raise ValueError(f"grouping label {name!r} clashes with a label of the pushed metrics")
        key[str(name)] = str(value)
    return key


def push_report(
    report: Mapping[str, Any],
    url: str,
    *,
    job: str = DEFAULT_JOB,
    grouping: Mapping[str, str] | None = None,
    timeout_s: float = DEFAULT_TIMEOUT_S,
) -> None:
    """Push the run's aggregates to the Pushgateway at ``url`` (``http://host:9091``), replacing
    the group ``job``/``evalset`` (+ ``grouping``). Raises :class:`PushgatewayError` on failure."""
    scheme = urllib.parse.urlsplit(url).scheme if "://" in url else "http"
    if scheme not in ("http", "https"):
        raise PushgatewayError(url, f"only http:// and https:// URLs are supported, not {scheme}://")
    registry = build_registry(report)
    key = grouping_key(report, grouping)
    try:
        push_to_gateway(url, job=job, registry=registry, grouping_key=key, timeout=timeout_s)
    except (OSError, http.client.HTTPException, ValueError) as exc:
        raise PushgatewayError(url, _describe(exc)) from exc


def _describe(exc: BaseException) -> str:
    """A one-line reason from a urllib/http.client error (HTTPError: status and the gateway's text)."""
    if isinstance(exc, urllib.error.HTTPError):
        try:
            body = exc.read().decode("utf-8", "replace").strip()
        except OSError:
            body = ""
        return f"HTTP {exc.code} {exc.reason}" + (f": {body[:300]}" if body else "")
    if isinstance(exc, urllib.error.URLError):
        return str(exc.reason)
    if isinstance(exc, TimeoutError):
        return "timed out"
    return str(exc) or type(exc).__name__
