"""Score pools: every labelled row scored once by the judge, then drawn from by label.

The simulation never invents a score. Each judged trace it simulates is a real labelled row,
drawn from the faithful or the unfaithful pool (per question group), carrying the scores the
judge gave that row — so the judge's real errors on the user's data are in every simulated hour.

Scoring is the expensive part (the local judge needs ~0.1 s per row, an LLM judge a call), so
the scores of a (labels file, judge, profile, judge build) are cached as JSON: the cache key is the
sha256 of the four, the build being a hash of the scoring code (a changed judge rescores).

Besides the score metrics there is one more series: ``contradictions``, the share of answers with a
contradicted claim (``ragmon_answers_contradicting_total`` over ``ragmon_answers_checked_total``).
The judge's side is its claim verdicts; the human side is ``labels.contradicts`` (1: the answer
says what its contexts contradict, 0: it does not).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from .. import quality
from ..calibration.dataset import LabelledRow, RowError, read_rows

NO_GROUP = "all"
CONTRADICTIONS: Final = "contradictions"  # the contradiction share's name in simulations and reports
CONTRADICTS_LABEL: Final = "contradicts"  # its human label
CONTRADICTING_KEY: Final = "_contradicting"  # 1.0 / 0.0 beside a row's scores: the judge's verdict
_JUDGE_CODE = Path(__file__).resolve().parents[1]  # ragmon/: the scoring code's build is hashed from here
_JUDGE_DIRS: Final = ("scoring", "metrics")
# the reader's training recipe lives under scoring/ but never runs in the judge (a test holds that): a change to it
# (a new training source) is not a new judge, and must not send every simulation to rescore its pools
RECIPE_ONLY: Final = frozenset(f"scoring/reader/{name}" for name in (
    "train.py", "export.py", "data.py", "data_manifest.json", "edits.py", "fixed_ranges.py", "seven_bit.py"))


@dataclass(frozen=True, slots=True)
class ScoredRow:
    """One labelled row with the judge's scores (metric -> value in [0, 1])."""

    id: str
    group: str
    labels: dict[str, int | None]
    scores: dict[str, float]
    contradicting: bool | None = None  # the judge found a contradicted claim (None: no claim verdicts)

    def value(self, metric: str) -> float | None:
        """The row's value of a simulated series: a score, or 0 / 1 for a contradicting / clean answer."""
        if metric == CONTRADICTIONS:
            return None if self.contradicting is None else float(not self.contradicting)
        return self.scores.get(metric)


@dataclass(frozen=True, slots=True)
class Pools:
    """The scored rows of one labels file, and how to draw from them by metric label."""

    source: str
    judge: str
    profile: str | None
    rows: tuple[ScoredRow, ...]

    @property
    def groups(self) -> tuple[str, ...]:
        return tuple(sorted({r.group for r in self.rows}))

    def metrics(self) -> tuple[str, ...]:
        """The simulated series: online metrics the judge scored on at least one row, in table order,
        then the contradiction share where the judge gave claim verdicts."""
        seen = {m for r in self.rows for m in r.scores}
        contradictions = (CONTRADICTIONS,) if any(r.contradicting is not None for r in self.rows) else ()
        return (*(m for m in quality.online_names() if m in seen), *contradictions)

    def labelled_metrics(self) -> tuple[str, ...]:
        """Series whose human label has both classes here: those can have incidents."""
        out = []
        for name in self.metrics():
            flags = self.failing_flags(name)
            values = {f for r, f in zip(self.rows, flags, strict=True) if r.value(name) is not None}
            if {0, 1} <= values:
                out.append(name)
        return tuple(out)

    def failing_flags(self, metric: str) -> list[int | None]:
        """Per row: 1 where humans say the metric failed (label 0; for contradictions: the answer
        contradicts its contexts), 0 where it passed, None unknown."""
        if metric == CONTRADICTIONS:
            return [r.labels.get(CONTRADICTS_LABEL) for r in self.rows]
        label = quality.metric(metric).label
        out: list[int | None] = []
        for r in self.rows:
            value = r.labels.get(label) if label else None
            out.append(None if value is None else 1 - int(value))
        return out


def group_of(meta: dict[str, Any], field: str | None) -> str:
    if not field:
        return NO_GROUP
    value = meta.get(field)
    return str(value) if isinstance(value, str | int) and str(value) else NO_GROUP


def _metas(path: Path) -> dict[int, dict[str, Any]]:
    """Line number -> the row's ``meta`` object (groups live there; calibration rows drop it)."""
    out: dict[int, dict[str, Any]] = {}
    with path.open(encoding="utf-8") as handle:
        for number, line in enumerate(handle, start=1):
            try:
                obj = json.loads(line)
            except ValueError:
                continue
            meta = obj.get("meta") if isinstance(obj, dict) else None
            out[number] = meta if isinstance(meta, dict) else {}
    return out


def judge_build() -> str:
    """A hash of the scoring code (``ragmon/scoring``, ``ragmon/metrics``, less the reader's training recipe,
    ``RECIPE_ONLY``): cached scores of an earlier judge are never read as this one's."""
    digest = hashlib.sha256()
    for folder in _JUDGE_DIRS:
        for file in sorted((_JUDGE_CODE / folder).rglob("*")):
            name = file.relative_to(_JUDGE_CODE).as_posix()
            if file.suffix in (".py", ".json") and file.is_file() and name not in RECIPE_ONLY:
                digest.update(name.encode())
                digest.update(file.read_bytes())
    return digest.hexdigest()[:16]


def cache_key(path: Path, judge: str, profile: Path | None) -> str:
    digest = hashlib.sha256()
    digest.update(path.read_bytes())
    digest.update(judge.encode())
    digest.update(judge_build().encode())
    if profile is not None:
        digest.update(profile.read_bytes())
    return digest.hexdigest()[:24]


def read_labelled(path: Path) -> tuple[list[LabelledRow], list[RowError]]:
    rows: list[LabelledRow] = []
    bad: list[RowError] = []
    for item in read_rows(path, None):
        (bad if isinstance(item, RowError) else rows).append(item)  # type: ignore[arg-type]
    return rows, bad


def build_pools(
    path: Path,
    judge_name: str,
    profile: Path | None,
    score_rows: Callable[[list[LabelledRow]], list[dict[str, float] | None]],
    group_field: str | None,
    cache_dir: Path | None,
) -> Pools:
    """Score every row of ``path`` (or read the cached scores) and return the pools.

    ``score_rows`` maps rows to their scores (None where the judge failed on a row: such rows
    are left out of the pools and counted by the caller), with ``CONTRADICTING_KEY`` where the
    judge gave claim verdicts."""
    rows, _bad = read_labelled(path)
    metas = _metas(path)
    cached: dict[str, Any] | None = None
    cache_file = None
    if cache_dir is not None:
        cache_file = cache_dir / f"{path.stem}.{judge_name}.{cache_key(path, judge_name, profile)}.json"
        if cache_file.is_file():
            cached = json.loads(cache_file.read_text(encoding="utf-8"))
    if cached is not None:
        scores: list[dict[str, float] | None] = [cached.get(str(r.line)) for r in rows]
    else:
        scores = score_rows(rows)
        if cache_file is not None:
            cache_file.parent.mkdir(parents=True, exist_ok=True)
            cache_file.write_text(json.dumps({str(r.line): s for r, s in zip(rows, scores, strict=True)}),
                                  encoding="utf-8")
    online = quality.online_names()
    scored = tuple(
        ScoredRow(id=r.id, group=group_of(metas.get(r.line, {}), group_field), labels=dict(r.labels),
                  scores={k: float(v) for k, v in s.items() if k in online},
                  contradicting=None if s.get(CONTRADICTING_KEY) is None else bool(s[CONTRADICTING_KEY]))
        for r, s in zip(rows, scores, strict=True) if s
    )
    return Pools(source=str(path), judge=judge_name, profile=str(profile) if profile else None, rows=scored)


def auc(pools: Pools, metric: str) -> float | None:
    """ROC AUC of the judge's score for telling passing from failing rows (human labels), or None."""
    flags = pools.failing_flags(metric)
    values = [r.value(metric) for r in pools.rows]
    good = [v for v, f in zip(values, flags, strict=True) if f == 0 and v is not None]
    bad = [v for v, f in zip(values, flags, strict=True) if f == 1 and v is not None]
    if not good or not bad:
        return None
    wins = sum((g > b) + 0.5 * (g == b) for g in good for b in bad)
    return wins / (len(good) * len(bad))
