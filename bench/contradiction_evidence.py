#!/usr/bin/env python3
"""How tolerant the LLM judge's contradiction-evidence check is (ragmon/scoring/llm/evidence.py),
measured on the one-edit pairs of the RAGTruth dev sets (bench/data/one_edit_pairs.jsonl).

For every pair the context sentence that holds the original fact (the one the edit contradicts) is
the evidence a judge should quote. The bench quotes it the ways a model does — verbatim, with case,
quotes and whitespace changed, cut short, with a word dropped or changed, with two words changed,
with the middle left out ("... ") — and counts how often each is accepted, per containment
threshold. Against it: the edited answer sentence quoted back (what a 1.5B model did in 3 of its 4
contradiction items), which the check must reject, with and without the rule that a quote matching
the claim's own sentence as well as a context is the answer; and a context sentence of another row
(a quote of nothing the judge was shown).

    python bench/contradiction_evidence.py [--out docs/contradiction-evidence.json]
"""

from __future__ import annotations

import argparse
import json
import random
import re
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from one_edit_pairs import load_pairs  # noqa: E402

from ragmon.scoring.llm import evidence as ev  # noqa: E402
from ragmon.scoring.text import split_sentences  # noqa: E402

THRESHOLDS = (0.6, 0.7, 0.8, 0.9, 1.0)
FILLER = ("very", "also", "the", "new", "said", "just")


def required(n: int, threshold: float) -> float:
    misses = int(n * (1 - threshold) + 1e-9)
    return 1.0 if misses == 0 else (n - misses) / n


def source_sentence(pair: dict[str, Any]) -> str | None:
    """The context sentence holding the edited span's original text that best matches the answer sentence."""
    original = pair["edit"]["from"]
    answer_sentence = own_sentence(pair["answer"], pair["edit"]["at"])
    best, best_score = None, 0.0
    for context in pair["contexts"]:
        for sentence in split_sentences(context):
            if original not in sentence:
                continue
            score = ev.containment(ev.tokens(sentence), ev.tokens(answer_sentence))
            if score > best_score:
                best, best_score = sentence, score
    return best


def own_sentence(text: str, at: int) -> str:
    """The sentence of ``text`` that holds character offset ``at``."""
    start = 0
    for sentence in split_sentences(text):
        found = text.find(sentence, start)
        if found <= at < found + len(sentence):
            return sentence
        start = max(start, found)
    return text


def variants(quote: str, rng: random.Random) -> dict[str, str]:
    words = quote.split()
    n = len(words)

    def changed(k: int) -> str:
        out = list(words)
        for i in rng.sample(range(n), min(k, n)):
            out[i] = rng.choice(FILLER)
        return " ".join(out)

    dropped = list(words)
    if n > 3:
        del dropped[rng.randrange(n)]
    cut = max(3, int(n * 0.6))
    third = max(1, n // 3)
    return {
        "verbatim": quote,
        "cosmetic": "“" + re.sub(r"\s+", "  ", quote.lower()).rstrip(".") + "”",
        "first 60 %": " ".join(words[:cut]),
        "one word dropped": " ".join(dropped),
        "one word changed": changed(1),
        "two words changed": changed(2),
        "middle left out": " ".join(words[:third]) + " ... " + " ".join(words[-third:]),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "contradiction-evidence.json")
    args = parser.parse_args()
    rng = random.Random(38)
    pairs = load_pairs()
    accepted: dict[str, dict[float, int]] = defaultdict(lambda: defaultdict(int))
    counts: dict[str, int] = defaultdict(int)
    answer_rejected_kind: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0])  # [n, by containment, by rule]
    other_accepted: dict[float, int] = defaultdict(int)
    checks, seconds = 0, 0.0
    all_sentences = [(p["row"], s) for p in pairs for c in p["contexts"][:1] for s in split_sentences(c)]
    used = 0
    for pair in pairs:
        source = source_sentence(pair)
        if source is None or len(ev.tokens(source)) < ev.MIN_TOKENS:
            continue
        used += 1
        edited = own_sentence(pair["edited"], pair["edit"]["at"])
        index = ev.EvidenceIndex(pair["contexts"])
        for name, quote in variants(source, rng).items():
            started = time.perf_counter()
            result = index.check(quote, [edited])
            seconds += time.perf_counter() - started
            checks += 1
            counts[name] += 1
            n = len(ev.tokens(quote))
            for t in THRESHOLDS:
                if n >= ev.MIN_TOKENS and result.in_context >= required(n, t) and not result.quotes_answer:
                    accepted[name][t] += 1
        # the edited answer sentence quoted back as "evidence"
        result = index.check(edited, [edited])
        n = len(ev.tokens(edited))
        stats = answer_rejected_kind[pair["kind"]]
        stats[0] += 1
        if result.in_context < required(n, ev.MIN_CONTAINMENT):
            stats[1] += 1  # containment alone rejects it
        if not result.valid:
            stats[2] += 1  # containment and the own-sentence rule
        # a context sentence of another row
        row, other = rng.choice(all_sentences)
        if row != pair["row"] and other not in "\n".join(pair["contexts"]):  # rows may share their sources
            result = index.check(other, [edited])
            counts["another row's sentence"] += 1
            n = len(ev.tokens(other))
            for t in THRESHOLDS:
                if n >= ev.MIN_TOKENS and result.in_context >= required(n, t) and not result.quotes_answer:
                    other_accepted[t] += 1

    result_doc: dict[str, Any] = {
        "pairs": len(pairs), "pairs_with_source_sentence": used, "thresholds": list(THRESHOLDS),
        "shipped_threshold": ev.MIN_CONTAINMENT,
        "genuine_quotes_accepted": {name: {str(t): round(accepted[name][t] / counts[name], 4) for t in THRESHOLDS}
                                    for name in counts if name != "another row's sentence"},
        "other_row_sentence_accepted": {str(t): round(other_accepted[t] / counts["another row's sentence"], 4)
                                        for t in THRESHOLDS},
        "edited_answer_sentence_rejected": {
            kind: {"n": s[0], "by_containment_alone": round(s[1] / s[0], 4), "shipped": round(s[2] / s[0], 4)}
            for kind, s in sorted(answer_rejected_kind.items())},
        "mean_check_ms": round(1000 * seconds / max(1, checks), 3),
    }
    args.out.write_text(json.dumps(result_doc, indent=1) + "\n", encoding="utf-8")
    print(markdown(result_doc))
    return 0


def markdown(r: dict[str, Any]) -> str:
    head = "| quote | " + " | ".join(f"≥ {t:g}" for t in r["thresholds"]) + " |"
    lines = [head, "|" + " --- |" * (len(r["thresholds"]) + 1)]
    for name, by in r["genuine_quotes_accepted"].items():
        cells = " | ".join(f"{100 * by[str(t)]:.1f} %" for t in r["thresholds"])
        lines.append(f"| {name} (accepted) | {cells} |")
    by = r["other_row_sentence_accepted"]
    lines.append("| another row's sentence (accepted) | "
                 + " | ".join(f"{100 * by[str(t)]:.1f} %" for t in r["thresholds"]) + " |")
    lines += ["", "| edit kind | pairs | answer quote rejected by containment alone | rejected as shipped |",
              "| --- | --- | --- | --- |"]
    for kind, s in r["edited_answer_sentence_rejected"].items():
        lines.append(f"| {kind} | {s['n']} | {100 * s['by_containment_alone']:.1f} % | {100 * s['shipped']:.1f} % |")
    lines.append(f"\n{r['pairs_with_source_sentence']} of {r['pairs']} pairs; {r['mean_check_ms']} ms a check")
    return "\n".join(lines)


if __name__ == "__main__":
    raise SystemExit(main())
