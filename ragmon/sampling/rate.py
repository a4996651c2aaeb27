"""The one deterministic sampling function shared by the SDK, the agent and the latency-only reader.

``trace_fraction(trace_id)`` maps a trace id to a number in [0, 1). A trace is inside a
rate r when its fraction is below r, so samples nest: every trace in a 5 % sample is also
in the 20 % sample, and every replica (and the SDK's content rate) decides the same way.
We hash the id instead of reading its low bits so the decision is independent of an
upstream OpenTelemetry TraceIdRatioBased sampler, which keeps only low-bit values.
"""

from __future__ import annotations

import hashlib

_SCALE = float(1 << 64)


def trace_fraction(trace_id: str | int | bytes) -> float:
    """A uniform value in [0, 1) for a trace id given as 32 hex chars, an int or 16 bytes."""
    if isinstance(trace_id, int):
        raw = trace_id.to_bytes(16, "big")
    elif isinstance(trace_id, str):
        raw = bytes.fromhex(trace_id)
    else:
        raw = trace_id
    return int.from_bytes(hashlib.blake2b(raw, digest_size=8).digest(), "big") / _SCALE


def in_sample(trace_id: str | int | bytes, rate: float) -> bool:
    """True when the trace falls inside ``rate`` (0 keeps nothing, 1 keeps everything; the id is
    hashed only in between)."""
    if rate >= 1.0 or rate <= 0.0:
        return rate >= 1.0
    return fraction_in_sample(trace_fraction(trace_id), rate)


def fraction_in_sample(fraction: float, rate: float) -> bool:
    """``in_sample`` of a trace whose ``trace_fraction`` is known (the latency-only reader hashed it
    already): the rule itself."""
    return rate >= 1.0 or (rate > 0.0 and fraction < rate)
