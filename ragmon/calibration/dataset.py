"""Read labelled rows for ``ragmon calibrate`` (the format of bench/data/README.md).

One JSON object per line::

    {"id": str, "question": str | null, "contexts": [str, ...], "answer": str | null,
     "labels": {"faithful": 1 | 0 | null, "answer_relevant": 1 | 0 | null,
                "context_relevant": 1 | 0 | null, "contradicts": 1 | 0 | null},
     "meta": {"context_labels": [1 | 0, ...], ...}}

Extra fields are ignored. A malformed line becomes a ``RowError`` (line number and what is
wrong) and reading goes on with the next line.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

LABEL_KEYS = ("faithful", "answer_relevant", "context_relevant", "contradicts")  # contradicts: alerts simulate


@dataclass(frozen=True, slots=True)
class LabelledRow:
    line: int
    id: str
    question: str | None
    contexts: tuple[str, ...]
    answer: str | None
    labels: dict[str, int | None]
    context_labels: tuple[int, ...] | None  # per context, same order as ``contexts``
    group: str | None = None  # meta.source_id: rows of one source stay in one cross-validation fold
    pipeline: str | None = None  # meta.pipeline: the label order's strata (label_order)


@dataclass(frozen=True, slots=True)
class RowError:
    line: int
    message: str

    def __str__(self) -> str:
        return f"line {self.line}: {self.message}"


class _Bad(ValueError):
    pass


def _optional_str(obj: dict[str, Any], key: str) -> str | None:
    value = obj.get(key)
    if value is None:
        return None
    if not isinstance(value, str):
        raise _Bad(f"'{key}' must be a string or null, got {type(value).__name__}")
    return value


def _label(value: Any, where: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, int | float) and value in (0, 1):
        return int(value)
    raise _Bad(f"{where} must be 1, 0 or null, got {value!r}")


def parse_row(text: str, line: int) -> LabelledRow:
    """One line -> a row, or ``_Bad`` with what is wrong."""
    try:
        obj = json.loads(text)
    except json.JSONDecodeError as exc:
        raise _Bad(f"not valid JSON ({exc.msg} at column {exc.colno})") from None
    if not isinstance(obj, dict):
        raise _Bad(f"expected a JSON object, got {type(obj).__name__}")
    contexts = obj.get("contexts")
    if contexts is None:
        contexts = []
    if not isinstance(contexts, list):
        raise _Bad(f"'contexts' must be a list of strings, got {type(contexts).__name__}")
    for i, c in enumerate(contexts):
        if not isinstance(c, str):
            raise _Bad(f"contexts[{i}] must be a string, got {type(c).__name__}")
    labels_obj = obj.get("labels")
    if labels_obj is None:
        labels_obj = {}
    if not isinstance(labels_obj, dict):
        raise _Bad(f"'labels' must be an object, got {type(labels_obj).__name__}")
    labels = {k: _label(labels_obj.get(k), f"labels.{k}") for k in LABEL_KEYS}
    meta = obj.get("meta") or {}
    if not isinstance(meta, dict):
        raise _Bad(f"'meta' must be an object, got {type(meta).__name__}")
    context_labels = None
    raw_ctx_labels = meta.get("context_labels")
    if raw_ctx_labels is not None:
        if not isinstance(raw_ctx_labels, list):
            raise _Bad("meta.context_labels must be a list of 1/0")
        if len(raw_ctx_labels) != len(contexts):
            raise _Bad(
                f"meta.context_labels has {len(raw_ctx_labels)} labels for {len(contexts)} contexts"
            )
        parsed = [_label(v, f"meta.context_labels[{i}]") for i, v in enumerate(raw_ctx_labels)]
        if any(v is None for v in parsed):
            raise _Bad("meta.context_labels may not contain null")
        context_labels = tuple(int(v) for v in parsed if v is not None)
    question = _optional_str(obj, "question")
    answer = _optional_str(obj, "answer")
    if all(v is None for v in labels.values()) and context_labels is None:
        raise _Bad("no label: set labels.faithful / answer_relevant / context_relevant / contradicts "
                   "or meta.context_labels")
    row_id = obj.get("id")
    return LabelledRow(
        line=line,
        id=str(row_id) if row_id is not None else f"line-{line}",
        question=question,
        contexts=tuple(contexts),
        answer=answer,
        labels=labels,
        context_labels=context_labels,
        group=str(meta["source_id"]) if meta.get("source_id") is not None else None,
        pipeline=str(meta["pipeline"]) if meta.get("pipeline") is not None else None,
    )


def read_rows(path: Path, limit: int | None = None) -> Iterator[LabelledRow | RowError]:
    """Rows in file order; blank lines are skipped; ``limit`` counts good rows."""
    good = 0
    with path.open("r", encoding="utf-8", errors="replace") as fh:
        for number, text in enumerate(fh, start=1):
            if not text.strip():
                continue
            if limit is not None and good >= limit:
                return
            try:
                row = parse_row(text, number)
            except _Bad as exc:
                yield RowError(number, str(exc))
                continue
            good += 1
            yield row
