"""Small, forgiving converters for attribute values: an odd type gives ``None`` (or 0), never
an exception. Shared by the text, document and message readers of this package."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

from ...types import AttrValue

MAX_JSON_CHARS = 8 << 20  # do not even try to parse absurdly large attribute strings
MAX_DEPTH = 8


def maybe_json(value: Any) -> Any:
    if isinstance(value, str):
        stripped = value.strip()
        if stripped[:1] in ("{", "[") and len(stripped) <= MAX_JSON_CHARS:
            try:
                return json.loads(stripped)
            except (ValueError, RecursionError):
                return value
    return value


def json_text(value: Any) -> str | None:
    try:
        return json.dumps(value, ensure_ascii=False, default=str)
    except (TypeError, ValueError, RecursionError):
        return None


def to_str(value: Any) -> str | None:
    if isinstance(value, str):
        return value if value.strip() else None
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int | float):
        return str(value)
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace") or None
    return None


def to_id(value: Any) -> str | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, str | int | bytes) or (isinstance(value, float) and math.isfinite(value)):
        text = to_str(value)
        return text.strip() if text else None
    return None


def to_float(value: Any) -> float | None:
    if isinstance(value, bool) or value is None:
        return None
    try:
        result = float(value)
    except (TypeError, ValueError):
        return None
    return result if math.isfinite(result) else None


def to_int(value: Any) -> int:
    if isinstance(value, bool):
        return 0
    try:
        return int(value)
    except (TypeError, ValueError, OverflowError):
        return 0


def to_bool(value: Any) -> bool | None:
    if isinstance(value, bool):
        return value
    if isinstance(value, str):
        lowered = value.strip().lower()
        if lowered in ("true", "1", "yes"):
            return True
        if lowered in ("false", "0", "no"):
            return False
    if isinstance(value, int):
        return bool(value)
    return None


def to_metadata(value: Any) -> Mapping[str, Any] | None:
    parsed = maybe_json(value)
    if isinstance(parsed, dict) and parsed:
        return parsed
    return None


def item_at(value: Any, index: int) -> Any:
    return value[index] if isinstance(value, list) and index < len(value) else None


def indexed_fields(attrs: Mapping[str, AttrValue], prefix: str, field_prefix: str) -> dict[int, dict[str, Any]]:
    """Flattened list attributes ``{prefix}{i}.{field}`` -> ``{i: {field: value}}`` (string
    splitting, not a regex: this runs over every attribute of every data-carrying span).

    Only ASCII digits make an index: ``str.isdigit`` also accepts ``²`` or ``①``, which ``int``
    rejects — one such key used to crash the whole extraction."""
    fields: dict[int, dict[str, Any]] = {}
    for key, value in attrs.items():
        if not key.startswith(prefix):
            continue
        index, dot, field = key[len(prefix):].partition(".")
        if dot and index.isascii() and index.isdigit() and field.startswith(field_prefix):
            fields.setdefault(int(index), {})[field] = value
    return fields


def unwrap_serialized(obj: dict[str, Any]) -> dict[str, Any]:
    """LangChain's ``{"lc": 1, "type": "constructor", "kwargs": {...}}`` -> kwargs."""
    kwargs = obj.get("kwargs")
    if obj.get("lc") is not None and isinstance(kwargs, dict):
        return kwargs
    return obj
