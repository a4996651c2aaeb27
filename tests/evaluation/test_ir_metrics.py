"""IR metrics against trec_eval (pytrec_eval) on randomized runs, plus hand-worked examples.

trec_eval ranks a run by score, descending, and breaks ties by document id, descending; it gives a
document one score per query. ragmon takes the rank order as given and de-duplicates it keeping
first occurrences. So each randomized query is handed to ragmon as a list (with duplicates
sometimes inserted) and to trec_eval as {doc: score} with strictly decreasing scores in the
de-duplicated order; the tie tests hand trec_eval tied scores and ragmon trec_eval's tie order.
"""

from __future__ import annotations

import math
import random
from collections.abc import Mapping, Sequence

import pytest
import pytrec_eval

from ragmon.evaluation import ir

KS = (1, 3, 5, 10, 100)
TOLERANCE = 1e-9
_TREC = {"hit": "success_{k}", "recall": "recall_{k}", "precision": "P_{k}", "ndcg": "ndcg_cut_{k}"}


def trec_eval(qrels: Mapping[str, Mapping[str, int]], run: Mapping[str, Mapping[str, float]]) -> dict:
    measures = {template.format(k=k) for template in _TREC.values() for k in KS} | {"recip_rank", "map"}
    return pytrec_eval.RelevanceEvaluator(dict(qrels), measures).evaluate(dict(run))


def assert_matches_reference(ragmon_values: Mapping[str, float | None], reference: Mapping[str, float]) -> None:
    for name, template in _TREC.items():
        for k in KS:
            ours, theirs = ragmon_values[f"{name}@{k}"], reference[template.format(k=k)]
            assert ours is not None
            assert abs(ours - theirs) <= TOLERANCE, (name, k, ours, theirs)
    assert ragmon_values["mrr"] is not None
    assert abs(ragmon_values["mrr"] - reference["recip_rank"]) <= TOLERANCE


def trec_order(scores: Mapping[str, float]) -> list[str]:
    """The order trec_eval ranks a run in: score descending, ties by document id descending."""
    return [doc for doc, _ in sorted(scores.items(), key=lambda item: (item[1], item[0]), reverse=True)]


def random_query(rng: random.Random) -> tuple[dict[str, int], list[str]]:
    """Graded gold (>= 1 relevant, some grade-0 judgements) and a ranking with occasional duplicates."""
    pool = [f"d{i:03d}" for i in range(rng.randint(3, 60))]
    judged = rng.sample(pool, rng.randint(1, min(len(pool), 12)))
    gold = {doc: rng.choice((0, 1, 1, 2, 3)) for doc in judged}
    if not any(grade > 0 for grade in gold.values()):
        gold[judged[0]] = rng.randint(1, 3)
    length = rng.choice((0, 1, 2, 5, 10, 20, rng.randint(0, len(pool))))
    ranking = rng.sample(pool, min(length, len(pool)))
    for _ in range(rng.choice((0, 0, 1, 3))):  # re-insert earlier documents further down
        if ranking:
            ranking.insert(rng.randint(1, len(ranking)), rng.choice(ranking))
    if ranking and rng.random() < 0.3:  # a gold document retrieved twice
        ranking.insert(rng.randint(0, len(ranking)), judged[0])
        ranking.insert(len(ranking), judged[0])
    return gold, ranking


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_randomized_runs_match_trec_eval(seed: int) -> None:
    rng = random.Random(seed)
    qrels, run, rankings = {}, {}, {}
    for q in range(400):
        gold, ranking = random_query(rng)
        qid = f"q{q}"
        qrels[qid], rankings[qid] = gold, ranking
        distinct = list(dict.fromkeys(ranking))
        run[qid] = {doc: float(len(distinct) - i) + rng.random() * 0.5 for i, doc in enumerate(distinct)}
    reference = trec_eval(qrels, run)
    assert sum(1 for r in rankings.values() if not r) > 10  # empty retrievals are exercised
    assert sum(1 for r in rankings.values() if len(r) != len(set(r))) > 50  # and duplicates
    for qid, ranking in rankings.items():
        assert trec_order(run[qid]) == list(dict.fromkeys(ranking))  # the order trec_eval sees
        assert_matches_reference(ir.retrieval_metrics(ranking, qrels[qid], ks=KS), reference[qid])


def test_average_precision_matches_trec_eval_map() -> None:
    rng = random.Random(11)
    qrels, run, rankings = {}, {}, {}
    for q in range(400):
        gold, ranking = random_query(rng)
        distinct = list(dict.fromkeys(ranking))
        qrels[f"q{q}"], rankings[f"q{q}"] = gold, ranking
        run[f"q{q}"] = {doc: float(len(distinct) - i) for i, doc in enumerate(distinct)}
    reference = trec_eval(qrels, run)
    for qid, ranking in rankings.items():
        assert abs(ir.average_precision(ranking, qrels[qid]) - reference[qid]["map"]) <= TOLERANCE, qid
    assert ir.average_precision(["a", "b", "c", "d"], {"a": 1, "c": 1}) == pytest.approx((1 / 1 + 2 / 3) / 2)
    assert ir.average_precision(["a"], {"a": 0}) == 0.0  # nothing relevant: trec_eval's 0 (see the module doc)


def test_tied_scores_match_trec_eval_in_its_tie_order() -> None:
    rng = random.Random(7)
    qrels, run = {}, {}
    for q in range(300):
        gold, ranking = random_query(rng)
        qrels[f"q{q}"] = gold
        run[f"q{q}"] = {doc: float(rng.randint(0, 3)) for doc in ranking}  # many ties
    reference = trec_eval(qrels, run)
    tie_order_matters = 0
    for qid, scores in run.items():
        ours = ir.retrieval_metrics(trec_order(scores), qrels[qid], ks=KS)
        assert_matches_reference(ours, reference[qid])
        other = sorted(scores, key=lambda doc: (-scores[doc], doc))  # ties by id ascending instead
        if ir.retrieval_metrics(other, qrels[qid], ks=KS) != ours:
            tie_order_matters += 1
    assert tie_order_matters > 20  # the tie-breaking was really exercised


def test_empty_retrieval_is_zero_like_trec_eval() -> None:
    gold = {"a": 2, "b": 1}
    reference = trec_eval({"q": gold}, {"q": {}})["q"]
    ours = ir.retrieval_metrics([], gold, ks=KS)
    assert_matches_reference(ours, reference)
    assert all(value == 0.0 for value in ours.values())


def test_gold_document_retrieved_twice_counts_once() -> None:
    gold = {"a": 1, "b": 1}
    ranking = ["a", "x", "a", "b", "a"]
    reference = trec_eval({"q": gold}, {"q": {"a": 3.0, "x": 2.0, "b": 1.0}})["q"]
    ours = ir.retrieval_metrics(ranking, gold, ks=KS)
    assert_matches_reference(ours, reference)
    assert ours["precision@3"] == pytest.approx(2 / 3)  # top 3 distinct = a, x, b
    assert ir.recall_at(["a", "a", "a"], gold, 3) == 0.5
    assert ir.precision_at(["a", "a", "a"], gold, 3) == pytest.approx(1 / 3)
    assert ir.dedupe(ranking) == ("a", "x", "b")


def test_hand_worked_example() -> None:
    """gold a:3 b:2 c:0 e:1 (relevant: a, b, e); ranking c, b, x, a.

    hit@1 = 0 (c is grade 0); hit@3 = 1; recall@3 = 1/3; precision@3 = 1/3; precision@10 = 2/10;
    mrr = 1/2 (b at rank 2); DCG@3 = 0/log2(2) + 2/log2(3) + 0/log2(4);
    IDCG@3 = 3/log2(2) + 2/log2(3) + 1/log2(4); DCG@10 adds 3/log2(5) for a at rank 4.
    """
    gold = {"a": 3, "b": 2, "c": 0, "e": 1}
    m = ir.retrieval_metrics(["c", "b", "x", "a"], gold)
    idcg = 3 + 2 / math.log2(3) + 1 / 2
    assert m["hit@1"] == 0.0 and m["hit@3"] == 1.0
    assert m["recall@3"] == pytest.approx(1 / 3) and m["recall@5"] == pytest.approx(2 / 3)
    assert m["precision@3"] == pytest.approx(1 / 3) and m["precision@10"] == pytest.approx(0.2)
    assert m["mrr"] == 0.5
    assert m["ndcg@3"] == pytest.approx((2 / math.log2(3)) / idcg)
    assert m["ndcg@10"] == pytest.approx((2 / math.log2(3) + 3 / math.log2(5)) / idcg)
    assert m["ndcg@1"] == 0.0


def test_ideal_dcg_is_truncated_at_k() -> None:
    # two grade-3 gold documents: at k=1 the ideal is one grade-3 document, so a@1 is perfect
    assert ir.ndcg_at(["a"], {"a": 3, "b": 3}, 1) == 1.0
    assert ir.ndcg_at(["a"], {"a": 3, "b": 3}, 2) == pytest.approx(3 / (3 + 3 / math.log2(3)))


def test_keys_and_precision_divides_by_k() -> None:
    m = ir.retrieval_metrics(["a"], {"a": 1}, hops=(frozenset({"a"}),))
    expected = {
        f"{name}@{k}" for name in ("hit", "recall", "precision", "ndcg", "two_hop_recall") for k in (1, 3, 5, 10)
    }
    assert set(m) == expected | {"mrr"}
    assert m["precision@5"] == 0.2  # one relevant document returned, divided by k = 5
    assert "two_hop_recall@5" not in ir.retrieval_metrics(["a"], {"a": 1})
    assert ir.retrieval_metrics(["a"], {"a": 1}, ks=(100,))["recall@100"] == 1.0


@pytest.mark.parametrize("gold", [{}, {"a": 0, "b": 0}])
def test_no_relevant_gold_is_not_computable(gold: dict[str, int]) -> None:
    m = ir.retrieval_metrics(["a", "b"], gold)
    assert m and all(value is None for value in m.values())
    assert ir.recall_at(["a"], gold, 5) is None
    assert ir.ndcg_at(["a"], gold, 5) == 0.0  # the standalone formula follows trec_eval: 0 when IDCG = 0
    # two-hop recall does not depend on the gold grades
    assert ir.retrieval_metrics(["a"], gold, hops=(frozenset({"a"}),))["two_hop_recall@1"] == 1.0


HOPS = (frozenset({"a"}), frozenset({"b", "b2"}))


@pytest.mark.parametrize(
    ("ranking", "k", "recall", "miss"),
    [
        (["x", "b2", "y", "a"], 4, 1.0, None),
        (["x", "b2", "y", "a"], 3, 0.0, "hop1_miss"),
        (["a", "x", "b"], 2, 0.0, "hop2_miss"),
        (["x", "y"], 10, 0.0, "both_miss"),
        ([], 5, 0.0, "both_miss"),
        (["x", "x", "a", "b"], 3, 1.0, None),  # duplicates do not use up the cut-off
    ],
)
def test_two_hop_recall_and_miss_class(ranking: list[str], k: int, recall: float, miss: str | None) -> None:
    assert ir.two_hop_recall_at(ranking, HOPS, k) == recall
    assert ir.classify_hop_miss(ranking, HOPS, k) == miss
    assert ir.retrieval_metrics(ranking, {"a": 1, "b": 1}, ks=(k,), hops=HOPS)[f"two_hop_recall@{k}"] == recall


def test_two_hop_edge_cases() -> None:
    assert ir.two_hop_recall_at(["a"], (), 5) is None
    assert ir.two_hop_recall_at(["a"], (frozenset({"a"}), frozenset()), 5) is None
    assert ir.classify_hop_miss(["a"], (frozenset({"a"}), frozenset()), 5) is None
    three = (frozenset({"a"}), frozenset({"b"}), frozenset({"c"}))
    assert ir.classify_hop_miss(["a", "b"], three, 5) == "hop2_miss"  # later hops count as hop 2
    assert ir.classify_hop_miss(["b", "c"], three, 5) == "hop1_miss"
    assert ir.two_hop_recall_at(["a", "b", "c"], three, 3) == 1.0


@pytest.mark.parametrize(
    ("question_type", "expected"),
    [("factoid", "mrr"), ("summary", "recall@5"), ("multi_hop", "two_hop_recall@5"), ("no_answer", None)],
)
def test_primary_metric(question_type: str, expected: str | None) -> None:
    assert ir.primary_metric(question_type) == expected


def test_primary_metric_with_other_k_and_unknown_type() -> None:
    assert ir.primary_metric("summary", 10) == "recall@10"
    with pytest.raises(ValueError, match="question_type"):
        ir.primary_metric("essay")


@pytest.mark.parametrize("k", [0, -1])
def test_bad_k_raises(k: int) -> None:
    with pytest.raises(ValueError, match="k must be"):
        ir.retrieval_metrics(["a"], {"a": 1}, ks=(k,))
    with pytest.raises(ValueError, match="k must be"):
        ir.recall_at(["a"], {}, k)


def _naive_metrics(ranking: Sequence[str], gold: Mapping[str, int], k: int) -> float:
    """What counting duplicates would give: shows the de-duplication is observable."""
    return sum(1 for doc in ranking[:k] if gold.get(doc, 0) > 0) / k


def test_deduplication_changes_results_versus_naive_counting() -> None:
    ranking, gold = ["a", "a", "b"], {"a": 1}
    assert _naive_metrics(ranking, gold, 2) == 1.0
    assert ir.precision_at(ranking, gold, 2) == 0.5
