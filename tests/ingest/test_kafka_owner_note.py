"""The hand-off's bookkeeping without a broker: the commit metadata's format and bounds
(``kafka.owner_note``), and the trace ids of the re-read range (``OffsetTracker.traces_from_safe``)."""

from __future__ import annotations

import random

from ragmon.ingest.kafka.offsets import OffsetTracker
from ragmon.ingest.kafka.owner_note import ID_CHARS, MAX_METADATA_BYTES, read_note, short_id, write_note

KEY = ("t", 0)


def ids(n: int, seed: int = 1) -> list[str]:
    rng = random.Random(seed)
    return [f"{rng.getrandbits(128):032x}" for _ in range(n)]


def test_round_trip() -> None:
    traces = ids(20)
    meta, left = write_note(True, 1234, traces)
    note = read_note(meta)
    assert left == 0 and note is not None
    assert note.clean and note.end == 1234
    assert note.taken == {short_id(t) for t in traces}
    periodic = read_note(write_note(False, 7, [])[0])
    assert periodic is not None and not periodic.clean and periodic.taken == frozenset()


def test_metadata_stays_under_the_brokers_default_limit_and_counts_what_does_not_fit() -> None:
    traces = ids(1000)
    meta, left = write_note(True, 99, traces)
    assert len(meta.encode()) <= MAX_METADATA_BYTES < 4096
    note = read_note(meta)
    assert note is not None
    assert len(note.taken) + left == 1000
    assert len(note.taken) >= 350


def test_short_ids_are_64_bits_of_the_trace_id() -> None:
    a = "0af7651916cd43dd8448eb211c80319c"
    assert len(short_id(a)) == ID_CHARS
    assert short_id(a) == short_id(a[:16] + "0" * 16)  # the first 64 bits decide
    assert short_id(a) != short_id("1" + a[1:])
    assert short_id("not-hex") == "not-hex"  # a broken id still gets a key, never an error


def test_other_or_damaged_metadata_is_ignored() -> None:
    for meta in (None, "", "someone else's", "ragmon1;x;1;", "ragmon1;h;-1;", "ragmon1;h;5;abc", "ragmon1;h;5"):
        assert read_note(meta) is None


def test_the_re_read_range_holds_the_traces_of_messages_from_the_safe_offset() -> None:
    tracker = OffsetTracker()
    for offset, trace in enumerate(["a", "b", "c", "d"]):
        tracker.track(KEY, offset)
        tracker.note_traces(KEY, offset, (trace,))
    tracker.release(KEY, 0)
    tracker.release(KEY, 2)  # "b" (offset 1) is still open: the commit stays at 1
    assert tracker.traces_from_safe(KEY) == (1, 4, {"b", "c", "d"})
    tracker.release(KEY, 1)
    tracker.release(KEY, 3)
    assert tracker.traces_from_safe(KEY) == (4, 4, set())  # nothing left to re-read
    tracker.track(KEY, 2)  # a seek back re-reads from 2: the window starts over there
    tracker.note_traces(KEY, 2, ("c",))
    assert tracker.traces_from_safe(KEY) == (2, 3, {"c"})
    assert tracker.traces_from_safe(("t", 9)) == (None, None, set())
