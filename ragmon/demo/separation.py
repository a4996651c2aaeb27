"""How well a judge separates the demo's injected failures from its healthy traffic, offline.

``python -m ragmon.demo.separation [--seeds 1,2,3]`` asks every bundled question once per
failure kind and seed (no SDK, no agent, no sleeps), scores each answer with the local judge,
and prints per-kind means and the share below the diagnosis threshold — the numbers behind
the demo's "Scores by injected failure" table, reproducible in a few seconds.
"""

from __future__ import annotations

import argparse
import statistics
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

from .. import quality
from .. import semconv as sc
from ..types import Scores
from .app import DemoRag
from .failures import FailureKind

# Latency is not the judge's business: slow retrievals have healthy text.
JUDGED_KINDS = (FailureKind.HEALTHY, FailureKind.RETRIEVAL_MISS, FailureKind.CONTRADICTION, FailureKind.OFF_TOPIC)


@dataclass(slots=True)
class KindSeparation:
    n: int = 0
    values: dict[str, list[float]] = field(default_factory=dict)
    by_change: dict[str, list[float]] = field(default_factory=dict)  # contradiction: faithfulness per change

    def mean(self, metric: str) -> float:
        return statistics.fmean(self.values[metric])

    def below(self, metric: str, threshold: float = 0.5) -> float:
        values = self.values[metric]
        return sum(v < threshold for v in values) / len(values)


Scorer = Callable[[str, Sequence[str], str], Scores]


def measure(
    score: Scorer, seeds: Iterable[int] = (1, 2, 3), kinds: Sequence[FailureKind] = JUDGED_KINDS,
    questions: int | None = None,
) -> dict[FailureKind, KindSeparation]:
    """``score(question, contexts, answer) -> Scores`` (e.g. ``LocalJudge().score_sync``)."""
    out = {k: KindSeparation() for k in kinds}
    for seed in seeds:
        rag = DemoRag(seed=seed, simulate_latency=False, instrument=False)
        for kind in kinds:
            for qa in rag.questions[:questions]:
                result = rag.ask(qa.question, kind)
                scores = score(qa.question, [h.document.text for h in result.hits], result.answer)
                sep = out[kind]
                sep.n += 1
                for metric, value in scores.as_dict().items():
                    sep.values.setdefault(metric, []).append(value)
                faithfulness = scores.get(sc.METRIC_FAITHFULNESS)
                if result.contradiction is not None and faithfulness is not None:
                    sep.by_change.setdefault(result.contradiction.change, []).append(faithfulness)
    return out


def report(results: dict[FailureKind, KindSeparation], threshold: float = 0.5) -> str:
    lines = [f"{'kind':<16}{'n':>5}  " + "  ".join(f"{m:>26}" for m in quality.online_names())]
    for kind, sep in results.items():
        cells = [f"{sep.mean(m):.2f} (<{threshold:g}: {sep.below(m, threshold):4.0%})" if m in sep.values else "–"
                 for m in quality.online_names()]
        lines.append(f"{kind.value:<16}{sep.n:>5}  " + "  ".join(f"{c:>26}" for c in cells))
        for change, values in sorted(sep.by_change.items()):
            caught = sum(v < threshold for v in values) / len(values)
            lines.append(f"  {kind.value}/{change}: n={len(values)} faithfulness {statistics.fmean(values):.2f}, "
                         f"below {threshold:g} in {caught:.0%}")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ragmon.demo.separation", description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", default="1,2,3", help="comma-separated seeds (default 1,2,3)")
    parser.add_argument("--questions", type=int, default=None, help="use only the first N questions")
    args = parser.parse_args(argv)
    from ..scoring.local import LocalJudge

    judge = LocalJudge()
    seeds = [int(s) for s in args.seeds.split(",") if s.strip()]
    print(report(measure(judge.score_sync, seeds, questions=args.questions)))
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
