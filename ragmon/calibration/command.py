"""``ragmon calibrate FILE.jsonl``: how far to trust a judge, measured against human labels.

Scores every labelled row with the chosen judge (offline ``local`` or ``llm``), then reports
per metric the ROC AUC, balanced accuracy, precision/recall/F1 for the failure class and
Cohen's kappa (each with a bootstrap 95% interval), the best threshold, and for per-context
labels the MAP / MRR / NDCG@k of the judge's context ordering. Malformed lines are reported
with their line number and skipped; judge errors on a row are counted and skipped.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any, Final, TextIO

from ..config import JUDGE_COMMAND_SETTINGS, add_setting_flags, setting_values
from ..errors import ConfigError, JudgeError
from ..scoring.factory import add_judge_argument
from ..scoring.judge import Judge
from ..types import Document, RagTrace
from .dataset import LabelledRow, RowError, read_rows
from .report import Scored, build_report, format_table

NAME: Final = "calibrate"
HELP: Final = "measure a judge against human labels (JSONL)"
DESCRIPTION: Final = "Score labelled rows with a judge and report agreement with the human labels."

DEFAULT_THRESHOLD = 0.5  # the agent's default diagnosis threshold for every metric


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("file", type=Path, help="labelled rows, one JSON object per line (see docs/judges.md)")
    add_judge_argument(parser, help="judge to measure")
    parser.add_argument("--judge-base-url", default=None,
                        help="OpenAI-compatible base URL for --judge llm (or RAGMON_JUDGE_BASE_URL)")
    parser.add_argument("--judge-model", default=None, help="chat model for --judge llm (or RAGMON_JUDGE_MODEL)")
    parser.add_argument("--limit", type=int, default=None, metavar="N", help="score only the first N good rows")
    parser.add_argument("--out", type=Path, default=None, metavar="REPORT.json", help="write the JSON report here")
    parser.add_argument("--threshold", type=float, default=DEFAULT_THRESHOLD,
                        help="score below which a row counts as a failure (default 0.5, the agent's default)")
    parser.add_argument("--bootstrap", type=int, default=1000, metavar="N",
                        help="bootstrap resamples for the 95%% intervals (0 = none; default 1000)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the bootstrap (default 0)")
    parser.add_argument("--k", type=int, default=5, help="cut-off of NDCG@k for per-context labels (default 5)")
    add_setting_flags(parser)  # --judge-timeout-s, --judge-concurrency (rows scored at once): the agent's settings
    parser.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")
    parser.add_argument("--fit", type=Path, default=None, metavar="PROFILE.json",
                        help="fit the local judge to these labels (faithfulness, answer relevancy, context "
                        "relevance; cross-validated) and write a judge profile")
    parser.add_argument("--profile-name", default=None, metavar="NAME",
                        help="--fit: the profile's name, shown by the agent as ragmon_judge_info{profile} and on "
                        "the dashboard (default: the profile file's stem)")
    parser.add_argument("--judge-profile", type=Path, default=None, metavar="PROFILE.json",
                        help="score with a local judge profile written by --fit (or RAGMON_JUDGE_PROFILE)")


class Progress:
    """A dependency-free progress bar on stderr (a line every 10% when not a terminal)."""

    def __init__(self, total: int, stream: TextIO | None = None, enabled: bool = True) -> None:
        self.total = max(total, 1)
        self.done = 0
        self.failed = 0
        self._stream = stream if stream is not None else sys.stderr  # looked up now, not at import
        self._enabled = enabled
        self._tty = self._stream.isatty()
        self._start = time.monotonic()
        self._last_decile = -1

    def step(self, failed: bool = False) -> None:
        self.done += 1
        self.failed += int(failed)
        if not self._enabled:
            return
        if self._tty:
            self._stream.write("\r" + self._line())
            self._stream.flush()
        else:
            decile = self.done * 10 // self.total
            if decile != self._last_decile:
                self._last_decile = decile
                self._stream.write(self._line() + "\n")

    def _line(self) -> str:
        width = 30
        filled = int(width * self.done / self.total)
        elapsed = time.monotonic() - self._start
        rate = self.done / elapsed if elapsed > 0 else 0.0
        eta = (self.total - self.done) / rate if rate > 0 else 0.0
        failed = f" {self.failed} failed" if self.failed else ""
        return (f"[{'#' * filled}{'.' * (width - filled)}] {self.done}/{self.total} "
                f"{100 * self.done / self.total:3.0f}% {rate:5.1f} rows/s ETA {eta:4.0f}s{failed}")

    def close(self) -> None:
        if self._enabled and self._tty:
            self._stream.write("\n")


def make_judge(args: argparse.Namespace) -> Judge:
    """The judge to measure; configuration errors raise ConfigError / ModelError."""
    from ..scoring.factory import build_judge, judge_settings

    profile = getattr(args, "judge_profile", None)
    return build_judge(judge_settings({
        "judge": args.judge,
        "judge_base_url": args.judge_base_url,
        "judge_model": args.judge_model,
        "judge_profile": str(profile) if profile is not None else None,
        **judge_flags(args),
    }))


def judge_flags(args: argparse.Namespace) -> dict[str, Any]:
    """The judge settings a judging command takes as flags (``config.JUDGE_COMMAND_SETTINGS``), as given."""
    return {name: getattr(args, name, None) for name in JUDGE_COMMAND_SETTINGS}


def rows_at_once(args: argparse.Namespace) -> int:
    """Rows scored at once: ``--judge-concurrency`` > ``RAGMON_JUDGE_CONCURRENCY`` > the agent's default."""
    concurrency: int = setting_values(judge_flags(args))["judge_concurrency"]
    return concurrency


def _reasons(by_reason: dict[str, int]) -> str:
    return (": " + ", ".join(f"{n} {reason}" for reason, n in by_reason.items())) if by_reason else ""


def row_trace(row: LabelledRow) -> RagTrace:
    trace_id = hashlib.sha256(f"{row.line}:{row.id}".encode()).hexdigest()[:32]
    return RagTrace(
        trace_id=trace_id,
        service="calibrate",
        pipeline="calibrate",
        question=row.question,
        answer=row.answer,
        documents=tuple(Document(id=str(i), content=c, rank=i) for i, c in enumerate(row.contexts)),
    )


async def score_rows(
    judge: Judge, rows: list[LabelledRow], concurrency: int, progress: Progress
) -> tuple[list[Scored], list[dict[str, Any]]]:
    """Score rows with bounded concurrency; a failing row is recorded, not fatal."""
    semaphore = asyncio.Semaphore(max(1, concurrency))
    results: list[Scored | None] = [None] * len(rows)
    failures: list[dict[str, Any]] = []

    async def one(i: int, row: LabelledRow) -> None:
        async with semaphore:
            try:
                results[i] = Scored(row, await judge.score(row_trace(row)))
                progress.step()
            except JudgeError as exc:
                failures.append({"line": row.line, "id": row.id, "reason": exc.reason, "error": str(exc)[:300]})
                progress.step(failed=True)

    try:
        await asyncio.gather(*(one(i, r) for i, r in enumerate(rows)))
    finally:
        await judge.aclose()
        progress.close()
    failures.sort(key=lambda f: f["line"])
    return [r for r in results if r is not None], failures


def run(args: argparse.Namespace) -> int:
    path: Path = args.file
    if not path.is_file():
        print(f"ragmon calibrate: no such file: {path}", file=sys.stderr)
        return 2
    if args.limit is not None and args.limit < 1:
        print("ragmon calibrate: --limit must be >= 1", file=sys.stderr)
        return 2
    if not 0.0 <= args.threshold <= 1.0:
        print("ragmon calibrate: --threshold must be in [0, 1]", file=sys.stderr)
        return 2
    rows: list[LabelledRow] = []
    malformed: list[RowError] = []
    for item in read_rows(path, args.limit):
        if isinstance(item, RowError):
            malformed.append(item)
            print(f"ragmon calibrate: {path}: {item} (skipped)", file=sys.stderr)
        else:
            rows.append(item)
    if not rows:
        print(f"ragmon calibrate: {path}: no usable labelled row", file=sys.stderr)
        return 1

    try:
        judge = make_judge(args)
        concurrency = rows_at_once(args)
    except ConfigError as exc:  # a profile for another judge version, a malformed profile: one line
        print(f"ragmon calibrate: {exc}", file=sys.stderr)
        return 2
    if args.fit is not None:
        return run_fit(args, judge, rows)
    progress = Progress(len(rows), enabled=not args.no_progress)
    started = time.monotonic()
    scored, failures = asyncio.run(score_rows(judge, rows, concurrency, progress))
    elapsed = time.monotonic() - started

    body = build_report(scored, args.threshold, args.bootstrap, args.seed, args.k)
    report: dict[str, Any] = {
        "file": str(path),
        "judge": getattr(judge, "name", args.judge),
        "rows_read": len(rows) + len(malformed),
        "rows_scored": len(scored),
        "rows_failed": len(failures),
        "rows_malformed": len(malformed),
        "malformed": [{"line": e.line, "error": e.message} for e in malformed],
        "failed_by_reason": dict(sorted(Counter(f["reason"] for f in failures).items())),
        "failed": failures,
        "threshold": args.threshold,
        "bootstrap": args.bootstrap,
        "seed": args.seed,
        "seconds": round(elapsed, 2),
        "rows_per_second": round(len(rows) / elapsed, 2) if elapsed > 0 else None,
        **body,
        "rows": [
            {
                "line": item.row.line,
                "id": item.row.id,
                "labels": item.row.labels,
                "scores": item.scores.as_dict(),
                "reason": item.scores.details.get("reason"),
            }
            for item in sorted(scored, key=lambda item: item.row.line)
        ],
    }
    print(f"\n{path.name}: {len(scored)} rows scored by the {report['judge']} judge in {elapsed:.1f}s"
          f" ({len(malformed)} malformed, {len(failures)} failed{_reasons(report['failed_by_reason'])});"
          f" failure = score < {args.threshold}")
    if failures:  # the first failure's own words: its cause (timeout, connection refused, HTTP status, reply)
        print(f"first failure (line {failures[0]['line']}): {failures[0]['error']}")
    print(format_table(report))
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
        print(f"report written to {args.out}")
    return 0 if scored else 1


def run_fit(args: argparse.Namespace, judge: Judge, rows: list[LabelledRow]) -> int:
    """``--fit PROFILE.json``: cross-validated refit of the local judge on ``rows``."""
    from ..scoring.local import LocalJudge, save_profile
    from .fit import TooFewLabels, fit_profile, format_fits

    if not isinstance(judge, LocalJudge):
        print("ragmon calibrate: --fit fits the local judge; use --judge local", file=sys.stderr)
        return 2
    started = time.monotonic()
    try:
        profile, fits, refused = fit_profile(judge, rows, boot=args.bootstrap, seed=args.seed,
                                             name=args.profile_name)
    except TooFewLabels as exc:
        print(f"ragmon calibrate: too few labels to fit: {exc}", file=sys.stderr)
        return 2
    for message in refused:
        print(f"ragmon calibrate: not fitted: {message}", file=sys.stderr)
    print(f"\n{args.file.name}: {len(rows)} rows, local judge refitted in {time.monotonic() - started:.1f}s")
    print(format_fits(fits))
    save_profile(profile, args.fit)
    print(f"profile written to {args.fit} (use it with --judge-profile {args.fit})")
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps({"file": str(args.file), "fits": [
            {"metric": f.metric, "n": f.n, "failures": f.failures, "default": f.default, "refit": f.refit,
             "gain_ci95": list(f.gain_ci95), "learning_curve": f.curve, "threshold": f.threshold} for f in fits],
            "refused": refused}, indent=2) + "\n", encoding="utf-8")
    return 0
