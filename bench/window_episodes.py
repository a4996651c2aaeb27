"""How often a sliding window's test crosses its level on noise: episodes per disjoint window.

The rules' budget of false pages counts disjoint windows (720 hourly, 120 six-hour, ... a month), but
Prometheus tests a window at every evaluation, and a window that moves crosses a level more often than
the disjoint windows it is counted as. Model: white noise per 5-minute evaluation; the test statistic is
the normalized sum over the window (its baseline, seven windows of the past week, only scales the noise).
An episode starts when the statistic has been above ``z`` for ``for: 10m`` (three evaluations in a row)
while it was not, for a window that rolls with every evaluation; for one summed over whole hours (moved
once an hour, held in between, so any crossing fires), when an hour's value is above ``z`` and the last
hour's was not. Prints each window's episodes as a multiple of the disjoint windows' expected crossings
(docs/alerts.md quotes it).

    python bench/window_episodes.py                  # z = 3.79, 4e7 evaluations per window (~3 min)
    python bench/window_episodes.py --z 3.0 --steps 8e6
"""

from __future__ import annotations

import argparse
import math

import numpy as np

STEPS_PER_HOUR = 12  # one evaluation every 5 minutes, as in the simulation
FOR_EVALUATIONS = 3  # `for: 10m`: pending at the first evaluation above, firing at the third


def episodes(hours: int, z: float, steps: int, rng: np.random.Generator, chunk: int = 4_000_000) -> tuple[int, int]:
    """(episodes of the rolling window, episodes of the whole-hour window) over ``steps`` evaluations."""
    width = hours * STEPS_PER_HOUR
    rolling = whole_hours = 0
    carry = np.zeros(0)
    last_hour_above = False
    done = 0
    while done < steps:
        noise = np.concatenate([carry, rng.standard_normal(chunk)])
        sums = np.concatenate([[0.0], np.cumsum(noise)])
        above = (sums[width:] - sums[:-width]) / math.sqrt(width) > z
        held = above[2:] & above[1:-1] & above[:-2]
        rolling += int((held[1:] & ~held[:-1]).sum())
        hourly = np.concatenate([[last_hour_above], above[::STEPS_PER_HOUR]])
        whole_hours += int((hourly[1:] & ~hourly[:-1]).sum())
        last_hour_above = bool(hourly[-1])
        carry = noise[-(width - 1):]
        done += chunk
    return rolling, whole_hours


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--z", type=float, default=3.79, help="the level (the rules' DROP_Z for one pipeline)")
    parser.add_argument("--steps", type=float, default=4e7, help="5-minute evaluations per window")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    rng = np.random.default_rng(args.seed)
    tail = 0.5 * math.erfc(args.z / math.sqrt(2))
    print(f"z = {args.z}, {args.steps:.0f} evaluations ({args.steps / STEPS_PER_HOUR / 24:,.0f} days) per window")
    for hours in (1, 6, 12, 24):
        rolling, whole_hours = episodes(hours, args.z, int(args.steps), rng)
        expected = args.steps / (hours * STEPS_PER_HOUR) * tail
        print(f"{hours:>2}h: rolling {rolling} episodes ({rolling / expected:.2f}x the disjoint windows), "
              f"whole hours {whole_hours} ({whole_hours / expected:.2f}x); disjoint windows expect {expected:.1f}",
              flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
