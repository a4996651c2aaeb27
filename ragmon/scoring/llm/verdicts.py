"""Reply schemas for the LLM judge, and tolerant parsing of what a model actually sends.

Servers differ: some honour ``response_format`` json_schema, some only json_object, some
(and small local models) wrap JSON in code fences, add prose around it, or spell a verdict
"yes"/"Supported"/1. ``extract_json`` finds the first JSON object in a reply; the
``parse_*`` functions coerce the common spellings and raise ``VerdictError`` (with a short
message that the repair prompt shows the model) when the structure is still wrong.
Pure and synchronous.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from ... import semconv as sc


class VerdictError(ValueError):
    """A reply that is not the JSON we asked for; the message says what is wrong."""


# --- JSON schemas sent as response_format (strict-mode compatible: all keys required) ---------
def _obj(properties: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": dict(properties),
        "required": list(properties),
        "additionalProperties": False,
    }


def context_name(rank: int) -> str:
    """How the compact prompt names a context, and the key its verdict comes back under."""
    return f"context {rank}"


def compact_schema(n_contexts: int) -> dict[str, Any]:
    """The compact reply's schema; context verdicts are named per context, so it is built per trace."""
    return _obj(
        {
            "claims": {
                "type": "array",
                "items": _obj(
                    {"sentence": {"type": "integer"}, "claim": {"type": "string"}, "supported": {"type": "boolean"}}
                ),
            },
            "contradicted": {
                "type": "array",
                "items": _obj({"claim": {"type": "integer"}, "evidence": {"type": "string"},
                               "reason": {"type": "string"}}),
            },
            "context_relevant": _obj({context_name(i): {"type": "boolean"} for i in range(1, n_contexts + 1)}),
            "questions": {"type": "array", "items": {"type": "string"}},
            "noncommittal": {"type": "boolean"},
        }
    )


def citation_name(number: int) -> str:
    """How the evaluation prompt names a (claim, cited context) pair, and its verdict's key."""
    return f"citation {number}"


def compact_eval_schema(n_contexts: int, reference: bool, n_citations: int) -> dict[str, Any]:
    """The evaluation variant of the compact schema: reference claims and citation verdicts
    are added only when the request has a reference / citations to check."""
    schema = compact_schema(n_contexts)
    props = schema["properties"]
    if reference:
        props["claims"]["items"] = _obj(
            {
                "sentence": {"type": "integer"}, "claim": {"type": "string"}, "supported": {"type": "boolean"},
                "in_reference": {"type": "boolean"},
            }
        )
        props["reference_claims"] = {
            "type": "array",
            "items": _obj(
                {
                    "sentence": {"type": "integer"}, "claim": {"type": "string"},
                    "attributed": {"type": "boolean"}, "in_answer": {"type": "boolean"},
                }
            ),
        }
    if n_citations:
        props["citation_supported"] = _obj({citation_name(i): {"type": "boolean"} for i in range(1, n_citations + 1)})
    schema["required"] = list(props)
    return schema


STATEMENTS_SCHEMA: dict[str, Any] = _obj({"statements": {"type": "array", "items": {"type": "string"}}})
NLI_SCHEMA: dict[str, Any] = _obj(
    {
        "verdicts": {
            "type": "array",
            "items": _obj(
                {"statement": {"type": "string"}, "reason": {"type": "string"}, "verdict": {"type": "integer"}}
            ),
        }
    }
)
QUESTION_SCHEMA: dict[str, Any] = _obj({"question": {"type": "string"}, "noncommittal": {"type": "integer"}})
CONTEXT_VERDICT_SCHEMA: dict[str, Any] = _obj({"reason": {"type": "string"}, "verdict": {"type": "integer"}})


# --- tolerant JSON extraction ----------------------------------------------------------------
_FENCE = re.compile(r"```[a-zA-Z0-9_-]*\s*\n?(.*?)```", re.DOTALL)
_THINK = re.compile(r"<think>.*?</think>", re.DOTALL | re.IGNORECASE)
_DECODER = json.JSONDecoder()


def extract_json(text: str | None) -> dict[str, Any]:
    """The first JSON object in ``text``: plain, inside a code fence, or amid prose."""
    if text is None or not text.strip():
        raise VerdictError("the reply was empty")
    cleaned = _THINK.sub("", text).strip()  # reasoning models prepend their thoughts
    candidates = [m.group(1) for m in _FENCE.finditer(cleaned)] + [cleaned]
    for candidate in candidates:
        found = _first_object(candidate)
        if found is not None:
            return found
    if cleaned.count("{") > cleaned.count("}"):
        raise VerdictError("the JSON object is truncated (unbalanced braces)")
    raise VerdictError("no JSON object found in the reply")


def _first_object(text: str) -> dict[str, Any] | None:
    start = text.find("{")
    while start != -1:
        try:
            value, _ = _DECODER.raw_decode(text, start)
        except json.JSONDecodeError:
            start = text.find("{", start + 1)
            continue
        if isinstance(value, dict):
            return value
        start = text.find("{", start + 1)
    return None


# --- value coercion --------------------------------------------------------------------------
_TRUE = frozenset({"true", "yes", "y", "1", "supported", "relevant", "useful", "entailed", "faithful"})
_FALSE = frozenset(
    {"false", "no", "n", "0", "unsupported", "not supported", "irrelevant", "not relevant",
     "not useful", "contradicted", "unfaithful", "not entailed"}
)


def to_bool(value: Any, field: str) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, int | float) and value in (0, 1):
        return bool(value)
    if isinstance(value, str) and value.strip().lower() in _TRUE:
        return True
    if isinstance(value, str) and value.strip().lower() in _FALSE:
        return False
    raise VerdictError(f"{field} must be true or false, got {value!r}")


def _list(obj: Mapping[str, Any], key: str) -> list[Any]:
    if key not in obj:
        raise VerdictError(f"missing key {key!r}")
    value = obj[key]
    if value is None:
        return []
    if not isinstance(value, list):
        raise VerdictError(f"{key!r} must be a list, got {type(value).__name__}")
    return value


def _first_key(item: Mapping[str, Any], keys: Sequence[str], field: str) -> Any:
    for key in keys:
        if key in item:
            return item[key]
    raise VerdictError(f"{field} needs one of the keys {', '.join(keys)}")


# --- compact mode ----------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class CompactVerdict:
    claims: tuple[tuple[str, bool], ...]
    context_relevant: tuple[bool, ...]  # in rank order, one per context shown
    questions: tuple[str, ...]
    noncommittal: bool
    # claim index (0-based) -> (evidence, reason) for the claims the contexts contradict; an item
    # naming no claim is left out and counted in ``invalid_contradictions`` (never guessed), and so
    # is one whose evidence is not found in the contexts (``evidence.checked``)
    contradicted: Mapping[int, tuple[str, str]] = field(default_factory=dict)
    invalid_contradictions: Mapping[str, int] = field(default_factory=dict)  # reason -> items dropped
    # per claim, the number of the answer sentence it came from (None when the reply gave none)
    claim_sentences: tuple[int | None, ...] = ()


def parse_compact(obj: Mapping[str, Any], n_contexts: int) -> CompactVerdict:
    """Validate a compact-mode reply; ``n_contexts`` is how many contexts the prompt showed."""
    claims: list[tuple[str, bool]] = []
    sentences: list[int | None] = []
    for i, item in enumerate(_list(obj, "claims")):
        if isinstance(item, Mapping):
            text = _first_key(item, ("claim", "statement", "text"), f"claims[{i}]")
            verdict = to_bool(_first_key(item, ("supported", "verdict"), f"claims[{i}]"), f"claims[{i}].supported")
        else:
            raise VerdictError(f"claims[{i}] must be an object with 'claim' and 'supported'")
        claims.append((str(text), verdict))
        number = item.get("sentence")
        sentences.append(number if isinstance(number, int) and not isinstance(number, bool) else None)

    by_rank: dict[int, bool] = {}
    # "context_relevant": {"context 1": true, ...} (what the prompt asks for) or booleans in rank
    # order; "contexts": objects with a rank, the shape of earlier prompts, still accepted
    key = "context_relevant" if "context_relevant" in obj or "contexts" not in obj else "contexts"
    if key not in obj:
        raise VerdictError(f"missing key {key!r}")
    raw = obj[key]
    if isinstance(raw, Mapping):
        for name, value in raw.items():
            rank = _context_rank(name)
            if rank is None:
                raise VerdictError(f"{key} keys must be 'context 1'..'context {n_contexts}', got {name!r}")
            by_rank[rank] = to_bool(value, f"{key}[{name!r}]")
    else:
        for i, item in enumerate(_list(obj, key)):
            if isinstance(item, Mapping):
                rank_value = item.get("rank", i + 1)
                try:
                    rank = int(rank_value)
                except (TypeError, ValueError) as exc:
                    raise VerdictError(f"{key}[{i}].rank must be an integer, got {rank_value!r}") from exc
                verdict = to_bool(_first_key(item, ("relevant", "verdict"), f"{key}[{i}]"), f"{key}[{i}].relevant")
            else:  # a bare list of booleans in rank order
                rank, verdict = i + 1, to_bool(item, f"{key}[{i}]")
            by_rank[rank] = verdict
    missing = [r for r in range(1, n_contexts + 1) if r not in by_rank]
    if missing:
        raise VerdictError(
            f"'{key}' must give one verdict for each of the {n_contexts} contexts (context 1..{n_contexts}); "
            f"missing {', '.join(context_name(r) for r in missing[:10])}"
        )

    questions = tuple(str(q).strip() for q in _list(obj, "questions") if str(q).strip())
    noncommittal = to_bool(obj.get("noncommittal", False), "noncommittal")
    contradicted, invalid = _contradicted(obj.get("contradicted"), len(claims))
    return CompactVerdict(
        claims=tuple(claims),
        context_relevant=tuple(by_rank[r] for r in range(1, n_contexts + 1)),
        questions=questions,
        noncommittal=noncommittal,
        contradicted=contradicted,
        invalid_contradictions={INVALID_NO_CLAIM: invalid} if invalid else {},
        claim_sentences=tuple(sentences),
    )


INVALID_NO_CLAIM: Final = sc.INVALID_CONTRADICTION_NO_CLAIM


def _contradicted(raw: Any, n_claims: int) -> tuple[dict[int, tuple[str, str]], int]:
    """The "contradicted" list (absent in replies of the earlier prompt: none). Items must name a
    claim by its 1-based number; others are counted (``no_claim``), not guessed."""
    out: dict[int, tuple[str, str]] = {}
    invalid = 0
    for item in raw if isinstance(raw, list) else []:
        number = item.get("claim") if isinstance(item, Mapping) else None
        if isinstance(number, bool) or not isinstance(number, int) or not 1 <= number <= n_claims:
            invalid += 1
            continue
        out[number - 1] = (str(item.get("evidence") or "")[:2000], str(item.get("reason") or "")[:200])
    return out, invalid


_CONTEXT_NAME = re.compile(r"^\s*(?:context|ctx|rank)?\s*#?\s*(\d+)\s*$", re.IGNORECASE)


def _context_rank(name: str) -> int | None:
    """1 for "context 1" (also "Context 1", "1", "context #1")."""
    match = _CONTEXT_NAME.match(str(name))
    return int(match.group(1)) if match else None


# --- compact mode, offline evaluation --------------------------------------------------------
@dataclass(frozen=True, slots=True)
class CompactEvalVerdict:
    """A compact reply of the evaluation variant: the online verdict plus what the request asked."""

    base: CompactVerdict
    in_reference: tuple[bool, ...]  # per answer claim (empty without a reference)
    reference_claims: tuple[tuple[str, bool, bool], ...]  # (claim, attributed, in_answer)
    citation_supported: tuple[bool, ...]  # per citation, in the order named


_CITATION_NAME = re.compile(r"^\s*(?:citation|cite)?\s*#?\s*(\d+)\s*$", re.IGNORECASE)


def parse_compact_eval(
    obj: Mapping[str, Any], n_contexts: int, n_reference_sentences: int | None, n_citations: int
) -> CompactEvalVerdict:
    """Validate an evaluation-variant compact reply. ``n_reference_sentences`` is None when the
    request had no reference; ``n_citations`` is how many citations the prompt named."""
    base = parse_compact(obj, n_contexts)
    in_reference: list[bool] = []
    reference_claims: list[tuple[str, bool, bool]] = []
    if n_reference_sentences is not None:
        for i, item in enumerate(_list(obj, "claims")):
            value = _first_key(item, ("in_reference", "in_ground_truth", "correct"), f"claims[{i}]")
            in_reference.append(to_bool(value, f"claims[{i}].in_reference"))
        for i, item in enumerate(_list(obj, "reference_claims")):
            if not isinstance(item, Mapping):
                raise VerdictError(f"reference_claims[{i}] must be an object with 'claim', 'attributed', 'in_answer'")
            text = _first_key(item, ("claim", "statement", "text"), f"reference_claims[{i}]")
            attributed = to_bool(_first_key(item, ("attributed", "supported"), f"reference_claims[{i}]"),
                                 f"reference_claims[{i}].attributed")
            in_answer = to_bool(_first_key(item, ("in_answer",), f"reference_claims[{i}]"),
                                f"reference_claims[{i}].in_answer")
            reference_claims.append((str(text), attributed, in_answer))
        if n_reference_sentences > 0 and not reference_claims:
            raise VerdictError(
                f"'reference_claims' must break down the {n_reference_sentences} reference sentences; it was empty"
            )
    supported: dict[int, bool] = {}
    if n_citations:
        if "citation_supported" not in obj:
            raise VerdictError("missing key 'citation_supported'")
        raw = obj["citation_supported"]
        if isinstance(raw, Mapping):
            for name, value in raw.items():
                match = _CITATION_NAME.match(str(name))
                if match is None:
                    raise VerdictError(f"citation_supported keys must be 'citation 1'..'citation {n_citations}', "
                                       f"got {name!r}")
                supported[int(match.group(1))] = to_bool(value, f"citation_supported[{name!r}]")
        else:
            for i, value in enumerate(_list(obj, "citation_supported"), start=1):
                supported[i] = to_bool(value, f"citation_supported[{i - 1}]")
        missing = [i for i in range(1, n_citations + 1) if i not in supported]
        if missing:
            raise VerdictError(
                f"'citation_supported' must give one verdict for each of citation 1..{n_citations}; missing "
                + ", ".join(citation_name(i) for i in missing[:10])
            )
    return CompactEvalVerdict(
        base=base,
        in_reference=tuple(in_reference),
        reference_claims=tuple(reference_claims),
        citation_supported=tuple(supported[i] for i in range(1, n_citations + 1)),
    )


# --- RAGAS-parity mode -----------------------------------------------------------------------
def parse_statements(obj: Mapping[str, Any]) -> tuple[str, ...]:
    return tuple(str(s).strip() for s in _list(obj, "statements") if str(s).strip())


def parse_nli(obj: Mapping[str, Any], n_statements: int) -> tuple[bool, ...]:
    items = _list(obj, "verdicts")
    if len(items) != n_statements:
        raise VerdictError(f"'verdicts' must have exactly {n_statements} items, one per statement, got {len(items)}")
    out = []
    for i, item in enumerate(items):
        value = item.get("verdict") if isinstance(item, Mapping) else item
        out.append(to_bool(value, f"verdicts[{i}].verdict"))
    return tuple(out)


CORRECTNESS_SCHEMA: dict[str, Any] = _obj(
    {
        "answer_statements": {
            "type": "array",
            "items": _obj(
                {"statement": {"type": "string"}, "reason": {"type": "string"}, "in_reference": {"type": "integer"}}
            ),
        },
        "reference_statements": {
            "type": "array",
            "items": _obj(
                {"statement": {"type": "string"}, "reason": {"type": "string"}, "in_answer": {"type": "integer"}}
            ),
        },
    }
)


def parse_correctness(
    obj: Mapping[str, Any], n_answer: int, n_reference: int
) -> tuple[tuple[bool, ...], tuple[bool, ...]]:
    """(in_reference per answer statement, in_answer per reference statement), exact lengths."""
    out: list[tuple[bool, ...]] = []
    for key, flag, n in (("answer_statements", "in_reference", n_answer), ("reference_statements", "in_answer",
                                                                            n_reference)):
        items = _list(obj, key)
        if len(items) != n:
            raise VerdictError(f"{key!r} must have exactly {n} items, one per statement, got {len(items)}")
        values = []
        for i, item in enumerate(items):
            value = item.get(flag, item.get("verdict")) if isinstance(item, Mapping) else item
            values.append(to_bool(value, f"{key}[{i}].{flag}"))
        out.append(tuple(values))
    return out[0], out[1]


def parse_question(obj: Mapping[str, Any]) -> tuple[str, bool]:
    if "question" not in obj:
        raise VerdictError("missing key 'question'")
    return str(obj["question"] or "").strip(), to_bool(obj.get("noncommittal", 0), "noncommittal")


def parse_context_verdict(obj: Mapping[str, Any]) -> bool:
    if "verdict" not in obj:
        raise VerdictError("missing key 'verdict'")
    return to_bool(obj["verdict"], "verdict")
