"""Judge profiles: ``ragmon calibrate --fit`` writes one, ``--judge-profile`` uses it, and a
profile for another judge version (or too few labels) is refused with one line."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from ragmon.cli import main
from ragmon.errors import ConfigError
from ragmon.scoring.error_rates import from_profile_meta
from ragmon.scoring.local import LocalJudge
from ragmon.scoring.local._profile import JUDGE_VERSION, JudgeProfile, load_profile, save_profile

CITIES = ["Lyon", "Porto", "Graz", "Turku", "Ghent", "Brno", "Cork", "Bergen", "Split", "Kaunas", "Malmo", "Aarhus"]
THINGS = ["bridges", "museums", "libraries", "parks", "theatres", "markets"]


def _rows(n: int) -> list[dict]:
    """Labelled rows built here: a context states a count; a faithful answer repeats it, an
    unfaithful one changes the number or adds a claim the context does not make."""
    rng = random.Random(7)
    rows = []
    for i in range(n):
        city, thing = CITIES[i % len(CITIES)], THINGS[(i // len(CITIES)) % len(THINGS)]
        count = rng.randint(3, 40)
        context = (f"{city} has {count} public {thing}, most of them in the old town. "
                   f"The city council maintains the {thing} and publishes a yearly report.")
        kind = i % 3
        if kind == 0:
            answer, faithful = f"{city} has {count} public {thing}.", 1
        elif kind == 1:
            answer, faithful = f"{city} has {count + 7} public {thing}.", 0
        else:
            answer, faithful = (f"{city} has {count} public {thing}, and a private foundation founded by "
                                f"a shipping magnate funds their restoration every winter."), 0
        rows.append({"id": f"r{i}", "question": f"How many public {thing} does {city} have?", "contexts": [context],
                     "answer": answer, "labels": {"faithful": faithful}, "meta": {"source_id": f"{city}-{thing}"}})
    return rows


def _write(path: Path, rows: list[dict]) -> Path:
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n", encoding="utf-8")
    return path


def test_fit_writes_a_profile_that_the_judge_and_calibrate_use(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = _write(tmp_path / "labels.jsonl", _rows(60))
    profile = tmp_path / "profile.json"
    assert main(["calibrate", str(data), "--fit", str(profile), "--bootstrap", "50", "--no-progress"]) == 0
    out = capsys.readouterr()
    assert "learning curve, faithfulness" in out.out
    assert "gain" in out.out
    # answer relevancy has no labels here: said so, not fitted
    assert "not fitted: answer_relevancy" in out.err
    loaded = load_profile(profile)
    assert loaded.version == JUDGE_VERSION
    assert loaded.faithfulness_weights is not None and loaded.relevancy_weights is None
    # the refit's out-of-fold error rates, for the drop alerts' correction (only fitted metrics)
    rates = loaded.meta["error_rates"]
    assert set(rates) == {"faithfulness"}
    assert 0.0 <= rates["faithfulness"]["sensitivity"] <= 1.0 and 0.0 <= rates["faithfulness"]["specificity"] <= 1.0
    assert rates["faithfulness"]["sensitivity"] + rates["faithfulness"]["specificity"] > 1.0  # better than chance
    # the score gap (passing minus failing answers' mean score, out of fold) reaches the agent's gauge
    assert 0.0 < rates["faithfulness"]["score_gap"] <= 1.0
    assert from_profile_meta(loaded.meta)["faithfulness"].score_gap == rates["faithfulness"]["score_gap"]
    assert from_profile_meta({"error_rates": {"faithfulness": {"sensitivity": 0.7, "specificity": 0.7,
                                                               "score_gap": -0.1}}})["faithfulness"].score_gap is None
    judge = LocalJudge(profile=profile)
    row = _rows(3)[1]
    scores = judge.score_sync(row["question"], row["contexts"], row["answer"])
    assert scores.values["faithfulness"] is not None and 0.0 <= scores.values["faithfulness"] <= 1.0
    # the fitted profile is usable for measuring other labelled data
    other = _write(tmp_path / "other.jsonl", _rows(12))
    assert main(["calibrate", str(other), "--judge-profile", str(profile), "--bootstrap", "0", "--no-progress"]) == 0


def test_too_few_labels_is_refused_with_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = _write(tmp_path / "labels.jsonl", _rows(15))
    assert main(["calibrate", str(data), "--fit", str(tmp_path / "p.json"), "--no-progress"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "too few labels" in err[0] and "at least 40" in err[0]
    assert not (tmp_path / "p.json").exists()


def test_profile_for_another_judge_version_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    profile = tmp_path / "old.json"
    save_profile(JudgeProfile(version="local-0"), profile)
    data = _write(tmp_path / "labels.jsonl", _rows(6))
    assert main(["calibrate", str(data), "--judge-profile", str(profile), "--no-progress"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1
    assert "local-0" in err[0] and JUDGE_VERSION in err[0]
    with pytest.raises(ConfigError):
        LocalJudge(profile=profile)


@pytest.mark.parametrize(
    ("content", "needle"),
    [
        ("{not json", "not JSON"),
        (json.dumps({"hello": 1}), "not a ragmon judge profile"),
        (json.dumps({**JudgeProfile().to_json(), "faithfulness": {"weights": {"no_such_feature": 1.0}}}),
         "unknown features"),
    ],
)
def test_malformed_profiles_are_refused(tmp_path: Path, content: str, needle: str) -> None:
    path = tmp_path / "p.json"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(ConfigError, match=needle):
        load_profile(path)


def test_context_weights_round_trip_and_replace_the_shipped_relevance(tmp_path: Path) -> None:
    from ragmon.scoring.local import model as local_model

    weights = {"bias": -2.0, "shipped_logit": 0.5, "question_coverage": 5.0, "length": -0.1}
    path = tmp_path / "ctx.json"
    save_profile(JudgeProfile(context_weights=weights, meta={"name": "ctx"}), path)
    loaded = load_profile(path)
    assert dict(loaded.context_weights or {}) == weights and loaded.context_threshold is None
    question = "How many public parks does Lyon have?"
    contexts = ["Lyon has 12 public parks, most of them in the old town.",
                "The Porto football club plays in blue and white."]
    judge, default = LocalJudge(profile=path), LocalJudge()
    features = judge.analyse(question, contexts, None).context_features
    expected = [round(local_model.context_relevance(f, weights=weights), 3) for f in features]
    got = judge.score_sync(question, contexts, None).details["context_relevance"]
    assert got == expected
    assert got != default.score_sync(question, contexts, None).details["context_relevance"]
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({**JudgeProfile().to_json(), "context_relevance": {"weights": {"nope": 1.0}}}))
    with pytest.raises(ConfigError, match="unknown features"):
        load_profile(bad)
