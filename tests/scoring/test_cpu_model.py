"""The CPU line every measured score and cost carries: the same int8 file reads slightly differently
with and without VNNI (reader/seven_bit.py), so the line must name what decides that."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from ragmon.scoring.onnx_runner import cpu_model

CPUINFO = Path("/proc/cpuinfo")


@pytest.mark.skipif(not CPUINFO.exists(), reason="the model name and flags are read from /proc/cpuinfo")
def test_the_cpu_line_names_the_model_the_int8_flags_and_the_logical_cpus() -> None:
    text = CPUINFO.read_text(encoding="utf-8")
    model = re.search(r"^model name\s*:\s*(.+)$", text, re.M)
    flags = set(re.search(r"^flags\s*:\s*(.+)$", text, re.M).group(1).split())  # type: ignore[union-attr]
    line = cpu_model()
    if model:
        assert line.startswith(model.group(1).strip())
    shown = set(line.rsplit("(", 1)[1].split(")", 1)[0].split())  # the last parentheses: "Intel(R) ..." has its own
    for flag in ("avx2", "avx512f", "avx512_vnni", "avx_vnni", "amx_int8"):
        assert (flag in shown) == (flag in flags), flag
    assert line.endswith(f"{os.cpu_count()} logical CPUs")
