"""Citation correctness of the local judge on WiCE: does a claim's cited article support it?

    python bench/eval_citation_wice.py [--limit N] [--no-write]

WiCE (Kamoi et al., 2023; the bench data's ``retrieval/wice_claim_dev.jsonl``, dev split,
349 claims) pairs a Wikipedia claim with the article its citation points to, labelled
``supported`` / ``partially_supported`` / ``not_supported`` by annotators. Each claim is judged
exactly as ``ragmon eval`` judges a cited claim (and a reference claim for context recall): the
claim against the one cited context (the article's sentences), through the local judge's claim-support step,
i.e. the per-claim support model of the faithfulness score.

Reported: ROC AUC of the support score for supported vs not_supported (the clean split) and for
supported vs the rest (partially supported counts as not supported, as a claim-level citation
check must), and the balanced accuracy of the verdict ragmon uses (support >= 0.5 and no explicit
contradiction). Results replace the "Citation correctness (WiCE)" section of docs/benchmarks.md
unless --no-write.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench._benchdata import benchdata_file  # noqa: E402
from ragmon.scoring.local import LocalJudge  # noqa: E402
from ragmon.scoring.local import model as local_model  # noqa: E402

DATA = "retrieval/wice_claim_dev.jsonl"  # bench data (bench/_benchdata.py)
DOC = ROOT / "docs" / "benchmarks.md"
START, END = "<!-- wice-citation:start -->", "<!-- wice-citation:end -->"


def auc(positives: list[float], negatives: list[float]) -> float:
    """ROC AUC by the Mann-Whitney statistic (ties count one half)."""
    if not positives or not negatives:
        return float("nan")
    wins = 0.0
    for p in positives:
        for n in negatives:
            wins += 1.0 if p > n else 0.5 if p == n else 0.0
    return wins / (len(positives) * len(negatives))


def balanced_accuracy(labels: list[bool], verdicts: list[bool]) -> float:
    pos = [v for lab, v in zip(labels, verdicts, strict=True) if lab]
    neg = [not v for lab, v in zip(labels, verdicts, strict=True) if not lab]
    return (sum(pos) / len(pos) + sum(neg) / len(neg)) / 2


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--limit", type=int, default=0, help="only the first N claims (0: all)")
    parser.add_argument("--no-write", action="store_true", help="do not update docs/benchmarks.md")
    args = parser.parse_args()

    rows = [json.loads(line) for line in benchdata_file(DATA).read_text(encoding="utf-8").splitlines() if line.strip()]
    if args.limit:
        rows = rows[: args.limit]
    judge = LocalJudge(cache_size=0)
    scored: list[tuple[str, float, bool]] = []
    t0 = time.perf_counter()
    for row in rows:
        article = "\n".join(s for s in row["evidence"] if s.strip())
        evidence, verdicts, _ = judge._analyser.support([row["claim"]], [article], None)
        scored.append((row["label"], local_model.claim_support(evidence[0]), verdicts[0]))
    seconds = time.perf_counter() - t0

    sup = [s for lab, s, _ in scored if lab == "supported"]
    part = [s for lab, s, _ in scored if lab == "partially_supported"]
    nots = [s for lab, s, _ in scored if lab == "not_supported"]
    clean = [(lab == "supported", v) for lab, _, v in scored if lab != "partially_supported"]
    strict = [(lab == "supported", v) for lab, _, v in scored]
    lines = [
        f"Local judge, claim vs its cited article (WiCE dev, {len(scored)} claims: {len(sup)} supported, "
        f"{len(part)} partially supported, {len(nots)} not supported; `python bench/eval_citation_wice.py`).",
        "",
        "| split | ROC AUC of the support score | balanced accuracy of the verdict |",
        "|---|---|---|",
        f"| supported vs not_supported | {auc(sup, nots):.3f} | "
        f"{balanced_accuracy([a for a, _ in clean], [b for _, b in clean]):.3f} |",
        f"| supported vs partially + not | {auc(sup, part + nots):.3f} | "
        f"{balanced_accuracy([a for a, _ in strict], [b for _, b in strict]):.3f} |",
        "",
        f"Verdict = support >= 0.5 and no explicit contradiction (what citation correctness and context "
        f"recall count). Share judged supported: supported {sum(v for lab, _, v in scored if lab == 'supported')}"
        f"/{len(sup)}, partially {sum(v for lab, _, v in scored if lab == 'partially_supported')}/{len(part)}, "
        f"not {sum(v for lab, _, v in scored if lab == 'not_supported')}/{len(nots)}. "
        f"{seconds / max(1, len(scored)) * 1000:.0f} ms per claim (articles average ~120 sentences; only the "
        "4 sentences sharing the most words with the claim are embedded).",
        "",
        "Reading: the support score ranks claims well, but the fixed 0.5 verdict (inherited from the "
        "faithfulness model's per-claim support, fitted on RAGTruth QA claims) is lenient: a third of "
        "the unsupported claims and most partially supported ones pass, so the local judge's citation "
        "correctness and context recall read high; compare runs with each other rather than reading them "
        "as absolute rates. The threshold was not tuned on this set.",
    ]
    text = "\n".join(lines)
    print(text)
    if args.no_write:
        return
    doc = DOC.read_text(encoding="utf-8") if DOC.exists() else ""
    section = f"{START}\n{text}\n{END}"
    if START in doc and END in doc:
        doc = doc[: doc.index(START)] + section + doc[doc.index(END) + len(END):]
    else:
        doc = doc.rstrip("\n") + "\n\n## Citation correctness (WiCE)\n\n" + section + "\n"
    DOC.write_text(doc, encoding="utf-8")


if __name__ == "__main__":
    main()
