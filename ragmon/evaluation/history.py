"""``--history DIR``: keep every evaluation report, and read them back as a trend.

Each report is written once, atomically (a hidden temporary file in the same directory, fsynced,
then hard-linked to its final name, which never overwrites an existing file), under a name that
sorts by time::

    20250601T020005.000000Z_shop-golden.json

:func:`load_history` reads every ``*.json`` file of the directory into a small
:class:`RunSummary`, in time order (``created_at``, then file name). Files that cannot be read —
not JSON, not a report, no timestamp — are skipped, logged once each, and listed in the
``skipped`` list when the caller passes one; one bad file never hides the others.
"""

from __future__ import annotations

import json
import logging
import math
import os
import re
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final

_log = logging.getLogger(__name__)

SCHEMA_PREFIX: Final = "ragmon.eval/"
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")
MAX_NAME_CHARS: Final = 80


@dataclass(frozen=True, slots=True)
class RunSummary:
    """One past run, as much as a trend needs."""

    path: Path
    created_at: datetime  # timezone-aware (UTC when the report gave none)
    evalset_name: str
    questions: int
    gate_passed: bool | None
    metrics: Mapping[str, float | None] = field(default_factory=dict)  # metric -> mean
    retrieval_p95_s: float | None = None
    pipeline_p95_s: float | None = None
    problems: int = 0
    judge: str | None = None
    app: str | None = None


@dataclass(frozen=True, slots=True)
class SkippedFile:
    """A history file that could not be read, and why."""

    path: Path
    reason: str


def _parse_time(value: Any) -> datetime:
    if not isinstance(value, str):
        raise ValueError("no created_at timestamp")
    parsed = datetime.fromisoformat(value)
    return parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=UTC)


def history_file_name(report: Mapping[str, Any]) -> str:
    """``<UTC timestamp>_<evalset name>.json``; the timestamp is ``created_at`` (now if missing)."""
    try:
        created = _parse_time(report.get("created_at")).astimezone(UTC)
    except ValueError:
        created = datetime.now(UTC)
    name = _UNSAFE.sub("_", str(report.get("evalset_name") or "evalset")).strip("._")[:MAX_NAME_CHARS] or "evalset"
    return f"{created:%Y%m%dT%H%M%S.%f}Z_{name}.json"


def save_to_history(report: Mapping[str, Any], directory: str | os.PathLike[str]) -> Path:
    """Write ``report`` as JSON into ``directory`` (created if needed) and return its path.

    Atomic: readers never see a partial file. Never overwrites: a name already taken gets a
    ``-1``, ``-2``... suffix.
    """
    folder = Path(directory)
    folder.mkdir(parents=True, exist_ok=True)
    data = json.dumps(report, indent=2, ensure_ascii=False, allow_nan=False) + "\n"
    fd, tmp_name = tempfile.mkstemp(prefix=".tmp-", suffix=".json", dir=folder)
    tmp = Path(tmp_name)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(data)
            out.flush()
            os.fsync(out.fileno())
        return _link_unique(tmp, folder / history_file_name(report))
    finally:
        tmp.unlink(missing_ok=True)


def _link_unique(tmp: Path, target: Path) -> Path:
    """Give ``tmp`` the name ``target`` (or ``target-N``) without replacing an existing file."""
    for attempt in range(1000):
        candidate = target if attempt == 0 else target.with_name(f"{target.stem}-{attempt}{target.suffix}")
        try:
            os.link(tmp, candidate)
        except FileExistsError:
            continue
        except OSError:  # a filesystem without hard links: fall back to a checked rename
            if candidate.exists():
                continue
            os.replace(tmp, candidate)
        return candidate
    raise FileExistsError(f"no free history file name for {target}")


def _float(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return None
    return float(value)


def _section(report: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    value = report.get(key)
    return value if isinstance(value, Mapping) else {}


def summarize(report: Mapping[str, Any], path: Path) -> RunSummary:
    """The :class:`RunSummary` of one report dict; ValueError when it is not a report."""
    schema = report.get("schema")
    if not isinstance(schema, str) or not schema.startswith(SCHEMA_PREFIX):
        raise ValueError(f"not a ragmon eval report (schema {schema!r})")
    metrics = report.get("metrics")
    if not isinstance(metrics, Mapping):
        raise ValueError("no metrics section")
    latency, gate, problems = (_section(report, key) for key in ("latency", "gate", "problems"))
    passed = gate.get("passed")
    return RunSummary(
        path=path,
        created_at=_parse_time(report.get("created_at")),
        evalset_name=str(report.get("evalset_name") or ""),
        questions=int(report.get("questions") or 0),
        gate_passed=passed if isinstance(passed, bool) else None,
        metrics={
            str(name): _float(value.get("mean")) if isinstance(value, Mapping) else None
            for name, value in metrics.items()
        },
        retrieval_p95_s=_float(latency.get("retrieval_p95_s")),
        pipeline_p95_s=_float(latency.get("pipeline_p95_s")),
        problems=int(problems.get("count") or 0),
        judge=report.get("judge"),
        app=report.get("app"),
    )


def load_history(
    directory: str | os.PathLike[str], *, skipped: list[SkippedFile] | None = None
) -> list[RunSummary]:
    """Summaries of every report in ``directory``, oldest first; [] when it does not exist.

    Unreadable files are logged at WARNING and appended to ``skipped`` (when given).
    """
    folder = Path(directory)
    if not folder.is_dir():
        return []
    runs: list[RunSummary] = []
    for path in sorted(folder.glob("*.json")):
        if path.name.startswith("."):
            continue
        try:
            report = json.loads(path.read_text(encoding="utf-8"))
            if not isinstance(report, Mapping):
                raise ValueError("not a JSON object")
            runs.append(summarize(report, path))
        except (OSError, UnicodeDecodeError, ValueError, TypeError) as exc:
            reason = f"{type(exc).__name__}: {exc}"
            _log.warning("skipping unreadable history file %s: %s", path, reason)
            if skipped is not None:
                skipped.append(SkippedFile(path, reason))
    runs.sort(key=_order)
    return runs


_COPY_SUFFIX = re.compile(r"^(?P<base>.*?)(?:-(?P<n>\d+))?$")


def _order(run: RunSummary) -> tuple[datetime, str, int]:
    """Time order; runs with the same timestamp by file name, ``x`` before ``x-1`` before ``x-2``."""
    match = _COPY_SUFFIX.match(run.path.stem)
    assert match is not None  # the pattern matches every string
    return run.created_at, match["base"], int(match["n"] or 0)
