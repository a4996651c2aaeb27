"""The evaluation report as JUnit XML, the format CI systems display as test results. Pure, no I/O.

Two test suites:

* ``gate`` — one test case per gate rule: ``failed`` → ``<failure>``; ``warned`` → passes, with
  the warning in ``<system-out>``; ``skipped`` → ``<skipped>``; ``passed`` → passes.
* ``questions`` — one test case per failed question: a row with a problem (it could not be run or
  judged) or with a diagnosis verdict other than ``ok``, as ``<failure>`` saying why. Rows that
  passed are not listed (a golden set of thousands would drown the failures).

Built with :mod:`xml.etree.ElementTree`; characters that XML 1.0 cannot carry (control
characters a user's app may put in an answer) are replaced, so the file always parses.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from collections.abc import Iterator, Mapping
from typing import Any, Final

from .markdown import format_delta, format_interval, format_observed, format_p, format_value

Report = Mapping[str, Any]

SUITE_GATE: Final = "gate"
SUITE_QUESTIONS: Final = "questions"
CLASS_GATE: Final = "ragmon.eval.gate"
CLASS_QUESTIONS: Final = "ragmon.eval.questions"
VERDICT_OK: Final = "ok"

# Everything outside XML 1.0's Char production (tab, newline and carriage return are allowed).
_INVALID_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff\ud800-\udfff]")


def _text(value: Any) -> str:
    """A string XML 1.0 can carry: invalid characters become U+FFFD."""
    return _INVALID_XML.sub("\ufffd", "" if value is None else str(value))


def failed_rows(report: Report) -> Iterator[Mapping[str, Any]]:
    """Rows that failed: a problem, or a verdict other than ``ok`` (None = nothing judged: not failed)."""
    for row in report.get("rows") or []:
        verdict = row.get("verdict")
        if row.get("problem") or (verdict is not None and verdict != VERDICT_OK):
            yield row


def _suite(parent: ET.Element, name: str, timestamp: str) -> ET.Element:
    return ET.SubElement(parent, "testsuite", {"name": name, "timestamp": _text(timestamp)})


def _case(suite: ET.Element, classname: str, name: str, seconds: Any = None) -> ET.Element:
    time_s = seconds if isinstance(seconds, int | float) and not isinstance(seconds, bool) and seconds >= 0 else 0
    return ET.SubElement(
        suite, "testcase", {"classname": _text(classname), "name": _text(name), "time": f"{time_s:.3f}"}
    )


def _rule_details(rule: Mapping[str, Any]) -> str:
    metric = str(rule.get("metric") or "")
    lines = [
        f"rule: {rule.get('rule')} (severity {rule.get('severity')}, {rule.get('kind')})",
        f"observed: {format_observed(metric, rule.get('observed'))}",
    ]
    if rule.get("kind") == "drop":
        lines += [
            f"baseline: {format_observed(metric, rule.get('baseline'))}",
            f"delta: {format_delta(rule.get('delta'))} 95% CI {format_interval(rule.get('ci95'), signed=True)} "
            f"p={format_p(rule.get('p_value'))}",
        ]
    lines.append(str(rule.get("message") or ""))
    return "\n".join(lines)


def _gate_suite(root: ET.Element, report: Report) -> dict[str, int]:
    suite = _suite(root, SUITE_GATE, report.get("created_at", ""))
    counts = {"tests": 0, "failures": 0, "skipped": 0}
    for rule in (report.get("gate") or {}).get("rules") or []:
        case = _case(suite, CLASS_GATE, str(rule.get("rule") or rule.get("metric") or "rule"))
        counts["tests"] += 1
        status, details, message = rule.get("status"), _text(_rule_details(rule)), _text(rule.get("message") or "")
        if status == "failed":
            counts["failures"] += 1
            ET.SubElement(case, "failure", {"message": message, "type": "gate_rule_failed"}).text = details
        elif status == "skipped":
            counts["skipped"] += 1
            ET.SubElement(case, "skipped", {"message": message})
        elif status == "warned":
            ET.SubElement(case, "system-out").text = "WARNING: " + details
        else:
            ET.SubElement(case, "system-out").text = details
    return counts


def _row_details(row: Mapping[str, Any]) -> tuple[str, str, str]:
    """(failure type, message, body) of one failed row."""
    problem = row.get("problem")
    metrics = row.get("metrics") or {}
    body = [
        f"question: {row.get('question')}",
        f"question_type: {row.get('question_type')}  difficulty: {row.get('difficulty')}",
        f"retrieved_ids: {', '.join(map(str, row.get('retrieved_ids') or [])) or '(none)'}",
    ]
    if metrics:
        body.append("metrics: " + ", ".join(f"{k}={format_value(v)}" for k, v in metrics.items()))
    if row.get("miss_class"):
        body.append(f"multi-hop miss: {row['miss_class']}")
    if problem:
        where = f" ({problem.get('source') or 'input'}, line {problem.get('line')})" if problem.get("line") else ""
        message = f"{problem.get('reason')}: {problem.get('message')}{where}"
        return str(problem.get("reason") or "problem"), message, "\n".join([message, *body])
    verdict = str(row.get("verdict"))
    message = f"{verdict}: {row.get('verdict_reason') or 'no reason given'}"
    return verdict, message, "\n".join([message, *body])


def _questions_suite(root: ET.Element, report: Report) -> dict[str, int]:
    suite = _suite(root, SUITE_QUESTIONS, report.get("created_at", ""))
    counts = {"tests": 0, "failures": 0, "skipped": 0}
    for row in failed_rows(report):
        latency = row.get("latency") or {}
        classname = f"{CLASS_QUESTIONS}.{row.get('question_type') or 'unknown'}"
        case = _case(suite, classname, str(row.get("id")), latency.get("pipeline_s"))
        kind, message, body = _row_details(row)
        ET.SubElement(case, "failure", {"message": _text(message), "type": _text(kind)}).text = _text(body)
        counts["tests"] += 1
        counts["failures"] += 1
    return counts


def _set_counts(element: ET.Element, counts: Mapping[str, int]) -> None:
    for key in ("tests", "failures", "errors", "skipped"):
        element.set(key, str(counts.get(key, 0)))
    element.set("time", "0")


def render_junit(report: Report) -> str:
    """The report as a JUnit XML document (``<testsuites>`` with the ``gate`` and ``questions`` suites)."""
    root = ET.Element("testsuites", {"name": _text(f"ragmon eval {report.get('evalset_name') or ''}".strip())})
    totals = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
    for build in (_gate_suite, _questions_suite):
        counts = build(root, report)
        _set_counts(root[-1], counts)
        for key, value in counts.items():
            totals[key] += value
    suite = root[0]
    properties = ET.Element("properties")
    for name in ("evalset", "evalset_name", "app", "judge", "questions", "ragmon_version"):
        if report.get(name) is not None:
            ET.SubElement(properties, "property", {"name": name, "value": _text(report[name])})
    suite.insert(0, properties)
    _set_counts(root, totals)
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"
