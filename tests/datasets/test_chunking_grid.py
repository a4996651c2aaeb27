"""``ragmon chunking``: a real grid over a real corpus with the real BM25 and MiniLM retrievers."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from ragmon.cli import main
from ragmon.datasets.chunking import Chunk
from ragmon.datasets.grid import GoldSpan, label_ranking, resolve_gold
from ragmon.evaluation.goldenset import parse_golden_row

from .conftest import write_jsonl


def _chunk(doc: str, start: int, end: int) -> Chunk:
    return Chunk(f"{doc}#{start}-{end}", doc, "x", start, end, 1)


def test_a_gold_id_counts_once_at_the_first_chunk_that_covers_it() -> None:
    gold = {"a": [GoldSpan("a", 1, None)], "b": [GoldSpan("b#100-200", 2, (100, 200))]}
    ranking = [_chunk("c", 0, 50), _chunk("a", 0, 50), _chunk("a", 50, 90), _chunk("b", 0, 100),
               _chunk("b", 150, 300)]
    assert label_ranking(ranking, gold) == ["c#0-50", "a", "a#50-90", "b#0-100", "b#100-200"]


def test_gold_resolution_doc_ids_chunk_ids_unknown() -> None:
    row = parse_golden_row({"id": 1, "question": "q", "ground_truth_docs": {"a": 1, "b#3-9": 2, "zz": 1, "c": 0}})
    gold, unknown = resolve_gold(row, {"a", "b", "c"})
    assert gold == {"a": [GoldSpan("a", 1, None)], "b": [GoldSpan("b#3-9", 2, (3, 9))]}
    assert unknown == ["zz"]


@pytest.fixture
def evalset(tmp_path: Path) -> Path:
    return write_jsonl(tmp_path / "golden.jsonl", [
        {"id": 1, "question": "How many days until a refund reaches my card?", "ground_truth_docs": ["refunds.md"]},
        {"id": 2, "question": "How long is the warranty on a kettle?", "ground_truth_docs": ["warranty.txt"]},
        {"id": 3, "question": "What does shipping to Switzerland cost?", "ground_truth_docs": ["shipping.md#147-220"]},
        {"id": 4, "question": "How often should I descale?", "ground_truth_docs": ["care/descaling.txt"]},
        {"id": 5, "question": "Unknown gold", "ground_truth_docs": ["missing.md"]},
    ])


@pytest.mark.parametrize("retriever", ["bm25", "dense"])
def test_grid_table_json_and_plot(corpus_dir: Path, evalset: Path, tmp_path: Path, retriever: str,
                                  capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "grid.json"
    code = main(["chunking", str(corpus_dir), str(evalset), "--sizes", "16,32,64", "--overlaps", "0,0.5",
                 "--modes", "paragraph,section", "--retriever", retriever, "--k", "1,3", "--out", str(out),
                 "--no-progress"])
    assert code == 0
    grid = json.loads(out.read_text())
    configs = grid["configs"]
    assert len(configs) == 3 * 2 + 3 * 2  # fixed grid + one row per content-aware mode and size
    first = configs[0]
    assert {"size": 16, "overlap": 0.0, "mode": "fixed"}.items() <= first.items()
    assert {"recall@3", "ndcg@3", "hit@1", "mrr", "index_s", "chunks"} <= set(first)
    assert next(c for c in configs if c["size"] == 16 and c["overlap"] == 0.5)["overlap_tokens"] == 8
    assert grid["questions"] == 4 and grid["skipped_questions"] == 1 and grid["unknown_gold_ids"] == ["missing.md"]
    assert grid["primary_k"] == 3
    best = configs[grid["best"]]
    assert best["ndcg@3"] == max(c["ndcg@3"] for c in configs)
    assert all(0 <= c["recall@3"] <= 1 and 0 <= c["ndcg@3"] <= 1 for c in configs)
    if retriever == "bm25":  # keyword questions over four short documents: most gold is found
        assert best["recall@3"] >= 0.75
    table = capsys.readouterr().out
    marked = [line for line in table.splitlines() if line.startswith("*")]
    assert len(marked) == 2 and marked[1].startswith("* best by ndcg@3")
    svg = ET.parse(tmp_path / "grid.svg").getroot()
    assert svg.tag.endswith("svg")
    texts = [t.text for t in svg.iter("{http://www.w3.org/2000/svg}text")]
    assert "recall@3" in texts and "ndcg@3" in texts and "fixed, overlap 0.5" in texts and "section" in texts
    assert len(list(svg.iter("{http://www.w3.org/2000/svg}polyline"))) == 2 * 4  # 2 panels x 4 series


def test_bad_usage_exits_2(corpus_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["chunking", str(tmp_path / "nope"), str(tmp_path / "nope.jsonl")]) == 2
    assert "no such file" in capsys.readouterr().err
    empty = write_jsonl(tmp_path / "g.jsonl", [{"id": 1, "question": "q", "ground_truth_docs": ["elsewhere"]}])
    assert main(["chunking", str(corpus_dir), str(empty), "--no-progress"]) == 2
    assert "no question" in capsys.readouterr().err
