"""Tests for the recall benchmarks (salience.bench), the held-out split and ``salience bench``."""

from __future__ import annotations

import json
import math
import random
from pathlib import Path

import numpy as np
import pytest

from conftest import SAMPLES, shared_path
from salience import save_transcripts
from salience.bench import (
    CLEARED,
    OMITTED,
    BenchReport,
    RecallCurve,
    compactor_selector,
    evidence_recall,
    hindsight_auc,
    last_k_tool_results_selector,
    observation_masking_selector,
    pack_greedy,
    recency_selector,
    reference_recall,
    run_benchmark,
)
from salience.cli import main
from salience.scorer.baselines import KeywordScorer, OracleScorer, RandomScorer, RecencyScorer
from salience.scorer.labels import step_references
from salience.tokens import TokenCounter
from salience.training.split import split_transcripts
from salience.transcript import Entry, Query, Transcript

WORDS = TokenCounter(lambda text: len(text.split()))


def tokens(t: Transcript) -> int:
    return sum(WORDS.count_entries(t.entries))


# --------------------------------------------------------------------------
# fixtures
# --------------------------------------------------------------------------


@pytest.fixture
def chat() -> Transcript:
    """Ten 7-token user turns (4 overhead + 3 words) and four queries, one without evidence."""
    return Transcript(
        id="chat",
        entries=[Entry(id=f"e{i}", role="user", content=f"fact number {i}") for i in range(10)],
        queries=[
            Query("what came early?", evidence=["e1", "e2"]),
            Query("what came late?", evidence=["e8"]),
            Query("what was known at five?", evidence=["e2"], at=5),
            Query("small talk"),
        ],
    )


def _call(cid: str, name: str, args: dict) -> dict:
    return {"id": cid, "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}


FILLER = " ".join(f"word{i}" for i in range(40))


@pytest.fixture
def agent() -> Transcript:
    """An airline agent: a system value reused later, ids read from tool results reused in calls."""
    return Transcript.from_openai([
        {"role": "system", "content": "You are an airline agent. Quote policy code POL123 when confirming."},
        {"role": "user", "content": "My user id is mia_li_3668."},
        {"role": "assistant", "content": None,
         "tool_calls": [_call("c1", "get_user_details", {"user_id": "mia_li_3668"})]},
        {"role": "tool", "tool_call_id": "c1",
         "content": json.dumps({"reservations": ["ZFA04Y", "K1NW8N"], "note": FILLER})},
        {"role": "assistant", "content": None,
         "tool_calls": [_call("c2", "get_reservation_details", {"reservation_id": "ZFA04Y"})]},
        {"role": "tool", "tool_call_id": "c2", "content": json.dumps({"flight": "HAT136", "note": FILLER})},
        {"role": "assistant", "content": "Your flight HAT136 is confirmed under policy POL123."},
        {"role": "user", "content": "Thanks. Please also check the other reservation."},
        {"role": "assistant", "content": None,
         "tool_calls": [_call("c3", "get_reservation_details", {"reservation_id": "K1NW8N"})]},
        {"role": "tool", "tool_call_id": "c3", "content": json.dumps({"flight": "HAT039", "note": FILLER})},
        {"role": "assistant", "content": "Reservation K1NW8N is on flight HAT039."},
    ], id="agent", domain="airline")


class Spy:
    """Scores by recency and records what it was asked."""

    name = "spy"

    def __init__(self) -> None:
        self.calls: list[tuple[int, str | None]] = []

    def score(self, transcript: Transcript, query: str | None = None) -> np.ndarray:
        self.calls.append((len(transcript.entries), query))
        return RecencyScorer().score(transcript)


class KeepAll:
    name = "keep_all"

    def __call__(self, history: Transcript, budget: int, query: str | None = None) -> Transcript:
        return history


class SystemOnly:
    name = "system_only"

    def __call__(self, history: Transcript, budget: int, query: str | None = None) -> Transcript:
        return history.replace(entries=tuple(e for e in history.entries if e.role == "system"))


def assert_pairs_valid(t: Transcript) -> None:
    calls = {c.id for e in t.entries for c in e.tool_calls}
    for e in t.entries:
        if e.tool_call_id is not None:
            assert e.tool_call_id in calls, f"tool result {e.id} kept without its call"


# --------------------------------------------------------------------------
# greedy packing
# --------------------------------------------------------------------------


@pytest.mark.parametrize("seed", range(12), ids=[f"seed{s}" for s in range(12)])
def test_pack_greedy_respects_budget_and_order(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 30))
    scores = rng.integers(0, 4, n) / 4  # many ties
    costs = rng.integers(1, 50, n)
    budget = int(rng.integers(0, costs.sum() + 1))
    keep = pack_greedy(scores, costs, budget)
    assert costs[keep].sum() <= budget
    # replay the order (score down, later first on ties): a skipped entry did not fit then
    left = budget
    for i in sorted(range(n), key=lambda i: (-scores[i], -i)):
        if keep[i]:
            left -= costs[i]
        else:
            assert costs[i] > left


def test_pack_greedy_rejects_mismatched_lengths() -> None:
    with pytest.raises(ValueError, match="one length"):
        pack_greedy([0.1, 0.2], [1], 5)


# --------------------------------------------------------------------------
# evidence recall
# --------------------------------------------------------------------------


def test_oracle_evidence_recall(chat: Transcript) -> None:
    curve = evidence_recall(OracleScorer(), [chat], (0.1, 0.25, 1.0), counter=WORDS)
    assert curve.n == 3  # the query without evidence is left out
    # 10%: one 7-token entry of 70 -> early 1/2, late 1, at-5 (35 tokens -> 3) nothing
    assert curve.recall == pytest.approx((0.5, 1.0, 1.0))
    assert curve.kind == "query" and curve.method == "oracle"
    assert curve.as_dict()[1.0] == 1.0
    assert curve.at(0.25) == 1.0


def test_recency_evidence_recall(chat: Transcript) -> None:
    curve = evidence_recall(RecencyScorer(), [chat], (0.1, 0.25), counter=WORDS, query_aware=False)
    # 25%: the last two entries (e8, e9) of 10 and the last one (e4) of the first five
    assert curve.recall == pytest.approx((0.0, 1 / 3))
    assert curve.kind == "agnostic"


def test_agnostic_scores_once_per_prefix(chat: Transcript) -> None:
    spy = Spy()
    evidence_recall(spy, [chat], (0.1, 0.5), counter=WORDS, query_aware=False)
    assert sorted(spy.calls, key=str) == sorted([(10, None), (5, None)], key=str)
    spy = Spy()
    evidence_recall(spy, [chat], (0.1, 0.5), counter=WORDS, query_aware=True)
    assert sorted(spy.calls) == [(5, "what was known at five?"), (10, "what came early?"), (10, "what came late?")]


def test_evidence_recall_without_queries_is_nan(agent: Transcript) -> None:
    curve = evidence_recall(RandomScorer(), [agent], counter=WORDS)
    assert curve.n == 0 and all(math.isnan(r) for r in curve.recall)


@pytest.mark.parametrize("fractions", [(), (0.0,), (1.5,), (-0.1,), ("0.1",)],
                         ids=["empty", "zero", "over", "neg", "str"])
def test_bad_fractions(chat: Transcript, fractions: tuple) -> None:
    with pytest.raises(ValueError, match="fraction|budget"):
        evidence_recall(OracleScorer(), [chat], fractions, counter=WORDS)


# --------------------------------------------------------------------------
# selectors
# --------------------------------------------------------------------------


def test_recency_selector_fits_and_keeps_pairs(agent: Transcript) -> None:
    sel = recency_selector(counter=WORDS)
    system = WORDS.count_entry(agent.entries[0])
    seen = set()
    for budget in range(system, tokens(agent) + 1, 3):
        out = sel(agent, budget)
        assert tokens(out) <= budget
        assert out.entries[0].role == "system"
        assert_pairs_valid(out)
        kept = [agent.index(e.id) for e in out.entries[1:]]
        assert kept == list(range(len(agent) - len(kept), len(agent)))  # a contiguous recent window
        seen.add(len(out.entries))
    assert len(seen) > 3  # the budgets did exercise different windows


def test_recency_selector_drops_call_and_result_together(agent: Transcript) -> None:
    # the last unit is the final assistant turn; before it, call c3 and its (large) result
    last = WORDS.count_entry(agent.entries[-1])
    budget = WORDS.count_entry(agent.entries[0]) + last + WORDS.count_entry(agent.entries[-2])
    out = recency_selector(counter=WORDS)(agent, budget)
    assert [e.id for e in out.entries] == ["m0", "m10"]  # the result alone would fit, but not without its call


def test_last_k_tool_results_clears_older(agent: Transcript) -> None:
    out = last_k_tool_results_selector(1, counter=WORDS)(agent, 10_000)
    tools = [e for e in out.entries if e.role == "tool"]
    assert [e.content for e in tools[:-1]] == [CLEARED, CLEARED]
    assert tools[-1].content == agent.entries[9].content
    assert len(out.entries) == len(agent.entries)
    assert_pairs_valid(out)


def test_observation_masking_keeps_last_m(agent: Transcript) -> None:
    sel = observation_masking_selector(counter=WORDS)
    assert sel.name == "observation_masking"
    assert sel(agent, 10_000) == agent  # three tool results, m=10: nothing masked
    out = observation_masking_selector(2, counter=WORDS)(agent, 10_000)
    assert [e.content for e in out.entries if e.role == "tool"][0] == OMITTED


@pytest.mark.parametrize("make", [
    lambda: last_k_tool_results_selector(3, counter=WORDS),
    lambda: observation_masking_selector(1, counter=WORDS),
    lambda: compactor_selector(RecencyScorer(), counter=WORDS),
    lambda: compactor_selector(RandomScorer(), counter=WORDS),
], ids=["last3", "masking", "compactor-recency", "compactor-random"])
@pytest.mark.parametrize("fraction", [0.1, 0.25, 0.5], ids=["10pct", "25pct", "50pct"])
def test_selectors_fit_the_budget(agent: Transcript, make, fraction: float) -> None:
    system = WORDS.count_entry(agent.entries[0])
    budget = system + int(fraction * (tokens(agent) - system))
    out = make()(agent, budget)
    assert tokens(out) <= budget
    assert_pairs_valid(out)


def test_masking_selector_rejects_negative_k() -> None:
    with pytest.raises(ValueError, match="int >= 0"):
        last_k_tool_results_selector(-1)


# --------------------------------------------------------------------------
# reference recall
# --------------------------------------------------------------------------


def test_reference_recall_keep_all_earns_nothing_over_budget(agent: Transcript) -> None:
    """Keeping everything sees every reference, but never fits a share of the history: no credit."""
    curve = reference_recall(KeepAll(), [agent], (0.1, 0.25), counter=WORDS)
    assert curve.kind == "reference" and curve.n > 0 and curve.refs >= curve.n
    assert curve.over_budget == (curve.n, curve.n)
    assert curve.recall == (0.0, 0.0) and curve.macro == (0.0, 0.0)
    assert reference_recall(KeepAll(), [agent], (1.0,), counter=WORDS).recall == (1.0,)


def test_reference_recall_ignores_system_references(agent: Transcript) -> None:
    sources = {src for sr in step_references(agent) for _, src in sr.refs}
    assert "m0" in sources  # a step does reuse the system prompt's POL123
    curve = reference_recall(SystemOnly(), [agent], (0.5,), counter=WORDS)
    assert curve.recall == (0.0,)
    assert curve.over_budget == (0,)


def test_reference_recall_recency_partial(agent: Transcript) -> None:
    curve = reference_recall(recency_selector(counter=WORDS), [agent], (0.1, 0.5, 1.0), counter=WORDS)
    assert curve.over_budget == (0, 0, 0)
    assert curve.recall[0] < curve.recall[1] <= curve.recall[2] == 1.0


def test_reference_recall_max_steps(agent: Transcript) -> None:
    full = reference_recall(KeepAll(), [agent], (0.5,), counter=WORDS)
    two = reference_recall(KeepAll(), [agent], (0.5,), counter=WORDS, max_steps=2)
    assert full.n > 2 and two.n == 2
    with pytest.raises(ValueError, match="max_steps"):
        reference_recall(KeepAll(), [agent], (0.5,), counter=WORDS, max_steps=0)


# --------------------------------------------------------------------------
# hindsight AUC
# --------------------------------------------------------------------------


class _Hindsight:
    """Scores a history by what the full transcript's later steps use (or the opposite)."""

    def __init__(self, full: Transcript, invert: bool = False) -> None:
        from salience.scorer.labels import hindsight_labels

        self.used = [lab.used_by for lab in hindsight_labels(full)]
        self.index = {e.id: i for i, e in enumerate(full.entries)}
        self.invert = invert

    def score(self, transcript: Transcript, query: str | None = None) -> np.ndarray:
        cut = len(transcript.entries)
        y = np.array([any(self.index[s] >= cut for s in self.used[i]) for i in range(cut)], dtype=float)
        return 1 - y if self.invert else y


def test_hindsight_auc_perfect_and_inverted(agent: Transcript) -> None:
    good = hindsight_auc(_Hindsight(agent), [agent], cuts=6)
    bad = hindsight_auc(_Hindsight(agent, invert=True), [agent], cuts=6)
    assert good.auc == 1.0 and bad.auc == 0.0
    assert good.histories == 5 and 0 < good.positives < good.rows  # five assistant steps after the first entry
    assert 0.0 <= hindsight_auc(RecencyScorer(), [agent]).auc <= 1.0


# --------------------------------------------------------------------------
# split
# --------------------------------------------------------------------------


def tau_like() -> list[Transcript]:
    return [Transcript(id=f"tau-airline-{task}-{trial}", domain="airline", meta={"task_id": task, "trial": trial})
            for task in range(10) for trial in range(4)]


def test_split_keeps_trials_of_a_task_together() -> None:
    ts = tau_like()
    train, test = split_transcripts(ts, 0.3, seed=0)
    assert len(test) == 12 and len(train) == 28  # ceil(0.3 * 10) = 3 tasks of 4 trials
    test_tasks = {t.meta["task_id"] for t in test}
    assert test_tasks.isdisjoint(t.meta["task_id"] for t in train)
    assert [t.id for t in train + test if t in test] == [t.id for t in test]


def test_split_is_deterministic_and_order_free() -> None:
    ts = tau_like()
    first = split_transcripts(ts, 0.3, seed=0)
    assert split_transcripts(ts, 0.3, seed=0) == first
    shuffled = ts[:]
    random.Random(1).shuffle(shuffled)
    assert {t.id for t in split_transcripts(shuffled, 0.3, seed=0)[1]} == {t.id for t in first[1]}
    other = {t.id for t in split_transcripts(ts, 0.3, seed=1)[1]}
    assert other != {t.id for t in first[1]}


def test_split_by_id_and_edges() -> None:
    ts = [Transcript(id=f"locomo-{i}") for i in range(6)]
    train, test = split_transcripts(ts, 0.33, seed=0)
    assert (len(train), len(test)) == (4, 2)
    assert split_transcripts(ts, 2)[1].__len__() == 2  # an int is a number of groups
    assert split_transcripts(ts[:1], 0.5) == (ts[:1], [])  # one group cannot be split
    assert len(split_transcripts(ts, 0.99)[0]) == 1  # each side keeps one group


@pytest.mark.parametrize("size", [0.0, 1.0, -1, True, "0.3"], ids=["zero", "one", "neg", "bool", "str"])
def test_split_rejects_bad_size(size) -> None:
    with pytest.raises(ValueError, match="test_size"):
        split_transcripts(tau_like(), size)


# --------------------------------------------------------------------------
# runner and report
# --------------------------------------------------------------------------


@pytest.fixture
def report(chat: Transcript, agent: Transcript) -> BenchReport:
    baselines = ("recency", "random", "oracle", "last3_tool_results")
    return run_benchmark([chat, agent], KeywordScorer(), baselines=baselines, counter=WORDS)


def test_run_benchmark_curves_and_skips(report: BenchReport) -> None:
    have = {(c.method, c.kind) for c in report.curves}
    assert have == {
        ("salience", "query"), ("recency", "query"), ("random", "query"), ("oracle", "query"),
        ("salience", "agnostic"), ("recency", "agnostic"), ("random", "agnostic"),
        ("salience", "reference"), ("recency", "reference"), ("random", "reference"),
        ("last3_tool_results", "reference"),
    }
    skipped = {(m, k) for m, k, _ in report.skipped}
    assert skipped == {("oracle", "agnostic"), ("oracle", "reference")}
    assert report.curve("oracle", "query").recall[-1] == 1.0
    assert all(c.fractions == (0.1, 0.25) for c in report.curves if c.kind == "reference")
    assert all(c.fractions == (0.05, 0.1, 0.25) for c in report.curves if c.kind != "reference")
    assert all(c.over_budget == (0, 0) for c in report.curves if c.kind == "reference")
    assert len(report.rows) == 4 * 3 + 3 * 3 + 4 * 2


def test_report_metrics_names(report: BenchReport) -> None:
    m = report.metrics()
    assert m["recall_query_10pct"] == report.curve("salience", "query").at(0.1)
    assert m["recall_query_5pct_oracle"] == report.curve("oracle", "query").at(0.05)
    assert "recall_reference_25pct_last3_tool_results" in m
    assert "recall_reference_macro_10pct" in m and "over_budget_reference_10pct_recency" in m
    assert m["n_query"] == 3
    assert all(k.replace("_", "").isalnum() for k in m)


def test_report_table_json_plot(report: BenchReport, tmp_path: Path) -> None:
    from rich.console import Console

    console = Console(record=True, width=240)
    console.print(report.table())
    console.print(report.table("reference"))
    text = console.export_text()
    assert "salience" in text and "last3_tool_results" in text and "25%" in text
    data = json.loads(report.to_json(tmp_path / "r.json"))
    assert len(data["curves"]) == len(report.curves)
    assert json.loads((tmp_path / "r.json").read_text())["metrics"] == data["metrics"]
    again = BenchReport.from_json(tmp_path / "r.json")
    assert again.metrics() == report.metrics() and again.curves == report.curves
    png = report.plot(tmp_path / "plots" / "r.png")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_report_json_writes_nan_as_null() -> None:
    curve = RecallCurve(method="x", kind="query", fractions=(0.1,), recall=(math.nan,), n=0)
    data = json.loads(BenchReport(curves=(curve,)).to_json())
    assert data["curves"][0]["recall"] == [None]
    assert data["metrics"] == {"n_query": 0.0}


def test_run_benchmark_progress(chat: Transcript) -> None:
    calls = []
    run_benchmark([chat], RandomScorer(), baselines=("recency",), kinds=("query",), counter=WORDS,
                  progress=lambda d, done, total: calls.append((d, done, total)))
    assert calls[-1][1] == calls[-1][2] == 2  # two methods, one transcript each


@pytest.mark.parametrize("kwargs, match", [
    ({"baselines": ("nope",)}, "unknown baseline 'nope'"),
    ({"kinds": ("nope",)}, "unknown benchmark kind 'nope'"),
    ({"kinds": ()}, "at least one"),
    ({"fractions": (2.0,)}, "in \\(0, 1\\]"),
], ids=["baseline", "kind", "no-kind", "fraction"])
def test_run_benchmark_bad_input(chat: Transcript, kwargs: dict, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        run_benchmark([chat], RandomScorer(), counter=WORDS, **kwargs)


def test_run_benchmark_skips_kinds_without_data(agent: Transcript) -> None:
    report = run_benchmark([agent], RandomScorer(), baselines=("recency",), counter=WORDS)
    assert report.kinds == ["reference"]
    assert ("*", "query", "no query lists evidence") in report.skipped


# --------------------------------------------------------------------------
# command line
# --------------------------------------------------------------------------


@pytest.fixture
def data_file(tmp_path: Path, chat: Transcript, agent: Transcript) -> Path:
    return save_transcripts([chat, agent], tmp_path / "data.jsonl")


def one_error_line(err: str) -> str:
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("salience: error: "), err
    return lines[0]


def test_cli_bench_baseline_scorer(data_file: Path, tmp_path: Path, capsys) -> None:
    code = main(["bench", str(data_file), "--scorer", "baseline:keyword", "--baselines", "recency,keyword,random",
                 "--budgets", "10%,0.5", "--json", str(tmp_path / "b.json"), "--plot", str(tmp_path / "b.png")])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "evidence recall, query-aware" in out and "agent reference recall" in out
    data = json.loads((tmp_path / "b.json").read_text())
    assert data["scorer"] == "keyword"
    assert {c["method"] for c in data["curves"]} == {"keyword", "recency", "random"}  # not keyword twice
    assert {tuple(c["fractions"]) for c in data["curves"]} == {(0.1, 0.5)}
    assert (tmp_path / "b.png").read_bytes()[:4] == b"\x89PNG"


def test_cli_bench_plot_default_name(data_file: Path, tmp_path: Path, monkeypatch, capsys) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(["bench", str(data_file), "--scorer", "baseline:random", "--baselines", "none",
                 "--kinds", "query", "--plot"]) == 0
    assert len(list(tmp_path.glob("bench-*.png"))) == 1


def test_cli_bench_scorer_file(tmp_path: Path, capsys) -> None:
    from salience import ImportanceScorer, load_transcripts
    from salience.scorer.features import FeatureExtractor

    samples = load_transcripts(SAMPLES)
    path = ImportanceScorer(features=FeatureExtractor(use_embeddings=False), calibration=None).fit(samples).save(
        tmp_path / "s.salience")
    code = main(["bench", str(SAMPLES / "customer_service.jsonl"), "--scorer", str(path), "--kinds", "reference",
                 "--baselines", "recency,last3_tool_results", "--max-steps", "3", "--json", str(tmp_path / "b.json")])
    assert code == 0, capsys.readouterr().err
    data = json.loads((tmp_path / "b.json").read_text())
    assert {c["method"] for c in data["curves"]} == {"salience", "recency", "last3_tool_results"}
    assert all(c["n"] <= 3 * 3 for c in data["curves"])


@pytest.mark.parametrize("extra, match", [
    (["--baselines", "recency,nope"], "--baselines: unknown name 'nope'"),
    (["--budgets", "0.1,abc"], "--budgets"),
    (["--budgets", "150%"], "--budgets"),
    (["--budgets", "0"], "--budgets"),
    (["--kinds", "query,nope"], "--kinds: unknown name 'nope'"),
    (["--scorer", "/no/such/scorer.salience"], "--scorer: /no/such/scorer.salience does not exist"),
    (["--scorer", "baseline:nope"], "unknown baseline 'nope'"),
    (["--max-steps", "0"], "--max-steps"),
    (["--test-split", "1.5"], "--test-split"),
    (["--plot", "data.jsonl"], "--plot: expected the name of a .png file"),
], ids=["baseline", "budget-word", "budget-pct", "budget-zero", "kind", "scorer-file", "scorer-baseline",
        "max-steps", "test-split", "plot-not-png"])
def test_cli_bench_bad_input_exits_2(data_file: Path, extra: list[str], match: str, capsys) -> None:
    argv = ["bench", str(data_file), "--scorer", "baseline:random", *extra]
    assert main(argv) == 2
    assert match in one_error_line(capsys.readouterr().err)


def test_cli_bench_split_without_second_group(tmp_path: Path, chat: Transcript, capsys) -> None:
    path = save_transcripts([chat], tmp_path / "one.jsonl")
    assert main(["bench", str(path), "--scorer", "baseline:random", "--split", "test"]) == 2
    assert "--split test" in one_error_line(capsys.readouterr().err)


def test_cli_bench_split_test_side(tmp_path: Path, chat: Transcript, capsys) -> None:
    copies = [chat.replace(id=f"chat{i}") for i in range(6)]
    path = save_transcripts(copies, tmp_path / "six.jsonl")
    assert main(["bench", str(path), "--scorer", "baseline:random", "--baselines", "none", "--kinds", "query",
                 "--split", "test", "--test-split", "0.33", "--json", str(tmp_path / "b.json")]) == 0
    assert "2 transcripts (test side of the split, seed 0)" in capsys.readouterr().out
    assert json.loads((tmp_path / "b.json").read_text())["curves"][0]["n"] == 2 * 3


def test_cli_bench_logs_models_uri(data_file: Path, monkeypatch, capsys) -> None:
    from salience.cli import bench as bench_command
    from salience.training import tracking

    logged = []
    monkeypatch.setattr(bench_command, "resolve_scorer", lambda spec: (RandomScorer(), spec))
    monkeypatch.setattr(tracking, "log_bench_metrics", lambda uri, metrics, artifacts: logged.append((uri, metrics)))
    argv = ["bench", str(data_file), "--scorer", "models:/salience/1", "--baselines", "none", "--kinds", "query"]
    assert main(argv) == 0
    assert logged and logged[0][0] == "models:/salience/1" and "recall_query_10pct" in logged[0][1]
    logged.clear()
    assert main([*argv, "--no-track"]) == 0
    assert logged == []


@pytest.mark.parametrize("module", ["salience.training.bench", "salience.bench", "salience.bench.metrics",
                                    "salience.bench.selectors", "salience.bench.report", "salience.bench.runner",
                                    "salience.training.split"])
def test_bench_module_has_no_print(module: str) -> None:
    import importlib
    import inspect

    assert "print(" not in inspect.getsource(importlib.import_module(module)).replace("console.print(", "")


# --------------------------------------------------------------------------
# shared data
# --------------------------------------------------------------------------


def test_reference_recall_on_tau_bench_runs() -> None:
    from salience import load_transcripts

    runs = load_transcripts(shared_path("tau-bench-airline"))[:10]
    sel = recency_selector()
    curve = reference_recall(sel, runs, (0.1, 0.25, 1.0))
    assert curve.n > 50 and curve.refs > curve.n
    assert curve.over_budget == (0, 0, 0)
    assert 0.0 < curve.recall[0] < curve.recall[1] < curve.recall[2] == 1.0


def test_cli_bench_independent_kind_reports_the_message_baselines_as_evaluate_does(
        tmp_path: Path, agent: Transcript, capsys) -> None:
    from salience import Compactor
    from salience.bench.independent import baseline_selectors, compactor_selector, evaluate

    path = save_transcripts([agent, agent.replace(id="agent2")], tmp_path / "agents.jsonl")
    code = main(["bench", str(path), "--scorer", "baseline:keyword", "--kinds", "independent", "--budgets", "0.25,0.5",
                 "--json", str(tmp_path / "b.json")])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "recall by the independent definition" in out and "value_stubs" in out
    assert "keyword − window, independent, 25%:" in out and "paired bootstrap over 2 transcripts" in out
    assert "keyword − window, billed, independent, 25%:" in out
    data = json.loads((tmp_path / "b.json").read_text())
    assert "curves" not in data and data["scorer"] == "keyword"
    results = data["independent"]["results"]
    assert {r["method"] for r in results} == {"keyword", "window", "window_billed", "observation_masking",
                                              "last3_tool_results", "value_stubs"}
    # the same figures as evaluate() on the same selectors: the CLI adds nothing of its own
    expected = evaluate([agent, agent.replace(id="agent2")], {
        "keyword": compactor_selector(Compactor(scorer=KeywordScorer())), **baseline_selectors()}, (0.25, 0.5))
    assert [(r["method"], r["fraction"], r["independent"], r["ours"]) for r in results] == \
        [(r.method, r.fraction, r.independent.to_dict(), r.ours.to_dict()) for r in expected.results]
    assert expected.result("window", 0.5).independent.refs > 0


def test_cli_bench_independent_only_refuses_a_plot_and_a_chat(tmp_path: Path, chat: Transcript, data_file: Path,
                                                            capsys) -> None:
    argv = ["bench", str(data_file), "--scorer", "baseline:random", "--kinds", "independent"]
    assert main([*argv, "--plot", str(tmp_path / "p.png")]) == 2
    assert "--plot" in one_error_line(capsys.readouterr().err)
    path = save_transcripts([chat], tmp_path / "chat.jsonl")
    assert main(["bench", str(path), "--scorer", "baseline:random", "--kinds", "independent"]) == 2
    err = capsys.readouterr()
    assert "skipped independent" in err.out and "nothing to measure" in one_error_line(err.err)


def test_cli_bench_logs_the_independent_figures_with_the_curves(data_file: Path, monkeypatch, capsys) -> None:
    from salience.cli import bench as bench_command
    from salience.training import tracking

    logged = []
    monkeypatch.setattr(bench_command, "resolve_scorer", lambda spec: (RandomScorer(), spec))
    monkeypatch.setattr(tracking, "log_bench_metrics", lambda uri, metrics, artifacts: logged.append((uri, metrics)))
    assert main(["bench", str(data_file), "--scorer", "models:/salience/1", "--baselines", "none",
                 "--kinds", "query,independent"]) == 0
    metrics = logged[0][1]
    assert "recall_query_10pct" in metrics and "independent_micro_25pct_window" in metrics
    assert "ours_micro_10pct_salience" in metrics
