"""The dashboard: rows of panels, template variables, annotations and links, serialized with the
SDK's JSON encoder.

Where the SDK (types generated for Grafana 11.6) has no field for something the dashboard uses,
a small subclass of the SDK's model adds exactly that key, and says why:

- the Prometheus annotation options ``step``, ``titleFormat``, ``textFormat``, ``tagKeys`` and
  ``useValueForTime`` (the SDK's ``AnnotationQuery`` lists only the datasource-independent fields
  and ``expr``): ``PrometheusAnnotationQuery``;
- a query variable's ``definition`` (the query text Grafana lists in the dashboard's variable
  settings; Grafana's Prometheus editor saves it next to ``query``): ``PrometheusQueryVariable``;
- the datasource variable's ``refresh`` exists in the model but the builder has no method for it,
  so it is set on the built model.
"""

from __future__ import annotations

import json
from typing import TypeVar

from grafana_foundation_sdk.builders import dashboard as db
from grafana_foundation_sdk.cog import builder as cogbuilder
from grafana_foundation_sdk.cog.encoder import JSONEncoder
from grafana_foundation_sdk.models import dashboard as dm

from .common import DS, RAG_ONLY, R
from .evaluators import evaluator_rows
from .panels import Layout
from .rows_operations import judge_rows, kafka_rows, latency_rows, offline_eval_rows, traffic_rows
from .rows_quality import diagnosis_rows, priority_rows, quality_rows, sampling_rows

UID = "ragmon-quality"
TITLE = "ragmon / RAG quality"
M = TypeVar("M")


class Built(cogbuilder.Builder[M]):
    """A model built (or extended) outside a builder, handed to a builder method that takes one."""

    def __init__(self, model: M) -> None:
        self._model = model

    def build(self) -> M:
        return self._model


class PrometheusAnnotationQuery(dm.AnnotationQuery):
    """An annotation read from Prometheus: the SDK's ``AnnotationQuery`` plus the Prometheus
    datasource's own options, which the SDK's model does not declare."""

    def __init__(
        self,
        name: str,
        expr: str,
        icon_color: str,
        *,
        title_format: str,
        text_format: str,
        step: str = "60s",
        tag_keys: str | None = None,
    ) -> None:
        super().__init__(name=name, datasource=DS, enable=True, icon_color=icon_color, expr=expr)
        self.step = step
        self.title_format = title_format
        self.text_format = text_format
        self.tag_keys = tag_keys

    def to_json(self) -> dict[str, object]:
        payload = super().to_json()
        payload.update(step=self.step, titleFormat=self.title_format, textFormat=self.text_format)
        if self.tag_keys is not None:
            payload["tagKeys"] = self.tag_keys
        payload["useValueForTime"] = False
        return payload


class PrometheusQueryVariable(dm.VariableModel):
    """A multi-value query variable (label values) as Grafana's Prometheus editor saves it: the
    SDK's ``VariableModel`` plus ``definition``, which the SDK's model does not declare."""

    def __init__(self, name: str, query: str) -> None:
        built = (
            db.QueryVariable(name)
            .label(name)
            .datasource(DS)
            .query({"query": query, "refId": f"{name}-var"})
            .refresh(dm.VariableRefresh.ON_TIME_RANGE_CHANGED)
            .include_all(True)
            .multi(True)
            .all_value(".*")
            .current(dm.VariableOption(selected=True, text=["All"], value=["$__all"]))
            .sort(dm.VariableSort.ALPHABETICAL_ASC)
            .build()
        )
        super().__init__(**vars(built))
        self.definition = query

    def to_json(self) -> dict[str, object]:
        return {**super().to_json(), "definition": self.definition}


def variables() -> list[cogbuilder.Builder[dm.VariableModel]]:
    datasource = (
        db.DatasourceVariable("datasource")
        .label("Prometheus")
        .type("prometheus")
        .current(dm.VariableOption(selected=True, text="Prometheus", value="prometheus"))
        .build()
    )
    datasource.refresh = dm.VariableRefresh.ON_DASHBOARD_LOAD  # no builder method for it
    token_price = (
        db.TextBoxVariable("token_price")
        .label("Price per 1000 judge tokens")
        .default_value("0.002")
        .current(dm.VariableOption(text="0.002", value="0.002"))
    )
    return [
        Built(datasource),
        Built(PrometheusQueryVariable("service", "label_values(ragmon_traces_received_total, service)")),
        Built(
            PrometheusQueryVariable(
                "pipeline", f'label_values(ragmon_traces_received_total{{service=~"$service", {RAG_ONLY}}}, pipeline)'
            )
        ),
        token_price,
    ]


RELEASE_LABELS = "service, pipeline, app_version, prompt_version, model"
RELEASE_NEW = "10m"
RELEASE_ANNOTATION = (
    f'group by ({RELEASE_LABELS}) (ragmon_release_info{{service=~"$service", pipeline=~"$pipeline"}})\n'
    f"unless\ngroup by ({RELEASE_LABELS}) (ragmon_release_info offset {RELEASE_NEW})"
)


def annotation_queries() -> list[cogbuilder.Builder[dm.AnnotationQuery]]:
    builtin = (
        db.AnnotationQuery()
        .name("Annotations & Alerts")
        .built_in(1)
        .type("dashboard")
        .enable(True)
        .hide(True)
        .datasource(dm.DataSourceRef(type_val="grafana", uid="-- Grafana --"))
        .icon_color("rgba(0, 211, 255, 1)")
    )
    alerts = PrometheusAnnotationQuery(
        "ragmon alerts",
        'ALERTS{alertname=~"Ragmon.*", alertstate="firing"}',
        "red",
        title_format="{{alertname}}",
        text_format="{{severity}} {{service}}/{{pipeline}}",
    )
    # a release (app version, prompt version, model) seen for the first time in the last RELEASE_NEW:
    # drawn where it appeared, so a drop lines up with the release behind it
    releases = PrometheusAnnotationQuery(
        "ragmon releases",
        RELEASE_ANNOTATION,
        "purple",
        title_format="release {{service}}/{{pipeline}}",
        text_format="app {{app_version}} · prompt {{prompt_version}} · model {{model}}",
        tag_keys="service,pipeline",
    )
    return [builtin, Built(alerts), Built(releases)]


def build_dashboard(evaluators: list[dict[str, object]] | None = None) -> db.Dashboard:
    lay = Layout()
    quality_rows(lay)
    evaluator_rows(lay, evaluators or [])
    diagnosis_rows(lay)
    priority_rows(lay)
    sampling_rows(lay)
    latency_rows(lay)
    traffic_rows(lay)
    judge_rows(lay)
    kafka_rows(lay)
    offline_eval_rows(lay)
    dashboard = (
        db.Dashboard(TITLE)
        .uid(UID)
        .tags(["ragmon", "rag", "llm"])
        .description("RAG quality scores, diagnosis, latency, coverage and judge cost from the ragmon agent.")
        .editable()
        .tooltip(dm.DashboardCursorSync.CROSSHAIR)
        .version(1)
        .refresh("30s")
        .time("now-6h", "now")
        .timezone("")  # the viewer's own preference
        .variables(variables())
        .annotations(annotation_queries())
        .link(db.DashboardLink("Alert runbooks").type(dm.DashboardLinkType.LINK).url(R.RUNBOOK_BASE).target_blank(True))
    )
    return lay.apply(dashboard)


def render(evaluators: list[dict[str, object]] | None = None) -> str:
    return json.dumps(build_dashboard(evaluators).build(), cls=JSONEncoder, indent=2, ensure_ascii=False) + "\n"
