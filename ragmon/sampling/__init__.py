"""Sampling: which traces carry text, and which of them the judge scores.

The rate rule is imported from here by the SDK, so this ``__init__`` loads only ``rate`` (no
policy, no statistics): ``from ragmon.sampling import in_sample`` stays as light as one hash.

Modules:

- ``rate``     the one deterministic trace-id rule (``trace_fraction``, ``in_sample``; ``fraction_in_sample``
               for a fraction already hashed), shared by
               the SDK's content rate, the agent's judging rate and the latency-only path
- ``sampler``  the agent's sampling policy: rate decision first, then priority rules (errors,
               negative feedback, slow or weak retrievals); the ``rate`` / ``priority`` streams
- ``power``    power-based rates: judge each pipeline just often enough to see a given drop
"""

from __future__ import annotations

from .rate import fraction_in_sample, in_sample, trace_fraction

__all__ = ["fraction_in_sample", "in_sample", "trace_fraction"]
