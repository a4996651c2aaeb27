"""The pure offset tracker: commit only past messages that are all accounted for."""

from __future__ import annotations

from ragmon.ingest.kafka.offsets import OffsetTracker

P0 = ("spans", 0)
P1 = ("spans", 1)


def test_nothing_tracked_means_nothing_to_commit() -> None:
    tracker = OffsetTracker()
    assert tracker.safe_offset(P0) is None
    assert tracker.to_commit() == {}
    assert tracker.pending() == 0


def test_commit_stops_at_the_lowest_pending_offset() -> None:
    tracker = OffsetTracker()
    for offset in range(5):
        tracker.track(P0, offset)
    assert tracker.safe_offset(P0) == 0
    assert tracker.release(P0, 1) and tracker.release(P0, 3)
    assert tracker.safe_offset(P0) == 0  # 0 still pending: nothing may be committed
    assert tracker.release(P0, 0)
    assert tracker.safe_offset(P0) == 2  # 0, 1 done; 2 pending
    assert tracker.release(P0, 2)
    assert tracker.safe_offset(P0) == 4
    assert tracker.release(P0, 4)
    assert tracker.safe_offset(P0) == 5  # one past the highest tracked offset
    assert tracker.pending(P0) == 0


def test_gaps_in_offsets_are_not_waited_for() -> None:
    tracker = OffsetTracker()
    for offset in (10, 11, 15, 20):  # compacted topic / transaction markers
        tracker.track(P0, offset)
    tracker.release(P0, 10)
    tracker.release(P0, 11)
    assert tracker.safe_offset(P0) == 15
    tracker.release(P0, 20)
    tracker.release(P0, 15)
    assert tracker.safe_offset(P0) == 21


def test_partitions_are_independent() -> None:
    tracker = OffsetTracker()
    tracker.track(P0, 0)
    tracker.track(P1, 7)
    tracker.release(P1, 7)
    assert tracker.to_commit() == {P1: 8}  # P0: nothing accounted yet, nothing to commit
    assert tracker.pending() == 1
    assert tracker.pending(P1) == 0


def test_to_commit_only_reports_progress_past_the_last_commit() -> None:
    tracker = OffsetTracker()
    tracker.track(P0, 0)
    tracker.track(P0, 1)
    tracker.release(P0, 0)
    assert tracker.to_commit() == {P0: 1}
    tracker.committed({P0: 1})
    assert tracker.to_commit() == {}
    tracker.release(P0, 1)
    assert tracker.to_commit([P0]) == {P0: 2}
    assert tracker.to_commit([P1]) == {}


def test_unknown_and_repeated_releases_are_ignored() -> None:
    tracker = OffsetTracker()
    tracker.track(P0, 0)
    tracker.track(P0, 2)
    assert not tracker.release(P0, 1)  # never handed out
    assert not tracker.release(P1, 0)  # partition not tracked
    assert tracker.release(P0, 0)
    assert not tracker.release(P0, 0)  # second release of the same message
    assert tracker.pending(P0) == 1
    assert tracker.safe_offset(P0) == 2


def test_release_token_takes_topic_partition_offset() -> None:
    tracker = OffsetTracker()
    tracker.track(P0, 3)
    assert not tracker.release_token("not-a-token")
    assert tracker.release_token(("spans", 0, 3))
    assert tracker.safe_offset(P0) == 4


def test_forget_drops_a_revoked_partition_and_its_late_releases() -> None:
    tracker = OffsetTracker()
    tracker.track(P0, 0)
    tracker.track(P1, 0)
    tracker.forget([P0])
    assert tracker.partitions() == [P1]
    assert not tracker.release(P0, 0)  # released after the revocation: nothing to do
    tracker.release(P1, 0)
    assert tracker.to_commit() == {P1: 1}


def test_refetch_after_seek_restarts_from_the_seek_point() -> None:
    tracker = OffsetTracker()
    for offset in range(4):
        tracker.track(P0, offset)
    tracker.release(P0, 0)
    tracker.track(P0, 2)  # the consumer sought back to 2 (e.g. paused mid-batch)
    assert tracker.safe_offset(P0) == 1
    tracker.release(P0, 1)
    tracker.release(P0, 2)
    assert tracker.safe_offset(P0) == 3
    assert tracker.pending(P0) == 0
