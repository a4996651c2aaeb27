"""What a judge judges with — the ``judge``, ``version`` and ``profile`` labels of
``ragmon_judge_info`` — and the one start-up line that says when no fitted profile is loaded.

A score only means something next to the judge that gave it: the local judge's version (its
features, ``JUDGE_VERSION``) and the profile fitted to the user's domain (``ragmon calibrate
--fit``), or the LLM judge's model. ``profile`` is ``PROFILE_NONE`` ("none") when the judge runs
with its shipped defaults, i.e. it was never fitted to this domain.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from .. import semconv as sc
from .judge import Judge


@dataclass(frozen=True, slots=True)
class JudgeIdentity:
    judge: str
    version: str
    profile: str  # sc.PROFILE_NONE when no fitted profile is loaded

    @property
    def fitted(self) -> bool:
        return self.profile != sc.PROFILE_NONE


@runtime_checkable
class DeclaresIdentity(Protocol):
    """A judge that says what it judges with (both built-in judges do)."""

    @property
    def identity(self) -> JudgeIdentity: ...


def judge_identity(judge: Judge) -> JudgeIdentity:
    """The identity a judge declares (``DeclaresIdentity``); a judge that declares none is reported
    with an unknown version and no profile."""
    if isinstance(judge, DeclaresIdentity):
        return judge.identity
    return JudgeIdentity(judge.name, sc.UNKNOWN_LABEL, sc.PROFILE_NONE)


def not_fitted_line(identity: JudgeIdentity) -> str | None:
    """The line the agent logs once at start when its judge is not fitted to the user's domain."""
    if identity.fitted:
        return None
    if identity.judge == "local":
        how = ("label a few hundred judged traces and fit a profile: ragmon dataset harvest -> ragmon dataset "
               "label --mode judge -> ragmon calibrate LABELS.jsonl --fit PROFILE.json -> ragmon agent "
               "--judge-profile PROFILE.json")
    else:
        how = f"measure it on labelled traces of your domain: ragmon calibrate LABELS.jsonl --judge {identity.judge}"
    return (f"default judge, not fitted to this domain: {identity.judge} judge {identity.version} with no profile; "
            f"its error rates on your traffic are unknown ({how}; see docs/judges.md#fit-to-your-domain)")
