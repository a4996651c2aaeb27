"""Quality rows: score means and drops, score distributions, the retrieval-vs-generation diagnosis
and user feedback, priority-sampled traces, and the sampling rate with the drop it can detect."""

from __future__ import annotations

from .calibration import calibration_panel
from .common import PRIORITY, RATE, SP, B, R, W
from .panels import Layout, heatmap, stat, target, timeseries


def quality_rows(lay: Layout) -> None:
    lay.row("Quality: score means (1h window vs 7d baseline, rate-sampled traces)")
    calibration_panel(lay)  # is the judge fitted to this domain? (ragmon_judge_info)
    for m in R.QUALITY_METRICS:
        sel = f'{SP}, metric="{m.name}", {RATE}'
        lay.add(
            timeseries(
                f"{m.title.capitalize()} mean",
                [
                    target(
                        f"ragmon:score_ratio:mean{W}{{{sel}}}", "{{service}}/{{pipeline}} " + W + " ({{judge}})", "A"
                    ),
                    target(f"ragmon:score_ratio:mean{B}{{{sel}}}", "{{service}}/{{pipeline}} " + B + " baseline", "B"),
                    # short-window mean straight from the histogram, with trace-id exemplars
                    target(
                        f"sum by (service, pipeline, judge) (rate(ragmon_score_ratio_sum{{{sel}}}[$__rate_interval]))\n"
                        "/ sum by (service, pipeline, judge) "
                        f"(rate(ragmon_score_ratio_count{{{sel}}}[$__rate_interval]))",
                        "{{service}}/{{pipeline}} now",
                        "C",
                        exemplar=True,
                    ),
                ],
                unit="percentunit",
                minmax=(0, 1),
                steps=((None, "red"), (m.floor, "green")),
                desc=f"Mean {m.title} of rate-sampled judged traces (the unbiased stream; priority-sampled traces "
                f"have their own panels). Dashed line: the absolute floor alert "
                f"(Ragmon{m.alert}BelowFloor). Dots are exemplars: click one to open its trace.",
            ),
            8,
            8,
        )
    for m in R.QUALITY_METRICS:
        lay.add(
            timeseries(
                f"{m.title.capitalize()}: drop below baseline",
                [
                    target(
                        f'ragmon:score_ratio:mean{B}{{{SP}, metric="{m.name}"}}\n'
                        f'- ragmon:score_ratio:mean{W}{{{SP}, metric="{m.name}"}}',
                        "{{service}}/{{pipeline}} ({{judge}})",
                        "A",
                    )
                ],
                unit="none",
                steps=((None, "green"), (R.DROP_WARNING, "orange"), (R.DROP_CRITICAL, "red")),
                desc=f"{B} mean minus {W} mean. Dashed lines: Ragmon{m.alert}Drop warning and critical "
                f"(also needs the drop to be significant, z > {R.DROP_Z:g}, and {R.MIN_SCORED_WINDOW} scored "
                f"traces in {W}).",
            ),
            8,
            6,
        )
    lay.add(
        timeseries(
            f"Drop significance (Welch z, {W} vs {B})",
            [target(f"ragmon:score_ratio:drop_z{W}{{{SP}}}", "{{service}}/{{pipeline}} {{metric}} ({{judge}})", "A")],
            unit="none",
            steps=((None, "transparent"), (R.DROP_Z, "orange")),
            desc=f"How many standard errors the {W} mean lies below the {B} mean, from the scores' variance and "
            f"counts (Welch). Noise stays below the dashed line ({R.DROP_Z:g}, two-sided alpha {R.DROP_ALPHA:g}); "
            "a drop alert needs both this and the drop size.",
        ),
        24,
        6,
    )
    lay.row("Quality: score distributions")
    for m in R.QUALITY_METRICS:
        lay.add(
            heatmap(
                f"{m.title.capitalize()} distribution",
                f'sum by (le) (increase(ragmon_score_ratio_bucket{{{SP}, metric="{m.name}", {RATE}}}'
                "[$__rate_interval]))",
                f"Histogram of rate-sampled {m.title} scores over time (buckets of 0.05). A second mode at the "
                "bottom is a population of bad answers; exemplars link to example traces.",
            ),
            8,
            8,
        )


VERDICT_GRID = (
    ("ok", "Retrieval OK · Generation OK", "green"),
    ("generation_failure", "Retrieval OK · Generation failed", "orange"),
    ("retrieval_failure", "Retrieval failed · Generation OK", "orange"),
    ("both", "Retrieval failed · Generation failed", "red"),
)


def diagnosis_rows(lay: Layout) -> None:
    lay.row("Diagnosis: retrieval vs generation")
    for i, (verdict, title, color) in enumerate(VERDICT_GRID):
        lay.add(
            stat(
                title,
                [
                    target(
                        f'sum(increase(ragmon_diagnosis_total{{{SP}, verdict="{verdict}"}}[$__range]))',
                        verdict,
                        "A",
                        instant=True,
                    )
                ],
                unit="short",
                color=color,
                desc=f"Scored traces with verdict {verdict} over the dashboard's time range (2x2 diagnosis).",
            ),
            6,
            4,
        )
        if i % 2 == 1:
            lay.newline()
    lay.move_to(x=12, y=lay.y - 8, row_h=8)  # the verdict rate panel sits to the right of the 2x2 grid
    lay.add(
        timeseries(
            "Verdicts per second",
            [target(f"sum by (verdict) (rate(ragmon_diagnosis_total{{{SP}}}[$__rate_interval]))", "{{verdict}}", "A")],
            unit="reqps",
            desc="Rate of each diagnosis verdict; the first thing to read when a quality alert fires.",
        ),
        12,
        8,
    )
    lay.newline()
    lay.add(
        timeseries(
            "User feedback: negative share",
            [
                target(
                    "sum by (service, pipeline) "
                    f'(rate(ragmon_feedback_total{{{SP}, feedback="negative"}}[$__rate_interval]))'
                    f" / sum by (service, pipeline) (rate(ragmon_feedback_total{{{SP}}}[$__rate_interval]))",
                    "{{service}}/{{pipeline}}",
                    "A",
                )
            ],
            unit="percentunit",
            minmax=(0, 1),
            desc="Share of user feedback events (ragmon.feedback / record_feedback) that are negative: the "
            "users' own verdict, to read next to the judge's scores. Late feedback is counted too.",
        ),
        12,
        8,
    )
    lay.add(
        timeseries(
            "User feedback events per second",
            [target(f"sum by (feedback) (rate(ragmon_feedback_total{{{SP}}}[$__rate_interval]))", "{{feedback}}", "A")],
            unit="reqps",
            desc="How much feedback arrives; a share computed from a handful of events is noise.",
        ),
        12,
        8,
    )


def priority_rows(lay: Layout) -> None:
    """Priority-sampled traces: the ones to explain, kept out of every mean and alert above."""
    lay.row("Priority-sampled traces (errors, negative feedback, slow or weak retrievals)")
    lay.add(
        timeseries(
            "Priority-sampled traces: mean score",
            [
                target(
                    f"sum by (metric) (rate(ragmon_score_ratio_sum{{{SP}, {PRIORITY}}}[$__rate_interval]))\n"
                    f"/ sum by (metric) (rate(ragmon_score_ratio_count{{{SP}, {PRIORITY}}}[$__rate_interval]))",
                    "{{metric}}",
                    "A",
                    exemplar=True,
                )
            ],
            unit="percentunit",
            minmax=(0, 1),
            desc="Mean scores of the traces judged because a priority rule picked them, not the rate. They are "
            "chosen for being bad, so they never enter the quality means or drop alerts; open them in /worst or "
            "through the exemplars.",
        ),
        12,
        7,
    )
    lay.add(
        timeseries(
            "Priority-sampled traces per second by rule",
            [
                target(
                    f'sum by (reason) (rate(ragmon_traces_sampled_total{{{SP}, reason=~"priority_.*"}}'
                    "[$__rate_interval]))",
                    "{{reason}}",
                    "A",
                )
            ],
            unit="reqps",
            desc="How many traces each priority rule sends to the judge (on top of the rate sample).",
        ),
        12,
        7,
    )


def sampling_rows(lay: Layout) -> None:
    """Power-based sampling: the rate each pipeline is judged at and the drop that sample can detect."""
    lay.row("Sampling: judging rate and detectable drop")
    lay.add(
        timeseries(
            "Judging rate per pipeline",
            [target(f"max by (service, pipeline) (ragmon_sample_rate_ratio{{{SP}}})", "{{service}}/{{pipeline}}", "A")],
            unit="percentunit",
            desc="Share of a pipeline's traces sent to the judge by the rate (fixed, or chosen by power-based "
            "sampling with --detect-drop: the least rate that detects the target drop within the window).",
        ),
        12,
        7,
    )
    lay.add(
        timeseries(
            "Detectable drop per pipeline",
            [
                target(
                    f"avg by (service, pipeline) (ragmon_detectable_drop_ratio{{{SP}}})",
                    "{{service}}/{{pipeline}}",
                    "A",
                ),
                target("max(ragmon_detect_target_drop_ratio) > 0", "target (--detect-drop)", "B"),
            ],
            unit="none",
            steps=((None, "transparent"), (R.DROP_WARNING, "orange")),
            desc="The smallest drop in a mean score that the pipeline's rate sample detects within the window "
            "(alpha and power as configured). Above the target: RagmonDetectionTargetMissed. Dashed line: the "
            f"warning drop size ({R.DROP_WARNING:g}).",
        ),
        12,
        7,
    )
