"""User attributes given to a decorator, ``ragmon.span()`` or ``RagSpan.set_attributes()``.

Known keys map to OpenInference names; a key containing a dot is taken as an attribute name
as-is (``**{"deployment.environment": "prod"}``); any other key goes into the ``metadata``
JSON object, next to an explicit ``metadata={...}``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from .. import semconv as sc
from .content import to_json_text

KNOWN_KEYS: Mapping[str, str] = {
    "model": sc.LLM_MODEL_NAME,
    "model_name": sc.LLM_MODEL_NAME,
    "prompt_version": sc.LLM_PROMPT_TEMPLATE_VERSION,
    "prompt_template_version": sc.LLM_PROMPT_TEMPLATE_VERSION,
    "session_id": sc.SESSION_ID,
    "user_id": sc.USER_ID,
}
_SCALARS = (str, bool, int, float)


def user_attributes(values: Mapping[str, Any]) -> dict[str, Any]:
    """OpenTelemetry attributes for user-supplied keyword arguments (None values are skipped)."""
    out: dict[str, Any] = {}
    metadata: dict[str, Any] = {}
    for key, value in values.items():
        if value is None:
            continue
        if key in KNOWN_KEYS:
            out[KNOWN_KEYS[key]] = value if isinstance(value, _SCALARS) else str(value)
        elif key == "tags":
            out[sc.TAG_TAGS] = _tags(value)
        elif key == "metadata":
            if isinstance(value, Mapping):
                metadata.update({str(k): v for k, v in value.items()})
            else:
                raise TypeError(f"metadata must be a mapping, got {type(value).__name__}")
        elif "." in key:
            out[key] = _attribute_value(value)
        else:
            metadata[key] = value
    if metadata:
        out[sc.METADATA] = to_json_text(metadata)
    return out


def _tags(value: Any) -> tuple[str, ...]:
    if isinstance(value, str):
        return (value,)
    if isinstance(value, Iterable):
        return tuple(str(tag) for tag in value)
    return (str(value),)


def _attribute_value(value: Any) -> Any:
    if isinstance(value, _SCALARS):
        return value
    if isinstance(value, list | tuple) and all(isinstance(v, str) for v in value):
        return tuple(value)
    if isinstance(value, list | tuple) and all(isinstance(v, int | float) and not isinstance(v, bool)
                                               for v in value):
        return tuple(value)
    return to_json_text(value)
