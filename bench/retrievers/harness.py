"""What the evaluation benchmarks share: reference metrics (``pytrec_eval``, i.e. trec_eval),
two-hop recall, running ``ragmon eval`` as a user would, and writing a docs section."""

from __future__ import annotations

import json
import os
import platform
import resource
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytrec_eval

from ragmon.scoring.onnx_runner import cpu_model

from .paths import REPO_ROOT

DOCS_FILE = REPO_ROOT / "docs" / "benchmarks.md"
Run = Mapping[str, Sequence[str]]  # question id -> retrieved document ids, best first


# --- reference metrics -----------------------------------------------------------------------
def trec_means(qrels: Mapping[str, Mapping[str, int]], run: Run, measures: Iterable[str]) -> dict[str, float]:
    """Mean of trec_eval measures (``ndcg_cut.10``, ``recall.100``, ``recip_rank``, ...) over
    every query in ``qrels``; a query with nothing retrieved scores 0 (trec_eval ``-c``)."""
    per_query = trec_per_query(qrels, run, measures)
    keys = sorted({key for values in per_query.values() for key in values})
    return {key: statistics.fmean(values.get(key, 0.0) for values in per_query.values()) for key in keys}


def trec_per_query(qrels: Mapping[str, Mapping[str, int]], run: Run,
                   measures: Iterable[str]) -> dict[str, dict[str, float]]:
    # Rank order is what the app reported: give trec_eval strictly decreasing scores so that
    # its own tie-breaking (by document id) never reorders the list. First occurrence counts.
    scored: dict[str, dict[str, float]] = {}
    for qid, ids in run.items():
        unique = list(dict.fromkeys(ids))
        scored[qid] = {doc: float(len(unique) - rank) for rank, doc in enumerate(unique)}
    evaluator = pytrec_eval.RelevanceEvaluator({q: dict(r) for q, r in qrels.items()}, set(measures))
    results = evaluator.evaluate({q: s for q, s in scored.items() if s and q in qrels})
    names = {name for values in results.values() for name in values}
    return {qid: {name: results.get(qid, {}).get(name, 0.0) for name in names} for qid in qrels}


@dataclass(frozen=True, slots=True)
class TwoHop:
    k: int
    recall: float  # share of questions with every hop in the top k
    hop1_miss: int  # hop 2 found, hop 1 not
    hop2_miss: int  # hop 1 found, hop 2 not
    both_miss: int
    questions: int


def two_hop(hops: Mapping[str, Sequence[Iterable[str]]], run: Run, k: int) -> TwoHop:
    """``two_hop_recall@k`` and the miss classes for two-hop questions."""
    found = hop1 = hop2 = both = 0
    for qid, (first, second) in hops.items():
        top = set(list(run.get(qid, ()))[:k])
        a, b = bool(top & set(first)), bool(top & set(second))
        found += a and b
        hop1 += (not a) and b
        hop2 += a and not b
        both += not (a or b)
    return TwoHop(k, found / len(hops) if hops else 0.0, hop1, hop2, both, len(hops))


def agree(a: float, b: float, tol: float = 1e-9) -> bool:
    return abs(a - b) <= tol


# --- ragmon eval -----------------------------------------------------------------------------
def ragmon_command() -> list[str]:
    exe = Path(sys.executable).with_name("ragmon")
    return [str(exe)] if exe.exists() else [shutil.which("ragmon") or "ragmon"]


def ragmon_eval_available() -> bool:
    try:
        proc = subprocess.run([*ragmon_command(), "eval", "--help"], capture_output=True, text=True,
                              timeout=120, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return proc.returncode == 0


def bench_env(**extra: str) -> dict[str, str]:
    """The environment for ``ragmon eval --app bench.retrievers...``: the repository on the path."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO_ROOT), env.get("PYTHONPATH", "")) if p)
    env.update(extra)
    return env


@dataclass(frozen=True, slots=True)
class EvalRun:
    report: dict[str, Any]
    wall_s: float
    cpu_s: float  # user + system CPU of the ragmon eval process
    returncode: int
    stderr: str
    argv: list[str]


def run_ragmon_eval(evalset: Path, app: str, out: Path, *, args: Sequence[str] = (),
                    env: Mapping[str, str] | None = None, timeout: float = 3600) -> EvalRun:
    """``ragmon eval EVALSET --app APP --out OUT ARGS...`` in a fresh process, from the repo root.
    Exit code 1 (the gate failed) still yields a report; anything else without a report raises."""
    argv = [*ragmon_command(), "eval", str(evalset), "--app", app, "--out", str(out), *args]
    out.unlink(missing_ok=True)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    proc = subprocess.run(argv, cwd=REPO_ROOT, env=dict(env or bench_env()), capture_output=True, text=True,
                          timeout=timeout, check=False)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if not out.exists():
        raise RuntimeError(f"ragmon eval exited {proc.returncode} without a report:\n$ {' '.join(argv)}\n"
                           f"{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    report = json.loads(out.read_text(encoding="utf-8"))
    return EvalRun(report, wall, cpu, proc.returncode, proc.stderr, argv)


def report_mean(report: Mapping[str, Any], metric: str) -> float | None:
    value = report.get("metrics", {}).get(metric)
    if isinstance(value, Mapping):
        value = value.get("mean")
    return float(value) if isinstance(value, int | float) else None


def report_ci(report: Mapping[str, Any], metric: str) -> tuple[float, float] | None:
    value = report.get("metrics", {}).get(metric)
    if isinstance(value, Mapping) and isinstance(value.get("ci95"), list | tuple) and len(value["ci95"]) == 2:
        lo, hi = value["ci95"]
        return float(lo), float(hi)
    return None


def report_run(report: Mapping[str, Any]) -> dict[str, list[str]]:
    """Question id -> retrieved ids, from the report's rows."""
    return {str(row["id"]): [str(i) for i in row.get("retrieved_ids") or []] for row in report.get("rows", [])}


def display_argv(argv: Sequence[str]) -> str:
    shown = [Path(argv[0]).name, *argv[1:]]
    return " ".join(str(Path(a).relative_to(REPO_ROOT)) if a.startswith(str(REPO_ROOT)) else a for a in shown)


# --- docs ------------------------------------------------------------------------------------
def machine_line() -> str:
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    return (f"{cpu_model()} ({platform.machine()}), Python {platform.python_version()}, "
            f"load average {load:.1f} at the end (a shared machine: other work competes)")


def write_section(marker: str, body: str, path: Path = DOCS_FILE) -> None:
    """Replace (or append) the block between ``<!-- marker:start -->`` and ``<!-- marker:end -->``."""
    start, end = f"<!-- {marker}:start -->", f"<!-- {marker}:end -->"
    block = f"{start}\n{body.strip()}\n{end}"
    text = path.read_text(encoding="utf-8") if path.exists() else "# Benchmarks\n"
    if start in text and end in text:
        head, rest = text.split(start, 1)
        _, tail = rest.split(end, 1)
        text = head + block + tail
    else:
        text = text.rstrip("\n") + "\n\n" + block + "\n"
    path.write_text(text, encoding="utf-8")


def fmt(value: float | None, digits: int = 4) -> str:
    return "–" if value is None else f"{value:.{digits}f}"
