"""Read an evaluators file (YAML) into ``EvaluatorSpec`` rows; every error names the file and line.

A bad file stops the agent (or ``ragmon eval``) at start-up with one message, so the checks here are
strict: unknown keys, kinds and checks are errors, not warnings, and regexes and JSON schemas are
compiled here rather than on the first trace.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Final

import jsonschema
import regex
import yaml

from .. import quality
from ..errors import ConfigError
from . import spec as s
from .checks import SCRIPTS
from .evaluate import EvaluatorSet

MAX_FILE_BYTES: Final = 1 << 20
MAX_PATTERN_CHARS: Final = 2_000
MAX_CRITERION_CHARS: Final = 1_000
MAX_FLOW_DEPTH: Final = 64  # brackets nested deeper than any real file: refused before parsing
# libyaml's loader when PyYAML has it: fast, and it refuses absurd nesting itself
_LOADER: Final[Any] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

_COMMON: Final = {"name", "kind", "description", "pass_when", "threshold", "role", "buckets"}
_KIND_KEYS: Final = {
    s.KIND_REGEX: {"pattern", "target", "ignore_case"},
    s.KIND_LLM: {"criterion"},
    s.KIND_HEURISTIC: {"check", "min_words", "max_words", "min_chars", "max_chars", "script", "min_share",
                       "pattern"},
    s.KIND_JSON_SCHEMA: {"schema"},
}
_PASS_WHEN: Final = {
    s.KIND_REGEX: ("no_match", "match"),
    s.KIND_LLM: ("yes", "no"),
    s.KIND_JSON_SCHEMA: ("ok",),
}
_HEURISTIC_PASS: Final = {"length": ("ok",), "language": ("ok",), "refusal": ("answered", "declined"),
                          "citation": ("cited", "uncited")}


class EvaluatorFileError(ValueError):
    """A bad evaluators file: the message names the file and the line."""


def evaluator_set_from(path: str | Path | None) -> EvaluatorSet:
    """The evaluators of ``--evaluators`` (an empty set without one), for the agent and ``ragmon eval``;
    a bad file is a ``ConfigError`` naming the flag, the file and the line."""
    if not path:
        return EvaluatorSet()
    try:
        return EvaluatorSet(load_evaluators(path))
    except EvaluatorFileError as exc:
        raise ConfigError("--evaluators", str(exc)) from None


def load_evaluators(path: str | Path) -> tuple[s.EvaluatorSpec, ...]:
    """Read and validate ``path``; ``EvaluatorFileError`` names the file and line of the first problem."""
    p = Path(path)
    try:
        raw = p.read_bytes()
    except OSError as exc:
        raise EvaluatorFileError(f"{p}: cannot read the evaluators file: {exc.strerror or exc}") from None
    if len(raw) > MAX_FILE_BYTES:
        raise EvaluatorFileError(f"{p}: {len(raw)} bytes; an evaluators file may hold at most {MAX_FILE_BYTES}")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise EvaluatorFileError(f"{p}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    return parse_evaluators(text, str(p))


def parse_evaluators(text: str, source: str = "<evaluators>") -> tuple[s.EvaluatorSpec, ...]:
    """Validate the text of an evaluators file (``source`` names it in errors)."""
    try:
        _refuse_deep_nesting(text, source)
        _refuse_aliases(text, source)
        node = yaml.compose(text, Loader=_LOADER)
        data = yaml.load(text, Loader=_LOADER)  # a safe loader (CSafeLoader or SafeLoader)
    except RecursionError:
        raise EvaluatorFileError(f"{source}: nested too deeply") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f":{mark.line + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise EvaluatorFileError(f"{source}{where}: not valid YAML: {problem}") from None
    if not isinstance(data, Mapping) or not isinstance(node, yaml.MappingNode):
        raise EvaluatorFileError(f"{source}:1: expected a mapping with an 'evaluators' list")
    unknown = set(map(str, data)) - {"evaluators"}
    if unknown:
        raise EvaluatorFileError(f"{source}:1: unknown top-level key(s) {sorted(unknown)}; expected 'evaluators'")
    items = data.get("evaluators")
    items_node = next((v for k, v in node.value if k.value == "evaluators"), None)
    if not isinstance(items, list) or not isinstance(items_node, yaml.SequenceNode):
        raise EvaluatorFileError(f"{source}:1: 'evaluators' must be a list")
    if len(items) > s.MAX_EVALUATORS:
        line = items_node.value[s.MAX_EVALUATORS].start_mark.line + 1
        raise EvaluatorFileError(f"{source}:{line}: {len(items)} evaluators; at most {s.MAX_EVALUATORS} are allowed "
                                 "(each adds series per service and pipeline)")
    specs: list[s.EvaluatorSpec] = []
    seen: set[str] = set()
    for item, item_node in zip(items, items_node.value, strict=True):
        line = item_node.start_mark.line + 1
        try:
            spec = _one(item, line, seen)
        except EvaluatorFileError as exc:
            raise EvaluatorFileError(f"{source}:{_line_of(item_node, exc.args[0]) or line}: {exc.args[1]}") from None
        seen.add(spec.name)
        specs.append(spec)
    return tuple(specs)


def _refuse_deep_nesting(text: str, source: str) -> None:
    """Brackets nested absurdly deep (a pure-Python YAML parser takes minutes on 50,000 of them)."""
    depth = 0
    for ch in text:
        if ch in "[{":
            depth += 1
            if depth > MAX_FLOW_DEPTH:
                raise EvaluatorFileError(f"{source}: nested too deeply (more than {MAX_FLOW_DEPTH} brackets)")
        elif ch in "]}":
            depth = max(0, depth - 1)


def _refuse_aliases(text: str, source: str) -> None:
    """Anchors and aliases are refused: a few lines of them can stand for a billion nodes."""
    for event in yaml.parse(text, Loader=_LOADER):
        if isinstance(event, yaml.AliasEvent) or getattr(event, "anchor", None):
            line = event.start_mark.line + 1
            raise EvaluatorFileError(f"{source}:{line}: YAML anchors and aliases are not allowed in an evaluators file")


def _line_of(item_node: yaml.Node, key: str | None) -> int | None:
    """The line of ``key`` inside an evaluator's mapping, for a precise error."""
    if key and isinstance(item_node, yaml.MappingNode):
        for k, _value in item_node.value:
            if k.value == key:
                return int(k.start_mark.line) + 1
    return None


def _fail(key: str | None, message: str) -> EvaluatorFileError:
    return EvaluatorFileError(key, message)


def _one(item: Any, line: int, seen: set[str]) -> s.EvaluatorSpec:
    if not isinstance(item, Mapping):
        raise _fail(None, "each evaluator must be a mapping with 'name' and 'kind'")
    name = item.get("name")
    if not isinstance(name, str) or not s.NAME_PATTERN.fullmatch(name):
        raise _fail("name", f"evaluator name {name!r} must match [a-z][a-z0-9_]{{0,39}}")
    if quality.known(name):
        raise _fail("name", f"evaluator name {name!r} is a built-in metric")
    if name in seen:
        raise _fail("name", f"evaluator {name!r} is declared twice")
    kind = item.get("kind")
    if kind not in s.KINDS:
        raise _fail("kind", f"evaluator {name!r}: kind {kind!r} must be one of {', '.join(s.KINDS)}")
    unknown = set(map(str, item)) - _COMMON - _KIND_KEYS[kind]
    if unknown:
        raise _fail(sorted(unknown)[0], f"evaluator {name!r}: unknown key(s) {sorted(unknown)} for kind {kind!r}")
    threshold = item.get("threshold", 0.95)
    if isinstance(threshold, bool) or not isinstance(threshold, int | float) or not 0.0 <= threshold <= 1.0:
        raise _fail("threshold", f"evaluator {name!r}: threshold must be a share in [0, 1], got {threshold!r}")
    role = item.get("role", "")
    if role not in s.ROLES:
        raise _fail("role", f"evaluator {name!r}: role must be one of retrieval, grounding, answer (or absent)")
    buckets = item.get("buckets", False)
    if not isinstance(buckets, bool):
        raise _fail("buckets", f"evaluator {name!r}: buckets must be true or false")
    description = item.get("description", "")
    if not isinstance(description, str):
        raise _fail("description", f"evaluator {name!r}: description must be text")
    common: dict[str, Any] = {"name": name, "kind": kind, "line": line, "description": description[:500],
                              "threshold": float(threshold), "role": role, "buckets": buckets}
    if kind == s.KIND_REGEX:
        return _regex(item, common)
    if kind == s.KIND_LLM:
        return _llm(item, common)
    if kind == s.KIND_HEURISTIC:
        return _heuristic(item, common)
    return _json_schema(item, common)


def _pass_when(item: Mapping[str, Any], allowed: Sequence[str], name: str) -> str:
    value = item.get("pass_when", allowed[0])
    if value is True or value is False:  # YAML 1.1 reads a bare yes/no as a boolean
        value = "yes" if value else "no"
    if value not in allowed:
        raise _fail("pass_when", f"evaluator {name!r}: pass_when must be one of {', '.join(allowed)}, got {value!r}")
    return str(value)


def _compile(pattern: Any, name: str, ignore_case: bool = False, key: str = "pattern") -> str:
    if not isinstance(pattern, str) or not pattern:
        raise _fail(key, f"evaluator {name!r}: {key} must be a non-empty regular expression")
    if len(pattern) > MAX_PATTERN_CHARS:
        raise _fail(key, f"evaluator {name!r}: {key} is {len(pattern)} characters; at most {MAX_PATTERN_CHARS}")
    try:
        regex.compile(pattern, regex.IGNORECASE if ignore_case else 0)
    except (regex.error, OverflowError, RecursionError) as exc:
        raise _fail(key, f"evaluator {name!r}: invalid regular expression: {exc}") from None
    return pattern


def _regex(item: Mapping[str, Any], common: dict[str, Any]) -> s.EvaluatorSpec:
    name = common["name"]
    ignore_case = item.get("ignore_case", False)
    if not isinstance(ignore_case, bool):
        raise _fail("ignore_case", f"evaluator {name!r}: ignore_case must be true or false")
    target = item.get("target", "answer")
    if target not in s.TARGETS:
        raise _fail("target", f"evaluator {name!r}: target must be one of {', '.join(s.TARGETS)}")
    return s.EvaluatorSpec(**common, pattern=_compile(item.get("pattern"), name, ignore_case), target=target,
                           ignore_case=ignore_case, pass_when=_pass_when(item, _PASS_WHEN[s.KIND_REGEX], name))


def _llm(item: Mapping[str, Any], common: dict[str, Any]) -> s.EvaluatorSpec:
    name = common["name"]
    criterion = item.get("criterion")
    if not isinstance(criterion, str) or not criterion.strip():
        raise _fail("criterion", f"evaluator {name!r}: criterion must be a yes/no question in words")
    if len(criterion) > MAX_CRITERION_CHARS:
        raise _fail("criterion", f"evaluator {name!r}: criterion is {len(criterion)} characters; at most "
                                 f"{MAX_CRITERION_CHARS}")
    return s.EvaluatorSpec(**common, criterion=" ".join(criterion.split()),
                           pass_when=_pass_when(item, _PASS_WHEN[s.KIND_LLM], name))


def _number(item: Mapping[str, Any], key: str, name: str, minimum: float = 0) -> float | None:
    value = item.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or value < minimum:
        raise _fail(key, f"evaluator {name!r}: {key} must be a number ≥ {minimum:g}, got {value!r}")
    return float(value)


def _heuristic(item: Mapping[str, Any], common: dict[str, Any]) -> s.EvaluatorSpec:
    name = common["name"]
    check = item.get("check")
    if check not in s.HEURISTICS:
        raise _fail("check", f"evaluator {name!r}: check must be one of {', '.join(s.HEURISTICS)}")
    allowed_keys = {"length": {"min_words", "max_words", "min_chars", "max_chars"},
                    "language": {"script", "min_share"}, "refusal": set(), "citation": {"pattern"}}[check]
    extra = set(map(str, item)) - _COMMON - {"check"} - allowed_keys
    if extra:
        raise _fail(sorted(extra)[0], f"evaluator {name!r}: key(s) {sorted(extra)} do not apply to check {check!r}")
    options: dict[str, Any] = {}
    if check == "length":
        for key in ("min_words", "max_words", "min_chars", "max_chars"):
            value = _number(item, key, name)
            if value is not None:
                options[key] = value
        if not options:
            raise _fail("check", f"evaluator {name!r}: a length check needs min_words, max_words, min_chars "
                                 "or max_chars")
    elif check == "language":
        script = item.get("script")
        if script not in SCRIPTS:
            raise _fail("script", f"evaluator {name!r}: script must be one of {', '.join(SCRIPTS)}")
        share = _number(item, "min_share", name)
        if share is not None and share > 1:
            raise _fail("min_share", f"evaluator {name!r}: min_share must be a share in [0, 1]")
        options = {"script": script, "min_share": 0.8 if share is None else share}
    elif check == "citation":
        options = {"pattern": _compile(item.get("pattern", r"\[[^\[\]\s]{1,40}\]"), name)}
    return s.EvaluatorSpec(**common, check=check, options=options,
                           pass_when=_pass_when(item, _HEURISTIC_PASS[check], name))


def _json_schema(item: Mapping[str, Any], common: dict[str, Any]) -> s.EvaluatorSpec:
    name = common["name"]
    schema = item.get("schema")
    if not isinstance(schema, Mapping):
        raise _fail("schema", f"evaluator {name!r}: schema must be a JSON Schema object")
    try:
        jsonschema.validators.validator_for(schema).check_schema(schema)
    except jsonschema.SchemaError as exc:
        raise _fail("schema", f"evaluator {name!r}: invalid JSON Schema: {exc.message}") from None
    if "$ref" in str(schema) and "http" in str(schema):
        raise _fail("schema", f"evaluator {name!r}: remote $ref is not allowed (the agent fetches nothing)")
    return s.EvaluatorSpec(**common, schema=dict(schema), pass_when="ok")
