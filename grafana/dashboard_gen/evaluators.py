"""The row of user-declared evaluators (``generate_dashboard.py --evaluators FILE``): per evaluator,
the share of rate-sampled answers that pass it over the rules' window, with its alert threshold drawn
as a dashed line (the same recording rule its alert reads)."""

from __future__ import annotations

from .common import RATE, SP, R, W
from .panels import Layout, target, timeseries


def evaluator_rows(lay: Layout, evaluators: list[dict[str, object]]) -> None:
    if not evaluators:
        return
    lay.row("Your evaluators: share of answers that pass (rate-sampled traces)")
    for e in evaluators:
        name, threshold = str(e["name"]), float(e["threshold"])  # type: ignore[arg-type]
        sel = f'{SP}, metric="{name}"'
        about = f" {e['description']}" if e["description"] else ""
        lay.add(
            timeseries(
                f"{name}: passing share",
                [
                    target(f"ragmon:evaluator_pass_share:ratio{W}{{{sel}}}", "{{service}}/{{pipeline}} " + W, "A"),
                    target(
                        f"sum by (service, pipeline) (rate(ragmon_score_ratio_sum{{{sel}, {RATE}}}[$__rate_interval]))"
                        "\n/ sum by (service, pipeline) "
                        f"(rate(ragmon_score_ratio_count{{{sel}, {RATE}}}[$__rate_interval]))",
                        "{{service}}/{{pipeline}} now", "B",
                    ),
                ],
                unit="percentunit",
                minmax=(0, 1),
                steps=((None, "red"), (threshold, "green")),
                desc=f"Declared evaluator {name} ({e['kind']}).{about} Share of rate-sampled answers that pass it; "
                f"dashed line: its threshold ({R.evaluator_alert_name(name)} fires below it). Failing traces are in "
                "the agent's /worst.",
            ),
            8,
            8,
        )
