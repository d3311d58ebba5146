"""Training end to end: labelling raw logs, the split, metrics, the saved file, the command."""

from __future__ import annotations

from pathlib import Path

import pytest
from sklearn.ensemble import HistGradientBoostingClassifier

from conftest import SAMPLES
from salience import Entry, ToolCall, Transcript, load_transcripts
from salience.cli import main
from salience.errors import ScorerError
from salience.scorer.features import FeatureExtractor
from salience.scorer.model import ImportanceScorer
from salience.training.train import prepare_transcripts, train_scorer


def _fast() -> ImportanceScorer:
    return ImportanceScorer(
        features=FeatureExtractor(use_embeddings=False),
        estimator=HistGradientBoostingClassifier(max_iter=40, random_state=0),
    )


def _raw_log(i: int) -> Transcript:
    """An unlabelled agent log: a lookup whose result is used by the next call."""
    return Transcript(
        id=f"raw-{i}",
        domain="retail",
        entries=(
            Entry(id="u", role="user", content=f"Please cancel order #W{1000 + i} for user jo_{i}_77."),
            Entry(id="a1", role="assistant",
                  tool_calls=(ToolCall(f"c{i}a", "get_order_details", f'{{"order_id": "#W{1000 + i}"}}'),)),
            Entry(id="r1", role="tool", name="get_order_details", tool_call_id=f"c{i}a",
                  content=f'{{"status": "pending", "payment_id": "paypal_{4000 + i}", "items": ["{7000 + i}"]}}'),
            Entry(id="a2", role="assistant",
                  tool_calls=(ToolCall(f"c{i}b", "get_weather", '{"city": "Paris"}'),)),
            Entry(id="r2", role="tool", name="get_weather", tool_call_id=f"c{i}b", content="Sunny, 21 degrees."),
            Entry(id="a3", role="assistant", tool_calls=(
                ToolCall(f"c{i}c", "cancel_pending_order",
                         f'{{"order_id": "#W{1000 + i}", "refund_to": "paypal_{4000 + i}"}}'),
            )),
            Entry(id="r3", role="tool", name="cancel_pending_order", tool_call_id=f"c{i}c", content="cancelled"),
            Entry(id="a4", role="assistant", content=f"Done: #W{1000 + i} is cancelled, refund to paypal_{4000 + i}."),
        ),
    )


def test_raw_logs_are_labelled_before_training() -> None:
    raw = [_raw_log(i) for i in range(3)]
    data, labeled = prepare_transcripts(raw)
    assert labeled == 3
    assert data[0].entries[2].label == 1.0  # the order details fed the cancel call
    assert raw[0].entries[2].label is None  # the caller's transcripts are untouched
    with pytest.raises(ScorerError, match="no transcript has domain 'airline'"):
        prepare_transcripts(raw, domain="airline")


def test_train_scorer_reports_and_saves(tmp_path: Path) -> None:
    raw = [_raw_log(i) for i in range(8)]
    report = train_scorer(raw, out=tmp_path / "m.salience", scorer=_fast(), test_split=0.25, max_steps=20)
    assert report.n_train + report.n_test == 8 and report.n_test >= 1
    assert report.path is not None and report.path.exists()
    loaded = ImportanceScorer.load(report.path)
    metrics = loaded.metadata_["metrics"]
    assert "cv_prior_roc_auc" in metrics
    assert any(k.startswith("recall_reference") for k in metrics)
    assert set(loaded.metadata_["split"]["test_ids"]) & {t.id for t in raw}


def test_train_command_writes_a_loadable_scorer(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "cli.salience"
    code = main(["train", str(SAMPLES), "--out", str(out), "--no-track", "--no-embeddings", "--cv", "2",
                 "--max-steps", "20"])
    printed = capsys.readouterr().out
    assert code == 0, printed
    assert "wrote" in printed and "cross-validated" in printed
    assert "model: the default for agents, boosted trees" in " ".join(printed.split())  # the samples act
    scorer = ImportanceScorer.load(out)
    t = load_transcripts(SAMPLES / "customer_service.jsonl")[0]
    assert scorer.score(t).shape == (len(t.entries),)
    assert (tmp_path / "cli-features.png").exists()


@pytest.mark.parametrize(
    ("args", "message"),
    [(["--test-split", "1.5"], "share in"), (["--cv", "1"], "--cv must be at least 2"),
     (["--budgets", "0,2"], "budgets must be")],
    ids=["split", "cv", "budgets"],
)
def test_train_command_bad_input(tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str],
                                 message: str) -> None:
    code = main(["train", str(SAMPLES), "--out", str(tmp_path / "x.salience"), "--no-track", *args])
    assert code == 2
    assert message in capsys.readouterr().err


def test_train_command_missing_input(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["train", str(tmp_path / "nope"), "--out", str(tmp_path / "x.salience"), "--no-track"]) == 2
    assert "no such file" in capsys.readouterr().err
