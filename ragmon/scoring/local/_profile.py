"""Judge profiles: the local judge's combination weights and thresholds, fitted to one domain.

The shipped coefficients (``coefficients``) are the default profile. ``ragmon calibrate
FILE --fit PROFILE.json`` fits the faithfulness and answer-relevancy combinations (and the
context-relevance threshold or weights) to a user's labelled rows and writes them as JSON; ``ragmon agent
--judge-profile``, ``ragmon eval --judge-profile`` and ``ragmon calibrate --judge-profile`` load
one. A profile is only meaningful for the features it was fitted on, so it records the judge
version and a profile for another version is refused.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ... import semconv as sc
from ...errors import ConfigError
from . import model as local_model

# Bump whenever a feature's definition, the claim model or the evidence checks change: a
# profile's weights are only valid for the features they were fitted on.
JUDGE_VERSION = "local-4"  # local-4: context sentences sharing no word with question or answer are not embedded
PROFILE_FORMAT = "ragmon-judge-profile"
DEFAULT_SOURCE = "shipped"
_LABEL_CHARS = re.compile(r"[^A-Za-z0-9_.-]")
_LABEL_MAX = 64


@dataclass(frozen=True, slots=True)
class JudgeProfile:
    """Weights (raw, unstandardised: sigmoid(bias + sum w * feature)) and failure thresholds.

    ``None`` weights mean "the shipped ones". A threshold is the raw probability below which a
    trace fails; scores are shifted so that it lands on 0.5, the agent's default."""

    faithfulness_weights: Mapping[str, float] | None = None
    relevancy_weights: Mapping[str, float] | None = None
    faithfulness_threshold: float = 0.5
    relevancy_threshold: float = 0.5
    context_threshold: float | None = None  # None: the shipped one
    context_weights: Mapping[str, float] | None = None  # over CONTEXT_PROFILE_FEATURES; replaces the threshold
    version: str = JUDGE_VERSION
    source: str = DEFAULT_SOURCE  # where it came from: the file it was read from
    meta: Mapping[str, Any] = field(default_factory=dict)

    @property
    def label(self) -> str:
        """The profile's name for ``ragmon_judge_info{profile}``: ``meta.name`` (``ragmon calibrate
        --fit --profile-name``), else the file's stem; "none" for the shipped defaults."""
        if self.source == DEFAULT_SOURCE:
            return sc.PROFILE_NONE
        name = self.meta.get("name") if isinstance(self.meta.get("name"), str) else None
        name = _LABEL_CHARS.sub("_", name or Path(self.source).stem)[:_LABEL_MAX]
        return name if name and name != sc.PROFILE_NONE else "unnamed"

    def to_json(self) -> dict[str, Any]:
        return {
            "format": PROFILE_FORMAT,
            "judge": "local",
            "judge_version": self.version,
            "faithfulness": {"weights": dict(self.faithfulness_weights or {}) or None,
                             "threshold": self.faithfulness_threshold},
            "answer_relevancy": {"weights": dict(self.relevancy_weights or {}) or None,
                                 "threshold": self.relevancy_threshold},
            "context_relevance": {"threshold": self.context_threshold,
                                  "weights": dict(self.context_weights or {}) or None},
            "meta": dict(self.meta),
        }


DEFAULT_PROFILE = JudgeProfile()


def save_profile(profile: JudgeProfile, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(profile.to_json(), indent=2) + "\n", encoding="utf-8")


def _weights(obj: Any, known: set[str], where: str) -> dict[str, float] | None:
    if obj is None:
        return None
    if not isinstance(obj, dict) or not all(isinstance(v, (int, float)) for v in obj.values()):
        raise ValueError(f"{where}.weights must be an object of numbers")
    unknown = sorted(set(obj) - known - {"bias"})
    if unknown:
        raise ValueError(f"{where}.weights has unknown features {unknown}")
    return {str(k): float(v) for k, v in obj.items()}


def _threshold(obj: Any, where: str, default: float | None) -> float | None:
    value = obj.get("threshold", default) if isinstance(obj, dict) else default
    if value is None:
        return None
    if not isinstance(value, (int, float)) or not 0.0 < float(value) < 1.0:
        raise ValueError(f"{where}.threshold must be a number in (0, 1)")
    return float(value)


def load_profile(path: str | Path, setting: str = "judge_profile") -> JudgeProfile:
    """Read a profile; any problem (missing, malformed, another judge version) is one
    ``ConfigError`` line naming the file."""
    p = Path(path)
    try:
        data = json.loads(p.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError(setting, f"cannot read judge profile {p}: {exc.strerror or exc}") from exc
    except ValueError as exc:
        raise ConfigError(setting, f"judge profile {p} is not JSON: {exc}") from exc
    if not isinstance(data, dict) or data.get("format") != PROFILE_FORMAT:
        raise ConfigError(setting, f"{p} is not a ragmon judge profile (written by `ragmon calibrate --fit`)")
    version = data.get("judge_version")
    if version != JUDGE_VERSION:
        raise ConfigError(
            setting,
            f"judge profile {p} was fitted for judge version {version!r}, this is {JUDGE_VERSION!r}: "
            f"refit it with `ragmon calibrate LABELLED.jsonl --fit {p.name}`",
        )
    try:
        faith = data.get("faithfulness") or {}
        rel = data.get("answer_relevancy") or {}
        ctx = data.get("context_relevance") or {}
        return JudgeProfile(
            faithfulness_weights=_weights(faith.get("weights"), set(local_model.FAITHFULNESS_PROFILE_FEATURES),
                                          "faithfulness"),
            relevancy_weights=_weights(rel.get("weights"), set(local_model.RELEVANCY_FEATURES), "answer_relevancy"),
            faithfulness_threshold=_threshold(faith, "faithfulness", 0.5) or 0.5,
            relevancy_threshold=_threshold(rel, "answer_relevancy", 0.5) or 0.5,
            context_threshold=_threshold(ctx, "context_relevance", None),
            context_weights=_weights(ctx.get("weights"), set(local_model.CONTEXT_PROFILE_FEATURES),
                                     "context_relevance"),
            version=version,
            source=str(p),
            meta=data.get("meta") or {},
        )
    except ValueError as exc:
        raise ConfigError(setting, f"judge profile {p}: {exc}") from exc
