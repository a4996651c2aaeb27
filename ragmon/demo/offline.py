"""``ragmon demo eval``: the offline half in one command — the gate passes a release and stops a broken one.

Runs ``ragmon eval`` itself (its parser, app runner and span capture, the local judge, the gate
with its default rules, the Markdown writer), twice, over the bundled golden set
(``golden.jsonl``: the demo corpus's 42 questions with their gold articles and reference answers
quoted from them, and 4 questions the corpus cannot answer):

1. ``ragmon.demo.releases:released`` — the bot as released. Nothing to compare with yet, so only
   the absolute rules apply; its report becomes the baseline.
2. ``ragmon.demo.releases:broken`` — a worse retriever and a prompt that contradicts, against
   that baseline: the default drop rules fail it.

Each step prints the ``ragmon eval`` command it runs (the same command works outside the demo),
a line of its scores and the gate's verdict; then the broken release's Markdown report (what a CI
job would post on the pull request). The reports stay in ``--out-dir``.

Exit codes: 0 when the gate passed the release and failed the broken one (the demo showed what
it should), 1 when it did not, 2 when a step could not run (its message on stderr).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import shlex
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any, TextIO

from ..evaluation import command as eval_command
from ..evaluation import gate as gates

__all__ = ["GOLDEN_SET", "STEPS", "add_arguments", "bundled_golden_set", "run"]

GOLDEN_SET = "golden.jsonl"
HEADLINE_METRICS = ("recall@5", "context_precision", "faithfulness", "answer_correctness", "composite")


@dataclass(frozen=True, slots=True)
class Step:
    name: str  # report file stem
    app: str  # ragmon eval --app
    title: str
    expected_exit: int


STEPS = (
    Step("released", "ragmon.demo.releases:released", "the support bot as released",
         eval_command.EXIT_PASSED),
    Step("broken", "ragmon.demo.releases:broken",
         "a broken release: the index holds only titles, the prompt changes one fact per answer",
         eval_command.EXIT_GATE_FAILED),
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--out-dir", type=Path, default=None, metavar="DIR",
                        help="where the reports go: released.json/.md, broken.json/.md (default: a new temporary "
                        "directory)")


@contextlib.contextmanager
def bundled_golden_set() -> Iterator[Path]:
    """The golden set shipped with the demo, as a file ``ragmon eval`` can read."""
    with resources.as_file(resources.files("ragmon.demo").joinpath(GOLDEN_SET)) as path:
        yield path


def _eval_argv(golden: Path, step: Step, out_dir: Path, baseline: Path | None) -> list[str]:
    argv = [str(golden), "--app", step.app, "--out", str(out_dir / f"{step.name}.json"),
            "--markdown", str(out_dir / f"{step.name}.md"), "--no-progress", "--quiet"]
    return argv + (["--baseline", str(baseline)] if baseline is not None else [])


def _run_eval(argv: list[str]) -> int:
    """``ragmon eval ARGV``: the command's own parser and entry point."""
    parser = argparse.ArgumentParser(prog="ragmon eval")
    eval_command.add_arguments(parser)
    return eval_command.run(parser.parse_args(argv))


def _scores_line(report: dict[str, Any]) -> str:
    metrics, deltas = report.get("metrics") or {}, ((report.get("baseline") or {}).get("deltas") or {})
    parts = []
    for name in HEADLINE_METRICS:
        mean = (metrics.get(name) or {}).get("mean")
        if mean is None:
            continue
        delta = (deltas.get(name) or {}).get("delta")
        parts.append(f"{name} {mean:.3f}" + (f" ({delta:+.3f})" if delta is not None else ""))
    return " · ".join(parts)


def _gate_line(report: dict[str, Any], code: int) -> str:
    gate = report.get("gate") or {}
    statuses = [rule["status"] for rule in gate.get("rules") or []]
    order = (gates.STATUS_FAILED, gates.STATUS_WARNED, gates.STATUS_PASSED, gates.STATUS_SKIPPED)
    tally = ", ".join(f"{statuses.count(status)} {status}" for status in order if status in statuses)
    verdict = "PASSED" if gate.get("passed") else "FAILED"
    failed = [rule["rule"] for rule in gate.get("rules") or [] if rule["status"] == "failed"]
    why = f"; failed: {'; '.join(failed)}" if failed else ""
    return f"gate {verdict} (exit {code}): {tally}{why}"


def run_demo_eval(out_dir: Path, out: TextIO) -> int:
    codes: list[int] = []
    baseline: Path | None = None
    with bundled_golden_set() as golden:
        for number, step in enumerate(STEPS, 1):
            argv = _eval_argv(golden, step, out_dir, baseline)
            print(f"\n[{number}/{len(STEPS)}] {step.title}", file=out)
            print(f"$ ragmon eval {shlex.join(a for a in argv if a not in ('--no-progress', '--quiet'))}", file=out)
            out.flush()
            code = _run_eval(argv)
            if code == eval_command.EXIT_USAGE:
                print(f"ragmon demo eval: step {number} ({step.name}) could not run; see above", file=sys.stderr)
                return eval_command.EXIT_USAGE
            report = json.loads((out_dir / f"{step.name}.json").read_text(encoding="utf-8"))
            print(f"  {_scores_line(report)}", file=out)
            print(f"  {_gate_line(report, code)}", file=out)
            if baseline is None:
                print("  (no baseline yet: the drop rules are skipped; this report is the next step's baseline)",
                      file=out)
            codes.append(code)
            baseline = out_dir / f"{step.name}.json"
    last = STEPS[-1]
    print(f"\nThe Markdown report of the broken release ({out_dir / f'{last.name}.md'}), as CI would post it:\n",
          file=out)
    print((out_dir / f"{last.name}.md").read_text(encoding="utf-8"), file=out)
    expected = [step.expected_exit for step in STEPS]
    if codes == expected:
        print(f"The gate passed the release and stopped the broken one. Reports: {out_dir}", file=out)
        return 0
    print(f"ragmon demo eval: expected exit codes {expected} from the two runs, got {codes}", file=sys.stderr)
    return 1


def run(args: argparse.Namespace, out: TextIO | None = None) -> int:
    out_dir: Path = args.out_dir or Path(tempfile.mkdtemp(prefix="ragmon-demo-eval-"))
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        print(f"ragmon demo eval: --out-dir {out_dir}: {exc}", file=sys.stderr)
        return eval_command.EXIT_USAGE
    return run_demo_eval(out_dir, out or sys.stdout)
