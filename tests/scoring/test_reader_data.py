"""The reader's training data: the manifest, sha256 checks, RAGTruth folds and claim labels,
premise windows and one-edit contradictions (pure code, no torch)."""

from __future__ import annotations

import hashlib
import json
import zipfile
from pathlib import Path

import pytest

from ragmon.errors import ConfigError
from ragmon.scoring.reader import data, edits, windows


def test_every_manifest_source_is_pinned_with_its_licence() -> None:
    sources = data.manifest()["sources"]
    assert len(sources) >= 6
    for s in sources:
        assert len(s["sha256"]) == 64 and int(s["sha256"], 16) >= 0, s["name"]
        assert s["licence"] and s["file"]
        assert s["format"] in ("docnli-tsv", "ragtruth-jsonl", "vitaminc-zip", "bump-json")
        if not s.get("benchdata"):
            assert s["url"].startswith("https://raw.githubusercontent.com/")
            assert len(s["url"].split("/")[5]) == 40  # pinned to a commit, not a branch


def _source(tmp_path: Path, text: str, sha: str) -> dict[str, object]:
    (tmp_path / "pairs.txt").write_text(text, encoding="utf-8")
    return {"name": "toy", "file": "pairs.txt", "format": "docnli-tsv", "url": "https://example.invalid/x",
            "sha256": sha, "licence": "test"}


def test_a_verified_file_is_read_and_a_changed_one_is_an_error_naming_it(tmp_path: Path) -> None:
    text = "entailment\tThe sky is blue.\tThe sky has a colour.\n"
    good = _source(tmp_path, text, hashlib.sha256(text.encode()).hexdigest())
    path = data.locate(good, tmp_path, None, download=False)
    assert list(data.docnli_rows(path)) == [(data.SUPPORTED, "The sky is blue.", "The sky has a colour.")]
    bad = _source(tmp_path, text.replace("blue", "green"), good["sha256"])  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match=r"pairs\.txt: sha256 .* does not match"):
        data.locate(bad, tmp_path, None, download=False)


def test_a_missing_file_is_an_error_without_download(tmp_path: Path) -> None:
    source = _source(tmp_path, "", "0" * 64)
    (tmp_path / "pairs.txt").unlink()
    with pytest.raises(ConfigError, match="missing"):
        data.locate(source, tmp_path, None, download=False)
    with pytest.raises(ConfigError, match="RAGMON_BENCHDATA"):
        data.locate({**source, "benchdata": True}, tmp_path, None, download=False)


def test_not_entailment_is_the_joined_label() -> None:
    lines = "not_entailment\tA\tB\nnon_entailment\tC\tD\nentailment\tE\tF\nbroken line\n"
    path = Path(__file__).parent / "_tmp_docnli.txt"
    try:
        path.write_text(lines, encoding="utf-8")
        assert [r[0] for r in data.docnli_rows(path)] == [data.NOT_SUPPORTED, data.NOT_SUPPORTED, data.SUPPORTED]
    finally:
        path.unlink()


def test_claims_take_the_label_of_the_spans_they_overlap() -> None:
    answer = "Paris is the capital of France. It has 90 million people. The mayor is Bob Smith."
    spans = [{"start": answer.index("90"), "end": answer.index("90") + 10, "label_type": "Evident Conflict"},
             {"start": answer.index("Bob"), "end": len(answer) - 1, "label_type": "Evident Baseless Info"}]
    assert data.claim_labels(answer, spans) == [
        ("Paris is the capital of France.", data.SUPPORTED),
        ("It has 90 million people.", data.CONTRADICTED),
        ("The mayor is Bob Smith.", data.UNSUPPORTED),
    ]


def test_ragtruth_folds_keep_every_answer_about_one_source_together() -> None:
    rows = [{"task": "qa", "meta": {"source_id": sid}} for sid in range(400)]
    folds = [data.ragtruth_fold(r) for r in rows]
    assert set(folds) == {"heldout", "train", "dev"}
    assert 0.4 < folds.count("heldout") / len(folds) < 0.6
    # another answer (another generator) about the same source: the same fold
    assert all(data.ragtruth_fold({"task": "qa", "meta": {"source_id": i}, "id": "other"}) == f
               for i, f in enumerate(folds))


def test_the_window_keeps_the_best_sentences_in_source_order() -> None:
    sentences = ["The store opens at nine.", "Parking is free on Sundays.", "Refunds take 14 days.",
                 "The warehouse ships parcels by courier.", "Returns need the original receipt."]
    w = windows.claim_window("Refunds need the original receipt and take 14 days.", sentences, k=2)
    assert w.sentences == ("Refunds take 14 days.", "Returns need the original receipt.")
    assert w.best in w.sentences and w.overlap > 0.5


def test_a_sentence_that_adds_none_of_the_claims_words_is_left_out_of_the_window() -> None:
    sentences = ["Refunds take 14 days.", "Refunds are popular.", "The receipt is needed.", "Parking is free."]
    w = windows.claim_window("Refunds take 14 days with the receipt.", sentences, k=3)
    # "Refunds are popular." ranks third but holds only "refunds", which the first already holds
    assert w.sentences == ("Refunds take 14 days.", "The receipt is needed.")
    # the best sentence is always kept, even when the claim shares nothing with any sentence
    alone = windows.claim_window("Zebras migrate.", sentences, k=3)
    assert alone.sentences == ("Refunds take 14 days.",) and alone.overlap == 0.0
    # stage 1's windows keep all three (data.build_pairs)
    full = windows.claim_window("Refunds take 14 days with the receipt.", sentences, k=3, prune=False)
    assert len(full.sentences) == 3 and "Refunds are popular." in full.sentences


def test_stage_two_reads_pruned_windows_and_stage_one_full_ones(tmp_path: Path) -> None:
    row = {"id": "r1", "task": "qa", "answer": "Refunds take 14 days with the receipt.",
           "contexts": ["Refunds take 14 days. Refunds are popular. The receipt is needed. Parking is free."],
           "labels": {"faithful": 1}, "meta": {"hallucination_spans": []}}
    # a source document outside the held-out fold (whose rows are never read in training)
    row["meta"]["source_id"] = next(i for i in range(100)
                                    if data.ragtruth_fold({**row, "meta": {"source_id": i}}) != "heldout")
    path = tmp_path / "rows.jsonl"
    path.write_text(json.dumps(row) + "\n", encoding="utf-8")
    (pruned,) = [p for p in data.ragtruth_pairs(path, "ragtruth-qa-dev") if p.source == "ragtruth-qa-dev"]
    (full,) = [p for p in data.ragtruth_pairs(path, "ragtruth-qa-dev", prune=False) if p.source == "ragtruth-qa-dev"]
    assert "Refunds are popular." not in pruned.premise and "Refunds are popular." in full.premise


# Two sentences share the same four words with the claim: a tie that the earlier sentence must win in
# every process. A plain float sum over the shared words follows the set's iteration order, which
# follows the string hash seed, and broke this tie differently under PYTHONHASHSEED=2.
_TIE = """
import ragmon.scoring.local
from ragmon.scoring.reader import windows
claim = "Tim's day exciting because Tim and his little sisters were going to have a campfire in the backyard."
sentences = ["Tim's mom was taking him and his little sisters, Rebecca and Georgia, to the beach!",
             "After their picnic lunch, Tim's mom was going to light a campfire and they were going to eat "
             "toasted marshmallows.",
             "Tim and his mom and his two little sisters hopped into the van.",
             "It also felt great on Tim's toes, and his little sisters giggled when the waves hit them."]
print(repr(windows.claim_window(claim, sentences, prune=False)))
"""


def test_the_window_is_the_same_whatever_the_string_hash_seed() -> None:
    # the reader's training pairs (and so the recipe's model) and a trace's verdicts must not depend
    # on the process that built them
    import os
    import subprocess
    import sys

    seen = set()
    for seed in range(8):
        env = {**os.environ, "PYTHONHASHSEED": str(seed)}
        run = subprocess.run([sys.executable, "-c", _TIE], env=env, capture_output=True, text=True, check=True)
        seen.add(run.stdout)
    assert len(seen) == 1, seen
    (window,) = seen
    assert "hopped into the van" in window and "giggled" not in window  # the earlier of the tied sentences


def test_a_long_sentence_is_cut_around_what_the_claim_shares() -> None:
    long = " ".join(["filler"] * 80 + ["the", "bridge", "opened", "in", "1937"] + ["filler"] * 80)
    w = windows.claim_window("The bridge opened in 1937.", [long], k=1)
    assert len(w.text.split()) == windows.MAX_SENTENCE_WORDS
    assert "bridge opened in 1937" in w.text


def test_one_edit_contradictions_of_an_entailed_pair() -> None:
    premise = "Maria Lopez founded the company in March 2010 with 12 employees in Madrid, and Juan Perez joined."
    hypothesis = "The company was founded with 12 employees by Maria Lopez in March."
    made = dict(edits.contradictions(premise, hypothesis, "k"))
    assert made["negation"] == "The company was not founded with 12 employees by Maria Lopez in March."
    assert "12" not in made["number"] and made["number"] != hypothesis
    # another name the premise holds stands where the hypothesis had one
    assert "Maria Lopez" not in made["name"] and ("Juan Perez" in made["name"] or "Madrid" in made["name"])
    assert "March" not in made["month"]
    both = edits.both_negated("The museum is open on Mondays.", "The museum is open on Mondays.", "k")
    assert both == ("The museum is not open on Mondays.", "The museum is not open on Mondays.")


def test_optional_sources_are_read_only_when_named_and_only_in_their_stage() -> None:
    names = {s["name"] for s in data.manifest()["sources"] if s.get("optional")}
    assert names, "the manifest holds optional sources"
    for stage in (1, 2):
        assert not names & {s["name"] for s in data.sources_read(stage)}  # the shipped recipe's pairs
    named = {s["name"] for s in data.sources_read(2, extra=names)}
    assert names <= named
    assert not names & {s["name"] for s in data.sources_read(1, extra=names)}  # all are stage-2 sources
    with pytest.raises(ConfigError, match="no manifest source named nope"):
        data.sources_read(2, extra=["nope"])


def _vitaminc_zip(path: Path, rows: list[dict[str, str]]) -> Path:
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("vitaminc_real/test.jsonl", "".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_vitaminc_labels_are_three_way_and_a_case_stays_on_one_side(tmp_path: Path) -> None:
    rows = []
    for case in range(40):
        for label in ("SUPPORTS", "REFUTES", "NOT ENOUGH INFO"):
            rows.append({"case_id": f"c{case}", "label": label, "claim": f"Westlife sold over {case} million .",
                         "evidence": f"Westlife ( a band ) sold {case}\ufffdmillion records in the UK ."})
    pairs = list(data.vitaminc_pairs(_vitaminc_zip(tmp_path / "v.zip", rows), "vitaminc-real", None, 13))
    assert len(pairs) == 120
    assert {p.label for p in pairs} == {data.SUPPORTED, data.CONTRADICTED, data.UNSUPPORTED}
    by_case: dict[str, set[str]] = {}
    for p in pairs:
        by_case.setdefault(p.claim, set()).add(p.split)
    assert all(len(splits) == 1 for splits in by_case.values())
    assert {p.split for p in pairs} == {"train", "dev"}
    # tokenized text read as prose
    assert pairs[0].premise.startswith("Westlife (a band) sold ") and pairs[0].premise.endswith("in the UK.")
    assert len(list(data.vitaminc_pairs(tmp_path / "v.zip", "vitaminc-real", 10, 13))) == 10


def test_bump_edits_are_labelled_by_their_type_against_the_article_window(tmp_path: Path) -> None:
    article = ("Mary Keefe posed for the painting in 1943. She was paid $10 for two mornings. "
               "The poster is not the same character. Parking in Arlington is free.")
    reference = "Keefe posed for the painting in 1943 . She was paid $10 ."
    rows = [
        {"article_id": 1, "article": article, "reference_summary": reference,
         "edited_summary": "Keefe posed for the painting in 1946 . She was paid $10 .",
         "error_type": "Extrinsic Circumstance Error", "corrected_error_type": "Intrinsic Circumstance Error"},
        {"article_id": 1, "article": article, "reference_summary": reference,
         "edited_summary": "Keefe posed for the painting in 1943 . She was paid $10 by Time .",
         "error_type": "Extrinsic Entity"},
        {"article_id": 1, "article": article, "reference_summary": reference,
         "edited_summary": "Keefe posed for the mural in 1943 . She was paid $10 .", "error_type": "Other"},
        {"article_id": 1, "article": article, "reference_summary": reference,
         "edited_summary": "Keefe posed for the painting in 1943 and she was paid $10 .",
         "error_type": "Intrinsic Predicate"},  # a sentence boundary moved: no clean minimal pair
    ]
    path = tmp_path / "bump.json"
    path.write_text(json.dumps(rows), encoding="utf-8")
    pairs = list(data.bump_pairs(path, "bump-task1"))
    assert [(p.claim, p.label) for p in pairs] == [
        ("Keefe posed for the painting in 1946.", data.CONTRADICTED),  # the corrected type decides
        ("Keefe posed for the painting in 1943.", data.SUPPORTED),
        ("She was paid $10 by Time.", data.NOT_SUPPORTED),
        ("She was paid $10.", data.SUPPORTED),  # each original sentence once
    ]
    assert "1943" in pairs[0].premise and "Parking" not in pairs[0].premise  # the article's window
    assert len({p.split for p in pairs}) == 1  # one article, one side


def test_dev_metrics_score_the_contradicted_class_apart_and_keep_the_checkpoint_score() -> None:
    import numpy as np

    from ragmon.scoring.reader.train import dev_metrics

    dev = [data.Pair("p", "c", data.SUPPORTED, "ragtruth-qa-dev", "dev"),
           data.Pair("p", "c", data.CONTRADICTED, "ragtruth-qa-dev", "dev"),
           data.Pair("p", "c", data.UNSUPPORTED, "ragtruth-qa-dev", "dev"),
           data.Pair("p", "c", data.SUPPORTED, "vitaminc-real", "dev"),
           data.Pair("p", "c", data.CONTRADICTED, "vitaminc-real", "dev")]
    # the reader ranks supported right on RAGTruth but puts the contradicted claim's mass on "unsupported"
    probs = np.array([[0.8, 0.1, 0.1], [0.2, 0.7, 0.1], [0.3, 0.1, 0.6], [0.9, 0.05, 0.05], [0.1, 0.1, 0.8]])
    got = dev_metrics(dev, probs)
    assert got["ragtruth_auc"] == 1.0 and got["ragtruth_conflict_auc"] == 0.5
    assert got["vitaminc_auc"] == 1.0 and got["vitaminc_conflict_auc"] == 1.0
    assert "bump_auc" not in got
    # the optional sources are logged, not part of the score checkpoints are chosen by
    without = dev_metrics(dev[:3], probs[:3])
    assert got["score"] == without["score"]


def test_balanced_negations_thin_the_negation_edits_and_repeat_supported_negated_claims() -> None:
    """``build_pairs(balance_negations=True)`` (a stage-2 trial): a negation alone must not predict
    "contradicted", so one-edit negations are thinned and supported claims holding a negation repeated."""
    edits_kept = [data._balanced_repeat(data.Pair(f"Shop {i} is open.", f"Shop {i} is not open.", data.CONTRADICTED,
                                                  "edit-rag-negation", "train")) for i in range(400)]
    assert set(edits_kept) == {0, 1} and 0.15 < sum(edits_kept) / 400 < 0.35  # one in NEGATION_EDIT_KEEP
    negated = data.Pair("Reservations: false.", "It does not take reservations.", data.SUPPORTED, "ragtruth-qa-dev",
                        "train")
    assert data._balanced_repeat(negated) == data.NEGATED_SUPPORTED_REPEAT
    for other in (data.Pair("It takes reservations.", "It takes reservations.", data.SUPPORTED, "ragtruth-qa-dev",
                            "train"),
                  data.Pair("Shop 1 is open.", "Shop 2 is open.", data.CONTRADICTED, "edit-rag-number", "train"),
                  data.Pair("It is open.", "It is not open.", data.CONTRADICTED, "edit-negation", "train")):
        assert data._balanced_repeat(other) == 1
