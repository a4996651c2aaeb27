"""``LocalJudge``: the ``Judge``/``EvalJudge`` facade over the analysis (``_analysis``), the
online metrics (``_online``) and the offline ones (``_offline``); CPU work runs on a thread."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Sequence
from pathlib import Path

from ...types import RagTrace, ScoreDetails, Scores
from ..error_rates import LOCAL_DEFAULTS, ErrorRates, from_profile_meta
from ..identity import JudgeIdentity
from ..judge import CIRCUIT_CLOSED, EvalRequest
from ..metrics import citations
from ..reader.model import Reader, shared_reader
from . import model as local_model
from ._analysis import Analyser, Analysis
from ._encoder import SentenceEncoder, VectorCache, embedder_for
from ._offline import abstention_values, citation_values, reference_values
from ._online import online_values
from ._profile import DEFAULT_PROFILE, JudgeProfile, load_profile

STAGES = ("split", "embed", "evidence", "read", "combine")


class LocalJudge:
    """Scores faithfulness, answer relevancy and context precision offline (see the package doc);
    ``score_for_eval`` adds the reference-based, abstention and citation metrics."""

    name = "local"
    bounds_own_duration = False  # CPU work on a thread: the agent's outer timeout applies
    circuit_state = CIRCUIT_CLOSED  # no remote endpoint, no breaker

    def __init__(
        self,
        model_path: str | None = None,
        sha256: str | None = None,
        *,
        threads: int = 1,
        cache_size: int = 8192,
        max_sentences_per_context: int = 4,
        profile: JudgeProfile | str | Path | None = None,
        int8: bool = True,
        reader: bool | str | Path = True,
    ) -> None:
        """``int8``: the model's matrix products on integer kernels (~2x faster; the fidelity
        table in docs/judges.md is measured this way); False runs them in float32 as before.
        ``reader``: the trained claim reader (True: the shipped file; a path: another one; False:
        without it, the lexical checks alone decide the claim verdicts)."""
        # Raises ModelError (missing file, checksum mismatch) at construction: fail fast.
        encoder = SentenceEncoder(embedder_for(model_path, sha256, threads, int8), VectorCache(cache_size))
        self.reader = (shared_reader() if reader is True else
                       Reader(reader, sha256=None, threads=threads) if reader else None)
        self._analyser = Analyser(encoder, max_sentences_per_context, self._add_time, self.reader)
        # a path is read here: a missing, malformed or other-version profile fails fast (ConfigError)
        self.profile = (profile if isinstance(profile, JudgeProfile) else
                        load_profile(profile) if profile is not None else DEFAULT_PROFILE)
        self._stage_lock = threading.Lock()
        self.stage_seconds: dict[str, float] = dict.fromkeys(STAGES, 0.0)

    @property
    def identity(self) -> JudgeIdentity:
        """Features version (+ the reader file's sha256 prefix when the reader runs) and profile."""
        version = str(self.profile.version)
        if self.reader is not None:
            version += f"+reader.{self.reader.sha256[:12]}"
        return JudgeIdentity(self.name, version, str(self.profile.label))

    @property
    def error_rates(self) -> dict[str, ErrorRates]:
        """Sensitivity/specificity per metric: the fitted profile's, else the measured defaults."""
        fitted = from_profile_meta(self.profile.meta)
        return fitted or dict(LOCAL_DEFAULTS)

    async def score(self, trace: RagTrace) -> Scores:
        return await asyncio.to_thread(self.score_sync, trace.question, trace.contexts, trace.answer)

    async def aclose(self) -> None:
        return None

    async def score_for_eval(self, trace: RagTrace, request: EvalRequest) -> Scores:
        """``score`` plus the offline metrics ``request`` enables (the ``EvalJudge`` protocol)."""
        return await asyncio.to_thread(self.score_eval_sync, trace, request)

    # --- the work -------------------------------------------------------------------------
    def score_sync(self, question: str | None, contexts: Sequence[str], answer: str | None) -> Scores:
        analysis = self.analyse(question, contexts, answer)
        t0 = time.perf_counter()
        details: ScoreDetails = {}
        values = online_values(analysis, details, self.profile)
        self._add_time("combine", time.perf_counter() - t0)
        return Scores(values, judge=self.name, details=details)

    def score_eval_sync(self, trace: RagTrace, request: EvalRequest) -> Scores:
        """The reference-free scores and the offline metrics of ``request`` (see ``EvalRequest``).

        With a citation pattern the markers are removed from the answer before anything is
        judged (a ``[1]`` is not a claim's number). Claim support everywhere is the per-claim
        model the faithfulness score is built from: a claim counts as supported by a text when
        ``local_model.claim_support`` >= 0.5 and no explicit check finds a contradiction.
        """
        question, contexts, answer = trace.question, trace.contexts, trace.answer
        cmap = None
        if request.citation_pattern is not None:
            cmap = citations.parse_citations(answer, trace.documents, request.citation_pattern)
            if cmap.markers:
                answer = cmap.stripped_answer
        base = self.score_sync(question, contexts, answer)
        values: dict[str, float | None] = dict(base.values)
        details = base.details.copy()
        t0 = time.perf_counter()
        values.update(abstention_values(trace.answer, request.expect_abstention, details))
        if request.reference is not None:
            values.update(reference_values(self._analyser, question, contexts, answer, request.reference, details))
        if cmap is not None:
            values.update(citation_values(self._analyser, question, contexts, cmap, details))
        self._add_time("combine", time.perf_counter() - t0)
        return Scores(values, judge=self.name, details=details)

    def claim_support(
        self, claims: Sequence[str], sources: Sequence[str], question: str | None = None
    ) -> list[float]:
        """Support in [0, 1] of each claim by the source texts (the per-claim faithfulness model)."""
        evidence, _, _ = self._analyser.support(list(claims), [s for s in sources if s and s.strip()], question)
        return [local_model.claim_support(e) for e in evidence]

    def analyse(self, question: str | None, contexts: Sequence[str], answer: str | None) -> Analysis:
        """Claims, their evidence and the per-context features, before any model is applied."""
        return self._analyser.analyse(question, contexts, answer)

    def _add_time(self, stage: str, seconds: float) -> None:
        with self._stage_lock:
            self.stage_seconds[stage] += seconds
