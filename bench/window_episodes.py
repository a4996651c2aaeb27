"""How often a sliding window's test crosses its level on noise: episodes per disjoint window.

The rules' budget of false pages counts disjoint windows (720 hourly, 120 six-hour, ... a month), but
Prometheus tests a window at every evaluation, and a window that moves crosses a level more often than
the disjoint windows it is counted as. Model: white noise per 5-minute evaluation; the test statistic is
the normalized sum over the window (its baseline, seven windows of the past week, only scales the noise).
An episode starts when the statistic has been above ``z`` for ``for: 10m`` (three evaluations in a row)
while it was not, for a window that rolls with every evaluation; for one summed over whole hours (moved
once an hour, held in between, so any crossing fires), when an hour's value is above ``z`` and the last
hour's was not. Prints each window's episodes as a multiple of the disjoint windows' expected crossings:
quality.EPISODES_PER_WINDOW holds them at z = 4.07, 4e8 evaluations each (the hourly window with --every 1, its
group's cadence; the long windows at 5 minutes, theirs), and the false-page budget counts them. At z = 4.5
(4e9 evaluations, every 5 minutes: ~11 min of one core) the long windows give the same ratios, so the table
serves a fleet's higher z too; at z = 5 even 4e8 evaluations see only a handful of episodes.

    python bench/window_episodes.py                               # z = 3.79, every 5 min, 4e7 evaluations per window
    python bench/window_episodes.py --z 4.07 --steps 4e8 --every 1  # ~1 min on 2 cores
"""

from __future__ import annotations

import argparse
import math

import numpy as np

FOR_MINUTES = 10  # the quality alerts' `for:`


def for_evaluations(every_minutes: int) -> int:
    """Evaluations in a row above the level before an alert fires: pending at the first, firing once ``for:`` has
    passed (3 at the simulation's 5-minute cadence, 11 at the shipped group's 1 minute)."""
    return FOR_MINUTES // every_minutes + 1


def episodes(hours: int, z: float, steps: int, rng: np.random.Generator, every_minutes: int = 5,
             chunk: int = 4_000_000) -> tuple[int, int]:
    """(episodes of the rolling window, episodes of the whole-hour window) over ``steps`` evaluations."""
    per_hour = 60 // every_minutes
    width = hours * per_hour
    hold = for_evaluations(every_minutes)
    rolling = whole_hours = 0
    # each chunk starts with the last width + hold - 2 draws of the one before, so the first window that ends on a
    # new draw has its hold - 1 windows before it (the first chunk: draws of its own)
    carry = rng.standard_normal(width + hold - 2)
    last_hour_above = False
    done = 0
    while done < steps:
        noise = np.concatenate([carry, rng.standard_normal(chunk)])
        sums = np.concatenate([[0.0], np.cumsum(noise)])
        above = (sums[width:] - sums[:-width]) / math.sqrt(width) > z
        held = np.asarray(np.lib.stride_tricks.sliding_window_view(above, hold).all(axis=1))
        rolling += int((held[1:] & ~held[:-1]).sum())
        hourly = np.concatenate([[last_hour_above], above[hold - 1::per_hour]])
        whole_hours += int((hourly[1:] & ~hourly[:-1]).sum())
        last_hour_above = bool(hourly[-1])
        carry = noise[-(width + hold - 2):]
        done += chunk
    return rolling, whole_hours


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--z", type=float, default=3.79, help="the level (the rules' DROP_Z for one pipeline)")
    parser.add_argument("--steps", type=float, default=4e7, help="evaluations per window")
    parser.add_argument("--every", type=int, default=5, choices=(1, 5),
                        help="minutes between evaluations (5: the simulation; 1: the shipped quality group)")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    rng = np.random.default_rng(args.seed)
    tail = 0.5 * math.erfc(args.z / math.sqrt(2))
    per_hour = 60 // args.every
    print(f"z = {args.z}, every {args.every} min, `for: {FOR_MINUTES}m` ({for_evaluations(args.every)} evaluations), "
          f"{args.steps:.0f} evaluations ({args.steps / per_hour / 24:,.0f} days) per window")
    for hours in (1, 6, 12, 24):
        rolling, whole_hours = episodes(hours, args.z, int(args.steps), rng, args.every)
        expected = args.steps / (hours * per_hour) * tail
        print(f"{hours:>2}h: rolling {rolling} episodes ({rolling / expected:.2f}x the disjoint windows), "
              f"whole hours {whole_hours} ({whole_hours / expected:.2f}x); disjoint windows expect {expected:.1f}",
              flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
