"""Floors on the human-labelled dev sets, so a change to the local judge cannot regress silently.

The full cross-dataset table is ``python bench/judge_fidelity.py`` (docs/judges.md); this test
scores a fixed slice of every dev set (every ``STEP``-th row) with the real judge and checks that
AUC and the balanced accuracy at the default threshold stay above floors set a little below what
the shipped judge reaches on the same slice (slack for the slice's noise, not a target; the slice
was part of the fitting data, so these are regression guards, not held-out numbers). Skipped,
saying which files and how to get them, when the bench data (``make benchdata``) is not there.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from bench._benchdata import benchdata_dir, missing, missing_reason
from ragmon.calibration import stats
from ragmon.scoring.local import LocalJudge

NEEDS = ("ragtruth_qa_dev.jsonl", "ragtruth_summary_dev.jsonl", "ragtruth_data2txt_dev.jsonl",
         "wikiqa_ranked_dev.jsonl", "retrieval/wice_claim_dev.jsonl")
DATA = benchdata_dir()
STEP = 6
pytestmark = pytest.mark.skipif(bool(missing(NEEDS)), reason=missing_reason(NEEDS))

# (AUC floor, balanced-accuracy-at-0.5 floor) on the slice
FLOORS = {
    "ragtruth_qa": (0.78, 0.68),
    "ragtruth_summary": (0.63, 0.54),
    "ragtruth_data2txt": (0.64, 0.58),
    "wice": (0.90, 0.82),
}
# best balanced accuracy (in-sample on the slice, so optimistic on ~75 rows) minus the one at 0.5:
# a coarse guard that 0.5 stays a sensible cut; the 0.03 goal is read off the full table
MAX_THRESHOLD_GAP = 0.15


def _load(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def _slice(name: str) -> list[tuple[str | None, list[str], str, int]]:
    if name == "wice":
        rows = [r for r in _load(DATA / "retrieval" / "wice_claim_dev.jsonl") if r["label"] != "partially_supported"]
        out = [(None, ["\n".join(s for s in r["evidence"] if s.strip())], r["claim"], int(r["label"] == "supported"))
               for r in rows]
        return out[:: STEP // 2]
    rows = _load(DATA / f"{name}_dev.jsonl")
    return [(r.get("question"), r["contexts"], r["answer"], int(r["labels"]["faithful"])) for r in rows][::STEP]


@pytest.fixture(scope="module")
def judge() -> LocalJudge:
    return LocalJudge()


@pytest.mark.parametrize("name", sorted(FLOORS))
def test_faithfulness_floor(judge: LocalJudge, name: str) -> None:
    rows = _slice(name)
    labels = np.array([r[3] for r in rows])
    scores = np.array([judge.score_sync(q, c, a).values["faithfulness"] for q, c, a, _ in rows], dtype=float)
    auc = stats.roc_auc(labels, scores)
    ba = stats.balanced_accuracy(stats.confusion(labels, scores, 0.5))
    best = stats.best_threshold(labels, scores)[1]
    auc_floor, ba_floor = FLOORS[name]
    assert auc >= auc_floor, f"{name}: AUC {auc:.3f} < {auc_floor} on {len(rows)} rows"
    assert ba >= ba_floor, f"{name}: balanced accuracy {ba:.3f} < {ba_floor} at 0.5"
    assert best - ba <= MAX_THRESHOLD_GAP, f"{name}: 0.5 is {best - ba:.3f} below the best threshold"


def test_answer_relevancy_is_not_fooled_by_echoes_refusals_or_other_answers(judge: LocalJudge) -> None:
    rows = _load(DATA / "ragtruth_qa_dev.jsonl")[:: STEP * 2]
    real, fake = [], []
    for i, r in enumerate(rows):
        q = r["question"]
        real.append(judge.score_sync(q, [], r["answer"]).values["answer_relevancy"])
        other = rows[(i + 7) % len(rows)]["answer"]
        for answer in (other, f"{q.rstrip('?')}?", f"I'm sorry, I don't have any information about {q.rstrip('?')}."):
            fake.append(judge.score_sync(q, [], answer).values["answer_relevancy"])
    labels = np.array([1] * len(real) + [0] * len(fake))
    scores = np.array(real + fake, dtype=float)
    assert stats.roc_auc(labels, scores) >= 0.9
    assert stats.balanced_accuracy(stats.confusion(labels, scores, 0.5)) >= 0.85


def test_answer_relevancy_on_wikiqa_sentences_keeps_0_5_as_its_cut(judge: LocalJudge) -> None:
    """WikiQA sentences read as answers (human label: the sentence answers the question), every
    third one (393 rows, 58 answers): the shipped judge reaches AUC 0.820, balanced accuracy 0.724 at
    0.5 and 0.744 at its best threshold here. With the cosine floor on single sentences too (before)
    it was 0.785 / 0.666 / 0.730: an on-topic sentence that does not answer passed 0.5."""
    rows = _load(DATA / "wikiqa_ranked_dev.jsonl")
    pairs = [(r["question"], s, int(lab)) for r in rows
             for s, lab in zip(r["contexts"], r["meta"]["context_labels"], strict=True)][::3]
    labels = np.array([p[2] for p in pairs])
    scores = np.array([judge.score_sync(q, [], s).values["answer_relevancy"] for q, s, _ in pairs], dtype=float)
    auc = stats.roc_auc(labels, scores)
    ba = stats.balanced_accuracy(stats.confusion(labels, scores, 0.5))
    best = stats.best_threshold(labels, scores)[1]
    assert auc >= 0.79, f"AUC {auc:.3f}"
    assert ba >= 0.69, f"balanced accuracy {ba:.3f} at 0.5"
    assert best - ba <= 0.05, f"0.5 is {best - ba:.3f} below the best threshold"
