import random

from ragmon import semconv as sc
from ragmon.sampling import in_sample, trace_fraction
from ragmon.sampling.sampler import SamplingPolicy, judgeable_skip_reason
from ragmon.types import Document, RagTrace


def _ids(n, seed=7):
    rng = random.Random(seed)
    return [f"{rng.getrandbits(128):032x}" for _ in range(n)]


def test_fraction_is_deterministic_and_uniform():
    ids = _ids(20_000)
    assert [trace_fraction(t) for t in ids[:50]] == [trace_fraction(t) for t in ids[:50]]
    share = sum(in_sample(t, 0.2) for t in ids) / len(ids)
    assert 0.18 < share < 0.22


def test_samples_nest():
    ids = _ids(5_000)
    small = {t for t in ids if in_sample(t, 0.05)}
    large = {t for t in ids if in_sample(t, 0.20)}
    assert small and small <= large


def test_id_forms_agree():
    tid = _ids(1)[0]
    assert trace_fraction(tid) == trace_fraction(int(tid, 16)) == trace_fraction(bytes.fromhex(tid))


def _trace(tid, **kw):
    base = dict(trace_id=tid, service="s", pipeline="p", question="q", answer="a",
                documents=(Document(id="d", content="c", score=0.9),), retrieval_latency_s=0.1)
    base.update(kw)
    return RagTrace(**base)


def test_priority_rules_bypass_the_rate():
    policy = SamplingPolicy(rate=0.0, slow_retrieval_s=1.0, min_top_score=0.3)
    tid = _ids(1)[0]
    assert policy.decide(_trace(tid)).sampled is False
    assert policy.decide(_trace(tid, error_type="ValueError")).reason == sc.SAMPLED_PRIORITY_ERROR
    negative = _trace(tid, attributes={sc.RAGMON_FEEDBACK: "negative"})
    assert policy.decide(negative).reason == sc.SAMPLED_PRIORITY_FEEDBACK
    assert policy.decide(_trace(tid, retrieval_latency_s=2.0)).reason == sc.SAMPLED_PRIORITY_SLOW
    low = (Document(id="d", content="c", score=0.1),)
    assert policy.decide(_trace(tid, documents=low)).reason == sc.SAMPLED_PRIORITY_LOW_SCORE
    assert policy.decide(_trace(tid, attributes={sc.RAGMON_FEEDBACK: "positive"})).sampled is False


def test_per_pipeline_rates():
    policy = SamplingPolicy(rate=1.0, pipeline_rates={"cheap": 0.0})
    tid = _ids(1)[0]
    assert policy.decide(_trace(tid, pipeline="cheap")).reason == sc.SKIP_NOT_SAMPLED
    assert policy.decide(_trace(tid, pipeline="other")).reason == sc.SAMPLED_RATE


def test_judgeable_skip_reasons():
    tid = _ids(1)[0]
    assert judgeable_skip_reason(_trace(tid)) is None
    assert judgeable_skip_reason(_trace(tid, content_sampled=False)) == sc.SKIP_NO_CONTENT
    assert judgeable_skip_reason(_trace(tid, answer=None)) == sc.SKIP_NO_ANSWER
    assert judgeable_skip_reason(_trace(tid, question=None)) == sc.SKIP_NO_QUESTION
