"""docs/metrics.md is the metrics contract: it must list exactly the metrics AgentMetrics
registers, with the exposed name, the type and the label names."""

from __future__ import annotations

import re
from pathlib import Path

from prometheus_client import CollectorRegistry
from prometheus_client.metrics import MetricWrapperBase

from ragmon.export.metrics import AgentMetrics

DOC = Path(__file__).resolve().parents[2] / "docs" / "metrics.md"
ROW = re.compile(r"^\|\s*`(?P<name>[a-z0-9_:]+)`\s*\|\s*(?P<type>[a-z]+)\s*\|[^|]*\|\s*(?P<labels>[^|]*)\|")
NOT_RAGMON = {"up"}  # documented for the AgentDown alert, exported by Prometheus itself


def exposed_name(metric: MetricWrapperBase) -> str:
    """The family name as scraped: counters get ``_total``, info metrics ``_info``."""
    name = metric._name  # prometheus_client strips a given _total; the exposition adds it back
    kind = metric._type
    if kind == "counter":
        return name + "_total"
    if kind == "info":
        return name + "_info"
    return name


def registered() -> dict[str, tuple[str, tuple[str, ...]]]:
    metrics = AgentMetrics(CollectorRegistry())
    out: dict[str, tuple[str, tuple[str, ...]]] = {}
    for value in vars(metrics).values():
        if isinstance(value, MetricWrapperBase):
            labels = tuple(value._labelnames)
            if value._type == "info":
                labels = ("version",)  # Info's labels are its value keys
            out[exposed_name(value)] = (value._type, labels)
    return out


def documented() -> dict[str, tuple[str, tuple[str, ...]]]:
    out: dict[str, tuple[str, tuple[str, ...]]] = {}
    for line in DOC.read_text(encoding="utf-8").splitlines():
        match = ROW.match(line)
        if not match or match["name"] in NOT_RAGMON:
            continue
        labels = tuple(re.findall(r"`([a-z_]+)`", match["labels"]))
        assert match["name"] not in out, f"{match['name']} documented twice"
        out[match["name"]] = (match["type"], labels)
    return out


def test_every_registered_metric_is_documented_and_vice_versa() -> None:
    reg, doc = registered(), documented()
    assert len(reg) >= 30, "AgentMetrics should register every agent metric"
    missing = sorted(set(reg) - set(doc))
    stale = sorted(set(doc) - set(reg))
    assert not missing, f"metrics missing from docs/metrics.md: {missing}"
    assert not stale, f"docs/metrics.md lists metrics the agent does not export: {stale}"


def test_documented_type_and_labels_match_the_registry() -> None:
    reg, doc = registered(), documented()
    for name, (kind, labels) in reg.items():
        doc_kind, doc_labels = doc[name]
        assert doc_kind == kind, f"{name}: documented as {doc_kind}, registered as {kind}"
        assert set(doc_labels) == set(labels), f"{name}: documented labels {doc_labels}, registered {labels}"


def test_registry_collects_exactly_the_documented_families() -> None:
    """The same check from the exposition side: the families a scrape would show."""
    doc = documented()
    metrics = AgentMetrics(CollectorRegistry())
    families = set()
    for family in metrics.registry.collect():
        families.add(exposed_name_from_family(family.name, family.type))
    assert families == set(doc)


def exposed_name_from_family(name: str, kind: str) -> str:
    return {"counter": name + "_total", "info": name + "_info"}.get(kind, name)
