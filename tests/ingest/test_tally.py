"""``ingest/tally.py`` writes prometheus_client's Histogram internals (its public API has no
"observe many"), so the library is pinned below its next major version: these tests fail when the
installed prometheus_client leaves the pinned range or its Histogram child no longer has the
fields the one-pass update writes (tests/ingest/test_fast_path.py compares the expositions)."""

from __future__ import annotations

import re
import tomllib
from importlib.metadata import version
from pathlib import Path

from prometheus_client import CollectorRegistry, Histogram

from ragmon.ingest.tally import Tally, observe_all

PYPROJECT = Path(__file__).resolve().parents[2] / "pyproject.toml"


def _pin() -> tuple[int, int]:
    """The lowest and the excluded major version pyproject.toml allows for prometheus-client."""
    project = tomllib.loads(PYPROJECT.read_text())["project"]
    lists = [project["dependencies"], *project["optional-dependencies"].values()]
    (spec,) = [d for deps in lists for d in deps if d.startswith("prometheus-client")]
    low = re.search(r">=\s*(\d+)", spec)
    high = re.search(r"<\s*(\d+)(?!\.)", spec)
    assert low and high, f"prometheus-client must be pinned below its next major version: {spec!r}"
    return int(low.group(1)), int(high.group(1))


def test_prometheus_client_is_pinned_below_its_next_major_version_and_installed_so() -> None:
    low, high = _pin()
    installed = tuple(int(part) for part in version("prometheus-client").split(".")[:2])
    assert high == low + 1  # below the next major version: an upgrade past it is a decision
    assert installed[0] < high, f"prometheus-client {installed} is past the pin: check ingest/tally.py"


def test_the_histogram_fields_the_tally_writes_are_there() -> None:
    registry = CollectorRegistry()
    child = Histogram("h_seconds", "h", ["k"], buckets=(0.1, 1.0), registry=registry).labels("a")
    bounds, buckets, total = child._upper_bounds, child._buckets, child._sum  # type: ignore[attr-defined]
    assert bounds == [0.1, 1.0, float("inf")] and len(buckets) == len(bounds)
    assert callable(total.get) and callable(total.set) and all(callable(b.inc) for b in buckets)


def test_observe_all_takes_the_one_pass_update_not_observe() -> None:
    registry = CollectorRegistry()
    child = Histogram("h_seconds", "h", ["k"], buckets=(0.1, 1.0), registry=registry).labels("a")

    def refuse(value: float) -> None:
        raise AssertionError("observe() called: the one-pass update was not taken")

    child.observe = refuse  # type: ignore[method-assign]
    observe_all(child, [0.05, 0.5, 5.0, 0.5])
    tally = Tally()
    tally.observe(child, 0.2)
    tally.observe(child, 0.3)
    tally.flush()
    assert registry.get_sample_value("h_seconds_bucket", {"k": "a", "le": "0.1"}) == 1
    assert registry.get_sample_value("h_seconds_bucket", {"k": "a", "le": "1.0"}) == 5
    assert registry.get_sample_value("h_seconds_count", {"k": "a"}) == 6
    assert registry.get_sample_value("h_seconds_sum", {"k": "a"}) == 0.05 + 0.5 + 5.0 + 0.5 + 0.2 + 0.3
