"""Pure text helpers for the local judge: claims, numbers, negations and names (sentences, words,
stems and stop words come from ``scoring.text``). No model, no I/O — deterministic and fast.

An answer is split into *claims* (sentences, long ones cut at clause boundaries); each
claim is later checked against the context sentences that support it best.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from ..text import META_WORDS, NEGATIONS, STOPWORDS, content_tokens, split_sentences, stem, words

# "1,000" is one number, "1,2,3" are three
_NUMBER = re.compile(r"(?<![A-Za-z0-9])[-+]?\$?(?:\d{1,3}(?:,\d{3})+(?!\d)|\d+)(?:\.\d+)?(?:%|st|nd|rd|th)?")
# "Step 6", "Option 2", "Passage 1": numbering, not a quantity the contexts must contain
_ENUMERATION = re.compile(
    r"\b(?:step|steps|option|options|question|questions|passage|passages|part|chapter|section|phase|"
    r"no|number|item|point|method|way|tip|stage|level|rule|#)\s*\.?\s*$",
    re.IGNORECASE,
)

MAX_CLAIM_WORDS = 40  # MiniLM reads ~128 tokens; long sentences are cut at clause boundaries
_CLAUSE_CUT = re.compile(r"(?:;|:|,\s+(?:and|but|while|whereas|which|although|so)\s+|\s+-\s+)")

_NUMBER_WORDS = {
    "zero": "0", "one": "1", "two": "2", "three": "3", "four": "4", "five": "5", "six": "6",
    "seven": "7", "eight": "8", "nine": "9", "ten": "10", "eleven": "11", "twelve": "12",
    "thirteen": "13", "fourteen": "14", "fifteen": "15", "sixteen": "16", "seventeen": "17",
    "eighteen": "18", "nineteen": "19", "twenty": "20", "thirty": "30", "forty": "40",
    "fifty": "50", "sixty": "60", "seventy": "70", "eighty": "80", "ninety": "90",
    "hundred": "100", "thousand": "1000", "million": "1000000", "billion": "1000000000",
    "half": "0.5", "dozen": "12", "once": "1", "twice": "2", "first": "1", "second": "2", "third": "3",
}


def split_claims(text: str | None) -> list[str]:
    """Claims of an answer: its sentences, with long ones cut into clauses."""
    claims: list[str] = []
    for sentence in split_sentences(text):
        claims.extend(cut_long(sentence))
    return claims


def cut_long(sentence: str, max_words: int = MAX_CLAIM_WORDS) -> list[str]:
    """Cut a sentence longer than ``max_words`` at clause boundaries, then by word count."""
    if len(sentence.split()) <= max_words:
        return [sentence]
    parts = [p.strip() for p in _CLAUSE_CUT.split(sentence) if p and p.strip()]
    out: list[str] = []
    current = ""
    for part in parts:
        candidate = f"{current} {part}".strip() if current else part
        if current and len(candidate.split()) > max_words:
            out.append(current)
            current = part
        else:
            current = candidate
    if current:
        out.append(current)
    final: list[str] = []
    for piece in out:
        words = piece.split()
        for i in range(0, len(words), max_words):
            final.append(" ".join(words[i : i + max_words]))
    return final


def _normalise_number(token: str) -> str:
    t = token.lower().lstrip("+$").rstrip("%")
    for suffix in ("st", "nd", "rd", "th"):
        if t.endswith(suffix):
            t = t[: -len(suffix)]
    t = t.replace(",", "")
    try:
        value = float(t)
    except ValueError:
        return t
    return f"{value:g}" if abs(value) < 1e15 else t


def numbers(text: str) -> set[str]:
    """Normalised numeric values (digits and number words): '1,000' == '1000', 'two' == '2'."""
    found = {_normalise_number(m.group()) for m in _NUMBER.finditer(text)}
    for w in words(text):
        mapped = _NUMBER_WORDS.get(w.lower())
        if mapped is not None:
            found.add(mapped)
    return {n for n in found if n}


def strict_numbers(text: str) -> set[str]:
    """Quantities written with digits (number words and list numbering are too ambiguous)."""
    out = set()
    for m in _NUMBER.finditer(text):
        if _ENUMERATION.search(text[max(0, m.start() - 12) : m.start()]):
            continue
        out.add(_normalise_number(m.group()))
    return out - {""}


def negation_count(text: str) -> int:
    count = 0
    tokens = [w.lower().replace("’", "'") for w in words(text)]
    for i, lw in enumerate(tokens):
        if (lw in NEGATIONS or lw.endswith("n't")) and not (i + 1 < len(tokens) and tokens[i + 1] == "only"):
            count += 1
    return count


def entities(text: str) -> set[str]:
    """Capitalised words not at a sentence start, acronyms and month names, lowercased."""
    out: set[str] = set()
    for sentence in split_sentences(text):
        # text after a colon or inside quotes starts with a capital anyway ("Step 2: Click 'Export'")
        for clause in re.split(r"[:;\"“”]", sentence):
            tokens = words(clause)
            for i, tok in enumerate(tokens):
                low = tok.lower()
                if not tok[0].isupper() or low in STOPWORDS or low in NEGATIONS or low in META_WORDS:
                    continue
                if i == 0 and not (len(tok) > 1 and tok.isupper()):
                    continue  # a sentence's first word is capitalised anyway
                out.add(stem(low))
    return out


_FIRST_WORD_ID = 1996  # in the BERT uncased vocabulary, whole words start here, roughly by frequency


@lru_cache(maxsize=1)
def _vocabulary() -> dict[str, int]:
    from importlib import resources

    from tokenizers import Tokenizer

    text = resources.files("ragmon.scoring.local").joinpath("assets/minilm-tokenizer.json").read_text("utf-8")
    return dict(Tokenizer.from_str(text).get_vocab())


@lru_cache(maxsize=1)
def content_pieces() -> np.ndarray:
    """For every WordPiece id: does the piece carry content (not a stopword, negation,
    "the passages say" word, punctuation or special token)? Used for token-level alignment."""
    skip = STOPWORDS | NEGATIONS | META_WORDS
    vocab = _vocabulary()
    mask = np.zeros(max(vocab.values()) + 1, dtype=bool)
    for piece, i in vocab.items():
        word = piece[2:] if piece.startswith("##") else piece
        mask[i] = word.isalnum() and word not in skip and not piece.startswith("[")
    return mask


# The words that say what kind of answer a question wants ("when", "how many", "what year").
QUESTION_WORDS = frozenset("what when where who whom whose which why how many much year long old".split())  # noqa: SIM905


@lru_cache(maxsize=1)
def question_word_pieces() -> frozenset[int]:
    """WordPiece ids of ``QUESTION_WORDS`` (each is a single piece in the uncased vocabulary)."""
    vocab = _vocabulary()
    return frozenset(vocab[w] for w in QUESTION_WORDS if w in vocab)


@lru_cache(maxsize=65536)
def rarity(token: str) -> float:
    """How informative a (stemmed) word is, in [0, 1]: ~0.1 for 'make', 1 for 'tubers'.

    The WordPiece vocabulary lists whole words roughly by corpus frequency, so a word's id is
    a free frequency rank; a word that is not a single piece is rarer than all of them.
    """
    vocab = _vocabulary()
    ids = [vocab[f] for f in (token, token + "e", token + "s", token + "ing", token + "ed") if f in vocab]
    ids = [i for i in ids if i >= _FIRST_WORD_ID]
    if not ids:
        return 1.0
    size = len(vocab)
    return math.log(min(ids) - _FIRST_WORD_ID + 2) / math.log(size - _FIRST_WORD_ID + 2)


@dataclass(frozen=True, slots=True)
class TextFacts:
    """What the evidence checks need from one piece of text, computed once."""

    tokens: frozenset[str]
    numbers: frozenset[str]
    entities: frozenset[str]
    negations: int


def facts(text: str) -> TextFacts:
    return TextFacts(
        tokens=frozenset(content_tokens(text)),
        numbers=frozenset(numbers(text)),
        entities=frozenset(entities(text)),
        negations=negation_count(text),
    )


# --- structured (JSON) contexts -------------------------------------------------------------
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
_CLOCK_RANGE = re.compile(r"^(\d{1,2}):(\d{1,2})\s*-\s*(\d{1,2}):(\d{1,2})$")
MAX_STRUCTURED_SENTENCES = 400


def _key_words(key: str) -> str:
    return _CAMEL.sub(" ", key).replace("_", " ").replace("-", " ").strip().lower()


def _clock(hour: int, minute: int) -> str:
    suffix = "am" if hour % 24 < 12 else "pm"
    h12 = hour % 12 or 12
    return f"{h12}:{minute:02d} {suffix}" if minute else f"{h12} {suffix}"


def _leaf_text(value: object) -> str:
    if value is True:
        return "yes"
    if value is False:
        return "no"
    if value is None:
        return "unknown"
    if isinstance(value, float) and value.is_integer():
        return f"{value:g}"
    text = str(value)
    m = _CLOCK_RANGE.match(text.strip())
    if m:  # "11:0-17:0" (opening hours) as people write it: "11 am to 5 pm (11:00-17:00)"
        h1, m1, h2, m2 = (int(g) for g in m.groups())
        return f"{_clock(h1, m1)} to {_clock(h2, m2)} ({h1}:{m1:02d}-{h2}:{m2:02d})"
    return text


def structured_sentences(text: str) -> list[str] | None:
    """A JSON object/array context as sentences a claim can be checked against, or None when
    ``text`` is not JSON: each scalar becomes "<key path in words>: <value>" (booleans as yes/no,
    opening hours in am/pm as well), long string values keep their own sentences."""
    stripped = text.strip()
    if not stripped or stripped[0] not in "{[":
        return None
    try:
        data = json.loads(stripped)
    except ValueError:
        return None
    if not isinstance(data, (dict, list)):
        return None
    out: list[str] = []

    def walk(value: object, path: list[str]) -> None:
        if len(out) >= MAX_STRUCTURED_SENTENCES:
            return
        if isinstance(value, dict):
            for k, v in value.items():
                walk(v, [*path, _key_words(str(k))])
        elif isinstance(value, list):
            for item in value:
                walk(item, path)
        else:
            leaf = _leaf_text(value)
            prefix = " ".join(p for p in path[-3:] if p)
            if isinstance(value, str) and len(leaf.split()) > 12:  # free text: its own sentences
                out.extend(split_sentences(leaf))
            else:
                out.append(f"{prefix}: {leaf}" if prefix else leaf)

    walk(data, [])
    return out[:MAX_STRUCTURED_SENTENCES]
