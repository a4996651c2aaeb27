"""BEIR SciFact and HotpotQA (distractor dev) as corpora and as ragmon golden sets (JSONL).

Golden-set rows follow ``ragmon eval``'s schema: ``id``, ``question``, ``ground_truth_docs``,
``question_type``, ``difficulty``, ``hops``, ``ground_truth_answer``, ``meta``. Document ids are
the ids the benchmark apps report: BEIR ``_id`` for SciFact, the paragraph title for HotpotQA
(titles are unique per paragraph in HotpotQA: 1021 distinct paragraphs in the 103 questions,
no title with two texts).

HotpotQA hops. The two supporting paragraphs are the gold documents. ``two_hop_recall@k``
needs one per hop. For **comparison** questions the question names both entities, so the
order carries no meaning and ``supporting_facts`` order is kept. For **bridge** questions hop 1
is the paragraph the question starts from and hop 2 the paragraph about the bridge entity,
which is found through hop 1. ``supporting_facts`` order usually (not always) lists the
start first, so the order is decided by evidence from the text, in this order of rules:

1. ``named``: exactly one of the two titles (parenthetical disambiguation removed, case
   folded) occurs in the question: that one is hop 1;
2. ``linked``: otherwise, exactly one paragraph's text mentions the other's title: the one that
   mentions it is hop 1 (it leads to the bridge);
3. ``sf_order``: otherwise the ``supporting_facts`` order.

On the 82 bridge questions of hotpotqa_dev_103 the rules decide 48 / 25 / 9 questions and
disagree with plain ``supporting_facts`` order on 4 (see ``hop_rule_counts``).
"""

from __future__ import annotations

import argparse
import csv
import gzip
import json
import re
from collections import Counter
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from .bm25 import Doc
from .paths import cache_dir, hotpotqa_file, scifact_dir

SCIFACT_EVALSET = "scifact_test.jsonl"
HOTPOTQA_EVALSET = "hotpotqa_dev_103.jsonl"


# --- SciFact (BEIR format) ------------------------------------------------------------------
def load_scifact_corpus(directory: Path | None = None) -> list[Doc]:
    directory = directory or scifact_dir()
    with gzip.open(directory / "corpus.jsonl.gz", "rt", encoding="utf-8") as fh:
        return [Doc(str(row["_id"]), row.get("title") or "", row.get("text") or "")
                for row in map(json.loads, fh) if row]


def load_scifact_queries(directory: Path | None = None) -> dict[str, str]:
    directory = directory or scifact_dir()
    with (directory / "queries.test.jsonl").open(encoding="utf-8") as fh:
        return {str(row["_id"]): row["text"] for row in map(json.loads, fh) if row}


def load_scifact_qrels(directory: Path | None = None) -> dict[str, dict[str, int]]:
    directory = directory or scifact_dir()
    qrels: dict[str, dict[str, int]] = {}
    with (directory / "qrels.test.tsv").open(encoding="utf-8", newline="") as fh:
        for row in csv.DictReader(fh, delimiter="\t"):
            qrels.setdefault(row["query-id"], {})[row["corpus-id"]] = int(row["score"])
    return qrels


def scifact_rows() -> list[dict[str, Any]]:
    """One row per test query with qrels (BEIR evaluates exactly these: 300)."""
    queries, qrels = load_scifact_queries(), load_scifact_qrels()
    return [
        {"id": qid, "question": queries[qid], "ground_truth_docs": dict(qrels[qid]),
         "question_type": "factoid", "meta": {"dataset": "beir/scifact", "split": "test"}}
        for qid in queries if qid in qrels
    ]


# --- HotpotQA (original distractor format) -------------------------------------------------
def load_hotpotqa(path: Path | None = None) -> list[dict[str, Any]]:
    with (path or hotpotqa_file()).open(encoding="utf-8") as fh:
        items: list[dict[str, Any]] = json.load(fh)
    return items


def hotpotqa_corpus(items: Iterable[Mapping[str, Any]]) -> list[Doc]:
    """Every context paragraph of every question, pooled, one document per title."""
    docs: dict[str, Doc] = {}
    for item in items:
        for title, sentences in item["context"]:
            text = "".join(sentences).strip()
            previous = docs.setdefault(title, Doc(title, title, text))
            if previous.text != text:
                raise ValueError(f"HotpotQA title {title!r} has two different paragraphs")
    return list(docs.values())


def _bare_title(title: str) -> str:
    return re.sub(r"\s*\([^)]*\)\s*$", "", title).casefold()


def hop_order(item: Mapping[str, Any]) -> tuple[str, str, str]:
    """(hop-1 title, hop-2 title, rule that decided): see the module docstring."""
    first, second = list(dict.fromkeys(title for title, _ in item["supporting_facts"]))
    if item.get("type") != "bridge":
        return first, second, "comparison"
    question = str(item["question"]).casefold()
    in_question = (_bare_title(first) in question, _bare_title(second) in question)
    if in_question[0] != in_question[1]:
        return (first, second, "named") if in_question[0] else (second, first, "named")
    texts = {title: "".join(sentences).casefold() for title, sentences in item["context"]}
    links = (_bare_title(second) in texts[first], _bare_title(first) in texts[second])
    if links[0] != links[1]:
        return (first, second, "linked") if links[0] else (second, first, "linked")
    return first, second, "sf_order"


def hop_rule_counts(items: Iterable[Mapping[str, Any]]) -> dict[str, int]:
    counts: Counter[str] = Counter()
    for item in items:
        hop1, _, rule = hop_order(item)
        counts[rule] += 1
        if item.get("type") == "bridge" and hop1 != item["supporting_facts"][0][0]:
            counts["differs_from_sf_order"] += 1
    return dict(sorted(counts.items()))


def hotpotqa_rows(items: Iterable[Mapping[str, Any]] | None = None) -> list[dict[str, Any]]:
    rows = []
    for item in items if items is not None else load_hotpotqa():
        hop1, hop2, rule = hop_order(item)
        rows.append({
            "id": item["_id"], "question": item["question"], "ground_truth_answer": item["answer"],
            "ground_truth_docs": [hop1, hop2], "hops": [[hop1], [hop2]],
            "question_type": "multi_hop", "difficulty": item.get("level") or None,
            "meta": {"dataset": "hotpotqa/dev_distractor", "type": item.get("type"), "hop_rule": rule},
        })
    return rows


# --- writing --------------------------------------------------------------------------------
def write_jsonl(rows: Iterable[Mapping[str, Any]], path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    with tmp.open("w", encoding="utf-8") as fh:
        for row in rows:
            fh.write(json.dumps({k: v for k, v in row.items() if v is not None}, ensure_ascii=False) + "\n")
    tmp.replace(path)
    return path


def write_scifact_evalset(path: Path | None = None) -> Path:
    return write_jsonl(scifact_rows(), path or cache_dir() / SCIFACT_EVALSET)


def write_hotpotqa_evalset(path: Path | None = None) -> Path:
    return write_jsonl(hotpotqa_rows(), path or cache_dir() / HOTPOTQA_EVALSET)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Write the benchmark golden sets (JSONL).")
    parser.add_argument("--out", type=Path, default=None, help="directory (default .cache/bench)")
    args = parser.parse_args(argv)
    out = args.out or cache_dir()
    print(write_scifact_evalset(out / SCIFACT_EVALSET))
    print(write_hotpotqa_evalset(out / HOTPOTQA_EVALSET))
    print("HotpotQA hop rules:", hop_rule_counts(load_hotpotqa()))


if __name__ == "__main__":
    main()
