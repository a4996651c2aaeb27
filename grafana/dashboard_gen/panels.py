"""Panel and query helpers over the SDK's builders, and the grid layout.

Every panel is an SDK panel builder (``timeseries.Panel``, ``stat.Panel``, ``heatmap.Panel``), every
query an SDK ``prometheus.Dataquery``; the helpers only fix ragmon's house style (legend as a table,
alert thresholds drawn as dashed lines, exemplars on score panels).
"""

from __future__ import annotations

from grafana_foundation_sdk.builders import common as cb
from grafana_foundation_sdk.builders import dashboard as db
from grafana_foundation_sdk.builders import heatmap as heatmap_b
from grafana_foundation_sdk.builders import prometheus
from grafana_foundation_sdk.builders import stat as stat_b
from grafana_foundation_sdk.builders import timeseries as timeseries_b
from grafana_foundation_sdk.models import common as cm
from grafana_foundation_sdk.models import dashboard as dm
from grafana_foundation_sdk.models import heatmap as heatmap_m
from grafana_foundation_sdk.models.prometheus import PromQueryFormat

from .common import DS

Step = tuple[float | None, str]  # (threshold value, colour); None is the base step
PanelBuilder = timeseries_b.Panel | stat_b.Panel | heatmap_b.Panel
GRID_WIDTH = 24  # Grafana's grid has 24 columns


def target(
    expr: str,
    legend: str,
    ref: str,
    *,
    exemplar: bool = False,
    fmt: PromQueryFormat | None = None,
    instant: bool = False,
) -> prometheus.Dataquery:
    """One PromQL query; instant queries (stat panels) read the last value, the others a range."""
    query = prometheus.Dataquery().datasource(DS).expr(expr).legend_format(legend).ref_id(ref).exemplar(exemplar)
    query = query.instant() if instant else query.range()
    if fmt is not None:
        query = query.format(fmt)
    return query


def thresholds(*steps: Step) -> db.ThresholdsConfig:
    return (
        db.ThresholdsConfig()
        .mode(dm.ThresholdsMode.ABSOLUTE)
        .steps([dm.Threshold(value=value, color=color) for value, color in steps])
    )


def timeseries(
    title: str,
    targets: list[prometheus.Dataquery],
    *,
    unit: str,
    desc: str = "",
    steps: tuple[Step, ...] = ((None, "transparent"),),
    minmax: tuple[float | None, float | None] = (None, None),
) -> timeseries_b.Panel:
    """A time series panel; non-base threshold steps are drawn as dashed lines (alert bounds)."""
    panel = (
        timeseries_b.Panel()
        .title(title)
        .description(desc)
        .datasource(DS)
        .targets(list(targets))
        .unit(unit)
        .thresholds(thresholds(*steps))
        .draw_style(cm.GraphDrawStyle.LINE)
        .line_width(2)
        .fill_opacity(0)
        .show_points(cm.VisibilityMode.NEVER)
        .span_nulls(True)
        .thresholds_style(
            cb.GraphThresholdsStyleConfig().mode(
                cm.GraphThresholdsStyleMode.DASHED if len(steps) > 1 else cm.GraphThresholdsStyleMode.OFF
            )
        )
        .color_scheme(db.FieldColor().mode(dm.FieldColorModeId.PALETTE_CLASSIC))
        .legend(
            cb.VizLegendOptions()
            .show_legend(True)
            .display_mode(cm.LegendDisplayMode.TABLE)
            .placement(cm.LegendPlacement.BOTTOM)
            .calcs(["lastNotNull", "mean"])
        )
        .tooltip(cb.VizTooltipOptions().mode(cm.TooltipDisplayMode.MULTI).sort(cm.SortOrder.DESCENDING))
    )
    if minmax[0] is not None:
        panel = panel.min(minmax[0])
    if minmax[1] is not None:
        panel = panel.max(minmax[1])
    return panel


def stepped(panel: timeseries_b.Panel) -> timeseries_b.Panel:
    """A pushed gauge changes once per run: draw it as steps with a point at each value."""
    return panel.line_interpolation(cm.LineInterpolation.STEP_AFTER).show_points(cm.VisibilityMode.ALWAYS)


def stat(
    title: str,
    targets: list[prometheus.Dataquery],
    *,
    unit: str,
    desc: str = "",
    color: str = "blue",
    steps: tuple[Step, ...] | None = None,
    text_mode: cm.BigValueTextMode = cm.BigValueTextMode.VALUE_AND_NAME,
    graph: bool = True,
) -> stat_b.Panel:
    """A single value coloured by its thresholds (one colour when there are none); ``text_mode``
    NAME shows only the series name (a label that says what the value means)."""
    return (
        stat_b.Panel()
        .title(title)
        .description(desc)
        .datasource(DS)
        .targets(list(targets))
        .unit(unit)
        .color_scheme(db.FieldColor().mode(dm.FieldColorModeId.THRESHOLDS))
        .thresholds(thresholds(*(steps or ((None, color),))))
        .reduce_options(cb.ReduceDataOptions().calcs(["lastNotNull"]).fields("").values(False))
        .color_mode(cm.BigValueColorMode.BACKGROUND)
        .graph_mode(cm.BigValueGraphMode.AREA if graph else cm.BigValueGraphMode.NONE)
        .text_mode(text_mode)
        .justify_mode(cm.BigValueJustifyMode.CENTER)
        .orientation(cm.VizOrientation.AUTO)
    )


def heatmap(title: str, expr: str, desc: str) -> heatmap_b.Panel:
    """Score histogram buckets over time (Prometheus computes the buckets), with trace-id exemplars."""
    return (
        heatmap_b.Panel()
        .title(title)
        .description(desc)
        .datasource(DS)
        .targets([target(expr, "{{le}}", "A", exemplar=True, fmt=PromQueryFormat.HEATMAP)])
        .scale_distribution(cb.ScaleDistributionConfig().type(cm.ScaleDistribution.LINEAR))
        .calculate(False)
        .y_axis(heatmap_b.YAxisConfig().axis_placement(cm.AxisPlacement.LEFT).unit("percentunit").decimals(2))
        .cell_gap(1)
        .color(
            heatmap_b.HeatmapColorOptions()
            .mode(heatmap_m.HeatmapColorMode.SCHEME)
            .scheme("Oranges")
            .fill("dark-orange")
            .scale(heatmap_m.HeatmapColorScale.EXPONENTIAL)
            .exponent(0.5)
            .steps(64)
        )
        .rows_frame(heatmap_b.RowsHeatmapOptions().layout(cm.HeatmapCellLayout.AUTO))
        .exemplars_color("rgba(255,0,255,0.7)")
        .mode(cm.TooltipDisplayMode.SINGLE)
        .show_y_histogram()
        .show_legend()
    )


class Layout:
    """Places panels left to right on Grafana's 24-column grid, wrapping rows, then hands them to the
    SDK's dashboard builder with explicit positions and ids.

    The SDK's builder can place panels itself (``span``/``height``), but it only flows them left to
    right; the diagnosis row needs a 2x2 grid of stats with a panel beside it, so positions are
    computed here for every panel, as before.
    """

    def __init__(self) -> None:
        self.x = self.y = 0
        self.row_h = 0
        self.next_id = 1
        self.items: list[db.Row | PanelBuilder] = []

    def row(self, title: str) -> None:
        self.newline()
        row = db.Row(title).collapsed(False).id(self._id()).grid_pos(dm.GridPos(h=1, w=GRID_WIDTH, x=0, y=self.y))
        self.items.append(row)
        self.y += 1

    def newline(self) -> None:
        if self.x:
            self.y += self.row_h
            self.x = self.row_h = 0

    def move_to(self, x: int, y: int, row_h: int) -> None:
        """Continue at (x, y) as if a row of height row_h were being filled (a panel beside a grid)."""
        self.x, self.y, self.row_h = x, y, row_h

    def add(self, panel: PanelBuilder, w: int, h: int) -> None:
        if self.x + w > GRID_WIDTH:
            self.newline()
        panel.id(self._id()).grid_pos(dm.GridPos(h=h, w=w, x=self.x, y=self.y))
        self.items.append(panel)
        self.x += w
        self.row_h = max(self.row_h, h)

    def apply(self, dashboard: db.Dashboard) -> db.Dashboard:
        for item in self.items:
            dashboard = dashboard.with_row(item) if isinstance(item, db.Row) else dashboard.with_panel(item)
        return dashboard

    def _id(self) -> int:
        self.next_id += 1
        return self.next_id - 1
