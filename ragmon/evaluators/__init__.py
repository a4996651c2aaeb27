"""User-declared evaluators: checks beside the three built-in metrics, each a row of the metric table.

==============  ====================================================================================
module          job
==============  ====================================================================================
spec            ``EvaluatorSpec``: one declared evaluator (kind, target, pass rule, threshold, role)
loader          read and validate an evaluators file (YAML); errors name the file and line;
                ``evaluator_set_from``: the set ``--evaluators`` names, for the agent and ``ragmon eval``
checks          the rule-based kinds (``regex``, ``heuristic``, ``json_schema``) on one trace, bounded
evaluate        ``EvaluatorSet``: every evaluator of a file, run on a trace -> {name: 1.0 | 0.0 | None}
==============  ====================================================================================

An evaluator scores 1.0 (pass) or 0.0 (fail) per judged trace, or None when it cannot be judged
(no answer, an ``llm`` criterion the judge's reply left out). Its mean is the share of passing
answers, exported as ``ragmon_score_ratio{metric=<name>}`` like the built-in metrics.
``llm`` criteria are judged by the LLM judge inside its one compact call (``scoring/llm/criteria``).
"""

from .evaluate import EvaluatorSet
from .loader import EvaluatorFileError, evaluator_set_from, load_evaluators, parse_evaluators
from .spec import KINDS, MAX_EVALUATORS, EvaluatorSpec

__all__ = ["KINDS", "MAX_EVALUATORS", "EvaluatorFileError", "EvaluatorSet", "EvaluatorSpec", "evaluator_set_from",
           "load_evaluators", "parse_evaluators"]
