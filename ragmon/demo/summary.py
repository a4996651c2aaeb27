"""The demo's terminal summary (pure: a ``DemoView`` in, text out).

``render`` draws the full summary (the live screen and the final one); ``progress_line``
is the one-line form printed periodically when stdout is not a terminal.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from .. import quality
from .. import semconv as sc
from .failures import INJECTED_KINDS, FailureKind
from .tracker import EXPECTED_VERDICTS, SIGNAL_METRIC, TrackerSnapshot, fmt_ratio, is_nan

SECTION_TITLES = ("Traffic", "Agent", "Scores by injected failure", "Caught?", "Look next")


@dataclass(frozen=True, slots=True)
class AgentCounts:
    """The agent's own counters for the demo's service, read from its registry or /metrics."""

    received: int = 0
    sampled: int = 0
    scored: int = 0
    skipped: Mapping[str, int] = field(default_factory=dict)
    failed: Mapping[str, int] = field(default_factory=dict)
    verdicts: Mapping[str, int] = field(default_factory=dict)
    retrieval_p95_s: float | None = None
    pipeline_p95_s: float | None = None

    def as_dict(self) -> dict[str, object]:
        return {
            "received": self.received, "sampled": self.sampled, "scored": self.scored,
            "skipped": dict(self.skipped), "failed": dict(self.failed), "verdicts": dict(self.verdicts),
            "retrieval_p95_s": self.retrieval_p95_s, "pipeline_p95_s": self.pipeline_p95_s,
        }


@dataclass(frozen=True, slots=True)
class DemoView:
    mode: str  # "inprocess" | "external"
    elapsed_s: float
    duration_s: float
    rate: float
    seed: int
    company: str
    document_count: int
    otlp_endpoint: str
    tracker: TrackerSnapshot
    thresholds: Mapping[str, float]
    slow_threshold_s: float
    sample_rate: float | None = None
    metrics_url: str | None = None  # http://host:port (no path)
    counts: AgentCounts | None = None
    final: bool = False
    stopped_early: bool = False
    notes: tuple[str, ...] = ()
    linger_s: float = 0.0  # in-process: how long the URLs stay up after the final summary


class _Style:
    def __init__(self, color: bool) -> None:
        self.color = color

    def __call__(self, text: str, code: str) -> str:
        return f"\x1b[{code}m{text}\x1b[0m" if self.color else text

    def bold(self, text: str) -> str:
        return self(text, "1")

    def bad(self, text: str) -> str:
        return self(text, "31")

    def good(self, text: str) -> str:
        return self(text, "32")

    def dim(self, text: str) -> str:
        return self(text, "2")


def _seconds(value: float | None) -> str:
    return "–" if value is None or is_nan(value) else f"{value:.3f} s"


def header(view: DemoView) -> list[str]:
    if view.mode == "inprocess":
        judged = f"{100 * (view.sample_rate or 0):.0f}%"
        where = "a ragmon agent running inside this process"
        judge = (f"It measures latency on every trace and judges {judged} of them with its offline judge "
                 "(a small embedding model on your CPU: no API key, no internet).")
    else:
        where = f"the ragmon agent at {view.otlp_endpoint}"
        judge = "That agent measures latency on every trace and judges a sample of them."
    return [
        f"What you are looking at: a small support bot for {view.company} (a made-up help-desk company) "
        f"answers customer questions from {view.document_count} knowledge-base articles (BM25 retriever + "
        "template generator). It is instrumented with @ragmon.pipeline, @ragmon.retriever and "
        f"@ragmon.generator, so every request becomes an OpenTelemetry trace sent to {where}. {judge} "
        "To show what the monitor catches, some requests are broken on purpose: the retriever returns "
        "the wrong articles (retrieval_miss), the answer changes a fact of its sources (contradiction), "
        "the answer is about something else (off_topic), or retrieval is slow (slow_retrieval). "
        "A good monitor scores those rows low and the healthy row high.",
    ]


def _wrap(text: str, width: int) -> list[str]:
    import textwrap

    return textwrap.wrap(text, width=width) or [""]


def render(view: DemoView, *, color: bool = False, width: int = 100, compact: bool = False) -> str:
    """The full summary; ``compact`` leaves out the explanation and "Look next" (for a live
    screen too short to hold everything; the final summary always has them)."""
    st = _Style(color)
    out: list[str] = []
    title = "ragmon demo — quality monitoring of a RAG app" + (" (final summary)" if view.final else ", live")
    out.append(st.bold(title))
    if compact:
        out.append(st.dim("(terminal too short for the explanation: it comes with the final summary)"))
    else:
        for paragraph in header(view):
            out.extend(_wrap(paragraph, width))
    out.append("")
    if view.final:
        how = "stopped early (Ctrl-C)" if view.stopped_early else "finished"
        out.append(f"Ran {view.elapsed_s:.0f} s ({how}) · {view.rate:g} requests/s · seed {view.seed}")
    else:
        out.append(f"{view.elapsed_s:.0f} s of {view.duration_s:.0f} s · {view.rate:g} requests/s · "
                   f"seed {view.seed} · Ctrl-C stops early and still prints the final summary")
    out.append("")

    snap = view.tracker
    sent = {k: snap.kinds[k].sent for k in FailureKind}
    total = sum(sent.values())
    out.append(st.bold("Traffic") + f"   sent {total} requests: " + ", ".join(f"{k} {n}" for k, n in sent.items()))
    if snap.contradiction_changes:
        changes = ", ".join(f"{n} {c}" for c, n in sorted(snap.contradiction_changes.items()))
        out.append(f"          contradictions changed one fact each: {changes}")

    c = view.counts
    if c is not None:
        skipped = sum(c.skipped.values())
        reasons = ", ".join(f"{r} {n}" for r, n in sorted(c.skipped.items()) if n)
        failed = sum(c.failed.values())
        out.append(st.bold("Agent") + f"     received {c.received} traces · sampled for judging {c.sampled} · "
                   f"scored {c.scored} · skipped {skipped}" + (f" ({reasons})" if reasons else "")
                   + f" · failed {failed}")
        out.append(f"          retrieval P95 {_seconds(c.retrieval_p95_s)} · pipeline P95 "
                   f"{_seconds(c.pipeline_p95_s)}   (measured on every trace, not just the judged ones)")
        verdicts = " · ".join(f"{v} {c.verdicts.get(v, 0)}" for v in sc.VERDICTS)
        out.append(f"          diagnosis verdicts: {verdicts}")
    else:
        out.append(st.bold("Agent") + "     (external agent: its counters are on its own /metrics"
                   + (f" at {view.metrics_url}/metrics)" if view.metrics_url else ")"))
    out.append("")

    if view.mode == "inprocess":
        out.extend(_scores_table(view, st))
        out.append("")
        out.extend(_caught(view, st))
    else:
        out.append(st.bold("Scores by injected failure") + "   not shown: with --agent external there is no "
                   "in-process score listener.")
        out.append("          The scores are in the external agent's ragmon_score_ratio histograms "
                   "(label service=\"ragmon-demo\") and its /worst page.")
        out.append("          Retrieval P95 as measured here, by injected kind: " + ", ".join(
            f"{k} {_seconds(snap.kinds[k].retrieval_p95_s)}" for k in FailureKind if snap.kinds[k].sent))
    if not compact:
        out.append("")
        out.extend(_look_next(view, st, width))
    for note in view.notes:
        out.append(st.dim(note))
    return "\n".join(out)


def _scores_table(view: DemoView, st: _Style) -> list[str]:
    snap = view.tracker
    thr = view.thresholds
    levels = sorted({f"{v:.2f}" for v in thr.values()})
    lines = [st.bold("Scores by injected failure") + "   mean score of the scored traces "
             f"(1 = good, ▼ = below threshold {'/'.join(levels)})"]
    online = quality.online()
    columns = [(m.name, max(13, len(m.title) + 1)) for m in online]
    titles = " ".join(f"{m.title:>{w}}" for m, (_, w) in zip(online, columns, strict=True))
    lines.append(f"  {'injected':<15} {'sent':>5} {'scored':>6}  {titles}  {'retrieval P95':>13}")
    for kind in FailureKind:
        ks = snap.kinds[kind]
        cells = []
        for metric, w in columns:
            mean = ks.means.get(metric)
            if mean is None:
                cells.append(f"{'–':>{w}}")
                continue
            low = mean < thr[metric]
            text = f"{mean:.2f}{' ▼' if low else '  '}"
            padded = f"{text:>{w}}"
            cells.append(st.bad(padded) if low else padded)
        lines.append(f"  {kind.value:<15} {ks.sent:>5} {ks.scored:>6}  {cells[0]} {cells[1]} {cells[2]}  "
                     f"{_seconds(ks.retrieval_p95_s):>13}")
    if snap.unmatched_scored:
        lines.append(st.dim(f"  ({snap.unmatched_scored} scored trace(s) came from another app on this agent)"))
    return lines


def _caught(view: DemoView, st: _Style) -> list[str]:
    snap = view.tracker
    lines = [st.bold("Caught?") + "   share of each broken kind's scored traces that the agent flagged"]
    for kind in INJECTED_KINDS:
        ks = snap.kinds[kind]
        if kind is FailureKind.SLOW_RETRIEVAL:
            how = f"retrieval took ≥ {view.slow_threshold_s:.2f} s (ragmon_retrieval_latency_seconds)"
        else:
            verdicts = "/".join(sorted(EXPECTED_VERDICTS[kind]))
            metric = SIGNAL_METRIC[kind]
            how = (f"verdict {verdicts}; {quality.metric(metric).title} < {view.thresholds[metric]:.2f} in "
                   f"{fmt_ratio(ks.signal_below, ks.scored)}")
        ratio = fmt_ratio(ks.caught, ks.scored)
        share = ks.caught / ks.scored if ks.scored else None
        colored = ratio if share is None else (st.good(f"{ratio:<12}") if share >= 0.8 else st.bad(f"{ratio:<12}"))
        lines.append(f"  {kind.value:<15} {colored:<12}  {how}")
        if kind is FailureKind.CONTRADICTION and snap.contradiction_caught:
            parts = [f"{change} {caught}/{scored}" for change, (caught, scored)
                     in sorted(snap.contradiction_caught.items())]
            lines.append(f"  {'':<15} {'':<12}  by changed fact: " + ", ".join(parts))
    healthy = snap.kinds[FailureKind.HEALTHY]
    false_alarms = healthy.flagged + snap.kinds[FailureKind.SLOW_RETRIEVAL].flagged
    clean = healthy.scored + snap.kinds[FailureKind.SLOW_RETRIEVAL].scored
    lines.append(f"  {'false alarms':<15} {fmt_ratio(false_alarms, clean):<12}  healthy or merely slow "
                 "traces that got a verdict other than ok")
    contra = snap.kinds[FailureKind.CONTRADICTION]
    if view.final and contra.scored and contra.caught < 0.5 * contra.scored:
        lines.append(st.dim("  Few contradictions caught? The offline judge compares meanings with a small embedding "
                            "model and checks numbers,"))
        lines.append(st.dim("  names and negations; it misses many one-word changes. An LLM judge reads them: "
                            "`ragmon agent --judge llm` (docs/judges.md)."))
    return lines


def _look_next(view: DemoView, st: _Style, width: int) -> list[str]:
    lines = [st.bold("Look next")]
    if view.metrics_url:
        pad = " " * (len(view.metrics_url) + 11)
        lines.append(f"  {view.metrics_url}/metrics   what Prometheus scrapes: ragmon_score_ratio, "
                     "ragmon_diagnosis_total,")
        lines.append(f"  {pad}ragmon_retrieval_latency_p95_seconds, ragmon_traces_*_total")
        if view.mode == "inprocess":
            lines.append(f"  {view.metrics_url}/worst     the lowest-scored traces with question, answer "
                         "and why")
            lines.append(f"  {pad}{_served_until(view)}")
    lines.append("  Your own app: call ragmon.init(), decorate it with @ragmon.pipeline/retriever/generator,")
    lines.append("  and run `ragmon agent` beside it (see the README).")
    return lines


def _served_until(view: DemoView) -> str:
    """The in-process agent serves these URLs only while the demo process runs: say until when."""
    if not view.final:
        return "(served while the demo runs)"
    if view.linger_s > 0:
        return f"(served for {view.linger_s:.0f} s more after this summary; Ctrl-C stops now)"
    return "(these stop when the demo exits, right now; `ragmon demo --linger 300` keeps them up)"


def progress_line(view: DemoView) -> str:
    """One line for logs and pipes: the numbers that move."""
    snap = view.tracker
    parts = [f"ragmon demo [{view.elapsed_s:.0f}s/{view.duration_s:.0f}s]",
             f"sent {sum(k.sent for k in snap.kinds.values())}"]
    if view.counts is not None:
        c = view.counts
        parts.append(f"received {c.received} scored {c.scored} skipped {sum(c.skipped.values())}")
        parts.append(f"retrieval P95 {_seconds(c.retrieval_p95_s)}")
        faith = [f"{k.value} {snap.kinds[k].means[sc.METRIC_FAITHFULNESS]:.2f}" for k in
                 (FailureKind.HEALTHY, FailureKind.CONTRADICTION)
                 if sc.METRIC_FAITHFULNESS in snap.kinds[k].means]
        if faith:
            parts.append("faithfulness " + " / ".join(faith))
    return " · ".join(parts)
