"""``ragmon eval EVALSET (--app MOD:FN | --responses FILE | --traces FILE) [...]``.

Exit codes: 0 the gate passed, 1 the gate failed, 2 bad usage or unreadable input (including an
unreachable Pushgateway: the run's result would otherwise be lost silently).
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import logging
import os
import sys
from pathlib import Path
from typing import Any, Final

from .. import env
from ..config import JUDGE_COMMAND_SETTINGS, add_setting_flags, setting_values, settings_by_name
from ..errors import ConfigError, EvalInputError, GateRuleError, ModelError, PushgatewayError
from ..evaluators import EvaluatorSet, evaluator_set_from
from ..evaluators.judging import check_criteria_judge, criteria_of
from ..scoring.factory import add_judge_argument
from ..scoring.judge import Judge
from ..scoring.metrics.citations import DEFAULT_CITATION_PATTERN
from . import gate as gates
from . import ir
from .app_runner import DEFAULT_CONCURRENCY, DEFAULT_TIMEOUT_S
from .history import save_to_history
from .junit import render_junit
from .markdown import render_markdown
from .pushgateway import push_report
from .run import EvalOptions, evaluate, parse_rules
from .terminal import Progress, render_summary

NAME: Final = "eval"
HELP: Final = "evaluate a RAG app against a golden set (IR metrics, judges, CI gate)"
DESCRIPTION: Final = (
    "Run a golden set through your app (in-process, or recorded responses / OTLP traces), measure retrieval "
    "against the gold documents and generation with the agent's judges, compare with a baseline and gate. "
    "Exit 0 passed, 1 gate failed, 2 bad usage or input."
)

log = logging.getLogger("ragmon.eval")

EXIT_PASSED = 0
EXIT_GATE_FAILED = 1
EXIT_USAGE = 2


def positive_ints(text: str) -> tuple[int, ...]:
    """argparse type: "1,3,5,10" -> (1, 3, 5, 10), sorted and de-duplicated, every value >= 1."""
    try:
        values = tuple(sorted({int(part) for part in text.split(",") if part.strip()}))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {text!r}") from None
    if not values or values[0] < 1:
        raise argparse.ArgumentTypeError(f"expected positive integers, got {text!r}")
    return values


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("evalset", help="golden set, JSONL: id, question, ground_truth_docs, ... (docs/evaluation.md)")
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--app", metavar="MODULE:FUNCTION",
                        help="your decorated RAG entry point, called in-process with each question")
    source.add_argument("--responses", metavar="FILE.jsonl",
                        help="recorded responses: id, retrieved_ids, contexts, answer, latency_s")
    source.add_argument("--traces", metavar="FILE",
                        help="OTLP/JSON traces as the OpenTelemetry Collector's file exporter writes them")
    parser.add_argument("--doc-id-field", default=None, metavar="FIELD",
                        help="use this document metadata field as the id the gold set refers to")
    parser.add_argument("--k", type=positive_ints, default=ir.DEFAULT_KS, metavar="1,3,5,10",
                        help="cut-offs of hit/recall/precision/ndcg/two-hop recall (default 1,3,5,10)")
    parser.add_argument("--primary-k", type=int, default=None,
                        help="cut-off of the primary metric per question type, miss classes and composite "
                        "(default 5, or the --k value closest to it)")
    add_judge_argument(parser, allow_none=True, help="generation judge, or none (retrieval only)")
    parser.add_argument("--judge-base-url", default=None, help="OpenAI-compatible base URL (or RAGMON_JUDGE_BASE_URL)")
    parser.add_argument("--judge-model", default=None, help="chat model for --judge llm (or RAGMON_JUDGE_MODEL)")
    add_setting_flags(parser)  # --judge-timeout-s, --judge-concurrency (questions judged at once): the agent's settings
    parser.add_argument("--concurrency", type=int, default=DEFAULT_CONCURRENCY,
                        help=f"app calls at once (default {DEFAULT_CONCURRENCY})")
    parser.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT_S,
                        help=f"seconds per app call (default {DEFAULT_TIMEOUT_S:g})")
    parser.add_argument("--citation-pattern", default=DEFAULT_CITATION_PATTERN,
                        help="regex of a citation marker; group 1 is a context number or document id "
                        "(default: [1] / [doc-id]); empty to skip citation metrics")
    parser.add_argument("--baseline", type=Path, default=None, metavar="OLD.json",
                        help="compare with a previous report: deltas with paired bootstrap intervals")
    parser.add_argument("--fail-if", action="append", default=[], metavar="RULE",
                        help="gate rule that fails the run, e.g. 'recall@5 < 0.85', 'faithfulness drop > 0.08', "
                        "'retrieval_p95_s > 0.5' (repeatable)")
    parser.add_argument("--warn-if", action="append", default=[], metavar="RULE", help="gate rule that only warns")
    parser.add_argument("--no-default-rules", action="store_true",
                        help="drop the default rules (composite drop > 0.05 warns; faithfulness drop > 0.08, "
                        "retrieval_p95_s > 0.5 and a significant drop > 0.1 of composite, recall@k or context "
                        "precision fail; docs/evaluation.md)")
    parser.add_argument("--significance", type=float, default=None, metavar="ALPHA",
                        help="fail a drop only when the paired bootstrap p-value is below ALPHA (e.g. 0.05)")
    parser.add_argument("--bootstrap", type=int, default=2000, metavar="N", help="bootstrap resamples (default 2000)")
    parser.add_argument("--seed", type=int, default=0, help="bootstrap seed (default 0)")
    parser.add_argument("--out", type=Path, default=None, metavar="REPORT.json", help="write the JSON report")
    parser.add_argument("--markdown", type=Path, default=None, metavar="FILE.md",
                        help="write a Markdown summary (CI job summary / PR comment)")
    parser.add_argument("--junit", type=Path, default=None, metavar="FILE.xml", help="write JUnit XML")
    parser.add_argument("--history", type=Path, default=None, metavar="DIR", help="keep every report in DIR")
    parser.add_argument("--pushgateway", default=None, metavar="URL",
                        help="push the aggregates to a Prometheus Pushgateway (job ragmon_eval)")
    parser.add_argument("--worst", type=int, default=10, help="worst questions listed (default 10)")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")
    parser.add_argument("--quiet", action="store_true", help="no terminal summary")
    parser.add_argument("--judge-profile", default=None, metavar="PROFILE.json",
                        help="local judge profile from `ragmon calibrate --fit` (or RAGMON_JUDGE_PROFILE)")
    evaluators_env = settings_by_name()["evaluators"].env  # the agent's variable: one file for both
    parser.add_argument("--evaluators", default=env.read(evaluators_env), metavar="FILE.yaml",
                        help="your own evaluators (docs/evaluators.md): one report row each and a default fail "
                             f"rule '<name> < <threshold>' (or {evaluators_env})")


def make_judge(args: argparse.Namespace, evaluators: EvaluatorSet | None = None) -> Judge | None:
    """The judge the agent would use with the same settings (RAGMON_JUDGE_* honoured); ``llm``
    evaluators need the LLM judge (ConfigError otherwise)."""
    specs = evaluators.specs if evaluators else ()
    check_criteria_judge(args.judge, specs)
    if args.judge == "none":
        return None
    from ..scoring.factory import build_judge, judge_settings

    return build_judge(judge_settings({"judge": args.judge, "judge_base_url": args.judge_base_url,
                                       "judge_model": args.judge_model,
                                       "judge_profile": getattr(args, "judge_profile", None),
                                       **_judge_flags(args)}),
                       criteria=criteria_of(specs))


def _judge_flags(args: argparse.Namespace) -> dict[str, Any]:
    return {name: getattr(args, name, None) for name in JUDGE_COMMAND_SETTINGS}


def _options(args: argparse.Namespace) -> EvalOptions:
    baseline = None
    if args.baseline is not None:
        try:
            baseline = json.loads(args.baseline.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise EvalInputError(f"--baseline {args.baseline}: cannot read a report: {exc}") from exc
        if not isinstance(baseline, dict) or "rows" not in baseline:
            raise EvalInputError(f"--baseline {args.baseline}: not a ragmon eval report (no 'rows')")
    if args.significance is not None and not 0 < args.significance < 1:
        raise EvalInputError(f"--significance must be between 0 and 1, got {args.significance}")
    for name in ("concurrency", "bootstrap"):
        if getattr(args, name) < 1:
            raise EvalInputError(f"--{name.replace('_', '-')} must be >= 1")
    try:  # parsed and checked as the agent's setting (ConfigError names it)
        judge_concurrency = setting_values(_judge_flags(args))["judge_concurrency"]
    except ConfigError as exc:
        raise EvalInputError(str(exc)) from None
    if not args.timeout > 0:
        raise EvalInputError("--timeout must be > 0")
    try:
        options = EvalOptions(
            evalset=args.evalset, app=args.app, responses=args.responses, traces=args.traces,
            doc_id_field=args.doc_id_field, ks=args.k, primary_k=args.primary_k, concurrency=args.concurrency,
            timeout_s=args.timeout, judge_concurrency=judge_concurrency,
            citation_pattern=args.citation_pattern or None,
            baseline=baseline, baseline_path=str(args.baseline or ""), significance=args.significance,
            n_resamples=args.bootstrap, seed=args.seed, worst=args.worst, judge_label=args.judge,
        )
        # the default recall rule sits at the run's primary cut-off, known once the options resolve it
        evaluators = evaluator_set_from(getattr(args, "evaluators", None))  # a bad file: ConfigError, a ValueError
        rules = parse_rules(args.fail_if, args.warn_if, defaults=not args.no_default_rules,
                            primary_k=options.primary_k or gates.DEFAULT_PRIMARY_K, evaluators=evaluators)
        return dataclasses.replace(options, rules=rules, evaluators=evaluators)
    except ValueError as exc:
        raise EvalInputError(str(exc)) from exc


async def _run(args: argparse.Namespace, options: EvalOptions, judge: Judge | None) -> dict[str, Any]:
    bars: dict[str, Progress] = {}

    def progress(phase: str, done: int, total: int) -> None:
        if args.no_progress:
            return
        bar = bars.get(phase)
        if bar is None:
            bar = bars[phase] = Progress(total, label=phase)
        bar.advance()
        if done >= total:
            bar.close()

    try:
        return await evaluate(options, judge, progress)
    finally:
        for bar in bars.values():
            bar.close()
        if judge is not None:
            await judge.aclose()


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(path)


def write_outputs(args: argparse.Namespace, report: dict[str, Any]) -> None:
    if args.out is not None:
        _write(args.out, json.dumps(report, indent=2, ensure_ascii=False) + "\n")
    if args.markdown is not None:
        _write(args.markdown, render_markdown(report, worst=args.worst))
    if args.junit is not None:
        _write(args.junit, render_junit(report))
    if args.history is not None:
        saved = save_to_history(report, args.history)
        log.info("report kept in %s", saved)


def run(args: argparse.Namespace) -> int:
    """The ``ragmon eval`` command; returns the exit code."""
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    try:
        options = _options(args)
        judge = make_judge(args, options.evaluators)
        report = asyncio.run(_run(args, options, judge))
        write_outputs(args, report)
    except (EvalInputError, GateRuleError) as exc:
        print(f"ragmon eval: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except (ConfigError, ModelError) as exc:
        print(f"ragmon eval: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except (OSError, ValueError) as exc:  # an unwritable path; a report JSON cannot hold
        print(f"ragmon eval: cannot write output: {exc}", file=sys.stderr)
        return EXIT_USAGE
    if not args.quiet:
        print(render_summary(report, color=sys.stdout.isatty(), worst=args.worst), end="")
    passed = bool(report["gate"]["passed"])
    if args.pushgateway:
        try:
            push_report(report, args.pushgateway)
        except PushgatewayError as exc:
            # a failed gate is the result CI needs; a lost push matters when the gate passed
            print(f"ragmon eval: {exc}", file=sys.stderr)
            return EXIT_USAGE if passed else EXIT_GATE_FAILED
    return EXIT_PASSED if passed else EXIT_GATE_FAILED


__all__ = ["EXIT_GATE_FAILED", "EXIT_PASSED", "EXIT_USAGE", "add_arguments", "run"]
