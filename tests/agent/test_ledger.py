"""The delivery ledger alone: tokens go back only when their last trace is accounted for, in-flight
copies hold them, recent ids mark duplicates, and a handed-off partition lets go unreleased."""

from __future__ import annotations

from collections.abc import Hashable

from ragmon.agent.ledger import DeliveryLedger, RecentIds
from ragmon.ingest.closed_trace import ClosedTrace
from ragmon.types import RagTrace


def _closed(trace_id: str, *tokens: Hashable) -> ClosedTrace:
    return ClosedTrace(RagTrace(trace_id=trace_id, service="svc", pipeline="p"), frozenset(tokens))


def _ledger(dedup_size: int = 10) -> tuple[DeliveryLedger, list[Hashable], list[int]]:
    released: list[Hashable] = []
    counts: list[int] = []
    return DeliveryLedger(released.append, dedup_size=dedup_size, on_in_flight=counts.append), released, counts


def test_a_token_goes_back_when_its_last_open_trace_is_accounted():
    ledger, released, _ = _ledger()
    open_now = {"t1", "t2"}
    ledger.hold("A", ["t1", "t2"], open_now.__contains__)
    assert released == []
    ledger.account(_closed("t1", "A"))
    assert released == []  # t2 still holds A
    ledger.account(_closed("t2", "A"))
    assert released == ["A"]
    assert ledger.tokens_held == 0


def test_a_delivery_whose_traces_are_all_accounted_goes_back_at_once():
    ledger, released, _ = _ledger()
    ledger.hold("B", ["t1"], lambda trace_id: False)
    assert released == ["B"]


def test_an_earlier_copy_in_flight_keeps_the_tokens():
    ledger, released, counts = _ledger()
    first = _closed("t1", "A")
    ledger.enqueue(first, "rate")
    ledger.hold("A", ["t1"], lambda trace_id: False)  # held by the copy in flight
    assert ledger.seen("t1") and ledger.holds(first) and ledger.stream_of("t1") == "rate"
    ledger.account(_closed("t1", "C"), remember=False)  # a redelivered copy, accounted as duplicate
    assert released == []
    ledger.account(first)
    assert sorted(map(str, released)) == ["A"]
    assert counts == [1, 0]  # the in-flight count as it changed
    assert not ledger.holds(first) and ledger.stream_of("t1") is None
    assert ledger.seen("t1")  # remembered: a later copy is a duplicate


def test_a_duplicate_is_not_remembered_again():
    ledger, _, _ = _ledger()
    ledger.account(_closed("t1"), remember=False)
    assert not ledger.seen("t1")


def test_a_handed_off_partition_lets_go_of_its_tokens_unreleased():
    ledger, released, _ = _ledger()
    on_partition = lambda token: isinstance(token, tuple) and token[:2] == ("topic", 0)  # noqa: E731
    ledger.hold(("topic", 0, 5), ["open-1", "judged-1"], lambda trace_id: True)
    ledger.hold(("topic", 1, 7), ["other"], lambda trace_id: True)
    ledger.forget({"open-1"})  # handed on unjudged
    assert ledger.waiting(on_partition)
    assert ledger.waiting(on_partition, {"open-1"})  # judged-1 still holds the token
    ledger.account(_closed("judged-1"))
    assert not ledger.waiting(on_partition, {"open-1"})
    ledger.let_go(on_partition)
    ledger.account(_closed("open-1"))  # even if it were accounted later: nothing to release
    assert released == []
    ledger.account(_closed("other"))
    assert released == [("topic", 1, 7)]


def test_recent_ids_are_bounded_and_refreshed():
    recent = RecentIds(2)
    recent.add("a")
    recent.add("b")
    recent.add("a")  # refreshed: b is now the oldest
    recent.add("c")
    assert list(recent) == ["a", "c"]
    off = RecentIds(0)
    off.add("a")
    assert "a" not in off
