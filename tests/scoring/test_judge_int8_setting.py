"""``RAGMON_JUDGE_INT8`` reaches the local judge's embedder, from the environment and as the default."""

from __future__ import annotations

from typing import Any

import pytest

from ragmon.scoring import factory
from ragmon.scoring.local import _judge


@pytest.mark.parametrize("environ, expected", [({}, True), ({"RAGMON_JUDGE_INT8": "false"}, False),
                                               ({"RAGMON_JUDGE_INT8": "true"}, True)])
def test_judge_int8_setting_reaches_the_embedder(monkeypatch: pytest.MonkeyPatch, environ: dict[str, str],
                                                 expected: bool) -> None:
    seen: list[bool] = []
    real = _judge.embedder_for

    def recording(model_path: str | None, sha256: str | None, threads: int, int8: bool = True) -> Any:
        seen.append(int8)
        return real(model_path, sha256, threads, int8)

    monkeypatch.setattr(_judge, "embedder_for", recording)
    factory.build_judge(factory.judge_settings({"judge": "local"}, environ=environ))
    assert seen == [expected]
    assert real(None, None, 1, expected).int8 is expected  # the bundled model runs the path asked for
