"""The chunking grid: re-chunk, re-index and evaluate each configuration against a golden set.

Gold matching by text: a retrieved chunk is relevant to a gold id when it **overlaps the gold
text** — any chunk of a gold document (``ground_truth_docs`` names corpus document ids), or any
chunk whose character span overlaps a gold chunk's span (``doc#start-end`` ids, as
``ragmon dataset synth`` writes them, whatever chunking made them). A gold id is counted once: the
first retrieved chunk that covers it takes its grade, later chunks covering it again are not
relevant (they add nothing new to the prompt). ``k`` counts chunks — what an app would put into
its prompt — and the metrics are ``ragmon eval``'s own (:mod:`ragmon.evaluation.ir`) over that
ranking. Questions without a relevant gold id in the corpus are left out and counted.
"""

from __future__ import annotations

import bisect
import itertools
import statistics
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..evaluation import ir
from ..evaluation.types import GoldenRow
from .chunking import Chunk, ChunkingConfig, DocTokens, chunk_corpus, parse_chunk_id, spans_overlap
from .retrievers import Bm25Index, DenseIndex, Doc, Retriever

__all__ = ["GridOptions", "GridResult", "best_index", "label_ranking", "resolve_gold", "run_grid"]

RETRIEVERS = ("bm25", "dense")
Progress = Callable[[int, int], None]


@dataclass(frozen=True, slots=True)
class GoldSpan:
    gold_id: str
    grade: int
    span: tuple[int, int] | None  # None: the whole document


@dataclass(frozen=True, slots=True)
class GridOptions:
    retriever: str = "bm25"
    ks: tuple[int, ...] = (1, 3, 5, 10)
    primary_k: int = 5
    cache_dir: Path | None = None  # dense vectors
    threads: int = 2


@dataclass
class GridResult:
    configs: list[dict[str, Any]]
    questions: int
    skipped_questions: int  # no relevant gold id found in the corpus
    unknown_gold_ids: list[str] = field(default_factory=list)
    primary_k: int = 5

    @property
    def best(self) -> int | None:
        return best_index(self.configs, self.primary_k)


def resolve_gold(row: GoldenRow, doc_ids: set[str]) -> tuple[dict[str, list[GoldSpan]], list[str]]:
    """Per document id, the row's relevant gold spans; and the gold ids not found in the corpus."""
    out: dict[str, list[GoldSpan]] = {}
    unknown: list[str] = []
    for gold_id, grade in row.ground_truth_docs.items():
        if grade <= 0:
            continue
        if gold_id in doc_ids:
            out.setdefault(gold_id, []).append(GoldSpan(gold_id, grade, None))
            continue
        parsed = parse_chunk_id(gold_id)
        if parsed is not None and parsed[0] in doc_ids:
            out.setdefault(parsed[0], []).append(GoldSpan(gold_id, grade, (parsed[1], parsed[2])))
        else:
            unknown.append(gold_id)
    return out, unknown


def label_ranking(chunks: Sequence[Chunk], gold: Mapping[str, Sequence[GoldSpan]]) -> list[str]:
    """Retrieved chunks -> ids for the IR metrics: a gold id at the first chunk that covers it,
    the chunk's own id everywhere else."""
    seen: set[str] = set()
    labels = []
    for chunk in chunks:
        label = chunk.id
        for g in gold.get(chunk.doc_id, ()):
            if g.gold_id not in seen and (g.span is None or spans_overlap(g.span, (chunk.start, chunk.end))):
                label = g.gold_id
                seen.add(label)
                break
        labels.append(label)
    return labels


def _index(chunks: Sequence[Chunk], options: GridOptions) -> Retriever:
    docs = [Doc(c.id, "", c.content) for c in chunks]
    if options.retriever == "bm25":
        return Bm25Index(docs)
    if options.retriever == "dense":
        return DenseIndex(docs, threads=options.threads, cache_dir=options.cache_dir)
    raise ValueError(f"unknown retriever {options.retriever!r}; known: {', '.join(RETRIEVERS)}")


def evaluate_config(
    doc_tokens: Sequence[DocTokens], questions: Sequence[tuple[GoldenRow, Mapping[str, Sequence[GoldSpan]]]],
    config: ChunkingConfig, options: GridOptions, progress: Callable[[], None] | None = None,
) -> dict[str, Any]:
    started = time.perf_counter()
    chunks = chunk_corpus(doc_tokens, config)
    by_id = {c.id: c for c in chunks}
    retriever = _index(chunks, options)
    index_s = time.perf_counter() - started
    depth = max(options.ks)
    per_metric: dict[str, list[float]] = {}
    started = time.perf_counter()
    for row, gold in questions:
        hits = retriever.search(row.question, depth)
        labels = label_ranking([by_id[doc.id] for doc, _ in hits], gold)
        grades = {g.gold_id: g.grade for spans in gold.values() for g in spans}
        values: dict[str, float | None] = {"mrr": ir.reciprocal_rank(labels, grades)}
        for k in options.ks:
            values[f"hit@{k}"] = ir.hit_at(labels, grades, k)
            values[f"recall@{k}"] = ir.recall_at(labels, grades, k)
            values[f"ndcg@{k}"] = ir.ndcg_at(labels, grades, k)
        for name, value in values.items():
            if value is not None:
                per_metric.setdefault(name, []).append(value)
        if progress is not None:
            progress()
    search_s = time.perf_counter() - started
    result: dict[str, Any] = {
        "mode": config.mode, "size": config.size, "overlap": round(config.overlap / config.size, 4),
        "overlap_tokens": config.overlap, "title_prefix": config.title_prefix, "count_title": config.count_title,
        "chunks": len(chunks),
        "avg_chunk_tokens": round(statistics.fmean(c.tokens for c in chunks), 1) if chunks else 0.0,
        "avg_shared_tokens": shared_tokens(doc_tokens, chunks),
    }
    for name in sorted(per_metric, key=_metric_order):
        result[name] = round(statistics.fmean(per_metric[name]), 4)
    result["index_s"] = round(index_s, 3)
    result["search_s"] = round(search_s, 3)
    return result


def shared_tokens(doc_tokens: Sequence[DocTokens], chunks: Sequence[Chunk]) -> float:
    """Mean number of tokens a chunk shares with the previous chunk of its document (the overlap as
    made: exact in fixed mode, whole sentences up to the configured overlap in the content-aware modes)."""
    by_id = {d.doc.id: d for d in doc_tokens}
    doc_id, doc_starts = "", []  # chunks come in corpus order: one document's token starts at a time
    total = pairs = 0
    for a, b in itertools.pairwise(chunks):
        if a.doc_id != b.doc_id:
            continue
        pairs += 1
        if b.start < a.end:
            if a.doc_id != doc_id:
                doc_id, doc_starts = a.doc_id, by_id[a.doc_id].starts
            total += bisect.bisect_left(doc_starts, a.end) - bisect.bisect_left(doc_starts, b.start)
    return round(total / pairs, 1) if pairs else 0.0


def _metric_order(name: str) -> tuple[int, int]:
    base, _, k = name.partition("@")
    return (["recall", "ndcg", "hit", "mrr"].index(base), int(k) if k else 0)


def run_grid(
    doc_tokens: Sequence[DocTokens], rows: Sequence[GoldenRow], configs: Sequence[ChunkingConfig],
    options: GridOptions, progress: Progress | None = None,
) -> GridResult:
    doc_ids = {d.doc.id for d in doc_tokens}
    questions = []
    unknown: set[str] = set()
    for row in rows:
        gold, missing = resolve_gold(row, doc_ids)
        unknown.update(missing)
        if gold:
            questions.append((row, gold))
    total = len(configs) * len(questions)
    done = 0

    def tick() -> None:
        nonlocal done
        done += 1
        if progress is not None:
            progress(done, total)

    results = [evaluate_config(doc_tokens, questions, config, options, tick) for config in configs]
    return GridResult(results, len(questions), len(rows) - len(questions), sorted(unknown), options.primary_k)


def best_index(configs: Sequence[Mapping[str, Any]], k: int) -> int | None:
    """The configuration with the highest ndcg@k (then recall@k, then the smaller index time)."""
    if not configs:
        return None
    return max(range(len(configs)), key=lambda i: (configs[i].get(f"ndcg@{k}", 0.0),
                                                   configs[i].get(f"recall@{k}", 0.0), -configs[i]["index_s"]))
