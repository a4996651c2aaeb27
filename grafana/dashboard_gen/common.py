"""What every row shares: the alert thresholds and windows of ``deploy/prometheus/generate_rules.py``
(imported from that script, so a threshold changed there moves here too), the datasource reference
and the template-variable selectors."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

from grafana_foundation_sdk.models.dashboard import DataSourceRef

REPO = Path(__file__).resolve().parents[2]


def _load_rules_generator() -> ModuleType:
    path = REPO / "deploy" / "prometheus" / "generate_rules.py"
    spec = importlib.util.spec_from_file_location("ragmon_generate_rules", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


R = _load_rules_generator()
W: str = R.WINDOW
B: str = R.BASELINE
LW: str = R.LATENCY_WINDOW
# Quality panels read the rate stream only, like the rules: priority-sampled traces (errors, negative
# feedback, slow or weak retrievals) are chosen for being bad and have their own panels.
RATE: str = R.RATE_STREAM
PRIORITY: str = R.PRIORITY_STREAM

# Every panel and query reads the Prometheus picked by the `datasource` template variable.
DS = DataSourceRef(type_val="prometheus", uid="${datasource}")
SP = 'service=~"$service", pipeline=~"$pipeline"'
RAG_ONLY = 'pipeline!="_not_rag"'  # the agent's label for traces that are not RAG requests (skipped not_rag)


def ms(seconds: float) -> str:
    return f"{seconds * 1000:g} ms"
