"""Building the golden set that ``ragmon eval`` reads (docs/evaluation.md, "Building a golden set").

* :mod:`.corpus` — a directory of ``.txt``/``.md`` files or JSONL ``{id, title, text}`` rows.
* :mod:`.chunking` — chunks by tokens of the embedding model's tokenizer: fixed windows with
  overlap, or paragraph/section packing; title prefix; ids ``doc#start-end`` that map back.
* :mod:`.grid` / :mod:`.chunking_command` — ``ragmon chunking``: re-chunk, re-index (BM25 or
  MiniLM, :mod:`.retrievers`) and evaluate each configuration; table, JSON, SVG (:mod:`.plot`).
* :mod:`.synth` / :mod:`.prompts` — ``ragmon dataset synth``: factoid, adversarial and multi-hop
  questions from an OpenAI-compatible LLM (the LLM judge's transport), realism filter, dedup,
  provenance. Split into :mod:`.synth_options` (kinds, drop reasons, options, counts),
  :mod:`.synth_parse` (reply parsing), :mod:`.synth_search` (distractors, multi-hop pairing) and
  :mod:`.synth_rows` (row assembly, provenance); :mod:`.synth` runs the loop and re-exports the API.
* :mod:`.harvest` — ``ragmon dataset harvest``: candidates from the agent's judged traces
  (written by ``ragmon.export.judged``, ``--export-judged``).
* :mod:`.dataset_command` / :mod:`.chunking_command` — the ``ragmon dataset`` and ``ragmon chunking``
  commands.
* :mod:`.label` — ``ragmon dataset label``: terminal labelling that stops and resumes.
* :mod:`.judge_label` — ``ragmon dataset label --mode judge``: faithful / answers the question /
  relevant contexts, written in the calibration format ``ragmon calibrate --fit`` reads.
  Candidates come in ``ragmon.calibration.label_order``'s order (scores near the threshold first).
"""

from __future__ import annotations

from .chunking import Chunk, ChunkingConfig, chunk_corpus, parse_chunk_id
from .corpus import CorpusDoc, load_corpus
from .harvest import harvest

__all__ = [
    "Chunk",
    "ChunkingConfig",
    "CorpusDoc",
    "chunk_corpus",
    "harvest",
    "load_corpus",
    "parse_chunk_id",
]
