"""Every OpenTelemetry Collector config the project ships passes ``otelcol validate`` with the
Collector that ``make services`` builds (scripts/otelcol.py, v0.165): the files under deploy/ as
they are, and the YAML snippets in README.md and docs/ that configure a Kafka exporter, put into
a minimal whole config. The old top-level ``topic``/``encoding`` spelling is refused, so the check
can fail."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from .conftest import REPO
from .conftest import validate_collector_config as validate

pytestmark = pytest.mark.kafka

FENCE = re.compile(r"^```ya?ml\n(.*?)^```", re.S | re.M)


def is_collector_config(doc: object) -> bool:
    return isinstance(doc, dict) and {"receivers", "exporters", "service"} <= doc.keys()


def shipped_configs() -> list[tuple[str, str]]:
    """(where, text) for each Collector config under deploy/: a file, or a ConfigMap's entry."""
    out = []
    for path in sorted((REPO / "deploy").rglob("*.y*ml")):
        where = path.relative_to(REPO).as_posix()
        for doc in yaml.safe_load_all(path.read_text()):
            if is_collector_config(doc):
                out.append((where, path.read_text()))
            elif isinstance(doc, dict) and doc.get("kind") == "ConfigMap":
                for key, text in (doc.get("data") or {}).items():
                    if key.endswith((".yaml", ".yml")) and is_collector_config(yaml.safe_load(text)):
                        out.append((f"{where}:{key}", text))
    return out


def kafka_snippets() -> list[tuple[str, dict]]:
    """(where, config) for each YAML block in the docs whose exporters include a Kafka exporter."""
    out = []
    for doc_path in [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]:
        for n, match in enumerate(FENCE.finditer(doc_path.read_text())):
            block = yaml.safe_load(match.group(1))
            exporters = block.get("exporters") if isinstance(block, dict) else None
            if isinstance(exporters, dict) and any(name.split("/")[0] == "kafka" for name in exporters):
                out.append((f"{doc_path.relative_to(REPO)}#{n}", block))
    return out


def whole(block: dict) -> dict:
    """A snippet made whole: an OTLP receiver and a traces pipeline around its exporters."""
    config = dict(block)
    config.setdefault("receivers", {"otlp": {"protocols": {"http": {}}}})
    if "service" not in config:
        config["service"] = {"pipelines": {"traces": {
            "receivers": list(config["receivers"]), "processors": list(config.get("processors", {})),
            "exporters": list(config["exporters"])}}}
    return config


def test_the_shipped_collector_configs_are_found() -> None:
    assert "deploy/otel-collector/config.yaml" in [where for where, _ in shipped_configs()]
    assert {where.split("#")[0] for where, _ in kafka_snippets()} >= {"README.md", "docs/kafka.md"}


@pytest.mark.parametrize(("where", "text"), shipped_configs(), ids=[w for w, _ in shipped_configs()])
def test_shipped_config_validates(where: str, text: str, tmp_path: Path) -> None:
    config = tmp_path / "config.yaml"
    config.write_text(text)
    result = validate(config)
    assert result.returncode == 0, f"{where}:\n{result.stdout}{result.stderr}"


@pytest.mark.parametrize(("where", "block"), kafka_snippets(), ids=[w for w, _ in kafka_snippets()])
def test_docs_snippet_validates(where: str, block: dict, tmp_path: Path) -> None:
    config = tmp_path / "snippet.yaml"
    config.write_text(yaml.safe_dump(whole(block)))
    result = validate(config)
    assert result.returncode == 0, f"{where}:\n{result.stdout}{result.stderr}"


def test_the_old_exporter_spelling_is_refused(tmp_path: Path) -> None:
    """The spelling before the exporter moved topic/encoding under `traces:` (what the compose
    file's collector-contrib 0.115.1 took): this Collector refuses it, naming the keys."""
    shipped = yaml.safe_load((REPO / "deploy/otel-collector/config.yaml").read_text())
    old = dict(shipped["exporters"]["kafka"])
    old.update(old.pop("traces"))
    shipped["exporters"]["kafka"] = old
    config = tmp_path / "old.yaml"
    config.write_text(yaml.safe_dump(shipped))
    result = validate(config)
    assert result.returncode != 0
    assert "invalid keys" in result.stderr + result.stdout
    assert "topic" in result.stderr + result.stdout
