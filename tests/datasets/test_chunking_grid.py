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
    assert len(configs) == 3 * (3 * 2)  # fixed, paragraph, section: each over sizes x overlaps
    assert [(c["mode"], c["size"], c["overlap"]) for c in configs] == [
        (mode, size, overlap) for mode in ("fixed", "paragraph", "section") for size in (16, 32, 64)
        for overlap in (0.0, 0.5)]
    first = configs[0]
    assert {"size": 16, "overlap": 0.0, "mode": "fixed", "count_title": False}.items() <= first.items()
    assert {"recall@3", "ndcg@3", "hit@1", "mrr", "index_s", "chunks", "avg_shared_tokens"} <= set(first)
    assert all(c["overlap_tokens"] == c["size"] // 2 for c in configs if c["overlap"] == 0.5)
    for c in configs:
        if c["overlap"] == 0:
            assert c["avg_shared_tokens"] == 0
        elif c["mode"] == "fixed":  # exact; whole sentences (up to the overlap) in the content-aware modes
            assert c["avg_shared_tokens"] > 0
        else:
            assert 0 <= c["avg_shared_tokens"] <= c["overlap_tokens"]
    # overlap makes more chunks in every mode (some sentences are carried into a second chunk)
    for mode in ("fixed", "paragraph"):
        by = {(c["size"], c["overlap"]): c["chunks"] for c in configs if c["mode"] == mode}
        assert by[(16, 0.5)] > by[(16, 0.0)]
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
    assert table.splitlines()[0].split()[:4] == ["mode", "size", "overlap", "shared"]
    assert sum("section" in line and " 0.5 (8) " in line for line in table.splitlines()) == 1  # overlap shown
    svg = ET.parse(tmp_path / "grid.svg").getroot()
    assert svg.tag.endswith("svg")
    texts = [t.text for t in svg.iter("{http://www.w3.org/2000/svg}text")]
    assert "recall@3" in texts and "ndcg@3" in texts and "fixed, overlap 0.5" in texts
    assert "section, overlap 0" in texts and "paragraph, overlap 0.5" in texts
    assert len(list(svg.iter("{http://www.w3.org/2000/svg}polyline"))) == 2 * 6  # 2 panels x 6 series


def test_count_title_rows(corpus_dir: Path, evalset: Path, tmp_path: Path,
                          capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "grid.json"
    assert main(["chunking", str(corpus_dir), str(evalset), "--sizes", "12,24", "--overlaps", "0.25",
                 "--modes", "section", "--count-title", "both", "--title-prefix", "both", "--k", "1,3",
                 "--out", str(out), "--no-progress"]) == 0
    configs = json.loads(out.read_text())["configs"]
    # title on x (counted, not counted) + title off (counting does not apply): 3 x (fixed + section) x 2 sizes
    assert len(configs) == 3 * 2 * 2
    assert sorted({(c["title_prefix"], c["count_title"]) for c in configs}) == [(False, False), (True, False),
                                                                               (True, True)]
    counted = {(c["mode"], c["size"]): c for c in configs if c["count_title"]}
    plain = {(c["mode"], c["size"]): c for c in configs if c["title_prefix"] and not c["count_title"]}
    for key, row in counted.items():  # a smaller span budget: more, shorter chunks
        assert row["chunks"] >= plain[key]["chunks"] and row["avg_chunk_tokens"] <= plain[key]["avg_chunk_tokens"]
    assert any(row["chunks"] > plain[key]["chunks"] for key, row in counted.items())
    table = capsys.readouterr().out
    assert "counted" in table and " no " in table
    svg = (tmp_path / "grid.svg").read_text()
    assert "fixed, overlap 0.25, title counted" in svg and "section, overlap 0.25, no title" in svg


def test_bad_usage_exits_2(corpus_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["chunking", str(tmp_path / "nope"), str(tmp_path / "nope.jsonl")]) == 2
    assert "no such file" in capsys.readouterr().err
    empty = write_jsonl(tmp_path / "g.jsonl", [{"id": 1, "question": "q", "ground_truth_docs": ["elsewhere"]}])
    assert main(["chunking", str(corpus_dir), str(empty), "--no-progress"]) == 2
    assert "no question" in capsys.readouterr().err
