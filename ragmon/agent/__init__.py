"""The agent: source -> assembler -> latency (all traces) -> sampler -> judge -> metrics.

It owns the lifecycles (source, judge workers, metrics server) and the accounting that
the rules of the house demand: every trace that enters ends as exactly one of scored,
skipped{reason} or failed{reason}, and a source's delivery token (a Kafka offset) is
released only once every trace with spans in that delivery is accounted for.

One class, ``Agent``, assembled from parts that each fit in one reading (private modules):

- ``_state``      the fields every part shares (declared once, so each part type-checks alone)
- ``_accounting`` how a trace ends (scored / skipped / failed) and when delivery tokens go back
- ``_admission``  back-pressure, OTLP admission and the power-sampling plan export
- ``_steps``      the per-trace path: spans in -> assemble -> sample -> judge -> record scores
- ``_lifecycle``  start / stop, metrics server, source, background tasks, readiness
- ``_agent``      ``Agent`` itself: the constructor that wires the collaborators
- ``_latency``    the latency-only path: a trace outside the judging sample, same metrics and accounting

and the command that runs it, ``command`` (``ragmon agent``: flags generated from the settings table).
"""

from __future__ import annotations

from ._agent import Agent
from ._state import ScoreListener

__all__ = ["Agent", "ScoreListener"]
