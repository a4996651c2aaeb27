"""Which judge can run which evaluators: ``llm`` criteria need the LLM judge (checked at start-up)."""

from __future__ import annotations

from collections.abc import Sequence

from .. import judges
from ..errors import ConfigError
from ..scoring.judge import Criterion
from . import spec as s


def criteria_of(specs: Sequence[s.EvaluatorSpec]) -> tuple[Criterion, ...]:
    """The ``llm`` evaluators as the LLM judge takes them."""
    return tuple(Criterion(e.name, e.criterion or "", e.pass_when) for e in specs if e.kind == s.KIND_LLM)


def check_criteria_judge(judge_name: str, specs: Sequence[s.EvaluatorSpec]) -> None:
    """One line at start-up when ``llm`` evaluators meet a judge that cannot run them."""
    criteria = [e for e in specs if e.kind == s.KIND_LLM]
    able = [n for n in judges.names() if judges.spec(n).judges_criteria]
    if criteria and (judge_name not in judges.names() or not judges.spec(judge_name).judges_criteria):
        names = ", ".join(f"{e.name} (line {e.line})" for e in criteria)
        raise ConfigError("--evaluators", f"llm evaluator(s) {names} need the LLM judge or another judge that "
                          f"reads criteria (--judge {' | '.join(able)}); "
                          f"the {judge_name} judge runs only regex, heuristic and json_schema evaluators")
