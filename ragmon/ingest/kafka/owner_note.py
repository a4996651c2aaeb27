"""The owner note: what one owner of a Kafka partition tells the next, in the metadata string
of its offset commit.

An owner commits offset ``N`` only below the first message of its earliest open trace
(``offsets.py``), so the next owner re-reads ``[N, end)``: the open traces whole, and beside them
traces the previous owner had already accounted for. Those are listed here, so the next owner
skips them instead of judging them twice::

    ragmon1;<h|p>;<end>;<id><id>...

``h``: written by a hand-off (revocation, graceful stop) — everything not listed was handed on
unjudged. ``p``: a periodic commit, the last word of an owner that may have died after it (a
crash): traces it accounted for after that commit are judged again by the next owner, which counts
them (``ragmon_kafka_handover_traces_total{kind="redelivered"}``). ``end``: one past the last
offset the writer had read. Each id is the first 64 bits of a trace id, base64url (11 characters),
so about 360 fit in the broker's default ``offset.metadata.max.bytes`` (4096); ids past that are
left out and counted (``unlisted``).
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Iterable
from dataclasses import dataclass

PREFIX = "ragmon1"
MAX_METADATA_BYTES = 4000  # below the broker's default offset.metadata.max.bytes (4096)
ID_CHARS = 11


@dataclass(frozen=True)
class OwnerNote:
    clean: bool  # a hand-off wrote it (h), not a periodic commit (p)
    end: int  # one past the last offset the writer had read
    taken: frozenset[str]  # short ids of traces it accounted for in the re-read range


def short_id(trace_id: str) -> str:
    """The first 64 bits of a trace id, base64url without padding (a non-hex id: its start)."""
    try:
        return base64.urlsafe_b64encode(bytes.fromhex(trace_id[:16])).decode()[:ID_CHARS]
    except ValueError:
        return trace_id[:ID_CHARS]


def write_note(clean: bool, end: int, trace_ids: Iterable[str], limit: int = MAX_METADATA_BYTES) -> tuple[str, int]:
    """The metadata string, and how many ids did not fit."""
    head = f"{PREFIX};{'h' if clean else 'p'};{end};"
    room = max(0, (limit - len(head)) // ID_CHARS)
    ids = sorted({short_id(t) for t in trace_ids})
    return head + "".join(ids[:room]), max(0, len(ids) - room)


def read_note(metadata: str | None) -> OwnerNote | None:
    """The owner note a commit carries; None for none, another writer's or a damaged string."""
    if not metadata or not metadata.startswith(PREFIX + ";"):
        return None
    parts = metadata.split(";", 3)
    if len(parts) != 4 or parts[1] not in ("h", "p") or not parts[2].isdigit():
        return None
    body = parts[3]
    if len(body) % ID_CHARS:
        return None
    try:
        for i in range(0, len(body), ID_CHARS):
            base64.urlsafe_b64decode(body[i:i + ID_CHARS] + "=")
    except (binascii.Error, ValueError):
        return None
    taken = frozenset(body[i:i + ID_CHARS] for i in range(0, len(body), ID_CHARS))
    return OwnerNote(parts[1] == "h", int(parts[2]), taken)
