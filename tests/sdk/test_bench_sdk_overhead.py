"""bench/sdk_overhead.py runs, and rewrites only its own section of docs/benchmarks.md.

(The numbers themselves are reported in docs/benchmarks.md, never asserted here.)
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench" / "sdk_overhead.py"


@pytest.fixture
def bench() -> ModuleType:
    spec = importlib.util.spec_from_file_location("sdk_overhead_bench", BENCH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_measure_produces_every_variant(bench: ModuleType) -> None:
    results = bench.measure(calls=20, repeats=1, content_rate=0.0)
    assert set(results) == {"undecorated", "bare OpenTelemetry spans", "ragmon decorators",
                            "ragmon decorators, content_rate=0"}
    assert all(value > 0 for value in results.values())
    text = bench.table(results, 20, 1)
    assert text.count("\n| ") == 4 and "Goal (ragmon's added cost" in text


def test_write_section_keeps_other_sections(bench: ModuleType, tmp_path: Path) -> None:
    path = tmp_path / "benchmarks.md"
    bench.write_section("first body", path)
    assert path.read_text() == "# Benchmarks\n\n## SDK overhead\n\nfirst body\n"
    path.write_text(path.read_text() + "\n## Agent throughput\n\nsomeone else's numbers\n")
    bench.write_section("second body", path)
    text = path.read_text()
    assert "first body" not in text and "second body" in text
    assert text.endswith("## Agent throughput\n\nsomeone else's numbers\n")
    assert text.count("## SDK overhead") == 1
    path.write_text("# Benchmarks\n\n## Judge latency\n\nx\n")
    bench.write_section("third body", path)
    assert path.read_text() == "# Benchmarks\n\n## Judge latency\n\nx\n\n## SDK overhead\n\nthird body\n"
