"""Quality rows: score means and drops, score distributions, the retrieval-vs-generation diagnosis
and user feedback, priority-sampled traces, and the sampling rate with the drop it can detect."""

from __future__ import annotations

from .calibration import calibration_panel
from .common import PRIORITY, RATE, SP, B, R, W
from .panels import Layout, heatmap, stat, target, timeseries


def quality_rows(lay: Layout) -> None:
    lay.row("Quality: score means (1h window vs 7d baseline, rate-sampled traces)")
    calibration_panel(lay)  # is the judge fitted to this domain? (ragmon_judge_info)
    for m in R.quality_metrics():
        sel = f'{SP}, metric="{m.name}", {RATE}'
        floor = R.FLOORS.get(m.name)
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
                # a dashed line only where the rules set a floor (off by default: generate_rules.py --floor)
                steps=((None, "red"), (floor, "green")) if floor is not None else ((None, "transparent"),),
                desc=f"Mean {m.title} of rate-sampled judged traces (the unbiased stream; priority-sampled traces "
                f"have their own panels). "
                + (f"Dashed line: the absolute floor alert (Ragmon{m.alert}BelowFloor). " if floor is not None else
                   "No absolute floor is set (the drop alerts compare with this pipeline's own past week). ")
                + "Dots are exemplars: click one to open its trace.",
            ),
            8,
            8,
        )
    for m in R.quality_metrics():
        sel = f'{SP}, metric="{m.name}"'
        lay.add(
            timeseries(
                f"Failing {m.title}: share of answers (± 95 %)",
                [
                    target(f"ragmon:failing_share:ratio{W}{{{sel}}}", "{{service}}/{{pipeline}} ({{judge}})", "A"),
                    target(f"ragmon:failing_share:ratio{W}{{{sel}}} + ragmon:failing_share:ci95_{W}{{{sel}}}",
                           "upper 95 %", "B"),
                    target(f"clamp_min(ragmon:failing_share:ratio{W}{{{sel}}}"
                           f" - ragmon:failing_share:ci95_{W}{{{sel}}}, 0)", "lower 95 %", "C"),
                ],
                unit="percentunit",
                minmax=(0, 1),
                desc=f"Estimated share of answers failing {m.title} in the last {W} (score below the metric's "
                "threshold), corrected for the judge's measured error rates (ragmon_judge_sensitivity_ratio / "
                "_specificity_ratio, Rogan-Gladen) where the judge exports them, else the flagged share as it is. "
                f"Ragmon{m.alert}Drop pages when it rises by {R.DROP_WARNING:g} (warning) / {R.DROP_CRITICAL:g} "
                f"(critical) on the same hour of the past {R.SEASONAL_DAYS} days, significantly.",
            ),
            8,
            6,
        )
    lay.add(
        timeseries(
            f"Rise of the failing share: z ({W} vs the same hour of {R.SEASONAL_DAYS} days)",
            [target(f"ragmon:score_failures:rise_z{W}{{{SP}}}",
                    "{{service}}/{{pipeline}} {{metric}} ({{judge}})", "A")],
            unit="none",
            steps=((None, "transparent"), (R.DROP_Z, "orange")),
            desc=f"Two-proportion z of the failing share's rise in the last {W} against the same hour of the past "
            f"{R.SEASONAL_DAYS} days. Noise stays below the dashed line ({R.DROP_Z:g}, one-sided alpha "
            f"{R.DROP_ALPHA:.2g}: half a false page per pipeline per 30 days over every hourly window and metric); "
            "a drop alert needs both this and the minimum effect.",
        ),
        24,
        6,
    )
    lay.row("Quality: score distributions")
    for m in R.quality_metrics():
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


def no_context_panels(lay: Layout) -> None:
    """The agent's fifth verdict, beside the 2x2 grid: a RAG trace whose retrieval ran and returned
    no documents. It is not judged (a faithfulness of 0 against nothing would pull the means down),
    so no score panel shows it: a retriever that goes empty shows here and only here."""
    no_context = f'{SP}, verdict="no_context"'
    lay.add(
        stat(
            "No context: retrieval returned nothing",
            [
                target(
                    f"sum(increase(ragmon_diagnosis_total{{{no_context}}}[$__range]))",
                    "no_context",
                    "A",
                    instant=True,
                )
            ],
            unit="short",
            steps=((None, "green"), (1, "orange")),
            desc="Sampled RAG traces whose retrieval ran and returned no documents, over the dashboard's time "
            "range: verdict no_context, counted as skipped{reason=\"no_context\"} and never judged, so the "
            "score means do not see them. An empty index, a broken filter or a vector store that went away.",
        ),
        6,
        8,
    )
    lay.add(
        timeseries(
            "No-context share of diagnosed traces",
            [
                target(
                    f"sum by (service, pipeline) (rate(ragmon_diagnosis_total{{{no_context}}}[$__rate_interval]))\n"
                    f"/ sum by (service, pipeline) (rate(ragmon_diagnosis_total{{{SP}}}[$__rate_interval]))",
                    "{{service}}/{{pipeline}}",
                    "A",
                )
            ],
            unit="percentunit",
            minmax=(0, 1),
            desc="Share of sampled RAG traces given a verdict (the four diagnosis verdicts and no_context) whose "
            "retrieval returned nothing. A rise with flat quality means is the retriever going empty: those "
            "traces never reach the judge.",
        ),
        18,
        8,
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
    no_context_panels(lay)
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
    lay.add(
        timeseries(
            "Answers contradicting their sources",
            [
                target(f"ragmon:answers_contradicting:share{W}{{{SP}}}", "{{service}}/{{pipeline}} " + W + " ({{judge}})",
                       "A"),
                target(f"ragmon:answers_contradicting:share{W}_{R.SAME_HOUR}{{{SP}}}",
                       "{{service}}/{{pipeline}} same hour, past " + str(R.SEASONAL_DAYS) + " days", "B"),
            ],
            unit="percentunit",
            minmax=(0, 1),
            desc=f"Share of rate-sampled judged answers with at least one claim their contexts contradict (a changed "
            "number, negation, name, date or unit: the judges' claim verdicts), in the last "
            f"{W} and in the same hour of the past {R.SEASONAL_DAYS} days. {R.CONTRADICTION_ALERT} fires on a "
            "significant rise; the agent's /worst shows the contradicted claims with their evidence.",
        ),
        24,
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
