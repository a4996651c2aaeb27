"""One golden-set row with its provenance, for ``ragmon dataset synth`` (split out of :mod:`.synth`).

The row id is a hash of kind, chunk ids and question; ``meta`` records kind, generator model,
prompt version(s), realism score with the rater's model and prompt version, the answer check's
model and prompt version (``None`` when not checked), source documents and the chunking.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any

from . import prompts as sp
from .chunking import Chunk, ChunkingConfig
from .synth_options import MULTI_HOP

__all__ = ["build_row"]


def build_row(kind: str, question: str, chunks: Sequence[Chunk], answer: str, meta: dict[str, Any],
              realism: int | None, *, generator_model: str, rater_model: str, chunking: ChunkingConfig,
              answer_checked: bool = False,
              difficulty: str | None = None, hops: list[list[str]] | None = None) -> dict[str, Any]:
    ids = [c.id for c in chunks]
    digest = hashlib.sha256("\0".join([kind, *ids, question]).encode()).hexdigest()[:12]
    config = chunking
    row: dict[str, Any] = {
        "id": f"synth-{digest}", "question": question, "ground_truth_docs": ids,
        "ground_truth_answer": answer, "question_type": MULTI_HOP if kind == MULTI_HOP else "factoid",
    }
    if difficulty:
        row["difficulty"] = difficulty
    if hops:
        row["hops"] = hops
    row["meta"] = {
        "source": "synthetic", "kind": kind, "generator_model": generator_model, **meta,
        "realism": realism, "realism_model": rater_model if realism is not None else None,
        "realism_prompt_version": sp.REALISM_VERSION if realism is not None else None,
        "answer_check_model": rater_model if answer_checked else None,
        "answer_check_prompt_version": sp.ANSWER_CHECK_VERSION if answer_checked else None,
        "source_docs": list(dict.fromkeys(c.doc_id for c in chunks)),
        "chunking": {"size": config.size, "overlap": config.overlap, "mode": config.mode,
                     "title_prefix": config.title_prefix, "count_title": config.count_title},
    }
    return row
