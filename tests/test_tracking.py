"""MLflow tracking and the model registry: runs, versions, aliases, loading, the CLI, errors.

One temporary SQLite store per module (MLflow creates its tables once, ~5 s); two
scorers trained on the project's samples (without embeddings, ~1 s each) are
registered as versions 1 and 2 of one model.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from threadpoolctl import threadpool_limits

from conftest import SAMPLES
from salience import load_transcripts
from salience.errors import NotFittedError, ScorerError, TrackingError
from salience.scorer.features import FeatureExtractor
from salience.scorer.model import ImportanceScorer
from salience.training import tracking

pytestmark = pytest.mark.slow

NAME = "salience-test"


def _git_head() -> str | None:
    done = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, check=False)
    return done.stdout.strip() if done.returncode == 0 else None


@pytest.fixture(scope="module", autouse=True)
def _one_thread() -> Iterator[None]:
    """One OpenMP thread for the gradient boosting: on a busy 2-core machine, its threads
    spin against each other and a 2 s fit takes a minute or more."""
    with threadpool_limits(1):
        yield


@pytest.fixture(scope="module")
def transcripts() -> list:
    return load_transcripts(SAMPLES)


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A fresh SQLite tracking store for this module (MLFLOW_TRACKING_URI)."""
    root = tmp_path_factory.mktemp("mlflow")
    mp = pytest.MonkeyPatch()
    mp.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{root}/mlflow.db")
    mp.delenv("MLFLOW_REGISTRY_URI", raising=False)
    yield root
    mp.undo()


@pytest.fixture(scope="module")
def scorers(transcripts: list) -> tuple[ImportanceScorer, ImportanceScorer]:
    """Two scorers on the same data that score differently (calibrated, and uncalibrated: cheaper to fit)."""
    first = ImportanceScorer(features=FeatureExtractor(use_embeddings=False)).fit(transcripts)
    second = ImportanceScorer(features=FeatureExtractor(use_embeddings=False), calibration=None).fit(transcripts)
    return first, second


@pytest.fixture(scope="module")
def registered(store: Path, scorers: tuple, tmp_path_factory: pytest.TempPathFactory) -> tuple:
    """Versions 1 and 2 of NAME, with metrics, a JSON report and the scorer file."""
    out = tmp_path_factory.mktemp("train")
    records = []
    for i, scorer in enumerate(scorers, start=1):
        model_file = scorer.save(out / f"scorer{i}.salience")
        report = out / "report.json"
        report.write_text(json.dumps({"trial": i}))
        records.append(tracking.log_training_run(
            scorer, name=NAME,
            params={"inputs": ["data/"]},
            metrics={"recall_q_10": 0.5 + i / 10, "cv_auc": 0.8, "fit_seconds": 1.0},
            artifacts=[report], model_path=model_file, tags={"purpose": "test"},
        ))
    return tuple(records)


# --------------------------------------------------------------------------
# Store resolution
# --------------------------------------------------------------------------


def test_tracking_uri_defaults_to_sqlite_in_salience_home(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    monkeypatch.delenv("MLFLOW_REGISTRY_URI", raising=False)
    monkeypatch.delenv("SALIENCE_HOME", raising=False)
    monkeypatch.chdir(tmp_path)
    assert tracking.tracking_uri() == f"sqlite:///{tmp_path}/.salience/mlflow.db"
    assert (tmp_path / ".salience").is_dir()
    monkeypatch.setenv("SALIENCE_HOME", str(tmp_path / "elsewhere"))
    assert tracking.tracking_uri() == f"sqlite:///{tmp_path}/elsewhere/mlflow.db"
    assert tracking.registry_uri() == tracking.tracking_uri()
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "http://tracking.example:5000")
    assert tracking.tracking_uri() == "http://tracking.example:5000"
    monkeypatch.setenv("MLFLOW_REGISTRY_URI", "sqlite:///registry.db")
    assert tracking.registry_uri() == "sqlite:///registry.db"


def test_importing_tracking_and_commands_does_not_import_mlflow() -> None:
    code = ("import sys, salience.training.tracking, salience.cli.registry, salience.cli; "
            "salience.cli.build_parser(); print('mlflow' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "False"


# --------------------------------------------------------------------------
# Logging and registering
# --------------------------------------------------------------------------


def test_two_trainings_register_two_versions(registered: tuple) -> None:
    first, second = registered
    assert (first.model_name, first.version, first.model_uri) == (NAME, 1, f"models:/{NAME}/1")
    assert (second.version, second.model_uri) == (2, f"models:/{NAME}/2")
    assert first.run_id != second.run_id
    assert first.experiment_id == second.experiment_id


def test_run_holds_params_metrics_tags_and_artifacts(registered: tuple, scorers: tuple, store: Path) -> None:
    from mlflow import MlflowClient

    client = MlflowClient(tracking_uri=f"sqlite:///{store}/mlflow.db")
    run = client.get_run(registered[0].run_id)
    params = run.data.params
    assert params["calibration"] == "isotonic" and params["kind"] == "agent"  # from the file's metadata: as fitted
    assert client.get_run(registered[1].run_id).data.params["calibration"] == "None"
    assert params["inputs"] == "data/"
    assert params["salience_version"] == scorers[0].metadata_["library_version"]
    assert params["training_fingerprint"] == scorers[0].metadata_["training_fingerprint"]
    assert params["n_transcripts"] == "8"
    head = _git_head()
    if head is not None:
        assert params["git_commit"] == head
    assert run.data.metrics == {"recall_q_10": 0.6, "cv_auc": 0.8, "fit_seconds": 1.0}
    assert run.data.tags["purpose"] == "test"
    assert run.data.tags["salience.model_name"] == NAME
    assert run.info.status == "FINISHED"
    top = {a.path for a in client.list_artifacts(run.info.run_id)}
    assert top == {"model", "report.json", "scorer"}
    assert [a.path for a in client.list_artifacts(run.info.run_id, "scorer")] == ["scorer/scorer1.salience"]
    # artifacts live beside the SQLite file, not in ./mlruns
    assert run.info.artifact_uri.startswith((store / "mlartifacts").as_uri())


def test_registered_model_is_a_pyfunc_with_a_sklearn_scorer_inside(registered: tuple, store: Path) -> None:
    model_dir = store / "mlartifacts" / "salience" / registered[1].run_id / "artifacts" / "model"
    mlmodel = (model_dir / "MLmodel").read_text()
    assert "python_function" in mlmodel and "compactor_model.py" in mlmodel
    assert "sklearn" in (model_dir / "artifacts" / "scorer" / "MLmodel").read_text()


def test_list_versions_shows_both_with_recall_and_cv_metrics(registered: tuple) -> None:
    versions = tracking.list_versions(NAME)
    assert [(v.name, v.version) for v in versions] == [(NAME, 1), (NAME, 2)]
    assert [v.run_id for v in versions] == [r.run_id for r in registered]
    for v, recall in zip(versions, (0.6, 0.7)):
        assert v.metrics["recall_q_10"] == pytest.approx(recall)
        assert v.metrics["cv_auc"] == pytest.approx(0.8)
        assert "fit_seconds" not in v.metrics  # neither recall nor cv
    assert versions[0].created is not None and versions[0].created <= versions[1].created
    assert [v.uri for v in tracking.list_versions()] == [f"models:/{NAME}/1", f"models:/{NAME}/2"]


def test_versions_of_other_tools_are_listed_only_by_name(registered: tuple, store: Path) -> None:
    from mlflow import MlflowClient

    client = MlflowClient(tracking_uri=f"sqlite:///{store}/mlflow.db")
    client.create_registered_model("someone-elses-model")
    client.create_model_version("someone-elses-model", source=(store / "elsewhere").as_uri())
    assert {v.name for v in tracking.list_versions()} == {NAME}
    assert [(v.name, v.version, v.run_id) for v in tracking.list_versions("someone-elses-model")] == [
        ("someone-elses-model", 1, None)]
    with pytest.raises(ScorerError, match=r"registered: salience-test, someone-elses-model"):
        tracking.load_scorer("models:/ghost/1")


@pytest.mark.parametrize("version", [1, 2], ids=["v1", "v2"])
def test_each_version_loads_its_own_scorer(registered: tuple, scorers: tuple, transcripts: list, version: int) -> None:
    loaded = tracking.load_scorer(f"models:/{NAME}/{version}")
    assert isinstance(loaded, ImportanceScorer)
    t = transcripts[0]
    np.testing.assert_allclose(loaded.score(t), scorers[version - 1].score(t))
    np.testing.assert_allclose(loaded.score(t, "which flight?"), scorers[version - 1].score(t, "which flight?"))
    other = scorers[2 - version]
    assert not np.allclose(loaded.score(t), other.score(t))
    assert not hasattr(loaded, "_rows_cache")


def test_runs_uri_and_latest_load(registered: tuple, scorers: tuple, transcripts: list) -> None:
    t = transcripts[1]
    by_run = tracking.load_scorer(f"runs:/{registered[0].run_id}/model")
    np.testing.assert_allclose(by_run.score(t), scorers[0].score(t))
    bare = ImportanceScorer.load(f"runs:/{registered[0].run_id}")
    np.testing.assert_allclose(bare.score(t), scorers[0].score(t))
    latest = ImportanceScorer.load(f"models:/{NAME}/latest")
    np.testing.assert_allclose(latest.score(t), scorers[1].score(t))


def test_a_plain_import_loads_a_registered_scorer_in_a_fresh_interpreter(registered: tuple, scorers: tuple,
                                                                        transcripts: list) -> None:
    """``from salience import ImportanceScorer; ImportanceScorer.load("models:/...")`` with nothing else
    imported (the store comes from MLFLOW_TRACKING_URI, set for this module): the loader is there, and
    neither mlflow nor tracking is imported before a URI is loaded."""
    code = (
        "import json, sys\n"
        "from salience import ImportanceScorer, load_transcripts\n"
        "from salience.scorer import loaders\n"
        "early = sorted(m for m in ('mlflow', 'salience.training.tracking') if m in sys.modules)\n"
        "assert loaders.loader_for('models:/x/1') is not None\n"
        f"scorer = ImportanceScorer.load('models:/{NAME}/1')\n"
        f"t = load_transcripts({str(SAMPLES)!r})[0]\n"
        "print(json.dumps({'early': early, 'type': type(scorer).__name__, 'scores': scorer.score(t).tolist()}))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["early"] == [] and out["type"] == "ImportanceScorer"
    np.testing.assert_allclose(out["scores"], scorers[0].score(transcripts[0]))


def test_promote_moves_the_champion_alias(registered: tuple, scorers: tuple, transcripts: list) -> None:
    t = transcripts[2]
    info = tracking.promote(NAME, 1)
    assert (info.version, info.aliases, info.champion) == (1, ("champion",), True)
    np.testing.assert_allclose(ImportanceScorer.load(f"models:/{NAME}@champion").score(t), scorers[0].score(t))
    tracking.promote(NAME, "2")
    versions = tracking.list_versions(NAME)
    assert [v.champion for v in versions] == [False, True]
    np.testing.assert_allclose(ImportanceScorer.load(f"models:/{NAME}@champion").score(t), scorers[1].score(t))
    tracking.promote(NAME, 1, alias="staging")
    assert [v.aliases for v in tracking.list_versions(NAME)] == [("staging",), ("champion",)]


@pytest.mark.parametrize(
    ("uri", "message"),
    [
        (f"models:/{NAME}/9", r"has no version 9 \(versions: 1, 2\)"),
        ("models:/nope/1", rf"no registered model 'nope' .*\(registered: {NAME}"),
        (f"models:/{NAME}@gold", r"has no alias @gold \(aliases: "),
        (f"models:/{NAME}/one", r"version must be a number"),
        ("models:/", r"not a model URI"),
        ("runs:/0123456789abcdef/model", r"no run '0123456789abcdef'"),
        ("s3://bucket/model", r"not an MLflow model URI"),
    ],
    ids=["version", "name", "alias", "bad-version", "no-name", "run", "scheme"],
)
def test_unknown_models_are_scorer_errors(registered: tuple, uri: str, message: str) -> None:
    with pytest.raises(ScorerError, match=message):
        tracking.load_scorer(uri)


def test_promote_unknown_version_or_bad_alias(registered: tuple) -> None:
    with pytest.raises(ScorerError, match=r"has no version 7 \(versions: 1, 2\)"):
        tracking.promote(NAME, 7)
    with pytest.raises(ScorerError, match=r"no registered model 'ghost'"):
        tracking.promote("ghost", 1)
    with pytest.raises(ScorerError, match=r"alias must be letters"):
        tracking.promote(NAME, 1, alias="latest")
    with pytest.raises(ScorerError, match=r"no registered model 'ghost'"):
        tracking.list_versions("ghost")


def test_log_bench_metrics_reaches_the_version_run(registered: tuple, tmp_path: Path, store: Path) -> None:
    plot = tmp_path / "recall.png"
    plot.write_bytes(b"\x89PNG\r\n\x1a\n")
    run_id = tracking.log_bench_metrics(f"models:/{NAME}/1", {"recall_q_25": 0.91, "recall_a_25": 0.42}, [plot])
    assert run_id == registered[0].run_id
    first = tracking.list_versions(NAME)[0]
    assert first.metrics["recall_q_25"] == pytest.approx(0.91)
    assert first.metrics["recall_a_25"] == pytest.approx(0.42)
    assert (store / "mlartifacts" / "salience" / run_id / "artifacts" / "bench" / "recall.png").exists()
    assert tracking.resolve_run_id(f"runs:/{run_id}/model") == run_id


def test_pyfunc_from_the_registry_compacts(registered: tuple, transcripts: list) -> None:
    import mlflow.pyfunc
    import pandas as pd

    model = mlflow.pyfunc.load_model(f"models:/{NAME}/2")
    messages = transcripts[0].to_openai()
    out = model.predict(pd.DataFrame({"messages": [json.dumps(messages)], "budget": [900]}))
    assert out["tokens"][0] <= 900
    assert len(json.loads(out["messages"][0])) < len(messages)


# --------------------------------------------------------------------------
# Bad input and broken stores
# --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"metrics": {"recall@10%": 0.5}}, r"metric name 'recall@10%' is not valid"),
        ({"metrics": {"recall": "high"}}, r"metric 'recall' must be a number \(got 'high'"),
        ({"params": {"bad key!": 1}}, r"param name 'bad key!' is not valid"),
        ({"artifacts": ["/nonexistent/plot.png"]}, r"artifact /nonexistent/plot.png does not exist"),
        ({"name": "bad/name?"}, r"registered model name 'bad/name\?' is not valid"),
    ],
    ids=["metric-name", "metric-value", "param-name", "artifact", "model-name"],
)
def test_bad_run_contents_are_tracking_errors(store: Path, scorers: tuple, kwargs: dict, message: str) -> None:
    call = {"name": "salience-bad", "params": {}, "metrics": {}, **kwargs}
    with pytest.raises(TrackingError, match=message):
        tracking.log_training_run(scorers[0], **call)


@pytest.mark.parametrize("kind", ["training", "tuning"])
def test_a_run_that_fails_midway_is_marked_failed(store: Path, scorers: tuple, tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch, kind: str) -> None:
    from mlflow.exceptions import MlflowException
    from mlflow.tracking import MlflowClient

    def broken(self: object, run_id: str, *args: object, **kwargs: object) -> None:
        raise MlflowException(f"disk full while logging to {run_id}")

    experiment = f"salience-broken-{kind}"
    monkeypatch.setattr(MlflowClient, "log_artifact", broken)
    profile = tmp_path / "profile.json"
    profile.write_text("{}")
    with pytest.raises(TrackingError, match=f"logging the {kind} run.*disk full"):
        if kind == "training":
            tracking.log_training_run(scorers[0], name="salience-broken", params={"a": 1}, metrics={"m": 0.5},
                                      model_path=scorers[0].save(tmp_path / "s.salience"), experiment=experiment)
        else:
            tracking.log_tuning_run(profile, params={"a": 1}, metrics={"m": 0.5}, experiment=experiment)
    monkeypatch.undo()
    client = MlflowClient()
    runs = client.search_runs([client.get_experiment_by_name(experiment).experiment_id])
    assert [r.info.status for r in runs] == ["FAILED"]
    assert runs[0].data.params["a"] == "1" and runs[0].data.metrics["m"] == 0.5


def test_unfitted_scorer_is_refused(store: Path) -> None:
    with pytest.raises(NotFittedError, match="not fitted yet"):
        tracking.log_training_run(ImportanceScorer(), name=NAME, params={}, metrics={})


def test_unreachable_server_is_a_quick_tracking_error(monkeypatch: pytest.MonkeyPatch, scorers: tuple) -> None:
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "http://127.0.0.1:9")
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "0")
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_TIMEOUT", "2")
    start = time.perf_counter()
    with pytest.raises(TrackingError, match=r"cannot reach the MLflow tracking server at http://127.0.0.1:9"):
        tracking.log_training_run(scorers[0], name=NAME, params={}, metrics={"recall_q_10": 0.5})
    with pytest.raises(TrackingError, match=r"cannot reach"):
        tracking.list_versions()
    with pytest.raises(TrackingError, match=r"cannot reach"):
        ImportanceScorer.load(f"models:/{NAME}/1")
    assert time.perf_counter() - start < 10


def test_unusable_home_is_a_tracking_error(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, scorers: tuple) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    monkeypatch.delenv("MLFLOW_REGISTRY_URI", raising=False)
    monkeypatch.setenv("SALIENCE_HOME", str(blocker / "home"))
    with pytest.raises(TrackingError, match=r"cannot create the salience home folder .*a-file/home"):
        tracking.log_training_run(scorers[0], name=NAME, params={}, metrics={})


def test_broken_database_is_a_one_line_tracking_error(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    db = tmp_path / "mlflow.db"
    db.write_bytes(b"this is not a SQLite database" * 100)
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{db}")
    with pytest.raises(TrackingError, match=r"MLflow tracking at sqlite:///.*failed \(") as info:
        tracking.list_versions()
    assert "\n" not in str(info.value)


# --------------------------------------------------------------------------
# salience versions / salience promote
# --------------------------------------------------------------------------


def _one_error_line(err: str) -> str:
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, err
    assert lines[0].startswith("salience: error: "), err
    return lines[0]


def test_cli_versions_table_and_json(registered: tuple, capsys: pytest.CaptureFixture[str]) -> None:
    from salience.cli import main

    tracking.promote(NAME, 2)
    tracking.log_bench_metrics(f"models:/{NAME}/2", {"recall_q_10_bm25": 0.3})  # a baseline beside the scorer
    assert main(["versions"]) == 0
    out = capsys.readouterr().out
    assert "recall_q_10" in out and "cv_auc" in out and "fit_seconds" not in out and "bm25" not in out
    rows = [line for line in out.splitlines() if NAME in line]
    assert len(rows) == 2
    assert "★" in rows[1] and "@champion" in rows[1] and "★" not in rows[0]
    assert "0.700" in rows[1]
    assert main(["versions", "--name", NAME, "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert [(d["version"], d["aliases"]) for d in data] == [(1, data[0]["aliases"]), (2, ["champion"])]
    assert data[1]["metrics"]["recall_q_10"] == pytest.approx(0.7)
    assert data[1]["metrics"]["recall_q_10_bm25"] == pytest.approx(0.3)
    assert main(["versions", "--metrics", "*bm25"]) == 0
    out = capsys.readouterr().out
    assert "recall_q_10_bm25" in out and "0.300" in out and "cv_auc" not in out


def test_cli_promote(registered: tuple, capsys: pytest.CaptureFixture[str]) -> None:
    from salience.cli import main

    tracking.promote(NAME, 2)
    assert main(["promote", NAME, "1"]) == 0
    assert capsys.readouterr().out.strip() == (
        f"{NAME} version 1 is now @champion (was version 2); models:/{NAME}@champion loads it")
    assert [v.champion for v in tracking.list_versions(NAME)] == [True, False]
    assert main(["promote", NAME, "v2", "--alias", "champion"]) == 0
    capsys.readouterr()


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["promote", NAME, "9"], r"has no version 9 \(versions: 1, 2\)"),
        (["promote", "ghost", "1"], r"no registered model 'ghost'"),
        (["versions", "--name", "ghost"], r"no registered model 'ghost'"),
    ],
    ids=["version", "promote-name", "versions-name"],
)
def test_cli_unknown_name_or_version_exits_2(registered: tuple, capsys: pytest.CaptureFixture[str], argv: list,
                                             message: str) -> None:
    from salience.cli import main

    assert main(argv) == 2
    assert re.search(message, _one_error_line(capsys.readouterr().err))


def test_cli_promote_bad_version_argument(capsys: pytest.CaptureFixture[str]) -> None:
    from salience.cli import main

    assert main(["promote", NAME, "first"]) == 2
    assert "expected a version number like 3 (got 'first')" in capsys.readouterr().err


def test_cli_versions_with_no_versions_says_so(monkeypatch: pytest.MonkeyPatch,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    from salience.cli import main

    monkeypatch.setattr(tracking, "list_versions", lambda name=None: [])  # an empty store, without creating one
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "sqlite:////somewhere/mlflow.db")
    assert main(["versions"]) == 0
    assert capsys.readouterr().out.strip() == (
        "no registered scorer versions in sqlite:////somewhere/mlflow.db; "
        "`salience train PATH... --out FILE` registers one")
