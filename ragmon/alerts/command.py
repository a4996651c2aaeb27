"""``ragmon alerts simulate LABELS.jsonl``: what the shipped alerts do with your traffic and your labels.

The judge scores every labelled row once (cached); simulated pipelines then draw judged traces
from the faithful / unfaithful pools by hour-of-day question mix, through the agent's own sampling
(a fixed rate or power-based), and Prometheus's rule engine (promtool) evaluates the shipped rules
over the simulated weeks. Reported per severity: false pages per pipeline per 30 days (stationary
traffic, and the time before each incident), and for steps of the failing share (+5, +10, +20
points) and a slow drift, how often and how fast they page. See docs/alerts.md.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import yaml

from .. import quality
from ..config import add_setting_flags
from ..errors import ConfigError, JudgeError, ModelError
from ..scoring.factory import add_judge_argument
from ..scoring.onnx_runner import cpu_model
from .answers import PromtoolAnswers
from .cases import Case, default_cases
from .latency import MEDIAN_S, SIGMA, LatencyModel
from .pools import CONTRADICTING_KEY, CONTRADICTIONS, Pools, auc, build_pools, judge_build
from .promtool import LATENCY_SERIES, alert_series, drop_z
from .report import every_alert, summarize, table
from .runner import Settings, simulate
from .traffic import MIN_WARMUP_DAYS, WARMUP_DAYS, Sampling, TrafficModel

NAME: Final = "alerts"
HELP: Final = "measure the shipped alerts end to end: false pages and time-to-page on simulated traffic"
DESCRIPTION: Final = "ragmon alerts simulate: " + (__doc__ or "").split("\n\n")[0].split(": ", 1)[-1]

RULES = Path(__file__).resolve().parents[2] / "deploy" / "prometheus" / "ragmon-rules.yml"
DEFAULT_CACHE = Path.home() / ".cache" / "ragmon" / "alerts"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="alerts_command", required=True, metavar="SUBCOMMAND")
    sim = sub.add_parser("simulate", help="false pages and time-to-page of the shipped rules on simulated traffic",
                         description=(__doc__ or "").split("\n\n")[0])
    sim.add_argument("labels", type=Path, nargs="?", default=None,
                     help="labelled rows in the calibration format (ragmon calibrate's input); not for --latency")
    add_judge_argument(sim, help="judge that scores the rows")
    sim.add_argument("--judge-base-url", default=None, help="OpenAI-compatible base URL for --judge llm")
    sim.add_argument("--judge-model", default=None, help="chat model for --judge llm")
    add_setting_flags(sim)  # --judge-timeout-s, --judge-concurrency (rows scored at once): the agent's settings
    sim.add_argument("--judge-profile", type=Path, default=None, metavar="PROFILE.json",
                     help="a local judge profile from `ragmon calibrate --fit` (scores and error rates)")
    sim.add_argument("--rules", type=Path, default=RULES, help="Prometheus rules file (default: the shipped one)")
    sim.add_argument("--rate", type=float, default=1.0, help="requests per second of each pipeline (default 1)")
    sim.add_argument("--pipelines", type=int, default=1,
                     help="pipelines per run (default 1); a fleet: give the rules generated for it (--rules) and "
                          "its --alpha")
    sim.add_argument("--chunk", type=int, default=20, help="simulated pipelines per promtool process (default 20)")
    sim.add_argument("--latency", action="store_true",
                     help="simulate retrieval latency (log-normal per request) and the latency alerts instead of "
                          "judge scores; incidents are steps that slow every retrieval by the step (1.0 = twice)")
    sim.add_argument("--latency-median", type=float, default=MEDIAN_S, metavar="SECONDS",
                     help=f"--latency: median retrieval time (default {MEDIAN_S:g})")
    sim.add_argument("--latency-sigma", type=float, default=SIGMA,
                     help=f"--latency: log-normal spread (default {SIGMA:g}: P95 = median x 2.7)")
    sim.add_argument("--days", type=float, default=7.0, help="measured days per run, after the warm-up")
    sim.add_argument("--warmup-days", type=float, default=WARMUP_DAYS, metavar="DAYS",
                     help=f"history simulated before measuring (default {WARMUP_DAYS:g}: the rules' baseline, the same "
                          "window of the past 7 days, whole for every window; fewer: a new pipeline, a quicker look)")
    sim.add_argument("--runs", type=int, default=10, help="runs per case (default 10)")
    sim.add_argument("--cases", default="all",
                     help="comma list: stationary, step_SIZE, drift_SIZE (default: stationary, step_0.05, "
                          "step_0.10, step_0.20, drift_0.10)")
    sim.add_argument("--base-share", type=float, default=0.10,
                     help="true failing share of the incident metric before any incident (default 0.10)")
    sim.add_argument("--metric", default=None,
                     help=f"metric the incidents change (default: the first labelled one); '{CONTRADICTIONS}': the "
                          "share of answers contradicting their sources (needs labels.contradicts)")
    sim.add_argument("--group-by", default="generator", metavar="META_FIELD",
                     help="meta field whose values are question groups with an hour-of-day mix ('' = none)")
    sim.add_argument("--sample-rate", type=float, default=1.0, help="fixed judging rate when --detect-drop is off")
    sim.add_argument("--detect-drop", type=float, default=None,
                     help="power-based sampling: the rise of the failing share to detect (e.g. 0.08)")
    sim.add_argument("--alpha", type=float, default=quality.alert_alpha(),
                     help=f"power-based sampling's one-sided level (default {quality.alert_alpha():.3g}, the rules')")
    sim.add_argument("--power", type=float, default=0.8, help="power-based sampling's power (default 0.8)")
    sim.add_argument("--page-within", type=float, default=120.0, metavar="MINUTES",
                     help="an incident counts as detected when paged within this (default 120)")
    sim.add_argument("--evaluation-interval", type=float, default=300.0, metavar="SECONDS",
                     help="promtool's evaluation step (default 300: 5x cheaper than the rules' 60 s)")
    sim.add_argument("--tail-levels", default="", metavar="Z,Z,...",
                     help="also count, on stationary runs, the evaluations at which each test statistic was above "
                          "each level, against the normal tail the false-page budget assumes (e.g. 2,3,4)")
    sim.add_argument("--seed", type=int, default=0)
    sim.add_argument("--jobs", type=int, default=2, help="promtool processes at once (default 2)")
    sim.add_argument("--cache", type=Path, default=DEFAULT_CACHE,
                     help="where judge scores and promtool's answers (per chunk of pipelines) are kept: a stopped "
                          "run started again with the same arguments skips the chunks it had finished")
    sim.add_argument("--fresh", action="store_true",
                     help="ask promtool every chunk again, even where an answer is kept (none is written either)")
    sim.add_argument("--out", type=Path, default=None, metavar="REPORT.json")
    sim.add_argument("--markdown", type=Path, default=None, metavar="REPORT.md")


def _score_rows(args: argparse.Namespace) -> Any:
    """Scores per row with the chosen judge: the same judge and scoring loop as ``ragmon calibrate``."""
    from ..calibration.command import Progress, make_judge, rows_at_once, score_rows
    from ..scoring.claim_verdicts import contradicts
    from ..types import Scores

    def values(scores: Scores) -> dict[str, float]:
        out = scores.as_dict()
        verdict = contradicts(scores.details)
        if verdict is not None:  # the contradiction share's own series: the judge's claim verdicts
            out[CONTRADICTING_KEY] = float(verdict)
        return out

    def score(rows: list[Any]) -> list[dict[str, float] | None]:
        judge = make_judge(args)
        scored, _failures = asyncio.run(score_rows(judge, rows, rows_at_once(args), Progress(len(rows), enabled=True)))
        by_line = {item.row.line: values(item.scores) for item in scored}
        return [by_line.get(r.line) for r in rows]

    return score


def _error_rates(args: argparse.Namespace, pools: Pools) -> tuple[dict[str, tuple[float, float]], dict[str, float]]:
    """The rates the agent would export for this judge: what the judge declares (``error_rates_of``: a
    fitted profile's, else its measured defaults; the contradiction check's under ``contradictions``),
    for the series simulated here, and the score gaps among them. The rules correct with them."""
    from ..calibration.command import make_judge
    from ..scoring.error_rates import error_rates_of

    rates = {m: r for m, r in error_rates_of(make_judge(args)).items() if m in pools.metrics()}
    return ({m: (r.sensitivity, r.specificity) for m, r in rates.items()},
            {m: r.score_gap for m, r in rates.items() if r.score_gap is not None})


def _cases(spec: str) -> tuple[Case, ...]:
    if spec == "all":
        return default_cases()
    out = []
    for name in (s.strip() for s in spec.split(",") if s.strip()):
        kind, _, size = name.partition("_")
        try:
            value = float(size) if kind in ("step", "drift") else 0.0
        except ValueError:
            value = -1.0
        if name != "stationary" and (kind not in ("step", "drift") or value <= 0):
            raise ConfigError("--cases", f"unknown case {name!r}: stationary, step_SIZE or drift_SIZE")
        out.append(Case(name, "none", 0.0) if name == "stationary" else Case(f"{kind}_{value:.2f}", kind, value))
    return tuple(out)


def run(args: argparse.Namespace) -> int:
    try:
        return _run(args)
    except (ConfigError, ModelError, JudgeError) as exc:
        print(f"ragmon alerts simulate: {exc}", file=sys.stderr)
        return 2


@dataclass(frozen=True, slots=True)
class Prepared:
    """What one ``ragmon alerts simulate`` call simulates: the scored pools, its settings and rules."""

    pools: Pools
    settings: Settings
    rules: dict[str, Any]
    metric: str


def prepare(args: argparse.Namespace, tail_levels: tuple[float, ...] = ()) -> Prepared:
    """Score the labelled rows into pools (or read them from the cache) and build the settings the arguments
    describe. ``_run`` simulates them; a bench can replay one pipeline of them (``runner.pipeline_rng``)."""
    if args.labels is None or not args.labels.is_file():
        raise ConfigError("LABELS", f"no such file: {args.labels}")
    pools = build_pools(args.labels, args.judge, args.judge_profile, _score_rows(args), args.group_by or None,
                        args.cache)
    if not pools.rows:
        raise ConfigError("LABELS", f"{args.labels}: no row could be scored")
    labelled = pools.labelled_metrics()
    metric = args.metric or (labelled[0] if labelled else None)
    if metric is None or metric not in labelled:
        raise ConfigError("--metric", f"incidents need a metric with both human labels in the file; have: "
                          f"{', '.join(labelled) or 'none'}")
    rules = yaml.safe_load(args.rules.read_text(encoding="utf-8"))
    error_rates, score_gaps = _error_rates(args, pools)
    settings = Settings(
        traffic=TrafficModel(rate_per_s=args.rate, days=args.days, warmup_days=args.warmup_days),
        sampling=Sampling(rate=args.sample_rate, detect_drop=args.detect_drop, alpha=args.alpha, power=args.power),
        base_share=args.base_share,
        thresholds={m.name: m.threshold for m in quality.online()},
        error_rates=error_rates,
        score_gaps=score_gaps,
        judge=args.judge,
        incident_metric=metric,
        runs=args.runs,
        pipelines=args.pipelines,
        seed=args.seed,
        jobs=args.jobs,
        evaluation_s=args.evaluation_interval,
        chunk=args.chunk,
        tail_levels=tail_levels,
    )
    return Prepared(pools, settings, rules, metric)


def _run(args: argparse.Namespace) -> int:
    if not args.rules.is_file():
        raise ConfigError("--rules", f"no such file: {args.rules}")
    if args.rate <= 0 or args.runs < 1 or args.pipelines < 1 or args.days <= 0 or args.chunk < 1:
        raise ConfigError("--rate/--runs/--pipelines/--days/--chunk", "must be positive")
    tail_levels = _levels(args.tail_levels)
    if args.warmup_days < MIN_WARMUP_DAYS:
        raise ConfigError("--warmup-days", f"must be at least {MIN_WARMUP_DAYS:g}: the rules compare each window "
                                           "with the same window a day before")
    cases = _cases(args.cases)
    if args.latency:
        if tail_levels:
            raise ConfigError("--tail-levels", "the latency alert has no test statistic to count (use it without "
                                               "--latency)")
        return _run_latency(args, cases)
    started = time.monotonic()
    prepared = prepare(args, tail_levels)
    pools, settings, rules, metric = prepared.pools, prepared.settings, prepared.rules, prepared.metric
    answers = _answers(args)
    results = simulate(pools, cases, settings, rules, answers=answers)
    report = summarize(results, args.page_within * 60.0)
    report["alerts"] = every_alert(rules, report, set(alert_series(rules)))
    report.update({
        "labels": str(args.labels),
        "rows": len(pools.rows),
        "groups": list(pools.groups),
        "judge": args.judge,
        "judge_profile": str(args.judge_profile) if args.judge_profile else None,
        "judge_build": judge_build(),
        "cpu": cpu_model(),  # the judge's int8 scores differ a little between CPUs (reader/seven_bit.py)
        "metric": metric,
        "auc": None if (value := auc(pools, metric)) is None else round(value, 3),
        "error_rates": {m: {"sensitivity": se, "specificity": sp, "score_gap": settings.score_gaps.get(m)}
                        for m, (se, sp) in settings.error_rates.items()},
        "rules": str(args.rules),
        "drop_z": drop_z(rules),
        "rate_per_s": args.rate,
        "sampling": {"detect_drop": args.detect_drop, "sample_rate": args.sample_rate, "alpha": args.alpha,
                     "power": args.power},
        "base_share": args.base_share,
        "days": args.days,
        "warmup_days": args.warmup_days,
        "runs": args.runs,
        "pipelines": args.pipelines,
        "seed": args.seed,
        "evaluation_interval_s": args.evaluation_interval,
        "cases": [c.name for c in cases],
        "promtool_answers": _answers_used(answers),
        "seconds": round(time.monotonic() - started, 1),
    })
    title = (f"{args.labels.name}: judge {args.judge}{' + ' + args.judge_profile.name if args.judge_profile else ''}, "
             f"{args.rate:g} req/s, {report['judged_per_hour']:.0f} judged/h, {args.runs} runs x {args.days:g} days")
    return _write(args, report, title)


def _levels(spec: str) -> tuple[float, ...]:
    """'2,3,4' -> (2.0, 3.0, 4.0): increasing, finite levels of a test statistic."""
    try:
        levels = tuple(float(x) for x in spec.split(",") if x.strip())
    except ValueError:
        levels = (float("nan"),)
    if any(not math.isfinite(x) for x in levels) or list(levels) != sorted(set(levels)):
        raise ConfigError("--tail-levels", f"expected increasing numbers separated by commas, got {spec!r}")
    return levels


def _run_latency(args: argparse.Namespace, cases: tuple[Case, ...]) -> int:
    """The retrieval latency alerts on simulated latency series (no labels, no judge)."""
    started = time.monotonic()
    rules = yaml.safe_load(args.rules.read_text(encoding="utf-8"))
    model = LatencyModel(median_s=args.latency_median, sigma=args.latency_sigma)
    settings = Settings(
        traffic=TrafficModel(rate_per_s=args.rate, days=args.days, warmup_days=args.warmup_days),
        sampling=Sampling(), base_share=0.0,
        thresholds={}, error_rates={}, score_gaps={}, judge="none", incident_metric=None, runs=args.runs,
        pipelines=args.pipelines, seed=args.seed, jobs=args.jobs, evaluation_s=args.evaluation_interval,
        chunk=args.chunk, latency=model,
    )
    empty = Pools(source="latency", judge="none", profile=None, rows=())
    answers = _answers(args)
    report = summarize(simulate(empty, cases, settings, rules, answers=answers), args.page_within * 60.0)
    report["alerts"] = every_alert(rules, report, set(alert_series(rules, LATENCY_SERIES)))
    report.update({
        "latency": {"median_s": model.median_s, "sigma": model.sigma, "p95_s": round(model.p95_s, 3)},
        "rules": str(args.rules), "rate_per_s": args.rate, "days": args.days,
        "warmup_days": args.warmup_days, "runs": args.runs,
        "pipelines": args.pipelines, "seed": args.seed, "evaluation_interval_s": args.evaluation_interval,
        "cases": [c.name for c in cases], "promtool_answers": _answers_used(answers),
        "seconds": round(time.monotonic() - started, 1),
    })
    title = (f"retrieval latency (median {model.median_s:g} s, P95 {model.p95_s:.2f} s): {args.rate:g} req/s, "
             f"{args.runs} runs x {args.days:g} days")
    return _write(args, report, title)


def _answers(args: argparse.Namespace) -> PromtoolAnswers | None:
    return None if args.fresh else PromtoolAnswers(args.cache / "promtool")


def _answers_used(answers: PromtoolAnswers | None) -> dict[str, Any] | None:
    """How many promtool tests the run asked for and how many it read back from an earlier run."""
    if answers is None:
        return None
    return {"asked": answers.asked, "reused": answers.reused, "kept_in": str(answers.directory)}


def _write(args: argparse.Namespace, report: dict[str, Any], title: str) -> int:
    text = table(report)
    print(title)
    print(text)
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    if args.markdown is not None:
        args.markdown.parent.mkdir(parents=True, exist_ok=True)
        args.markdown.write_text(f"### {title}\n\n{text}\n", encoding="utf-8")
    return 0
