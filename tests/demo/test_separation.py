"""The offline separation report, driven by an exact-match oracle instead of a model."""

from __future__ import annotations

from collections.abc import Sequence

from ragmon import semconv as sc
from ragmon.demo.failures import FailureKind
from ragmon.demo.separation import measure, report
from ragmon.demo.text import content_tokens, sentences
from ragmon.types import Scores


def oracle(question: str, contexts: Sequence[str], answer: str) -> Scores:
    """Faithfulness: share of answer sentences found verbatim in the contexts; relevancy and
    precision: word overlap with the question — what the injected failures break, by construction."""
    known = {s for c in contexts for s in sentences(c)}
    claims = sentences(answer)
    q = set(content_tokens(question))
    return Scores(
        {
            sc.METRIC_FAITHFULNESS: sum(c in known for c in claims) / len(claims),
            sc.METRIC_ANSWER_RELEVANCY: 1.0 if q & set(content_tokens(answer)) else 0.0,
            sc.METRIC_CONTEXT_PRECISION: 1.0 if q & set(content_tokens(contexts[0])) else 0.0,
        },
        judge="oracle",
    )


def test_measure_and_report_per_kind() -> None:
    results = measure(oracle, seeds=(1,), questions=8)
    assert {k: r.n for k, r in results.items()} == {
        FailureKind.HEALTHY: 8, FailureKind.RETRIEVAL_MISS: 8, FailureKind.CONTRADICTION: 8, FailureKind.OFF_TOPIC: 8,
    }
    healthy, contra = results[FailureKind.HEALTHY], results[FailureKind.CONTRADICTION]
    assert healthy.mean("faithfulness") == 1.0
    assert contra.mean("faithfulness") < 1.0  # one sentence in each contradicted answer is new
    assert sum(len(v) for v in contra.by_change.values()) == 8
    assert results[FailureKind.OFF_TOPIC].mean("faithfulness") == 0.0
    assert results[FailureKind.RETRIEVAL_MISS].mean("context_precision") < healthy.mean("context_precision")
    text = report(results)
    assert text.splitlines()[0].split()[:2] == ["kind", "n"]
    assert "contradiction/" in text and "healthy" in text
