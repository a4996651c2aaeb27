"""Prometheus's own rule engine over simulated counters: ``promtool test rules``.

The shipped rules file is evaluated as it is, by promtool, over input series written from the
simulation (one ``pipeline`` label value per simulated pipeline run). promtool evaluates every
group at the test's ``evaluation_interval`` from t=0, stores the ``ALERTS`` series it produces,
and then answers PromQL queries over that history: when each alert episode started. Nothing of
PromQL is re-implemented here; this module writes YAML and reads promtool's answer.

Only the groups that hold the simulated alerts (on judge scores and the contradiction share; on
retrieval latency in a latency simulation) are kept, and of their recording rules only those the
alerts depend on (transitively): the others cannot change when an alert fires and would only cost
evaluation time (the 7-day dashboard means are the most expensive rules of the file).

A drop alert is tested over several windows (1h, 6h, 12h, 24h: a ``window`` label on each); Alertmanager
groups them by alert, service, pipeline and metric, so one incident seen by two windows is one page.
The episodes counted here are the same: an alert's firing series with the ``window`` label dropped.
"""

from __future__ import annotations

import math
import re
import shutil
import subprocess
import tempfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from .. import semconv as sc
from ..errors import ConfigError
from .answers import PromtoolAnswers, promtool_version

DAY_S = 86_400.0
QUERY_SPAN_S = 3 * 3600.0  # measured time per ALERTS query (promtool's per-query sample limit)
EPISODE_QUERIES = 4  # the kinds of ALERTS query per span: false starts, first start after, starts after, windows
# The test statistics the quality alerts page on (every window): their tails on stationary traffic are what the
# false-page budget assumes to be normal (quality.alert_alpha)
# (no backslash: promtool quotes the query back Go-style, and parse_output matches it by text)
Z_RECORDS = "ragmon:(score_failures:rise|score_ratio:drop|answers_contradicting:rise)_z"
TAIL_WINDOWS = ("1h", "6h", "12h", "24h")  # generate_rules.py WINDOW and LONG_WINDOWS
PHASE_SERIES = "ragmon_sim_phase"  # 0 warm-up, 1 measured before the incident, 2 after it
_NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")
_GOT = re.compile(r"^\s*(\{.*\})\s+(\S+)\s*$")
_LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')


@dataclass(frozen=True, slots=True)
class SeriesSet:
    """Input series of one simulated pipeline: metric -> counter name -> values per scrape (metric ""
    for counters without a metric label)."""

    pipeline: str
    judge: str
    counters: dict[str, dict[str, Sequence[float]]]
    phases: Sequence[int]  # per scrape


@dataclass(frozen=True, slots=True)
class Episode:
    alertname: str
    severity: str
    pipeline: str
    metric: str
    value: float  # what the query returned: an episode count, or a first timestamp (s)
    window: str = ""  # the drop test's window, in the query that keeps it (which windows fire)
    record: str = ""  # the test statistic's recording rule, in the tail queries


def promtool_path() -> str:
    path = shutil.which("promtool")
    if path is None:
        raise ConfigError("promtool", "not found on PATH: install Prometheus (Debian: apt-get install prometheus)")
    return path


QUALITY_SERIES = ("ragmon_score", sc.M_ANSWERS_CONTRADICTING)  # what a quality alert reads
LATENCY_SERIES = ("ragmon_retrieval_latency",)  # what the retrieval latency alert reads


def _records(rules: dict[str, Any]) -> dict[str, str]:
    return {rule["record"]: rule["expr"] for group in rules.get("groups", []) for rule in group.get("rules", [])
            if "record" in rule}


def alert_series(rules: dict[str, Any], series: Sequence[str] = QUALITY_SERIES) -> dict[str, str]:
    """Alert name -> the simulated series it reads (one of ``series``; recording rules expanded)."""
    records = _records(rules)
    out: dict[str, str] = {}
    for group in rules.get("groups", []):
        for rule in group.get("rules", []):
            if "alert" in rule:
                expanded = _expand_names(rule["expr"], records)
                reads = next((s for s in series if s in expanded), None)
                if reads is not None:
                    out[rule["alert"]] = reads
    return out


def quality_rules(rules: dict[str, Any], keep_alert: Any = None,
                  series: Sequence[str] = QUALITY_SERIES) -> dict[str, Any]:
    """The groups of ``rules`` that hold alerts on ``series`` (judge scores and the contradiction share
    by default), cut to what those alerts read."""
    records = _records(rules)
    reading = alert_series(rules, series)
    alerts = [
        rule for group in rules.get("groups", []) for rule in group.get("rules", [])
        if "alert" in rule and rule["alert"] in reading and (keep_alert is None or keep_alert(rule["alert"]))
    ]
    needed: set[str] = set()
    todo = [name for a in alerts for name in _NAME.findall(a["expr"]) if name in records]
    while todo:
        name = todo.pop()
        if name in needed:
            continue
        needed.add(name)
        todo.extend(n for n in _NAME.findall(records[name]) if n in records)
    groups = []
    for group in rules.get("groups", []):
        kept = [r for r in group.get("rules", []) if r.get("record") in needed or r in alerts]
        if kept:
            groups.append({**group, "rules": kept})
    return {"groups": groups}


_RISE_Z_LEVEL = re.compile(r"rise_z\w+(?:\{[^}]*\})? > ([\d.]+)")


def drop_z(rules: dict[str, Any]) -> float | None:
    """The level the drop and rise alerts of ``rules`` page above (generate_rules.py DROP_Z), or None: what a
    report records so that cells run under other budgets are told apart."""
    for group in rules.get("groups", []):
        for rule in group.get("rules", []):
            found = _RISE_Z_LEVEL.search(rule.get("expr", "")) if "alert" in rule else None
            if found:
                return float(found.group(1))
    return None


def _expand_names(expr: str, records: dict[str, str], depth: int = 0) -> str:
    if depth > 8:
        return expr
    return expr + " " + " ".join(_expand_names(records[n], records, depth + 1)
                                 for n in _NAME.findall(expr) if n in records)


def _values(values: Iterable[float]) -> str:
    # counters written exactly: a week of traffic passes a million, where 6 significant digits would
    # round each scrape by up to 5 and a rate of the difference of two buckets becomes noise
    return " ".join(str(int(v)) if v == int(v) else f"{v:.6f}".rstrip("0") for v in values)


def _phase_values(phases: Sequence[int]) -> str:
    """Phases in promtool's expanding notation (``0x2015 1x300 2x700``): runs of one value."""
    out = []
    i = 0
    while i < len(phases):
        j = i
        while j + 1 < len(phases) and phases[j + 1] == phases[i]:
            j += 1
        out.append(f"{phases[i]}x{j - i}" if j > i else str(phases[i]))
        i = j + 1
    return " ".join(out)


def group_order_of(rules: dict[str, Any]) -> list[str]:
    """The rules file's groups in its own order. promtool evaluates the groups of a step in an order it does not
    guarantee unless the test names one (``group_eval_order``); unnamed, it changed from run to run, so a long
    window (``ragmon-quality-long``, summing the hourly records of ``ragmon-quality``) read the hourly record of
    this step in some runs and of the step before in others, and one simulation gave different counts twice."""
    return [str(g["name"]) for g in rules.get("groups", [])]


def test_file(
    rule_file: Path,
    sets: Sequence[SeriesSet],
    gauges: dict[str, dict[tuple[str, str], float]],
    scrape_s: float,
    evaluation_s: float,
    end_s: float,
    measured_s: float,
    service: str = "sim",
    tail_levels: Sequence[float] = (),
    tail_z: float | None = None,
    group_order: Sequence[str] = (),
) -> dict[str, Any]:
    """A promtool unit-test document: the input series and the queries over ``ALERTS``; with ``tail_levels``,
    also how often each test statistic (``Z_RECORDS``, and with ``tail_z`` the mean's drop against its limit) was
    above each level while measured (``tail_queries``). ``group_order``: the rule groups in the order promtool
    evaluates them at each step (``group_order_of``)."""
    series: list[dict[str, str]] = []
    n_scrapes = max(len(s.phases) for s in sets)
    for s in sets:
        base = f'service="{service}",pipeline="{s.pipeline}",job="ragmon",instance="sim"'
        series.append({"series": f"{PHASE_SERIES}{{{base}}}", "values": _phase_values(s.phases)})
        for metric, counters in s.counters.items():
            metric_label = f',metric="{metric}"' if metric else ""
            labels = f'{base},judge="{s.judge}"{metric_label},sample="{sc.SAMPLE_STREAM_RATE}"'
            for name, values in counters.items():
                # a value per scrape from t=scrape_s; t=0 holds the zero the agent starts from;
                # a name with labels of its own (a histogram bucket's le) keeps them
                own, _, extra = name.partition("{")
                full = f"{own}{{{labels},{extra}" if extra else f"{name}{{{labels}}}"
                series.append({"series": full, "values": _values([0.0, *values])})
    for name, by_key in gauges.items():
        for (judge, metric), value in by_key.items():
            series.append({"series": f'{name}{{judge="{judge}",metric="{metric}",job="ragmon",instance="sim"}}',
                           "values": f"{value:g}x{n_scrapes}"})
    firing = 'max without(window) (ALERTS{alertstate="firing"})'
    before = f'max without(window) (ALERTS{{alertstate="firing"}} offset {int(evaluation_s)}s)'
    starts = f"({firing} unless {before})"
    # the same starts per window: which of an alert's windows fire (one page may start in several)
    window_starts = ('(ALERTS{alertstate="firing"} unless '
                     f'ALERTS{{alertstate="firing"}} offset {int(evaluation_s)}s)')
    phase = f"on(service, pipeline) ({PHASE_SERIES} == %d)"
    tests = []
    # one query per QUERY_SPAN_S of the measured time: promtool's engine loads at most 10,000 samples per
    # query, and a subquery over a day of an alert's windows (each its own ALERTS series, a 24h one firing
    # for a day) on a few pipelines exceeds it; a range of the span minus a second never counts the step on
    # a boundary twice
    span = int(QUERY_SPAN_S)
    for end in range(int(end_s), int(end_s - measured_s), -span):
        rng = f"[{span - 1}s:{int(evaluation_s)}s]"
        for query in (
            # episodes that started while measured, before any incident: false pages
            f"sum_over_time(({starts} and {phase % 1}){rng})",
            # the first episode that started after the incident (a timestamp in seconds)
            f"min_over_time(timestamp({starts} and {phase % 2}){rng})",
            # episodes after the incident (a slow drift may page, resolve and page again)
            f"sum_over_time(({starts} and {phase % 2}){rng})",
            # the false episodes' windows
            f"sum_over_time(({window_starts} and {phase % 1}){rng})",
        ):
            tests.append({"expr": query, "eval_time": f"{end}s", "exp_samples": []})
        for query in tail_queries(tail_levels, rng, phase % 1, tail_z):
            tests.append({"expr": query, "eval_time": f"{end}s", "exp_samples": []})
    return {
        "rule_files": [str(rule_file)],
        "evaluation_interval": f"{int(evaluation_s)}s",
        **({"group_eval_order": list(group_order)} if group_order else {}),
        "tests": [{
            "interval": f"{int(scrape_s)}s",
            "input_series": series,
            "promql_expr_test": tests,
        }],
    }


TAIL_POINTS = "points"  # the tail column that counts every measured evaluation


def tail_columns(levels: Sequence[float]) -> list[tuple[str, float, str]]:
    """The tail queries of one span, in order: (window, level, column) — per window, every measured evaluation
    (``TAIL_POINTS``, level −inf), then those above each of ``levels`` (column ``f"{level:g}"``). Empty ``levels``:
    none, so the ALERTS queries' answers stay as they were."""
    if not levels:
        return []
    return [(window, level, TAIL_POINTS if level == -math.inf else f"{level:g}")
            for window in TAIL_WINDOWS for level in (-math.inf, *levels)]


DROP_AT_LIMIT = "ragmon:score_ratio:drop_at_limit_z"  # + window: the mean's drop against its skew limit


def drop_at_limit(window: str, z: float) -> str:
    """The mean-drop statistic moved by its skew term, ``drop_z − (drop_z_limit − z)``: above ``z`` exactly when
    the drop passes the limit it pages at, so its tail is read on the same scale as the share rises' (which
    page above ``z`` itself). Present where the limit is (a window with scored traces and a baseline)."""
    moved = f"ragmon:score_ratio:drop_z{window} - (ragmon:score_ratio:drop_z_limit{window} - {z:g})"
    return f'label_replace({moved}, "record", "{DROP_AT_LIMIT}{window}", "", "")'


def tail_queries(levels: Sequence[float], rng: str, measured: str, z: float | None = None) -> list[str]:
    """One query per ``tail_columns``: per pipeline, metric and test statistic of its window, its evaluations in
    ``rng`` while ``measured`` above the column's level. The statistic's name goes to a ``record`` label (an
    ``*_over_time`` drops the metric name). With ``z`` (the rules' DROP_Z), the mean's drop against its limit
    (``drop_at_limit``) is counted too. One window a query: promtool's engine holds at most 10,000 samples
    at once, and a 3-hour subquery of every statistic over every window of 20 pipelines would hold ~20,000."""
    out = []
    for window, level, _column in tail_columns(levels):
        named = f'label_replace({{__name__=~"{Z_RECORDS}{window}"}}, "record", "$1", "__name__", "(.+)")'
        if z is not None:
            named = f"({named} or {drop_at_limit(window, z)})"
        out.append(f"sum by(pipeline, metric, record) (count_over_time((({named} > {level:g}) and {measured}){rng}))")
    return out


def run_promtool(rules: dict[str, Any], document_of: Any, timeout_s: float = 3600.0,
                 workdir: Path | None = None, answers: PromtoolAnswers | None = None,
                 kinds: int = EPISODE_QUERIES) -> list[list[Episode]]:
    """Write the rules and the test, run promtool (or read its answer from ``answers``, where the same
    question was answered before), return the samples of each of the ``kinds`` queries per span (the episode
    queries, then any tail queries), merged over the spans."""
    with tempfile.TemporaryDirectory(prefix="ragmon-alerts-", dir=workdir) as tmp:
        rule_file = Path(tmp) / "rules.yml"
        rules_text = yaml.safe_dump(rules, width=10**9, sort_keys=False)
        rule_file.write_text(rules_text, encoding="utf-8")
        document = document_of(rule_file)
        test = Path(tmp) / "test.yml"
        test_text = yaml.safe_dump(document, width=10**9, sort_keys=False)
        test.write_text(test_text, encoding="utf-8")
        promtool = promtool_path()
        # the question without the folder it was written to
        key = "" if answers is None else answers.key(promtool_version(promtool), rules_text, test_text.replace(tmp, ""))
        output = None if answers is None else answers.get(key, accept=_reported)
        if output is None:
            proc = subprocess.run([promtool, "test", "rules", str(test)], capture_output=True, text=True,
                                  timeout=timeout_s, check=False)
            output = proc.stdout + proc.stderr
            # 0: every query empty, 1: some query "failed" (got samples: what is read here); anything else (a
            # signal, a crash) would read as a run in which nothing fired
            if proc.returncode not in (0, 1) or not _reported(output):
                raise ConfigError("promtool", f"exited with {proc.returncode} without a test report: {output[-400:]!r}")
            if answers is not None:
                answers.put(key, output)
    tests = document["tests"][0]["promql_expr_test"]
    per_test = parse_output(output, [(q["expr"], q["eval_time"]) for q in tests])
    # each kind of query over every measured day, merged per kind
    merged: list[list[Episode]] = [[] for _ in range(kinds)]
    for i, samples in enumerate(per_test):
        merged[i % kinds].extend(samples)
    return merged


def _reported(output: str) -> bool:
    return any(word in output for word in ("SUCCESS", "FAILED"))


def parse_output(text: str, queries: Sequence[tuple[str, str]]) -> list[list[Episode]]:
    """promtool's report of the expression tests (each 'fails' with what it got) as samples.

    A query whose result is empty passes and prints nothing: its list stays empty. Anything
    else promtool complains about (a rule that does not evaluate, a bad file) is an error."""
    results: list[list[Episode]] = [[] for _ in queries]
    current = -1
    for line in text.splitlines():
        stripped = line.strip()
        if ", err:" in stripped or stripped.startswith("err:"):
            raise ConfigError("promtool", f"rule or query evaluation failed: {stripped[:400]}")
        if stripped.startswith("expr:"):
            # promtool quotes the expression Go-style; a passing (empty) query prints nothing, so match
            # each report to its query by text, not by position
            expr = stripped.split('"', 1)[1].rsplit('", time:', 1)[0].replace('\\"', '"')
            when = stripped.rsplit("time: ", 1)[1].rstrip(",").strip()
            current = next((i for i, (q, t) in enumerate(queries) if q == expr and _same_time(t, when)), -1)
            continue
        if stripped.startswith(("rule:", "alertname:")):
            raise ConfigError("promtool", f"rule evaluation failed: {stripped[:400]}")
        if stripped.startswith("got:") and current >= 0:
            for part in _split_samples(stripped[4:]):
                match = _GOT.match(part)
                if match is None:
                    continue
                labels = dict(_LABEL.findall(match.group(1)))
                results[current].append(Episode(
                    alertname=labels.get("alertname", ""), severity=labels.get("severity", ""),
                    pipeline=labels.get("pipeline", ""), metric=labels.get("metric", ""),
                    value=float(match.group(2)), window=labels.get("window", ""), record=labels.get("record", ""),
                ))
    if current < 0 and "SUCCESS" not in text and "FAILED" in text:
        raise ConfigError("promtool", f"unexpected output: {text[:400]}")
    return results


def _split_samples(text: str) -> list[str]:
    """'{a="1"} 2E+00, {b="2"} 3E+00' or one sample per line, as single samples."""
    parts = re.split(r",\s*(?=\{)", text.strip())
    return [p for p in (x.strip() for x in parts) if p and not math.isnan(0.0)]


def _seconds(duration: str) -> float:
    """'864000s' or promtool's '1w3d2h' as seconds."""
    units = {"w": 604800, "d": 86400, "h": 3600, "m": 60, "s": 1, "ms": 0.001}
    return sum(float(n) * units[u] for n, u in re.findall(r"(\d+(?:\.\d+)?)(ms|w|d|h|m|s)", duration))


def _same_time(a: str, b: str) -> bool:
    return abs(_seconds(a) - _seconds(b)) < 1e-6
