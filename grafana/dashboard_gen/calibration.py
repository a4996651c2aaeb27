"""The judge calibration panel at the top of the quality rows: is the judge fitted to this domain?

It reads ``ragmon_judge_info{judge, version, profile}`` (1 per agent): ``profile="none"`` shows
"default judge, not fitted to this domain" on orange (its error rates on this traffic are unknown,
so every score below is to be read with that in mind), a fitted profile shows its name on green."""

from __future__ import annotations

from grafana_foundation_sdk.models import common as cm

from .panels import Layout, stat, target

NOT_FITTED = "default judge, not fitted to this domain"
TITLE = "Judge calibration"
# the profile label's value when no profile is loaded: ragmon.semconv.PROFILE_NONE
PROFILE_NONE = "none"
# no "$" in the query (Grafana reads "$..." as a template variable): the fitted branch gets a constant
# "shown" prefix and keeps its profile label; the default branch drops its profile label ("none")
_NONE = f'ragmon_judge_info{{profile="{PROFILE_NONE}"}}'
_FITTED = f'ragmon_judge_info{{profile!="{PROFILE_NONE}"}}'
EXPR = (
    f"label_replace(max by (judge, version, profile) ({_FITTED}),\n"
    '  "shown", "fitted profile ", "judge", ".*")\n'
    "or\n"
    f"label_replace(label_replace(0 * max by (judge, version, profile) ({_NONE}),\n"
    f'  "shown", "{NOT_FITTED}", "judge", ".*"), "profile", "", "profile", ".*")'
)
LEGEND = "{{shown}}{{profile}} · {{judge}} judge {{version}}"


def calibration_panel(lay: Layout) -> None:
    lay.add(
        stat(
            TITLE,
            [target(EXPR, LEGEND, "A", instant=True)],
            unit="none",
            steps=((None, "orange"), (1, "green")),
            text_mode=cm.BigValueTextMode.NAME,
            graph=False,
            desc=f"What the agents judge with (ragmon_judge_info). Orange, \"{NOT_FITTED}\": the judge runs on "
            "its shipped defaults, so how often it is wrong on this traffic is unknown and a real quality drop "
            "may move the scores below less than it should. Fit it: ragmon dataset harvest -> ragmon dataset "
            "label --mode judge -> ragmon calibrate LABELS.jsonl --fit PROFILE.json -> ragmon agent "
            "--judge-profile PROFILE.json (docs/judges.md). Green: the name of the fitted profile loaded.",
        ),
        24,
        3,
    )
