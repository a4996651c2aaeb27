"""The alerts measured end to end on the dev sets: ``ragmon alerts simulate`` per cell (data set, traffic,
incident metric, fleet size), the JSON reports under ``docs/alerts-simulation/`` and the table
``docs/alerts-simulation/README.md`` that docs/alerts.md quotes.

Cells, in the order they run (each is skipped when its report exists, so an interrupted run resumes; within a
cell, promtool's answer to each chunk of pipelines is kept in the work folder, so a cell stopped midway resumes
from the chunks it had finished):

- RAGTruth QA at 0.1, 1 and 10 req/s: steps of +10 and +20 points of unfaithful answers (5 runs of 3 measured
  days, 20 at 0.1 req/s; "paged within" read from each run's delay) and stationary traffic (5 runs of 10
  measured days), with every quality alert of the shipped file (the drop alerts over 1h/6h/12h/24h, the
  contradiction rise);
- WikiQA (dev): answer relevancy and context precision, from rows built out of WikiQA's human sentence labels
  (``wikiqa_rows``): a +10-point step of each, and stationary traffic;
- RAGTruth data-to-text at 1 req/s, stationary: where the old absolute floor fired ~32 times a month;
- retrieval latency (``--latency``): stationary at 0.1, 1 and 10 req/s, and steps that make retrieval 2x / 4x
  slower at 1 req/s;
- a fleet, last (the costliest): the QA steps under the rules and --alpha generated for 100 pipelines sharing
  0.5 false pages a month (``generate_rules.py --pipelines 100``: what the fleet's budget costs a pipeline in
  time to page), then 100 pipelines at 1 req/s on stationary traffic in one simulation, then parts of the fleet
  (``fleet100-1rps-stationary-seedN``: 10 of its pipelines for 10 days, a fleet-day each, a seed each), which
  also count the test statistics' tails (``--tail-levels``).

    python bench/alerts_simulate.py                    # every cell (the data: python3 scripts/benchdata.py)
    python bench/alerts_simulate.py --only qa-0.1      # only the cells whose tag starts so
    python bench/alerts_simulate.py --only qa-1rps-stationary --exact   # that cell, not its seed blocks
"""

from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from bench._benchdata import benchdata_file  # noqa: E402  (the labelled dev sets: make benchdata)

OUT = ROOT / "docs" / "alerts-simulation"
DETECT_DROP = 0.08  # power-based sampling sized for the critical step
FLEET = 100
# More fleet-days: parts of the fleet, each its own seed and report (10 pipelines x 10 measured days = one
# fleet-day, ~35 min of one core; the pipelines of a fleet are simulated independently, so parts add up to the
# fleet's days exactly as chunks of one simulation would); with the first fleet cell's 3 days: 33 fleet-days
FLEET_PARTS, FLEET_PART_PIPELINES, FLEET_PART_DAYS = 30, 10, 10
# the seed cells also count their test statistics' tails (ragmon/alerts/tails.py): the fleet's z is too rare for
# its false pages to check the normal model the budget assumes, the tail up to ~4.5 is not
TAIL_LEVELS = "2,2.5,3,3.5,4,4.5,5"
# every quality configuration on stationary traffic gets this many more blocks of 5 runs x 10 days (one
# seed each), so its false firings are read from 100 pipeline-days: 50 cannot tell 0.6 a month from 1.2
STATIONARY_SEEDS = (1,)
# the quiet pipeline's goal (4 of 5 within 12 h) sits at its point estimate on 20 runs: a second block of 20 (its
# own seed) is read with the first, so the table gives the share over 40 runs; at 1 req/s, +10 points within 2 h
# went from 5 of 5 to 4 of 5 with the sentence-cache fix of the judge (one run starting at 00:47, into the night's
# ebb): a second block of 5 says how far that is from the goal
INCIDENT_SEEDS = {"qa-0.1rps-incidents": (1,), "qa-1rps-incidents": (1,)}


def with_contradicts(name: str, work: Path) -> Path:
    """The dev file with ``labels.contradicts`` from RAGTruth's span types (a "Conflict" span: 1)."""
    out = work / f"{name}.jsonl"
    if not out.exists():
        lines = []
        for line in benchdata_file(f"{name}_dev.jsonl").read_text(encoding="utf-8").splitlines():
            row = json.loads(line)
            kinds = {span.get("label_type", "") for span in row.get("meta", {}).get("hallucination_spans") or []}
            if row.get("labels", {}).get("faithful") is not None:
                row["labels"]["contradicts"] = int(any("Conflict" in k for k in kinds))
            lines.append(json.dumps(row))
        out.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return out


def wikiqa_rows(work: Path) -> Path:
    """Rows with ``answer_relevant`` and ``context_relevant`` from WikiQA's human sentence labels.

    Per question, an answer is a sentence of its document: one a human marked as answering it
    (``answer_relevant`` 1) or one marked as not (0); the contexts are the document's sentences (they hold an
    answering sentence: ``context_relevant`` 1) or the document without its answering sentences (0). The four
    combinations make the two labels independent, so an incident of one metric leaves the other alone."""
    out = work / "wikiqa_pairs.jsonl"
    if not out.exists():
        lines = []
        for line in benchdata_file("wikiqa_ranked_dev.jsonl").read_text(encoding="utf-8").splitlines():
            row = json.loads(line)
            contexts, marks = row["contexts"], row.get("meta", {}).get("context_labels") or []
            good = [c for c, m in zip(contexts, marks, strict=False) if m == 1]
            bad = [c for c, m in zip(contexts, marks, strict=False) if m == 0]
            if not good or not bad:
                continue
            for answer, relevant in ((good[0], 1), (bad[0], 0)):
                for ctx, ctx_relevant in ((contexts, 1), (bad, 0)):
                    lines.append(json.dumps({
                        "id": f"{row['id']}-a{relevant}-c{ctx_relevant}", "dataset": "wikiqa_pairs", "task": "qa",
                        "question": row["question"], "contexts": ctx, "answer": answer,
                        "labels": {"faithful": None, "answer_relevant": relevant, "context_relevant": ctx_relevant},
                        "meta": {"doc_title": row.get("meta", {}).get("doc_title")},
                    }))
        out.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return out


def fleet_rules(work: Path) -> Path:
    out = work / f"ragmon-rules-fleet{FLEET}.yml"
    subprocess.run([sys.executable, str(ROOT / "deploy" / "prometheus" / "generate_rules.py"), "--output", str(out),
                    "--pipelines", str(FLEET)], check=True, cwd=ROOT, capture_output=True)
    return out


def cells(work: Path) -> list[tuple[str, list[str]]]:
    qa = str(with_contradicts("ragtruth_qa", work))
    d2t = str(with_contradicts("ragtruth_data2txt", work))
    wiki = str(wikiqa_rows(work))
    power = ["--detect-drop", f"{DETECT_DROP:g}"]
    steps = ["--cases", "step_0.10,step_0.20", "--runs", "5", "--days", "3", "--page-within", "720"]
    still = ["--cases", "stationary", "--runs", "5", "--days", "10"]
    out: list[tuple[str, list[str]]] = []
    for rate in ("0.1", "1", "10"):
        # the quiet pipeline's goal is read from more runs (they are cheap at 0.1 req/s)
        runs = ["--runs", "20"] if rate == "0.1" else []
        out.append((f"qa-{rate}rps-incidents", [qa, "--rate", rate, *power, *steps, *runs]))
        out.append((f"qa-{rate}rps-stationary", [qa, "--rate", rate, *power, *still]))
    for metric in ("answer_relevancy", "context_precision"):
        out.append((f"wikiqa-{metric}-1rps-incidents", [wiki, "--rate", "1", "--metric", metric, "--group-by", "",
                                                         *power, "--cases", "step_0.10,step_0.20", "--runs", "5",
                                                         "--days", "3", "--page-within", "720"]))
    out.append(("wikiqa-1rps-stationary", [wiki, "--rate", "1", "--metric", "context_precision", "--group-by", "",
                                           *power, *still]))
    out.append(("data2txt-1rps-stationary", [d2t, "--rate", "1", *power, *still]))
    # the same quality configurations again on fresh seeds (run after every first block)
    for tag, argv in [c for c in out if c[0].endswith("stationary")]:
        out += [(f"{tag}-seed{seed}", [*argv, "--seed", str(seed)]) for seed in STATIONARY_SEEDS]
    for tag, argv in [c for c in out if c[0] in INCIDENT_SEEDS]:
        out += [(f"{tag}-seed{seed}", [*argv, "--seed", str(seed)]) for seed in INCIDENT_SEEDS[tag]]
    for rate in ("0.1", "1", "10"):
        out.append((f"latency-{rate}rps-stationary", ["--latency", "--rate", rate, *still]))
    out.append(("latency-1rps-incidents", ["--latency", "--rate", "1", "--cases", "step_1.00,step_3.00", "--runs", "5",
                                           "--days", "3"]))
    # the fleet last: a hundred pipelines in one simulation is the costliest cell
    from ragmon.quality import alert_alpha

    fleet = ["--detect-drop", f"{DETECT_DROP:g}", "--alpha", f"{alert_alpha(FLEET):.6g}", "--rules",
             str(fleet_rules(work))]
    # what the fleet's budget costs one of its pipelines in time to page (its rules and --alpha, one pipeline)
    out.append((f"fleet{FLEET}-1rps-incidents", [qa, "--rate", "1", *fleet, *steps]))
    out.append((f"fleet{FLEET}-1rps-stationary", [qa, "--rate", "1", *fleet, "--cases", "stationary", "--runs", "1",
                                                  "--pipelines", str(FLEET), "--days", "3", "--chunk", "20"]))
    # more fleet-days, a part a cell (run a few a session with --only fleet100-1rps-stationary-seed; each writes its
    # report when done); write_table adds every fleet cell's pages and days up
    for seed in range(1, FLEET_PARTS + 1):
        out.append((f"fleet{FLEET}-1rps-stationary-seed{seed}",
                    [qa, "--rate", "1", *fleet, "--cases", "stationary", "--runs", "1", "--pipelines",
                     str(FLEET_PART_PIPELINES), "--days", str(FLEET_PART_DAYS), "--chunk", str(FLEET_PART_PIPELINES),
                     "--seed", str(seed), "--tail-levels", TAIL_LEVELS]))
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--only", default="", help="run only the cells whose tag starts with this")
    parser.add_argument("--exact", action="store_true", help="--only names one cell: not the cells it starts")
    parser.add_argument("--work", type=Path, default=ROOT / ".cache" / "alerts-bench")
    args = parser.parse_args()
    OUT.mkdir(parents=True, exist_ok=True)
    args.work.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    for tag, argv in cells(args.work):
        out = OUT / f"{tag}.json"
        wanted = tag == args.only if args.exact else tag.startswith(args.only)
        if not wanted or out.exists():
            continue
        subprocess.run([sys.executable, "-m", "ragmon", "alerts", "simulate", *argv, "--cache",
                        str(args.work / "scores"), "--out", str(out)], check=True, cwd=ROOT)
        print(f"{tag}: done after {time.monotonic() - started:.0f}s", flush=True)
        write_table()
    write_table()
    return 0


def _within(entry: dict, key: str, minutes: float) -> str:
    x = entry.get("steps", {}).get(key)
    if not x:
        return "-"
    delays = x.get("delays_minutes") or []
    hit = sum(1 for d in delays if d is not None and d <= minutes)
    median = "never" if x["median_minutes"] is None else f"{x['median_minutes']:.0f}"
    return f"{hit}/{len(delays)} ({median})"


def _false(report: dict) -> str:
    crit = report["severities"]["critical"]
    lo, hi = crit["false_pages_per_30d_ci95"]
    return f"{crit['false_pages_per_30d']:.2f} [{lo:.2f}, {hi:.2f}]"


def _by_severity(entry: dict) -> str:
    """'0.60 page / 0.00 warning': each severity is its own rule, with its own false firings."""
    by = entry.get("false_per_30d_by_severity")
    if not by:
        return f"{entry['false_per_30d']:.2f}"
    return f"{by.get('critical', 0.0):.2f} page / {by.get('warning', 0.0):.2f} warning"


def fleet_lines(reports: dict[str, dict]) -> list[str]:
    """The fleet as a whole: every stationary fleet cell (one seed each) added up, false pages per 30
    fleet-days (a fleet-day: every pipeline of the fleet for a day) with an exact Poisson interval."""
    from ragmon.alerts.report import rate_ci95

    cells = {t: r for t, r in reports.items() if t.startswith(f"fleet{FLEET}-1rps-stationary")}
    if not cells:
        return []
    pages = sum(int(r["severities"]["critical"]["false_pages"]) for r in cells.values())
    fleet_days = sum(r["measured_pipeline_days"] for r in cells.values()) / FLEET
    lo, hi = rate_ci95(pages, fleet_days)
    builds = ", ".join(sorted({str(r.get("judge_build", "-")) for r in cells.values()}))
    return ["", f"The fleet of {FLEET} as a whole ({len(cells)} cell{'s' if len(cells) > 1 else ''}, seeds "
                f"{', '.join(str(r.get('seed', '-')) for r in cells.values())}; judge builds {builds}): "
                f"{pages} false pages in {fleet_days:.0f} fleet-days, {30.0 * pages / fleet_days:.2f} per 30 "
                f"fleet-days [95 % CI {lo:.2f}, {hi:.2f}]."]


REPLAYS = OUT / "replay"  # bench/fleet_replay.py's reports (a subfolder: no cell reads them)


def replay_lines() -> list[str]:
    """The stationary cells replayed over many more pipeline-days, the page rules applied in numpy (their pages
    equal promtool's: tests/alerts/test_fleet_replay.py)."""
    reports = [json.loads(p.read_text(encoding="utf-8")) for p in sorted(REPLAYS.glob("*.json"))]
    if not reports:
        return []
    lines = ["", "## Stationary cells replayed over more pipeline-days", "",
             "`bench/fleet_replay.py`: each cell's pipelines on more seeds, replayed alone with the simulator's own "
             "draws, every paging rule applied in numpy as the rules compute it (pages equal to promtool's, "
             "tests/alerts/test_fleet_replay.py). False firings per pipeline per 30 days [exact 95 % interval]; "
             "the fleet's per 30 fleet-days.", "",
             "| cell | seeds | judge build | z | pipeline-days | false pages / 30 d | false warnings | nearest margin "
             "| fleet: pages / 30 fleet-days |", "|---|---|---|---|---|---|---|---|---|"]
    for r in reports:
        lo, hi = r["pages_per_pipeline_30d_ci95"]
        fleet = "-"
        if "fleet_days" in r:
            f_lo, f_hi = r["fleet_pages_per_30d_ci95"]
            fleet = f"{r['fleet_pages_per_30d']:.2f} [{f_lo:.2f}, {f_hi:.2f}] in {r['fleet_days']:g} fleet-days"
        nearest = f"{r['closest'][0]['margin']:.2f}" if r["closest"] else "-"
        lines.append(f"| {r['cell']} | {r['seeds']} | {r['judge_build']} | {r['drop_z']} | {r['pipeline_days']:.0f} | "
                     f"{r['pages_per_pipeline_30d']:.3f} [{lo:.3f}, {hi:.3f}] | {r['warnings']} | {nearest} | "
                     f"{fleet} |")
    return lines


def tail_lines(reports: dict[str, dict]) -> list[str]:
    """Per cell that counted them: the share of measured evaluations at which the alerts' test statistics were
    above each level, as a multiple of the normal tail the false-page budget assumes (ragmon/alerts/tails.py)."""
    cells = {t: r["tails"] for t, r in reports.items() if r.get("tails")}
    if not cells:
        return []
    levels = sorted({level for tails in cells.values() for level in tails["all"]["above"]}, key=float)
    lines = ["", "## The test statistics' tails on stationary traffic", "",
             "Every test statistic the quality alerts page on (the share's rise and the mean's drop per metric, the "
             "contradiction share's rise; every window), at every measured evaluation: how many were above each "
             "level (the mean's drop as it pages, against its skew limit — `drop_z − (limit − z)` — where a report "
             "counted it so, else raw; reports counted differently are not pooled), "
             "and that share as a multiple of the standard normal's 1 − Φ(z) [95 % bootstrap interval over "
             "pipelines]. The budget sizes z as if the ratio were 1; under 1 is conservative.", "",
             "| cell | pipelines | evaluations | " + " | ".join(f"z > {level}" for level in levels) + " |",
             "|---|---|---|" + "---|" * len(levels)]
    def row(name: str, pipelines: int, pooled: dict) -> str:
        cells_of_row = []
        for level in levels:
            ci = pooled["ratio_ci95"].get(level)
            interval = f" [{ci[0]:.2f}, {ci[1]:.2f}]" if ci else " [-]"
            cells_of_row.append(f"{pooled['above'].get(level, 0)}: {pooled['ratio'].get(level, 0.0):.2f}×{interval}")
        return f"| {name} | {pipelines} | {pooled['points']:,} | " + " | ".join(cells_of_row) + " |"

    # which mean drop the row pools: a report of before 2026-12-07 counted it raw
    lines += [row(f"{tag} (mean drop {tails.get('mean_drop', 'raw')})", tails["pipelines"], tails["all"])
              for tag, tails in cells.items()]
    from ragmon.alerts.tails import pooled_tails

    together = pooled_tails([reports[tag] for tag in cells]) if len(cells) > 1 else None
    if together is not None:
        lines.append(row("**every cell above**", together["pipelines"], together))
    return lines


def configuration_of(tag: str) -> str:
    """A cell's configuration: its tag without the seed block ("qa-1rps-stationary-seed1" -> "qa-1rps-stationary")."""
    head, _, seed = tag.rpartition("-seed")
    return head if head and seed.isdigit() else tag


def pooled_lines(reports: dict[str, dict]) -> list[str]:
    """Per quality configuration on stationary traffic, every seed block added up: each alert's false firings
    per pipeline per 30 days, page and warning apart, with an exact Poisson interval."""
    from ragmon.alerts.report import rate_ci95

    blocks: dict[str, list[tuple[str, dict]]] = {}
    for tag, r in reports.items():
        config = configuration_of(tag)
        if config.endswith("stationary") and not config.startswith(("latency", f"fleet{FLEET}")):
            blocks.setdefault(config, []).append((tag, r))
    if not any(len(cells) > 1 for cells in blocks.values()):
        return []
    lines = ["", "## Stationary traffic, every seed block of a configuration added up", "",
             "False firings per pipeline per 30 days (count in brackets, then the 95 % interval) of each alert that "
             "fired in any block; every other simulated alert fired 0 times.", "",
             "| configuration | blocks (seeds) | judge builds | pipeline-days | false firings / 30 d by alert |",
             "|---|---|---|---|---|"]
    for config, cells in blocks.items():
        days = sum(r["measured_pipeline_days"] for _, r in cells)
        counts: Counter[tuple[str, str]] = Counter()
        for _, r in cells:
            for name, v in r.get("alerts", {}).items():
                for severity, n in (v.get("false") or {}).items():
                    counts[(name, severity)] += int(n)
        fired = []
        for (name, severity), n in sorted(counts.items()):
            if n:
                lo, hi = rate_ci95(n, days)
                fired.append(f"{name} {'page' if severity == 'critical' else severity} {30.0 * n / days:.2f} "
                             f"({n}) [{lo:.2f}, {hi:.2f}]")
        seeds = ", ".join(str(r.get("seed", "-")) for _, r in cells)
        builds = ", ".join(sorted({str(r.get("judge_build", "-")) for _, r in cells}))
        lines.append(f"| {config} | {len(cells)} ({seeds}) | {builds} | {days:.0f} | {'; '.join(fired) or 'none'} |")
    return lines


def pooled_incident_lines(reports: dict[str, dict]) -> list[str]:
    """Per incident configuration with more than one seed block: the runs paged in time over every block, with
    Wilson's 95 % interval, and the median delay over all of them."""
    from ragmon.alerts.report import delay_quantile_minutes, proportion_ci95

    blocks: dict[str, list[tuple[str, dict]]] = {}
    for tag, r in reports.items():
        config = configuration_of(tag)
        if config.endswith("incidents") and not config.startswith("latency"):
            blocks.setdefault(config, []).append((tag, r))
    pooled = {config: cells for config, cells in blocks.items() if len(cells) > 1}
    if not pooled:
        return []

    def share(cells: list[tuple[str, dict]], key: str, minutes: float) -> str:
        delays = [d for _, r in cells for d in r["severities"]["critical"]["steps"].get(key, {}).get("delays_minutes")
                  or []]
        if not delays:
            return "-"
        hit = sum(1 for d in delays if d is not None and d <= minutes)
        lo, hi = proportion_ci95(hit, len(delays))
        # the reports' own median (seconds in, an unpaged run infinitely late)
        median = delay_quantile_minutes([math.inf if d is None else 60.0 * d for d in delays], 0.5)
        return (f"{hit}/{len(delays)} = {100.0 * hit / len(delays):.0f} % [{100.0 * lo:.0f}, {100.0 * hi:.0f}] "
                f"({'never' if median is None else f'{median:.0f}'})")

    lines = ["", "## Incidents, every seed block of a configuration added up", "",
             "Runs paged within the time over every block, with Wilson's 95 % interval (median minutes over all runs).",
             "", "| configuration | blocks (seeds) | judge builds | z | +10 pts ≤ 2 h | +10 pts ≤ 12 h | +20 pts ≤ 2 h "
             "| +20 pts ≤ 6 h |", "|---|---|---|---|---|---|---|---|"]
    for config, cells in pooled.items():
        seeds = ", ".join(str(r.get("seed", "-")) for _, r in cells)
        builds = ", ".join(sorted({str(r.get("judge_build", "-")) for _, r in cells}))
        levels = ", ".join(sorted({str(r.get("drop_z") or "-") for _, r in cells}))
        lines.append(f"| {config} | {len(cells)} ({seeds}) | {builds} | {levels} | {share(cells, '0.10', 120)} | "
                     f"{share(cells, '0.10', 720)} | {share(cells, '0.20', 120)} | {share(cells, '0.20', 360)} |")
    return lines


def cpus(reports: dict[str, dict]) -> str:
    """The CPUs the reports record, with their cell counts (reports before the field: "not recorded")."""
    counts = Counter(str(report.get("cpu", "a CPU not recorded")) for report in reports.values())
    return "; ".join(f"{name} ({n} cell{'s' if n > 1 else ''})" for name, n in counts.most_common())


def write_table() -> None:
    reports = {p.stem: json.loads(p.read_text(encoding="utf-8")) for p in sorted(OUT.glob("*.json"))}
    lines = [
        "# `ragmon alerts simulate` on the dev sets",
        "",
        f"Generated by `python bench/alerts_simulate.py`; cells ran on {cpus(reports)}, shared with other work.",
        "Rules as shipped",
        "(drop tests over 1h, 6h, 12h and 24h: the failing share's rise on the arcsine scale, and the mean score's",
        "drop above its skew limit, docs/alerts.md; no floors), power-based sampling on",
        f"(`--detect-drop {DETECT_DROP}`), promtool every 5 minutes, base failing share 10 %. Each JSON report names",
        "the judge build (`judge_build`) that scored its rows and, since 2026-12-06, the level its rules' drop tests",
        "page above (`drop_z`; `-`: not recorded — before the budget counted episodes, 3.79 in the single-pipeline",
        "rules since 2026-12-05 and 4.81 in the fleet's; the latency cells have no drop test).",
        "",
        "## Incidents: time to page (critical)",
        "",
        "Cells: runs paged within the time (median minutes over all runs; `never` when half were not paged).",
        "Starts: `uniform` — each incident at a uniformly random time of day (the report keeps `start_hours` and",
        "`within_by_start`); `1.5 d` — a report from before that, whose start times spanned 1.5 days, so the",
        "afternoon and evening starts that the night's ebb of traffic follows were 2 in 3.",
        "",
        "| cell | judge build | z | starts | judged/h | AUC | +10 pts ≤ 2 h | +10 pts ≤ 12 h | +20 pts ≤ 2 h "
        "| +20 pts ≤ 6 h |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for tag, r in reports.items():
        if not configuration_of(tag).endswith("incidents") or tag.startswith("latency"):
            continue
        crit = r["severities"]["critical"]
        starts = "uniform" if all("start_hours" in step for step in crit["steps"].values()) else "1.5 d"
        lines.append(f"| {tag} | {r.get('judge_build', '-')} | {r.get('drop_z') or '-'} | {starts} | "
                     f"{r['judged_per_hour']:.0f} | "
                     f"{r.get('auc', '-')} | "
                     f"{_within(crit, '0.10', 120)} | {_within(crit, '0.10', 720)} | {_within(crit, '0.20', 120)} | "
                     f"{_within(crit, '0.20', 360)} |")
    lines += pooled_incident_lines(reports)
    lines += ["", "## Stationary traffic: false alerts per pipeline per 30 days", "",
              "Pages (critical) with an exact Poisson 95 % interval, then every alert of the rules file with its false "
              "firings per pipeline per 30 days, pages and warnings apart (each severity is its own rule, routed "
              "apart), or why it is not simulated here.", "",
              "| cell | judge build | z | pipeline-days | judged/h | false pages / 30 d [95 % CI] | "
              "false firings / 30 d by alert |", "|---|---|---|---|---|---|---|"]
    not_simulated: dict[str, str] = {}
    for tag, r in reports.items():
        if not configuration_of(tag).endswith("stationary") or tag.startswith(f"fleet{FLEET}-1rps-stationary-"):
            continue
        simulated = {k: v for k, v in r.get("alerts", {}).items() if v.get("simulated")}
        for name, v in r.get("alerts", {}).items():
            if not v.get("simulated") and "simulated by" not in v["why"]:
                not_simulated[name] = v["why"]
        by_alert = ", ".join(f"{k} {_by_severity(v)}" for k, v in simulated.items()) or "-"
        lines.append(f"| {tag} | {r.get('judge_build', '-')} | {r.get('drop_z') or '-'} | "
                     f"{r['measured_pipeline_days']:.0f} | {r['judged_per_hour']:.0f} | {_false(r)} | {by_alert} |")
    lines += pooled_lines(reports)
    lines += fleet_lines(reports)
    lines += replay_lines()
    lines += tail_lines(reports)
    if not_simulated:
        lines += ["", "Not simulated:", ""]
        lines += [f"- `{name}`: {why}" for name, why in sorted(not_simulated.items())]
    latency = [(t, r) for t, r in reports.items() if t.startswith("latency") and t.endswith("incidents")]
    if latency:
        lines += ["", "## Retrieval latency steps (critical above 1 s, warning above 0.5 s)", "",
                  "| cell | healthy P95 | 2x slower: warning ≤ 2 h | 4x slower: page ≤ 2 h |", "|---|---|---|---|"]
        for tag, r in latency:
            warn, crit = r["severities"]["warning"], r["severities"]["critical"]
            lines.append(f"| {tag} | {r['latency']['p95_s']:.2f} s | {_within(warn, '1.00', 120)} | "
                         f"{_within(crit, '3.00', 120)} |")
    (OUT / "README.md").write_text("\n".join(lines) + "\n", encoding="utf-8")


if __name__ == "__main__":
    sys.exit(main())
