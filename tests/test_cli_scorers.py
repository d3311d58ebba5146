"""One ``--scorer`` grammar (:mod:`salience.cli.scorers`) for every command that takes a scorer.

Each of ``compact``, ``inspect``, ``bench`` and ``tune`` is run with each form: a scorer
file, a baseline name, the deprecated ``baseline:NAME``, ``default``, a registered
version (``models:/NAME/1``, ``models:/NAME@champion``, in a temporary SQLite store: slow)
and a bad value, which exits 2 with one line listing the accepted forms.
"""

from __future__ import annotations

import inspect as pyinspect
import json
import pkgutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from threadpoolctl import threadpool_limits

from conftest import SAMPLES
from salience import Query, Transcript, load_transcripts, save_transcripts
from salience.cli import main
from salience.cli.scorers import HELP_BASELINES, ScorerKind, accepted_forms, parse_scorer
from salience.errors import SalienceError
from salience.scorer.baselines import BASELINES
from salience.scorer.features import FeatureExtractor
from salience.scorer.model import ImportanceScorer

CODING = SAMPLES / "coding_agent.jsonl"
MODEL = "salience-cli-scorers"


@pytest.fixture(scope="module", autouse=True)
def _one_thread() -> Iterator[None]:
    with threadpool_limits(1):
        yield


def one_error_line(err: str) -> str:
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, err
    assert lines[0].startswith("salience: error: "), err
    return lines[0]


@pytest.fixture(scope="module")
def scorer_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A scorer written by ``ImportanceScorer.save`` (no embeddings, uncalibrated: about a second)."""
    scorer = ImportanceScorer(features=FeatureExtractor(use_embeddings=False), calibration=None)
    return scorer.fit(load_transcripts(SAMPLES)).save(tmp_path_factory.mktemp("scorer") / "s.salience")


@pytest.fixture(scope="module")
def registered(scorer_file: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """``scorer_file`` registered as version 1 of MODEL, @champion, in a fresh SQLite store."""
    from salience.training import tracking

    root = tmp_path_factory.mktemp("mlflow")
    mp = pytest.MonkeyPatch()
    mp.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{root}/mlflow.db")
    mp.delenv("MLFLOW_REGISTRY_URI", raising=False)
    record = tracking.log_training_run(ImportanceScorer.load(scorer_file), name=MODEL, params={}, metrics={},
                                       model_path=scorer_file)
    tracking.promote(MODEL, record.version, alias="champion")
    yield MODEL
    mp.undo()


@pytest.fixture(scope="module")
def messages_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One OpenAI message list (the first coding-agent sample)."""
    path = tmp_path_factory.mktemp("input") / "messages.json"
    path.write_text(json.dumps(load_transcripts(CODING)[0].to_openai()))
    return path


@pytest.fixture(scope="module")
def evidence_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Ten user turns and two queries that list evidence: what ``bench --kinds query`` measures."""
    from salience import Entry

    chat = Transcript(
        id="chat",
        entries=[Entry(id=f"e{i}", role="user", content=f"fact number {i}") for i in range(10)],
        queries=[Query("what came early?", evidence=["e1", "e2"]), Query("what came late?", evidence=["e8"])],
    )
    return save_transcripts([chat], tmp_path_factory.mktemp("bench") / "chat.jsonl")


def _argv(command: str, scorer: str, messages_file: Path, evidence_file: Path, tmp_path: Path) -> list[str]:
    if command == "compact":
        return ["compact", str(messages_file), "--budget", "50%", "--scorer", scorer, "-o", str(tmp_path / "o.json")]
    if command == "inspect":
        return ["inspect", str(messages_file), "--budget", "50%", "--scorer", scorer, "--limit", "3"]
    if command == "bench":
        return ["bench", str(evidence_file), "--scorer", scorer, "--baselines", "none", "--kinds", "query",
                "--budgets", "0.5", "--no-track"]
    assert command == "tune"
    return ["tune", str(CODING), "--domain", "coding", "--scorer", scorer, "--trials", "1", "--folds", "1",
            "--max-steps", "3", "--no-track", "--out", str(tmp_path / "p.json")]


COMMANDS = ["compact", "inspect", "bench", "tune"]
FORMS = ["file", "baseline", "deprecated-baseline", "default"]


def _spec(form: str, scorer_file: Path) -> str:
    return {"file": str(scorer_file), "baseline": "bm25", "deprecated-baseline": "baseline:bm25",
            "default": "default"}[form]


@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize("command", COMMANDS)
def test_every_command_takes_every_form(command: str, form: str, scorer_file: Path, messages_file: Path,
                                        evidence_file: Path, tmp_path: Path, capsys) -> None:
    spec = _spec(form, scorer_file)
    code = main(_argv(command, spec, messages_file, evidence_file, tmp_path))
    captured = capsys.readouterr()
    assert code == 0, captured.err
    deprecations = [line for line in captured.err.splitlines() if "deprecated" in line]
    if form == "deprecated-baseline":
        assert deprecations == ["salience: warning: --scorer baseline:bm25 is deprecated; write --scorer bm25"]
    else:
        assert deprecations == []
    if command == "tune":
        assert json.loads((tmp_path / "p.json").read_text())["scorer"] == spec


@pytest.mark.slow
@pytest.mark.parametrize("version", ["1", "@champion"], ids=["number", "alias"])
@pytest.mark.parametrize("command", COMMANDS)
def test_every_command_takes_a_registered_version(command: str, version: str, registered: str, messages_file: Path,
                                                  evidence_file: Path, tmp_path: Path, capsys) -> None:
    uri = f"models:/{registered}/{version}" if version[0] != "@" else f"models:/{registered}{version}"
    code = main(_argv(command, uri, messages_file, evidence_file, tmp_path))
    assert code == 0, capsys.readouterr().err


@pytest.mark.parametrize("bad", ["nope", "baseline:nope", "models-/x"], ids=["word", "unknown-baseline", "typo"])
@pytest.mark.parametrize("command", COMMANDS)
def test_every_command_rejects_a_bad_value_in_one_line(command: str, bad: str, messages_file: Path,
                                                       evidence_file: Path, tmp_path: Path, capsys) -> None:
    assert main(_argv(command, bad, messages_file, evidence_file, tmp_path)) == 2
    captured = capsys.readouterr()
    line = one_error_line(captured.err)
    assert f"(got {bad!r}" in line
    for form in ("a scorer file", "models:/NAME/3", "models:/NAME@champion", "bm25", "recency", "'default'"):
        assert form in line, line
    assert not (tmp_path / "p.json").exists() and not (tmp_path / "o.json").exists()


# --------------------------------------------------------------------------
# the grammar itself
# --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "kind", "name", "deprecated"),
    [
        (None, ScorerKind.DEFAULT, "default", False),
        ("default", ScorerKind.DEFAULT, "default", False),
        ("recency", ScorerKind.BASELINE, "recency", False),
        ("baseline:fusion", ScorerKind.BASELINE, "fusion", True),
        ("models:/m/3", ScorerKind.REGISTERED, "models:/m/3", False),
        ("models:/m@champion", ScorerKind.REGISTERED, "models:/m@champion", False),
        ("runs:/abc/model", ScorerKind.REGISTERED, "runs:/abc/model", False),
    ],
    ids=["none", "default", "baseline", "deprecated", "version", "alias", "run"],
)
def test_parse_scorer(text: str | None, kind: ScorerKind, name: str, deprecated: bool) -> None:
    spec = parse_scorer(text)
    assert (spec.kind, spec.name, spec.deprecated) == (kind, name, deprecated)
    assert spec.uri == (name if kind is ScorerKind.REGISTERED else None)


def test_a_file_is_a_file_and_a_folder_is_refused(scorer_file: Path, tmp_path: Path) -> None:
    assert parse_scorer(str(scorer_file)).kind is ScorerKind.FILE
    with pytest.raises(SalienceError, match=r"is a folder, not a scorer file: --scorer must be a scorer file"):
        parse_scorer(str(tmp_path))
    with pytest.raises(SalienceError, match=r"--scorer must be a scorer file, .*\(got ''\)"):
        parse_scorer("")


def test_a_baseline_name_wins_over_a_file_of_that_name(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "recency").write_text("not a scorer")
    assert parse_scorer("recency").kind is ScorerKind.BASELINE
    assert parse_scorer("./recency").kind is ScorerKind.FILE


def test_help_lists_every_baseline() -> None:
    assert list(HELP_BASELINES) == sorted(BASELINES)
    assert all(name in accepted_forms() for name in BASELINES)


@pytest.mark.parametrize("command", COMMANDS)
def test_help_shows_the_grammar(command: str, capsys) -> None:
    assert main([command, "--help"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "models:/NAME@ALIAS" in out and "bm25" in out and "baseline:NAME is a deprecated alias" in out


# --------------------------------------------------------------------------
# the package's shape
# --------------------------------------------------------------------------


def test_commands_import_helpers_from_common_not_from_the_package() -> None:
    """Only ``cli/__init__`` imports the dispatcher; no command imports the package back."""
    import ast

    import salience.cli as package

    for info in pkgutil.iter_modules(package.__path__):
        module = __import__(f"salience.cli.{info.name}", fromlist=["_"])
        imported = set()
        for node in ast.walk(ast.parse(pyinspect.getsource(module))):
            if isinstance(node, ast.ImportFrom) and node.module:
                imported.add(node.module)
            elif isinstance(node, ast.Import):
                imported.update(alias.name for alias in node.names)
        assert "salience.cli" not in imported, info.name
        assert "salience.cli.dispatch" not in imported, info.name


def test_inspect_help_prints(capsys) -> None:
    assert main(["inspect", "--help"]) == 0
    assert "25% of the transcript's tokens" in " ".join(capsys.readouterr().out.split())


def test_every_command_has_its_module() -> None:
    from salience.cli.dispatch import COMMANDS as REGISTERED

    for name, spec in REGISTERED:
        module = spec.partition(":")[0]
        assert module.startswith("salience.cli."), (name, spec)


@pytest.mark.parametrize(
    ("old", "names"),
    [
        ("salience.selector.commands", ["parse_budget", "read_input", "resolve_scorer", "restore_archive",
                                        "archive_document", "print_inspection", "run_compact", "run_inspect"]),
        ("salience.training.commands", ["add_train_parser", "run_train"]),
        ("salience.training.bench_command", ["add_bench_parser", "parse_budgets", "resolve_scorer", "run_bench"]),
        ("salience.training.tune_command", ["add_tune_parser", "resolve_tune_scorer", "run_tune"]),
        ("salience.training.registry_commands", ["add_versions_parser", "metric_columns", "print_versions"]),
        ("salience.demo", ["add_demo_parser", "run_demo"]),
    ],
    ids=["selector.commands", "training.commands", "bench_command", "tune_command", "registry_commands", "demo"],
)
def test_old_paths_still_import(old: str, names: list[str]) -> None:
    module = __import__(old, fromlist=["_"])
    for name in names:
        assert callable(getattr(module, name)), (old, name)
        assert getattr(module, name).__module__.startswith("salience.cli."), (old, name)
