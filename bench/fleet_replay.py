"""The fleet's false pages over many fleet-days: the fleet parts' pipelines replayed alone, the page rules applied
in numpy.

``bench/alerts_simulate.py`` counts the fleet's false pages with promtool, a part (10 pipelines × 10 measured days,
one fleet-day) at a time, ~26 core-minutes each; showing ≤ 1 false page a month with confidence needs ~100
fleet-days without a page, which promtool cannot give on this machine. The pipelines of a fleet are independent
(each its own random stream, ``runner.pipeline_rng``), so its false pages are the sum of its pipelines' own. This
bench replays the parts' pipelines alone (the simulator's own draws, as ``bench/tails_null.py`` does) and applies
every paging alert of the fleet's rules file to their counters as the rules compute them
(``deploy/prometheus/generate_rules.py``: the failing share's rise on the arcsine scale and the mean score's drop
against its skew limit over 1h, 6h, 12h and 24h, each against the same window of the 7 days before, the minimum
effect corrected by the judge's error rates or score gap, the count guards, ``for: 10m`` at 5-minute evaluations;
the contradiction share's rise likewise), and counts the episodes an Alertmanager would page on (an alert's
windows are one page). ``tests/alerts/test_fleet_replay.py`` holds the replica's pages equal to promtool's, alert
by alert, on traffic that pages often (rules with a low z).

The same for any stationary cell (``--cell qa-0.1rps-stationary``: its runs and pipelines on seeds 1–20, each seed
a block of the cell), so that every configuration's false firings per pipeline are read from a thousand
pipeline-days rather than fifty.

Two stages, so the costly one runs once: ``draw`` replays the cell on each seed of ``--seeds`` and stores each
pipeline's per-scrape increments under ``.cache/replay/<cell>`` (reproducible from the seeds); ``pages`` reads them
and writes ``docs/alerts-simulation/replay/<cell>.json``.

    PYTHONPATH=. python bench/fleet_replay.py draw --seeds 1-120      # the fleet's parts: 120 fleet-days
    PYTHONPATH=. python bench/fleet_replay.py pages --seeds 1-120
    PYTHONPATH=. python bench/fleet_replay.py draw --cell qa-1rps-stationary --seeds 1-20
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from tails_null import replay  # noqa: E402  (one pipeline drawn as the runner draws it)

from ragmon.alerts import command  # noqa: E402
from ragmon.alerts.pools import CONTRADICTIONS, judge_build  # noqa: E402
from ragmon.alerts.promtool import drop_z  # noqa: E402
from ragmon.alerts.report import rate_ci95  # noqa: E402
from ragmon.alerts.traffic import DAY  # noqa: E402
from ragmon.scoring.onnx_runner import cpu_model  # noqa: E402

sys.path.insert(0, str(ROOT / "deploy" / "prometheus"))
import generate_rules as rules_source  # noqa: E402  (the windows, guards and steps the rules are built from)

FIELDS = ("count", "total", "squares", "failures")
FLEET = 100  # bench/alerts_simulate.py FLEET: the rules are the fleet's, and a fleet-day is its pipelines' day
PART = f"fleet{FLEET}-1rps-stationary-seed"
REPORTS = ROOT / "docs" / "alerts-simulation" / "replay"  # a subfolder: bench/alerts_simulate.py reads no report here
WINDOWS = {w: rules_source._seconds(w) for w in (rules_source.WINDOW, *rules_source.LONG_WINDOWS)}
SEVERITIES = {"warning": rules_source.DROP_WARNING, "critical": rules_source.DROP_CRITICAL}


@dataclass(frozen=True, slots=True)
class PageRules:
    """What a rules file pages on, as numbers: the drop alerts' z and the constants generate_rules.py builds
    every rules file with."""

    z: float
    for_s: float
    alert_of: Mapping[str, str]  # metric -> its drop alert's name

    @classmethod
    def of(cls, rules: dict[str, Any]) -> PageRules:
        z = drop_z(rules)
        if z is None:
            raise ValueError("the rules file has no drop alert")
        names = {m.name: f"Ragmon{m.alert}Drop" for m in rules_source.quality_metrics()}
        names[CONTRADICTIONS] = rules_source.CONTRADICTION_ALERT
        return cls(z=z, for_s=rules_source._seconds(rules_source.QUALITY_FOR), alert_of=names)

    def effect(self, severity: str) -> float:
        return round(SEVERITIES[severity] * rules_source.MIN_EFFECT, 4)

    @property
    def skew(self) -> float:
        """The skew term's coefficient in the mean drop's limit, as the rules file writes it."""
        return round((self.z**2 - 1) / 6, 4)


@dataclass(frozen=True, slots=True)
class Judge:
    """The judge's gauges the rules read: Youden's J per metric (used where at least MIN_CORRECTABLE_YOUDEN) and
    the score gap (floored at 0.05)."""

    youden: Mapping[str, float]
    gap: Mapping[str, float]

    @classmethod
    def of(cls, error_rates: Mapping[str, tuple[float, float]], score_gaps: Mapping[str, float]) -> Judge:
        youden = {m: se + sp - 1.0 for m, (se, sp) in error_rates.items()}
        return cls(youden={m: j for m, j in youden.items() if j >= rules_source.MIN_CORRECTABLE_YOUDEN},
                   gap={m: max(g, 0.05) for m, g in score_gaps.items()})


def _windowed(inc: np.ndarray, at: np.ndarray, w: int, day: int, whole_days: bool) -> tuple[np.ndarray, np.ndarray]:
    """A counter's increase (given per scrape) over the ``w`` scrapes up to each of ``at``, and over the same
    scrapes of each of the SEASONAL_DAYS days before, summed, as promtool finds them: a day whose window ended
    before the counter existed adds nothing (no samples); one that began before it adds what it holds (the
    counter starts at 0, so increase() extrapolates no further), or, with ``whole_days`` (the long windows wait
    for whole days: ``_partial_day``), makes the baseline absent (NaN)."""
    cum = np.concatenate([[0.0], np.cumsum(inc)])
    now = cum[at] - cum[np.clip(at - w, 0, None)]
    base = np.zeros(len(at))
    partial = np.zeros(len(at), dtype=bool)
    for d in range(1, rules_source.SEASONAL_DAYS + 1):
        end = at - d * day
        base += cum[np.clip(end, 0, None)] - cum[np.clip(end - w, 0, None)]
        partial |= (end >= 0) & (end - w < 0)
    return now, np.where(partial & whole_days, np.nan, base)


def _arcsine_rise_z(e_w: np.ndarray, n_w: np.ndarray, e_b: np.ndarray, n_b: np.ndarray) -> np.ndarray:
    """The share's rise on Anscombe's arcsine scale, in standard errors (``_share_rise_rules``)."""
    def arcsine(e: np.ndarray, n: np.ndarray) -> np.ndarray:
        return np.arcsin(np.sqrt((e + 0.375) / (n + 0.75)))

    return 2 * (arcsine(e_w, n_w) - arcsine(e_b, n_b)) / np.sqrt(1 / n_w + 1 / n_b)


def margins(counters: Mapping[str, Mapping[str, np.ndarray]], scrape_s: float, at: np.ndarray, rules: PageRules,
            judge: Judge) -> dict[tuple[str, str, str, str], np.ndarray]:
    """At each evaluation ``at`` (a scrape index: the evaluation at that scrape's time), how far each alert's
    expression is from returning a series: (alertname, severity, metric, window) -> the largest of its tests'
    statistic less the level it must pass (the share's rise z less z; the mean's drop z less its skew limit),
    counting only tests whose minimum effect and count guards hold (−inf where none does). The expression returns
    a series exactly where the margin is above 0. ``counters``: metric -> field -> increments per scrape (the
    contradiction check under CONTRADICTIONS, its counts in ``count`` and ``failures``)."""
    day = round(DAY / scrape_s)
    out: dict[tuple[str, str, str, str], np.ndarray] = {}
    with np.errstate(divide="ignore", invalid="ignore"):
        for metric, c in counters.items():
            for window, seconds in WINDOWS.items():
                w, whole = round(seconds / scrape_s), window != rules_source.WINDOW
                n_w, n_b = _windowed(c["count"], at, w, day, whole)
                e_w, e_b = _windowed(c["failures"], at, w, day, whole)
                known = (n_w > 0) & (n_b > 0)
                rise = e_w / n_w - e_b / n_b
                if metric in judge.youden:
                    rise = rise / judge.youden[metric]
                share_margin = _arcsine_rise_z(e_w, n_w, e_b, n_b) - rules.z
                share_counts = known & (n_w >= rules_source.MIN_SCORED_WINDOW) & (
                    n_b >= rules_source.MIN_SCORED_BASELINE)
                mean_test = None
                if metric != CONTRADICTIONS:
                    s_w, s_b = _windowed(c["total"], at, w, day, whole)
                    _q_w, q_b = _windowed(c["squares"], at, w, day, whole)
                    mean_w, mean_b = s_w / n_w, s_b / n_b
                    var_b = np.maximum(q_b / n_b - mean_b**2, rules_source.MIN_SCORE_VARIANCE)
                    drop = (mean_b - mean_w) / np.sqrt(var_b * (1 / n_w + 1 / n_b))
                    limit = rules.z + rules.skew * mean_b / np.sqrt(var_b * n_w)
                    mean_rise = (mean_b - mean_w) / judge.gap.get(metric, 1.0)
                    mean_counts = known & (n_w >= rules_source.MIN_SCORED_MEAN_WINDOW) & (
                        n_b >= rules_source.MIN_SCORED_BASELINE)
                    mean_test = (drop - limit, mean_rise, mean_counts)
                for severity in SEVERITIES:
                    effect = rules.effect(severity)
                    margin = np.where(share_counts & (rise >= effect), share_margin, -np.inf)
                    if mean_test is not None:
                        mean_margin, mean_rise, mean_counts = mean_test
                        margin = np.maximum(margin, np.where(mean_counts & (mean_rise >= effect), mean_margin,
                                                             -np.inf))
                    out[(rules.alert_of[metric], severity, metric, window)] = np.nan_to_num(margin, nan=-np.inf)
    return out


@dataclass(frozen=True, slots=True)
class Pages:
    by_alert: dict[str, int]  # "alertname/severity/metric" -> pages (its windows merged)
    by_window: dict[str, int]  # "alertname/severity/metric/window" -> episodes of that window
    # "alertname/severity/metric" -> the highest margin held for ``for`` over the measured evaluations: above 0
    # it fired; how near a quiet pipeline came to paging
    closest: dict[str, float]


def pages(counters: Mapping[str, Mapping[str, np.ndarray]], scrape_s: float, evaluation_s: float, first: int,
          rules: PageRules, judge: Judge) -> Pages:
    """Alert episodes that start at the evaluations after scrape ``first`` (the measured time), as the simulator
    counts them from promtool: an alert fires once its expression has held for ``for`` (``for_s``), and one page
    is an alert's firing with its windows merged (Alertmanager groups them)."""
    if evaluation_s != scrape_s:
        raise ValueError("the replica evaluates at every scrape, as the simulator does")
    held = round(rules.for_s / evaluation_s)  # evaluations before the one that fires
    n = len(next(iter(next(iter(counters.values())).values())))
    start = max(first - held - 1, 1)  # the evaluation before the measured time must know whether it was firing
    at = np.arange(start, n + 1)
    by_window: dict[str, int] = {}
    merged: dict[str, np.ndarray] = {}
    for (alert, severity, metric, window), margin in margins(counters, scrape_s, at, rules, judge).items():
        kept = np.copy(margin)  # the margin held at this evaluation and the ``held`` before it
        for k in range(1, held + 1):
            kept[k:] = np.minimum(kept[k:], margin[:-k])
            kept[:k] = -np.inf
        key = f"{alert}/{severity}/{metric}"
        merged[key] = np.maximum(merged[key], kept) if key in merged else kept
        by_window[f"{key}/{window}"] = _starts(kept > 0, at, first)
    measured = at > first
    return Pages(by_alert={key: _starts(kept > 0, at, first) for key, kept in merged.items()}, by_window=by_window,
                 closest={key: float(kept[measured].max()) for key, kept in merged.items()})


def _starts(firing: np.ndarray, at: np.ndarray, first: int) -> int:
    begins = firing[1:] & ~firing[:-1]
    return int(np.sum(begins & (at[1:] > first)))


def seed_list(text: str) -> list[int]:
    """'1-5,9' -> [1, 2, 3, 4, 5, 9]."""
    out: list[int] = []
    for part in text.split(","):
        lo, _, hi = part.strip().partition("-")
        if lo:
            out += list(range(int(lo), int(hi or lo) + 1))
    return out


def configuration_of(tag: str) -> str:
    """'fleet100-1rps-stationary-seed1' -> 'fleet100-1rps-stationary': the cell without its seed block."""
    head, _, seed = tag.rpartition("-seed")
    return head if head and seed.isdigit() else tag


def cell_arguments(work: Path, cell: str, seed: int) -> list[str]:
    """A stationary cell's arguments (``bench/alerts_simulate.py``) with ``seed``: seeds past the bench's own
    blocks are the same configuration on further seeds."""
    import alerts_simulate as cells_of

    argv = list(dict(cells_of.cells(work))[cell])
    if "stationary" not in argv[argv.index("--cases") + 1].split(","):
        raise SystemExit(f"{cell}: not a stationary cell (false pages are counted on stationary traffic)")
    if "--seed" in argv:
        argv[argv.index("--seed") + 1] = str(seed)
    else:
        argv += ["--seed", str(seed)]
    return argv


def prepare(work: Path, cell: str, seed: int) -> command.Prepared:
    parsed = argparse.ArgumentParser()
    command.add_arguments(parsed)
    ns = parsed.parse_args(["simulate", *cell_arguments(work, cell, seed), "--cache", str(work / "scores")])
    return command.prepare(ns)


def pipeline_file(store: Path, seed: int, run: int, pipeline: int) -> Path:
    return store / f"seed{seed:03d}-r{run:02d}-p{pipeline:03d}.npz"


def draw_seed(prepared: command.Prepared, seed: int, store: Path) -> None:
    """Each run's pipelines of the cell on ``seed``, drawn as the runner draws them, stored as per-scrape
    increments per metric."""
    settings = prepared.settings
    for r in range(settings.runs):
        for p in range(settings.pipelines):
            path = pipeline_file(store, seed, r, p)
            if path.is_file():
                continue
            run = replay(prepared, seed, p, r)
            arrays = {f"{metric}.{f}": np.diff(np.asarray(getattr(c, f), dtype=np.float64), prepend=0.0)
                      for metric, c in run.counters.items() for f in FIELDS}
            tmp = path.with_suffix(".tmp.npz")
            np.savez_compressed(tmp, rates=np.asarray(run.rates), **arrays)
            tmp.replace(path)  # a stopped draw leaves no half-written pipeline


def load(path: Path) -> tuple[dict[str, dict[str, np.ndarray]], np.ndarray]:
    """A stored pipeline: metric -> field -> increments per scrape, and the sampler's rate at each scrape."""
    with np.load(path) as data:
        counters: dict[str, dict[str, np.ndarray]] = {}
        for name in data.files:
            if name != "rates":
                metric, _, field = name.partition(".")
                counters.setdefault(metric, {})[field] = data[name]
        return counters, data["rates"]


def count_pages(cell: str, seeds: list[int], work: Path, store: Path) -> dict[str, Any]:
    """Every stored pipeline of ``seeds`` through the page replica: false firings by alert and window, per pipeline
    per 30 days and, for the fleet's cell, the fleet's pages per 30 fleet-days, with exact intervals."""
    prepared = prepare(work, cell, seeds[0])  # the same rules, judge and traffic on every seed
    settings, traffic = prepared.settings, prepared.settings.traffic
    rules, judge = PageRules.of(prepared.rules), Judge.of(settings.error_rates, settings.score_gaps)
    first = round(traffic.warmup_days * DAY / traffic.scrape_s)
    by_alert: dict[str, int] = {}
    by_window: dict[str, int] = {}
    paged: list[dict[str, Any]] = []
    closest: list[dict[str, Any]] = []
    pipelines, lowest_rate = 0, 1.0
    missing = []
    for seed, r, p in ((s, r, p) for s in seeds for r in range(settings.runs) for p in range(settings.pipelines)):
        path = pipeline_file(store, seed, r, p)
        if not path.is_file():
            missing.append(path.name)
            continue
        counters, rates = load(path)
        lowest_rate = min(lowest_rate, float(rates.min()))
        got = pages(counters, traffic.scrape_s, settings.evaluation_s, first, rules, judge)
        alerts, windows = got.by_alert, got.by_window
        pipelines += 1
        for key, margin in got.closest.items():
            if "/critical/" in key:
                closest.append({"seed": seed, "run": r, "pipeline": p, "alert": key, "margin": round(margin, 3)})
        for key, n in alerts.items():
            by_alert[key] = by_alert.get(key, 0) + n
            if n and "/critical/" in key:
                paged.append({"seed": seed, "run": r, "pipeline": p, "alert": key, "pages": n})
        for key, n in windows.items():
            by_window[key] = by_window.get(key, 0) + n
    if missing:
        raise SystemExit(f"{len(missing)} pipelines not drawn yet (first: {missing[0]}): run the draw stage")
    pipeline_days = pipelines * traffic.days
    pages_total = sum(n for key, n in by_alert.items() if "/critical/" in key)
    warnings_total = sum(n for key, n in by_alert.items() if "/warning/" in key)
    per_alert = {}
    for key, n in sorted(by_alert.items()):
        a_lo, a_hi = rate_ci95(n, pipeline_days)
        per_alert[key] = {"firings": n, "per_pipeline_30d": round(n * 30 / pipeline_days, 4),
                          "ci95": [round(a_lo, 4), round(a_hi, 4)]}
    lo, hi = rate_ci95(pages_total, pipeline_days)
    report: dict[str, Any] = {
        "cell": configuration_of(cell),
        "seeds": f"{seeds[0]}-{seeds[-1]}" if seeds == list(range(seeds[0], seeds[-1] + 1)) else seeds,
        "pipelines": pipelines, "measured_days": traffic.days, "pipeline_days": pipeline_days,
        "rate_per_s": traffic.rate_per_s, "drop_z": rules.z, "judge": settings.judge, "judge_build": judge_build(),
        "error_rates": dict(settings.error_rates), "score_gaps": dict(settings.score_gaps),
        "lowest_sampling_rate": lowest_rate, "pages": pages_total,
        "pages_per_pipeline_30d": round(pages_total * 30 / pipeline_days, 4),
        "pages_per_pipeline_30d_ci95": [round(lo, 4), round(hi, 4)],
    }
    if configuration_of(cell).startswith(f"fleet{FLEET}-"):  # the fleet's rules: its pipelines share one budget
        fleet_days = pipeline_days / FLEET
        f_lo, f_hi = rate_ci95(pages_total, fleet_days)
        report.update({"fleet": FLEET, "fleet_days": fleet_days, "fleet_pages": pages_total,
                       "fleet_pages_per_30d": round(pages_total * 30 / fleet_days, 3),
                       "fleet_pages_per_30d_ci95": [round(f_lo, 3), round(f_hi, 3)]})
    return report | {
        "warnings": warnings_total, "alerts": per_alert,
        "windows": {k: n for k, n in sorted(by_window.items()) if n}, "paged_pipelines": paged,
        # how near the quiet pipelines came: each critical alert's highest margin held for `for`, the ten nearest
        "closest": sorted(closest, key=lambda r: -r["margin"])[:10],
        "margin_above": {f"{lv:g}": sum(1 for r in closest if r["margin"] > lv) for lv in (-2.0, -1.0, -0.5, 0.0)},
        "cpu": cpu_model(), "python": platform.python_version(),
    }


def _summary(report: dict[str, Any]) -> str:
    lo, hi = report["pages_per_pipeline_30d_ci95"]
    lines = [f"{report['cell']}: {report['pipelines']} pipelines x {report['measured_days']:g} days, "
             f"{report['pages']} false pages, {report['pages_per_pipeline_30d']:g} per pipeline per 30 days "
             f"[95 % {lo:g} to {hi:g}]; {report['warnings']} false warnings"]
    if "fleet_days" in report:
        f_lo, f_hi = report["fleet_pages_per_30d_ci95"]
        lines.append(f"the fleet of {report['fleet']}: {report['fleet_days']:g} fleet-days, "
                     f"{report['fleet_pages_per_30d']:g} false pages per 30 fleet-days [95 % {f_lo:g} to {f_hi:g}]")
    lines += ["| alert / severity / metric | firings | per pipeline per 30 d |", "|---|---|---|"]
    for key, row in report["alerts"].items():
        lines.append(f"| {key} | {row['firings']} | {row['per_pipeline_30d']:g} "
                     f"[{row['ci95'][0]:g}, {row['ci95'][1]:g}] |")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    sub = parser.add_subparsers(dest="stage", required=True)
    draw = sub.add_parser("draw", help="replay the cell's pipelines and store their counters")
    count = sub.add_parser("pages", help="count the stored pipelines' false pages")
    count.add_argument("--out", type=Path, default=None, help=f"default {REPORTS}/<cell>.json")
    for p in (draw, count):
        p.add_argument("--cell", default=f"{PART}1",
                       help="a stationary cell of bench/alerts_simulate.py (its seed replaced by --seeds)")
        p.add_argument("--seeds", default="1-120")
        p.add_argument("--work", type=Path, default=ROOT / ".cache" / "alerts-bench")
        p.add_argument("--store", type=Path, default=None, help="default .cache/replay/<cell>")
    args = parser.parse_args()
    store = args.store or ROOT / ".cache" / "replay" / configuration_of(args.cell)
    started = time.monotonic()
    if args.stage == "draw":
        store.mkdir(parents=True, exist_ok=True)
        for seed in seed_list(args.seeds):
            draw_seed(prepare(args.work, args.cell, seed), seed, store)
            print(f"seed {seed}: {time.monotonic() - started:.0f}s", flush=True)
        return 0
    report = count_pages(args.cell, seed_list(args.seeds), args.work, store)
    report["seconds"] = round(time.monotonic() - started, 1)
    out = args.out or REPORTS / f"{configuration_of(args.cell)}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=1) + "\n", encoding="utf-8")
    print(_summary(report))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
