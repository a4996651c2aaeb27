"""The alerts measured end to end on every dev set: ``ragmon alerts simulate`` per data set, traffic
level and judge (default, and a profile fitted on the other half of the data set).

Writes one JSON report per configuration under ``docs/alerts-simulation/`` and the table
``docs/alerts-simulation/README.md`` that docs/alerts.md quotes. Two kinds of runs per configuration:
incidents (steps of +5/+10/+20 points and a +10-point drift; ``--incident-runs`` runs of 3 measured days
each) and stationary traffic for false pages (``--stationary-runs`` runs of 10 measured days each).
The contradiction share (``RagmonContradictionsRise``) is in every stationary run, and has incident runs
of its own (``--metric contradictions``) on each set at 1 req/s: RAGTruth's conflict spans are the human
label (``labels.contradicts``: 1 for an answer with a span labelled a conflict, 0 otherwise).

    python bench/alerts_simulate.py                 # ~1.5 h on 2 busy cores
    python bench/alerts_simulate.py --quick         # one data set, one rate: a smoke run
"""

from __future__ import annotations

import argparse
import hashlib
import json
import platform
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from bench._benchdata import benchdata_file  # noqa: E402  (the labelled dev sets: make benchdata)

OUT = ROOT / "docs" / "alerts-simulation"
SETS = ("ragtruth_qa", "ragtruth_summary", "ragtruth_data2txt")
RATES = (0.1, 1.0, 10.0)
DETECT_DROP = 0.08  # power-based sampling sized for the critical step


def cpu() -> str:
    model, flags = platform.processor() or "unknown", ""
    try:
        text = Path("/proc/cpuinfo").read_text()
        model = next(line.split(":", 1)[1].strip() for line in text.splitlines() if line.startswith("model name"))
        have = next(line.split(":", 1)[1].split() for line in text.splitlines() if line.startswith("flags"))
        flags = " ".join(f for f in ("avx2", "avx512f", "avx512_vnni", "avx_vnni") if f in have)
    except (OSError, StopIteration):
        pass
    return f"{model} ({flags or 'no AVX2'})"


def with_contradicts(name: str, work: Path) -> Path:
    """The dev file with ``labels.contradicts`` from RAGTruth's span types (a "Conflict" span: 1)."""
    out = work / f"{name}.jsonl"
    if not out.exists():
        lines = []
        for line in benchdata_file(f"{name}_dev.jsonl").read_text(encoding="utf-8").splitlines():
            row = json.loads(line)
            kinds = {span.get("label_type", "") for span in row.get("meta", {}).get("hallucination_spans") or []}
            faithful = row.get("labels", {}).get("faithful")
            if faithful is not None:
                row["labels"]["contradicts"] = int(any("Conflict" in k for k in kinds))
            lines.append(json.dumps(row))
        out.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return out


def halves(name: str, work: Path) -> tuple[Path, Path]:
    """Split a dev file in two by source document (rows of one source stay together)."""
    a, b = work / f"{name}.fit.jsonl", work / f"{name}.held.jsonl"
    if not a.exists():
        fit, held = [], []
        for line in with_contradicts(name, work).read_text(encoding="utf-8").splitlines():
            source = str(json.loads(line).get("meta", {}).get("source_id"))
            (fit if hashlib.sha256(source.encode()).digest()[0] % 2 == 0 else held).append(line)
        a.write_text("\n".join(fit) + "\n", encoding="utf-8")
        b.write_text("\n".join(held) + "\n", encoding="utf-8")
    return a, b


def ragmon(*args: str) -> None:
    subprocess.run([sys.executable, "-m", "ragmon", *args], check=True, cwd=ROOT)


def simulate(labels: Path, tag: str, rate: float, cases: str, runs: int, days: float, extra: list[str],
             cache: Path) -> dict:
    out = OUT / f"{tag}.json"
    if not out.exists():
        ragmon("alerts", "simulate", str(labels), "--rate", f"{rate:g}", "--cases", cases, "--runs", str(runs),
               "--days", f"{days:g}", "--detect-drop", f"{DETECT_DROP:g}", "--cache", str(cache), "--out", str(out),
               *extra)
    return json.loads(out.read_text(encoding="utf-8"))


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--incident-runs", type=int, default=5)
    parser.add_argument("--stationary-runs", type=int, default=6)
    parser.add_argument("--work", type=Path, default=ROOT / ".cache" / "alerts-bench")
    args = parser.parse_args()
    OUT.mkdir(parents=True, exist_ok=True)
    args.work.mkdir(parents=True, exist_ok=True)
    cache = args.work / "scores"
    sets = SETS[:1] if args.quick else SETS
    incidents = "step_0.05,step_0.10,step_0.20,drift_0.10"
    rows = []
    started = time.monotonic()
    configs = []
    contradiction_configs = []
    for name in sets:
        full = with_contradicts(name, args.work)
        contradiction_configs.append((f"{name}-contradictions-1rps", full, 1.0, ["--metric", "contradictions"]))
        fit_half, held_half = halves(name, args.work)
        profile = args.work / f"{name}.profile.json"
        if not profile.exists():
            ragmon("calibrate", str(fit_half), "--fit", str(profile), "--bootstrap", "200", "--no-progress")
        # every set at 1 req/s, default judge, and the fitted profile against the default on the held-out half
        configs.append((f"{name}-default-1rps", full, 1.0, []))
        if not args.quick:
            configs.append((f"{name}-default-held-1rps", held_half, 1.0, []))
            configs.append((f"{name}-fitted-held-1rps", held_half, 1.0, ["--judge-profile", str(profile)]))
    if not args.quick:  # the other traffic levels on the set where the default judge is strongest
        full = with_contradicts(SETS[0], args.work)
        configs += [(f"{SETS[0]}-default-{r:g}rps", full, r, []) for r in RATES if r != 1.0]
    contradiction_rows: list[tuple[str, dict]] = []
    order = sorted(configs, key=lambda c: (c[0].startswith(SETS[0]), c[0]))  # the cheap one-metric sets first
    for tag, labels, rate, extra in order:
        inc = simulate(labels, f"{tag}-incidents", rate, incidents, args.incident_runs, 3, extra, cache)
        sta = simulate(labels, f"{tag}-stationary", rate, "stationary", args.stationary_runs, 10, extra, cache)
        rows.append((tag, rate, inc, sta))
        print(f"{tag}: done after {time.monotonic() - started:.0f}s", flush=True)
        write_table(sorted(rows), contradiction_rows, time.monotonic() - started)
    for tag, labels, rate, extra in contradiction_configs:  # incidents only: stationary runs hold the series
        inc = simulate(labels, f"{tag}-incidents", rate, incidents, args.incident_runs, 3, extra, cache)
        contradiction_rows.append((tag, inc))
        print(f"{tag}: done after {time.monotonic() - started:.0f}s", flush=True)
        write_table(sorted(rows), contradiction_rows, time.monotonic() - started)
    return 0


def _step(entry: dict, key: str) -> str:
    x = entry.get("steps", {}).get(key)
    if not x:
        return "-"
    median = "never" if x["median_minutes"] is None else f"{x['median_minutes']:.0f}"
    return f"{x['p_detect'] * 100:.0f} % ({median})"


def _per_30d(entry: dict, report: dict, kind: str) -> str:
    """False alerts of one kind of alert (Drop: relative, BelowFloor: absolute) per pipeline per 30 days."""
    n = sum(v for k, v in entry["false_pages_by_alert"].items() if k.split("/")[0].endswith(kind))
    return f"{30.0 * n / report['measured_pipeline_days']:.2f}"


def _build(report: dict) -> str:
    """Which judge build scored the rows (reports from before the build hash say so)."""
    return report.get("judge_build") or "earlier"


def write_table(rows: list[tuple[str, float, dict, dict]], contradiction_rows: list[tuple[str, dict]],
                seconds: float) -> None:
    lines = [
        "# `ragmon alerts simulate` on the dev sets",
        "",
        f"Generated by `python bench/alerts_simulate.py` in {seconds / 60:.0f} min on {cpu()}, 2 cores.",
        f"Power-based sampling on (`--detect-drop {DETECT_DROP}`), rules as shipped, evaluated by promtool every"
        " 5 minutes. Base failing share 10 %. Incidents: 5 runs per step; false pages: stationary runs of 10 days.",
        "`held` rows: the half of the data set that the profile was not fitted on (split by source document),",
        "the default judge on the same half beside it. Cells: share of runs paged within 2 h (median minutes).",
        "",
        "| configuration | judge build | judged/h | AUC | critical false pages/30d [95% CI] | warning false "
        "alerts/30d: drop / floor / contradictions | +5 pts | +10 pts | +20 pts | drift +10/day: paged (median min) |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for tag, _rate, inc, sta in rows:
        crit, warn = sta["severities"]["critical"], sta["severities"]["warning"]
        if crit["false_pages_per_30d"] is None:
            continue
        lo, hi = crit["false_pages_per_30d_ci95"]
        drift = inc["severities"]["critical"].get("drifts", {}).get("drift_0.10")
        drift_cell = "-"
        if drift:
            median = "never" if drift["median_minutes"] is None else f"{drift['median_minutes']:.0f}"
            drift_cell = f"{drift['runs'] - drift['never_paged']}/{drift['runs']} ({median})"
        lines.append(
            f"| {tag} | {_build(sta)} | {inc['judged_per_hour']:.0f} | {inc.get('auc', '-')} | "
            f"{crit['false_pages_per_30d']:.2f} [{lo:.2f}, {hi:.2f}] | {_per_30d(warn, sta, 'Drop')} / "
            f"{_per_30d(warn, sta, 'BelowFloor')} / {_per_30d(warn, sta, 'ContradictionsRise')} | "
            f"{_step(inc['severities']['critical'], '0.05')} | {_step(inc['severities']['critical'], '0.10')} | "
            f"{_step(inc['severities']['critical'], '0.20')} | {drift_cell} |"
        )
    if contradiction_rows:
        lines += [
            "",
            "The contradiction share: steps of the share of answers that contradict their sources (RAGTruth's",
            "conflict spans), paged by `RagmonContradictionsRise` (critical). `AUC` here is the judge's claim",
            "verdicts as a yes/no test of the human label: (sensitivity + specificity) / 2.",
            "",
            "| configuration | judge build | judged/h | AUC | +5 pts | +10 pts | +20 pts | "
            "drift +10/day: paged (median min) |",
            "|---|---|---|---|---|---|---|---|",
        ]
        for tag, inc in contradiction_rows:
            crit = inc["severities"]["critical"]
            drift = crit.get("drifts", {}).get("drift_0.10")
            drift_cell = "-" if not drift else (
                f"{drift['runs'] - drift['never_paged']}/{drift['runs']} "
                f"({'never' if drift['median_minutes'] is None else format(drift['median_minutes'], '.0f')})")
            lines.append(f"| {tag} | {_build(inc)} | {inc['judged_per_hour']:.0f} | {inc.get('auc', '-')} | "
                         f"{_step(crit, '0.05')} | {_step(crit, '0.10')} | {_step(crit, '0.20')} | {drift_cell} |")
    (OUT / "README.md").write_text("\n".join(lines) + "\n", encoding="utf-8")


if __name__ == "__main__":
    sys.exit(main())
