"""``salience tune`` and :func:`salience.training.tune.tune_profile`: the search, the folds,
the profile the Compactor loads, the command line and its tracking."""

from __future__ import annotations

import itertools
import json
import math
from pathlib import Path

import numpy as np
import pytest

from conftest import SAMPLES
from salience import load_transcripts
from salience.bench import BENCH_COMPACTOR_PARAMS, reference_recall
from salience.cli import main
from salience.errors import SalienceError, ScorerError
from salience.scorer.baselines import KeywordScorer, RecencyScorer
from salience.selector.compactor import Compactor
from salience.selector.masking import Phase
from salience.tokens import default_counter
from salience.training.tune import (
    DEFAULT_PARAMS,
    SEARCH_SPACE,
    TuneResult,
    sample_candidates,
    select_domain,
    tune_profile,
)
from salience.transcript import Entry, Query, ToolCall, Transcript


def one_error_line(err: str) -> str:
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, err
    assert lines[0].startswith("salience: error: "), err
    return lines[0]


@pytest.fixture(scope="module")
def samples() -> list[Transcript]:
    return load_transcripts(SAMPLES)


@pytest.fixture(scope="module")
def airline(samples: list[Transcript]) -> list[Transcript]:
    return select_domain(samples, "airline")


@pytest.fixture(scope="module")
def tuned(airline: list[Transcript]) -> TuneResult:
    return tune_profile(airline, RecencyScorer(), trials=10, folds=3, seed=0, domain="airline")


def agent(k: int, *, result_words: int = 40) -> Transcript:
    """A tool-using run: four lookups with large results, then an answer quoting the last two."""
    entries = [Entry(id="s", role="system", content="You help with orders."),
               Entry(id="u", role="user", content="Where are my orders?")]
    for j in range(4):
        entries.append(Entry(id=f"a{j}", role="assistant", content="",
                             tool_calls=(ToolCall(id=f"c{j}", name="get_order", arguments=f'{{"n": {j}}}'),)))
        entries.append(Entry(id=f"r{j}", role="tool", tool_call_id=f"c{j}", name="get_order",
                             content=f"order W{k}{j}0{j} carrier X{k}{j}Q " + "filler words here " * result_words))
    entries.append(Entry(id="f", role="assistant", content=f"W{k}202 goes by X{k}2Q and W{k}303 by X{k}3Q."))
    return Transcript(id=f"run{k}", domain="retail", entries=tuple(entries))


# --------------------------------------------------------------------------
# the search
# --------------------------------------------------------------------------


def test_result_on_samples(tuned: TuneResult) -> None:
    assert tuned.metric == "reference"
    assert tuned.domain == "airline"
    assert tuned.trials == 10
    assert tuned.folds == 2  # two transcripts: at most one fold per group
    assert tuned.before.name == "default"
    assert dict(tuned.before.params) == {**DEFAULT_PARAMS, "retain": dict(DEFAULT_PARAMS["retain"])}
    assert all(0.0 <= f <= 1.0 for c in tuned.candidates for f in c.folds)
    assert tuned.after.mean == max(c.mean for c in tuned.candidates)
    assert set(tuned.params) == set(DEFAULT_PARAMS)


@pytest.mark.parametrize(("trials", "seed", "folds"), [(1, 0, 3), (4, 1, 2), (8, 7, 3), (12, 3, 1)],
                         ids=["defaults-only", "few", "more", "one-fold"])
def test_tuned_at_least_default_on_tuning_folds(airline: list[Transcript], trials: int, seed: int,
                                                folds: int) -> None:
    result = tune_profile(airline, KeywordScorer(), trials=trials, folds=folds, seed=seed, max_steps=6)
    assert result.after.mean >= result.before.mean
    assert result.trials == trials
    if trials == 1:
        assert result.after is result.before


def test_ties_go_to_the_defaults() -> None:
    # one transcript, nothing over budget at a generous target: many candidates tie at 1.0
    result = tune_profile([agent(0, result_words=2)], RecencyScorer(), target=1.0, trials=5)
    assert result.before.mean == 1.0
    assert result.after.name == "default"
    assert result.changed == {}


def test_deterministic(airline: list[Transcript]) -> None:
    a = tune_profile(airline, RecencyScorer(), trials=5, seed=3, max_steps=5)
    b = tune_profile(list(reversed(airline)), RecencyScorer(), trials=5, seed=3, max_steps=5)
    assert dict(a.params) == dict(b.params)
    assert sorted(c.mean for c in a.candidates) == pytest.approx(sorted(c.mean for c in b.candidates))


def test_over_budget_pins_score_zero() -> None:
    runs = [agent(k) for k in range(4)]
    result = tune_profile(runs, RecencyScorer(), trials=2, folds=2)
    default, bench = result.candidates
    assert bench.name == "bench"
    # the last 4 entries (two large lookups) cannot fit 25% of the history whole: the default pins
    # degrade (oldest first) instead of raising, so no candidate is over budget
    assert sum(default.over_budget) == 0
    assert sum(bench.over_budget) == 0
    # and they now score what they keep, where raising scored nothing
    assert min(default.folds) > 0


def test_matches_reference_recall_of_compactor_selector() -> None:
    from salience.bench.selectors import compactor_selector

    runs = [agent(k) for k in range(3)]
    result = tune_profile(runs, KeywordScorer(), trials=6, folds=1, seed=2)
    for c in result.candidates:
        if sum(c.over_budget):
            continue  # compactor_selector keeps over-budget pins; tune scores them 0
        curve = reference_recall(compactor_selector(KeywordScorer(), **c.params), runs, (0.25,))
        assert c.folds[0] == pytest.approx(curve.recall[0]), c.name


def test_heldout_is_nested(tuned: TuneResult) -> None:
    names = {c.name: c for c in tuned.candidates}
    for f, (score, choice) in enumerate(zip(tuned.heldout, tuned.heldout_choice)):
        chosen = names[choice]
        assert score == chosen.folds[f]
        other = [g for g in range(tuned.folds) if g != f]
        assert all(np.mean([c.folds[g] for g in other]) <= np.mean([chosen.folds[g] for g in other])
                   for c in tuned.candidates)
    assert tuned.heldout_before == tuned.before.mean
    assert math.isfinite(tuned.heldout_after)


def test_one_group_has_no_heldout(samples: list[Transcript]) -> None:
    result = tune_profile(select_domain(samples, "retail"), RecencyScorer(), trials=3, folds=3)
    assert result.folds == 1
    assert math.isnan(result.heldout_after)
    assert result.profile(scorer="recency")["heldout_after"] is None


def test_max_steps_caps_each_fold(airline: list[Transcript]) -> None:
    result = tune_profile(airline, RecencyScorer(), trials=1, folds=2, max_steps=3)
    assert result.before.units == (3, 3)


def test_evidence_metric_through_the_compactor(samples: list[Transcript]) -> None:
    chats = select_domain(samples, "conversation")
    result = tune_profile(chats, RecencyScorer(), trials=4, folds=2)
    assert result.metric == "evidence"
    assert result.after.mean >= result.before.mean
    assert sum(result.before.units) == sum(len([q for q in t.queries if q.evidence]) for t in chats)


def test_evidence_recall_counts_whole_entries() -> None:
    notes = [Entry(id=f"e{i}", role="user", content=f"note {i} " + "words " * 20) for i in range(8)]
    t = Transcript(id="chat", entries=tuple(notes), queries=(Query("note 0?", evidence=("e0",)),))
    result = tune_profile([t], RecencyScorer(), trials=2, metric="evidence", target=0.3)
    default, bench = result.candidates
    assert default.folds == (0.0,) and default.over_budget == (0,)  # the last 4 notes give way, oldest first
    assert bench.folds == (0.0,) and bench.over_budget == (0,)  # recency keeps the latest notes, not e0
    full = tune_profile([t], RecencyScorer(), trials=1, metric="evidence", target=1.0)
    assert full.before.folds == (1.0,)


def test_progress_reaches_total(airline: list[Transcript]) -> None:
    calls: list[tuple[str, int, int]] = []
    tune_profile(airline, RecencyScorer(), trials=2, max_steps=4, progress=lambda d, n, t: calls.append((d, n, t)))
    last = calls[-1]
    assert last[1] == last[2] == 2 * 2 * 4


def test_scorer_is_called_once_per_history(airline: list[Transcript]) -> None:
    class Counting(RecencyScorer):
        calls = 0

        def score(self, transcript, query=None):  # type: ignore[no-untyped-def]
            Counting.calls += 1
            return super().score(transcript, query)

    result = tune_profile(airline, Counting(), trials=5, max_steps=4)
    assert 0 < Counting.calls <= sum(result.before.units)


# --------------------------------------------------------------------------
# candidates
# --------------------------------------------------------------------------


def test_candidates_are_distinct_and_in_space() -> None:
    cands = sample_candidates(30, seed=5)
    assert [n for n, _ in cands[:2]] == ["default", "bench"]
    assert cands[1][1]["pin_last"] == BENCH_COMPACTOR_PARAMS["pin_last"]
    keys = [json.dumps(p, sort_keys=True) for _, p in cands]
    assert len(set(keys)) == 30
    for _, p in cands[2:]:
        for key in ("pin_last", "pin_last_user", "critical", "max_entry_tokens", "trim_keep", "stub_values"):
            assert p[key] in SEARCH_SPACE[key]
        assert p["retain"]["stub"] <= p["retain"]["trim"]
        Compactor(scorer=RecencyScorer(), **p)._config()  # every candidate is a valid Compactor
    assert sample_candidates(30, seed=5) == cands
    assert sample_candidates(30, seed=6) != cands


# --------------------------------------------------------------------------
# the profile
# --------------------------------------------------------------------------


def test_profile_loads_into_compactor_and_changes_it(tuned: TuneResult, airline: list[Transcript],
                                                     tmp_path: Path) -> None:
    assert tuned.changed, "the samples should move at least one parameter off its default"
    path = tuned.write(tmp_path / "sub" / "airline.profile.json", scorer="recency")
    data = json.loads(path.read_text())
    assert data["domain"] == "airline"
    assert data["compactor"] == dict(tuned.profile()["compactor"])
    assert data["target"] == 0.25 and data["metric"] == "reference_recall" and data["trials"] == 10
    assert data["before"] == pytest.approx(tuned.before.mean) and data["after"] == pytest.approx(tuned.after.mean)
    assert data["scorer"] == "recency" and data["salience_version"]

    scorer = RecencyScorer()
    counter = default_counter()
    profiled = Compactor(scorer=scorer, profile=path, on_over_budget="keep_pins")
    explicit = Compactor(scorer=scorer, on_over_budget="keep_pins", **data["compactor"])
    plain = Compactor(scorer=scorer, on_over_budget="keep_pins")
    differs = False
    for t in airline:
        for cut, share in itertools.product(range(4, len(t.entries), 3), (3, 4)):
            history = Transcript(id=t.id, entries=t.entries[:cut], domain=t.domain)
            budget = max(1, sum(counter.count_entries(history.entries)) // share)
            a = profiled.compact(history, budget=budget, format="transcript")
            b = explicit.compact(history, budget=budget, format="transcript")
            assert (a.kept, a.trimmed, a.stubbed, a.dropped) == (b.kept, b.trimmed, b.stubbed, b.dropped)
            c = plain.compact(history, budget=budget, format="transcript")
            differs |= (a.kept, a.trimmed, a.stubbed, a.dropped) != (c.kept, c.trimmed, c.stubbed, c.dropped)
    # the profile's values are what the compactor runs with (a moved pin can leave a recency
    # scorer's choices as they were: its newest entries score the highest anyway)
    got, default = profiled._config(), plain._config()
    moved = [k for k in ("pin_last", "pin_last_user", "critical", "max_entry_tokens", "trim_keep", "stub_values")
             if getattr(got, k) != getattr(default, k)]
    assert all(getattr(got, k) == data["compactor"][k] for k in moved)
    assert differs or moved


def test_profile_names_the_policy_the_tuning_ran_with(tuned: TuneResult, airline: list[Transcript]) -> None:
    assert tuned.policy == "airline" and tuned.profile()["compactor"]["policy"] == "airline"
    # a message list carries no domain: with the profile it is masked as the tuning's transcripts were
    scorer = RecencyScorer()
    t = airline[0]
    messages = t.to_openai()
    budget = max(1, sum(default_counter().count_entries(t.entries)) // 4)
    from_messages = Compactor(scorer=scorer, profile=tuned.profile(), on_over_budget="keep_pins").compact(
        messages, budget=budget)
    from_transcript = Compactor(scorer=scorer, on_over_budget="keep_pins", **tuned.params).compact(t, budget=budget)
    assert from_messages.phase == from_transcript.phase != Phase.CHAT
    mixed = [airline[0], airline[1].replace(domain="retail")]
    assert tune_profile(mixed, scorer, trials=1, folds=1).profile()["compactor"].get("policy") is None


def test_metrics_are_finite_and_named(tuned: TuneResult) -> None:
    m = tuned.metrics()
    assert m["recall_before"] == pytest.approx(tuned.before.mean)
    assert m["recall_after"] == pytest.approx(tuned.after.mean)
    assert "recall_after_fold2" in m
    assert all(math.isfinite(v) for v in m.values())


# --------------------------------------------------------------------------
# bad input
# --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"target": 0}, "target must be a share"),
        ({"target": 1.5}, "target must be a share"),
        ({"target": True}, "target must be a share"),
        ({"trials": 0}, "trials must be an int >= 1"),
        ({"folds": 0}, "folds must be an int >= 1"),
        ({"max_steps": 0}, "max_steps must be an int >= 1 or None"),
        ({"metric": "bleu"}, "metric must be one of"),
        ({"seed": "x"}, "seed must be an int"),
    ],
    ids=["target-0", "target-1.5", "target-bool", "trials-0", "folds-0", "max-steps-0", "metric", "seed"],
)
def test_bad_parameters(airline: list[Transcript], kwargs: dict, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        tune_profile(airline, RecencyScorer(), **kwargs)


def test_bad_scorer_and_empty_input(airline: list[Transcript]) -> None:
    with pytest.raises(ValueError, match="scorer must have a score"):
        tune_profile(airline, object())
    with pytest.raises(SalienceError, match="no transcripts"):
        tune_profile([], RecencyScorer())
    quiet = Transcript(id="q", entries=(Entry(id="u", role="user", content="hello"),
                                        Entry(id="a", role="assistant", content="hi")))
    with pytest.raises(SalienceError, match="nothing to tune on: no assistant step"):
        tune_profile([quiet], RecencyScorer())
    with pytest.raises(SalienceError, match="nothing to tune on: no query lists evidence"):
        tune_profile(airline, RecencyScorer(), metric="evidence")


def test_select_domain_lists_domains(samples: list[Transcript]) -> None:
    with pytest.raises(SalienceError, match=r"domain 'nope' \(domains found: airline, coding, conversation, retail\)"):
        select_domain(samples, "nope")


# --------------------------------------------------------------------------
# the command line
# --------------------------------------------------------------------------


def test_cli_tune(tmp_path: Path, capsys) -> None:
    out = tmp_path / "p.json"
    code = main(["tune", str(SAMPLES), "--domain", "airline", "--scorer", "recency", "--trials", "4",
                 "--no-track", "--out", str(out)])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert "mean ± std" in captured.out and "default" in captured.out and "tuned" in captured.out
    assert "held-out" in captured.out and "pin_last" in captured.out
    assert "tracking" not in captured.err
    data = json.loads(out.read_text())
    assert data["scorer"] == "recency" and data["trials"] == 4 and data["domain"] == "airline"
    assert Compactor(scorer=RecencyScorer(), profile=out)._config().pin_last == data["compactor"]["pin_last"]


def test_cli_default_out_name(tmp_path: Path, monkeypatch, capsys) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(["tune", str(SAMPLES / "coding_agent.jsonl"), "--domain", "coding", "--scorer", "baseline:keyword",
                 "--trials", "2", "--no-track"]) == 0
    assert json.loads((tmp_path / "salience-coding.profile.json").read_text())["scorer"] == "baseline:keyword"


@pytest.mark.parametrize(
    ("extra", "match"),
    [
        (["--domain", "nope"], "no transcript has domain 'nope' .domains found: airline, coding"),
        (["--domain", "airline", "--target", "0"], r"--target: expected a share of the tokens in \(0, 1\]"),
        (["--domain", "airline", "--target", "1.5"], r"--target: expected a share"),
        (["--domain", "airline", "--trials", "0"], "--trials: expected a positive integer"),
        (["--domain", "airline", "--max-steps", "0"], "--max-steps: expected a positive integer"),
        (["--domain", "airline", "--scorer", "/no/such.salience"], "--scorer: /no/such.salience does not exist"),
    ],
    ids=["unknown-domain", "target-0", "target-1.5", "trials-0", "max-steps-0", "missing-scorer"],
)
def test_cli_bad_input_exits_2(extra: list[str], match: str, tmp_path: Path, capsys) -> None:
    code = main(["tune", str(SAMPLES), "--no-track", "--out", str(tmp_path / "p.json"), *extra])
    assert code == 2
    import re

    assert re.search(match, one_error_line(capsys.readouterr().err))
    assert not (tmp_path / "p.json").exists()


def test_cli_default_scorer_falls_back(monkeypatch) -> None:
    import salience.scorer.model as model
    from salience.cli.tune import resolve_tune_scorer

    def missing() -> None:
        raise ScorerError("the bundled default scorer is missing (x)")

    monkeypatch.setattr(model, "default_scorer", missing)
    scorer, label, note = resolve_tune_scorer("default")
    assert isinstance(scorer, RecencyScorer) and label == "recency"
    assert note is not None and "recency baseline" in note and "missing" in note
    scorer, label, note = resolve_tune_scorer("keyword")
    assert isinstance(scorer, KeywordScorer) and label == "keyword" and note is None


def test_cli_tracking_failure_still_writes_profile(tmp_path: Path, monkeypatch, capsys) -> None:
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("x")
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{blocker}/sub/mlflow.db")
    monkeypatch.delenv("MLFLOW_REGISTRY_URI", raising=False)
    out = tmp_path / "p.json"
    code = main(["tune", str(SAMPLES), "--domain", "airline", "--scorer", "recency", "--trials", "2",
                 "--out", str(out)])
    err = capsys.readouterr().err
    assert code == 0
    assert out.exists()
    lines = [line for line in err.splitlines() if "tracking" in line]
    assert len(lines) == 1 and lines[0].startswith("tracking failed: ")


@pytest.mark.slow
def test_cli_tracking_logs_run(tmp_path: Path, monkeypatch, capsys) -> None:
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path}/mlflow.db")
    monkeypatch.delenv("MLFLOW_REGISTRY_URI", raising=False)
    out = tmp_path / "p.json"
    assert main(["tune", str(SAMPLES), "--domain", "airline", "--scorer", "recency", "--trials", "3",
                 "--out", str(out)]) == 0
    err = capsys.readouterr().err
    run_id = err.split("tracking: logged run ")[1].split()[0]
    from mlflow import MlflowClient

    client = MlflowClient(tracking_uri=f"sqlite:///{tmp_path}/mlflow.db")
    run = client.get_run(run_id)
    assert run.info.status == "FINISHED"
    assert run.data.params["domain"] == "airline" and run.data.params["scorer"] == "recency"
    assert json.loads(run.data.params["compactor.retain"])["trim"] > 0
    data = json.loads(out.read_text())
    assert run.data.metrics["recall_before"] == pytest.approx(data["before"], abs=1e-6)
    assert run.data.metrics["recall_after"] == pytest.approx(data["after"], abs=1e-6)
    assert [a.path for a in client.list_artifacts(run_id, "profile")] == ["profile/p.json"]
    exp = client.get_experiment(run.info.experiment_id)
    assert exp.name == "salience-tune"
