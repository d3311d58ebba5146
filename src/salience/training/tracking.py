"""Experiment tracking and the model registry, with MLflow (the only module that imports it).

MLflow is imported lazily, inside the functions: ``import salience.training.tracking``
stays cheap.

Where runs go
-------------
:func:`tracking_uri`: ``MLFLOW_TRACKING_URI`` when set (a tracking server, a database,
Databricks...), else an embedded SQLite store in the salience home folder, which is
``SALIENCE_HOME`` or ``./.salience`` in the current directory (created on first use)::

    .salience/
      mlflow.db                      runs, params, metrics, tags, registered models (SQLite)
      mlartifacts/<experiment>/<run id>/artifacts/
        model/                       the registered MLflow model (pyfunc, see below)
          MLmodel, python_model.py, requirements.txt, ...
          artifacts/scorer/          the ImportanceScorer in MLflow's scikit-learn flavor
        scorer/<file>.salience       the scorer file `salience train --out` wrote
        <plots and reports>          PNG and JSON artifacts of training and benchmarks

For any SQLite store (the default one or a ``sqlite:///`` URI you set), artifacts of
experiments salience creates live in ``mlartifacts`` beside the database file, never
in ``./mlruns``. :func:`registry_uri` is ``MLFLOW_REGISTRY_URI`` when set, else the
tracking URI. ``mlflow ui --backend-store-uri sqlite:///.salience/mlflow.db`` browses it.

What a training run holds
-------------------------
:func:`log_training_run` logs params (with the library version, the git commit of the
current directory when there is one, the training data fingerprint, the default model's kind
and calibration as fitted), metrics, artifacts and the scorer file, then registers a new
version of the model ``name``. The registered model is an MLflow ``pyfunc`` model,
:class:`salience.training.pyfunc.CompactorModel`
(``mlflow models serve -m models:/NAME@champion --env-manager local`` serves the
compactor, ``mlflow.pyfunc.spark_udf`` scores transcript logs), with the scikit-learn
flavoured scorer inside it, which :func:`load_scorer` (and
``ImportanceScorer.load("models:/NAME/VERSION")``) returns.

The scorer inside is stored with MLflow's scikit-learn flavor in the ``cloudpickle``
format, like the pickle-based scorer file itself: load models only from stores you
trust. (MLflow's ``skops`` format took about 5 s to save and 1.5 s to load a boosted
scorer here, and its allow-list of types is read from the model folder itself, so it
would add cost without safety.)

Spark: ``mlflow.pyfunc.spark_udf(spark, "models:/NAME@champion", result_type="ids string,
scores string", params={"mode": "score"}, env_manager="local")`` scores a column of
transcripts (see :mod:`salience.training.pyfunc` for the columns).

Errors: a store that cannot be reached or used raises :class:`~salience.errors.TrackingError`
with a one-line reason; unknown names, versions, aliases and runs raise
:class:`~salience.errors.ScorerError` listing what exists.

Network and noise: salience never lets MLflow send usage telemetry
(``MLFLOW_DISABLE_TELEMETRY`` defaults to true while MLflow is imported and used
here; set it to ``false`` yourself to opt in), hides MLflow's download progress bars
and info logs during its calls, and probes an ``http(s)`` tracking server once (5 s at
most) before using it so that a server that is down fails fast instead of after
MLflow's retries.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import subprocess
import tempfile
import time
import warnings
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from salience._version import __version__
from salience.errors import NotFittedError, SalienceError, ScorerError, TrackingError

if TYPE_CHECKING:
    from mlflow import MlflowClient

    from salience.scorer.model import ImportanceScorer

__all__ = [
    "DEFAULT_ALIAS",
    "DEFAULT_EXPERIMENT",
    "TrainingRecord",
    "VersionInfo",
    "home",
    "list_versions",
    "load_scorer",
    "log_bench_metrics",
    "log_training_run",
    "log_tuning_run",
    "promote",
    "read_scorer_model",
    "registry_uri",
    "reported_metric",
    "resolve_run_id",
    "save_compactor_model",
    "tracking_uri",
]

DEFAULT_EXPERIMENT = "salience"
DEFAULT_ALIAS = "champion"
#: Where the pyfunc model sits in a run's artifacts, and the sklearn scorer inside it.
MODEL_PATH = "model"
SCORER_ARTIFACT = "scorer"
_MAX_PARAM = 6000
_NAME_RE = re.compile(r"^[\w\-./ :]+$")
_ALIAS_RE = re.compile(r"^[A-Za-z0-9_\-]+$")
_URI_RE = re.compile(r"^models:/(?P<name>[^/@]+?)(?:/(?P<version>[^/]+)|@(?P<alias>[^/]+))$")
_ENV_DEFAULTS = {"MLFLOW_DISABLE_TELEMETRY": "true", "MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR": "false"}
_LOG_LEVELS = {"mlflow": logging.ERROR, "alembic": logging.WARNING}


# --------------------------------------------------------------------------
# Records
# --------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class TrainingRecord:
    """What :func:`log_training_run` logged: the run and the new registered version."""

    run_id: str
    model_name: str
    version: int
    model_uri: str
    experiment_id: str = ""
    tracking_uri: str = ""


@dataclass(frozen=True, slots=True)
class VersionInfo:
    """One registered version of a scorer, with its run's recall and cross-validation metrics."""

    name: str
    version: int
    run_id: str | None
    created: datetime | None
    aliases: tuple[str, ...] = ()
    metrics: Mapping[str, float] = field(default_factory=lambda: MappingProxyType({}))

    @property
    def uri(self) -> str:
        """``models:/NAME/VERSION``."""
        return f"models:/{self.name}/{self.version}"

    @property
    def champion(self) -> bool:
        """True when the version carries the ``champion`` alias."""
        return DEFAULT_ALIAS in self.aliases

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return {
            "name": self.name,
            "version": self.version,
            "uri": self.uri,
            "run_id": self.run_id,
            "created": self.created.isoformat() if self.created else None,
            "aliases": list(self.aliases),
            "metrics": dict(self.metrics),
        }


def reported_metric(key: str) -> bool:
    """Whether a run metric belongs in :attr:`VersionInfo.metrics`: recall figures, cross-validation
    and held-out test figures.

    >>> keys = ("recall_query_10pct", "bench.recall@5", "cv_prior_roc_auc", "auc_cv", "test_hindsight_auc", "n_query")
    >>> [k for k in keys if reported_metric(k)]
    ['recall_query_10pct', 'bench.recall@5', 'cv_prior_roc_auc', 'auc_cv', 'test_hindsight_auc']
    """
    k = key.lower()
    return "recall" in k or k.startswith(("cv", "test_")) or "_cv" in k or ".cv" in k


# --------------------------------------------------------------------------
# Store resolution
# --------------------------------------------------------------------------


def home() -> Path:
    """The salience home folder: ``SALIENCE_HOME`` or ``./.salience`` (created)."""
    path = Path(os.environ.get("SALIENCE_HOME") or Path.cwd() / ".salience").expanduser().absolute()
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise TrackingError(f"cannot create the salience home folder {path} ({exc.strerror or exc}); "
                            "set SALIENCE_HOME or MLFLOW_TRACKING_URI") from None
    return path


def tracking_uri() -> str:
    """``MLFLOW_TRACKING_URI`` if set, else ``sqlite:///<home>/mlflow.db`` (see the module doc)."""
    uri = os.environ.get("MLFLOW_TRACKING_URI", "").strip()
    if uri:
        return uri
    return f"sqlite:///{(home() / 'mlflow.db').as_posix()}"


def registry_uri() -> str:
    """``MLFLOW_REGISTRY_URI`` if set, else :func:`tracking_uri`."""
    return os.environ.get("MLFLOW_REGISTRY_URI", "").strip() or tracking_uri()


def _sqlite_path(uri: str) -> Path | None:
    if not uri.startswith("sqlite:///"):
        return None
    rest = uri[len("sqlite:///"):].split("?", 1)[0]
    if not rest or rest == ":memory:":
        return None
    return Path(rest).absolute()


# --------------------------------------------------------------------------
# MLflow plumbing
# --------------------------------------------------------------------------


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    """Telemetry off, progress bars hidden, MLflow's logs and warnings muted: for this block.

    Imports MLflow (with telemetry off, so no client is started) if it is not yet imported.
    """
    saved_env = {k: os.environ.get(k) for k in _ENV_DEFAULTS}
    for key, value in _ENV_DEFAULTS.items():
        os.environ.setdefault(key, value)
    saved_levels: dict[str, int] = {}
    try:
        try:
            import mlflow  # noqa: F401  (configures its loggers on first import: quiet them after)
        except ImportError as exc:  # pragma: no cover - mlflow is a dependency
            raise TrackingError(f"MLflow is not available ({_reason(exc)}); pip install mlflow") from None
        for name, level in _LOG_LEVELS.items():
            logger = logging.getLogger(name)
            saved_levels[name] = logger.level
            if logger.getEffectiveLevel() < level:
                logger.setLevel(level)
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", module=r"mlflow(\.|$)")
            warnings.filterwarnings("ignore", message=r".*(type hint|input example|pickle|cloudpickle).*")
            yield
    finally:
        for key, old in saved_env.items():
            if old is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = old
        for name, level in saved_levels.items():
            logging.getLogger(name).setLevel(level)


def _reason(exc: BaseException) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    if len(text) > 300:
        text = text[:297] + "..."
    name = type(exc).__name__
    return text if name in ("MlflowException", "RestException") else f"{name}: {text}"


def _not_found(exc: BaseException) -> bool:
    return getattr(exc, "error_code", None) == "RESOURCE_DOES_NOT_EXIST"


@contextlib.contextmanager
def _guard(action: str, uri: str) -> Iterator[None]:
    """Turn anything MLflow raises into a one-line :class:`TrackingError` (salience errors pass)."""
    try:
        with _quiet():
            yield
    except SalienceError:
        raise
    except Exception as exc:
        raise TrackingError(f"MLflow tracking at {uri}: {action} failed ({_reason(exc)})") from exc


def _probe(uri: str) -> None:
    """Fail fast when an http(s) tracking server does not answer at all."""
    if not uri.startswith(("http://", "https://")):
        return
    import requests

    try:
        timeout = min(5.0, float(os.environ.get("MLFLOW_HTTP_REQUEST_TIMEOUT") or 5))
    except ValueError:
        timeout = 5.0
    try:
        requests.get(uri.rstrip("/") + "/health", timeout=timeout)
    except requests.RequestException as exc:
        raise TrackingError(f"cannot reach the MLflow tracking server at {uri} ({type(exc).__name__}); "
                            "start it, or unset MLFLOW_TRACKING_URI to use the local SQLite store") from None


def _client() -> tuple[MlflowClient, str]:
    """An MlflowClient on :func:`tracking_uri` / :func:`registry_uri` (no global MLflow state is touched)."""
    uri = tracking_uri()
    reg = registry_uri()
    for u in dict.fromkeys((uri, reg)):
        db = _sqlite_path(u)
        if db is not None:
            try:
                db.parent.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise TrackingError(f"cannot create {db.parent} for the MLflow store {u} "
                                    f"({exc.strerror or exc})") from None
        _probe(u)
    with _guard("opening the store", uri):
        from mlflow import MlflowClient

        return MlflowClient(tracking_uri=uri, registry_uri=reg), uri


def _experiment_id(client: MlflowClient, name: str, uri: str) -> str:
    exp = client.get_experiment_by_name(name)
    if exp is not None:
        if exp.lifecycle_stage == "deleted":
            client.restore_experiment(exp.experiment_id)
        return str(exp.experiment_id)
    location = None
    db = _sqlite_path(uri)
    if db is not None:
        safe = re.sub(r"[^\w.\-]+", "_", name).strip("._") or "experiment"
        location = (db.parent / "mlartifacts" / safe).as_uri()
    try:
        return str(client.create_experiment(name, artifact_location=location))
    except Exception as exc:  # created meanwhile by another process
        exp = client.get_experiment_by_name(name)
        if exp is None:
            raise exc from None
        return str(exp.experiment_id)


def _git_commit() -> str | None:
    try:
        done = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, timeout=5, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    commit = done.stdout.strip()
    return commit if done.returncode == 0 and re.fullmatch(r"[0-9a-f]{7,64}", commit) else None


def _check_name(kind: str, key: str) -> str:
    if not isinstance(key, str) or not key or not _NAME_RE.match(key) or len(key) > 250:
        raise TrackingError(f"{kind} name {key!r} is not valid for MLflow (letters, digits, _ - . / : and spaces, "
                            "at most 250 characters)")
    return key


def _metric_value(key: str, value: Any) -> float:
    if isinstance(value, bool):
        return float(value)
    try:
        return float(value)
    except (TypeError, ValueError):
        raise TrackingError(f"metric {key!r} must be a number (got {value!r} that is a "
                            f"{type(value).__name__})") from None


def _param_value(value: Any) -> str:
    if isinstance(value, str):
        text = value
    elif isinstance(value, (list, tuple)):
        text = ",".join(map(str, value))
    else:
        text = str(value)
    return text if len(text) <= _MAX_PARAM else text[: _MAX_PARAM - 3] + "..."


def _log_metrics(client: MlflowClient, run_id: str, metrics: Mapping[str, Any]) -> None:
    from mlflow.entities import Metric

    now = int(time.time() * 1000)
    batch = [Metric(_check_name("metric", k), _metric_value(k, v), now, 0) for k, v in metrics.items()]
    for i in range(0, len(batch), 900):
        client.log_batch(run_id, metrics=batch[i : i + 900])


def _existing_files(paths: Sequence[str | os.PathLike[str]], what: str) -> list[Path]:
    files = [Path(p) for p in paths]
    for p in files:
        if not p.exists():
            raise TrackingError(f"{what} {p} does not exist")
    return files


# --------------------------------------------------------------------------
# Models
# --------------------------------------------------------------------------


def _check_scorer(scorer: Any) -> None:
    from salience.scorer.model import ImportanceScorer

    if not isinstance(scorer, ImportanceScorer):
        raise ScorerError(f"scorer must be an ImportanceScorer (got a {type(scorer).__name__})")
    if not hasattr(scorer, "prior_model_"):
        raise NotFittedError("This ImportanceScorer instance is not fitted yet. Call 'fit' with appropriate "
                             "arguments before logging it.")


def _requirements() -> list[str]:
    import mlflow
    import pandas
    import sklearn

    return [f"salience=={__version__}", f"mlflow=={mlflow.__version__}", f"scikit-learn=={sklearn.__version__}",
            f"pandas=={pandas.__version__}"]


_ENTRY = """\
# Written by salience: the code MLflow runs to build the model (MLflow "models from code").
import mlflow.models

from salience.training.pyfunc import CompactorModel

mlflow.models.set_model(CompactorModel())
"""


def save_compactor_model(
    scorer: ImportanceScorer,
    path: str | os.PathLike[str],
    *,
    compactor: Mapping[str, Any] | None = None,
) -> Path:
    """Write an MLflow pyfunc model of the Compactor with ``scorer`` inside it, at ``path`` (a new folder).

    The scorer is saved with MLflow's scikit-learn flavor as the model's ``scorer``
    artifact; ``compactor`` holds :class:`~salience.selector.compactor.Compactor`
    parameters (JSON-ready values; default ``{"on_over_budget": "keep_pins"}``). The
    model has a signature: input columns ``messages``, ``budget`` and ``query``,
    params ``mode``, ``budget`` and ``query`` (see :mod:`salience.training.pyfunc`).
    ``mlflow.pyfunc.load_model(path)`` loads it; ``mlflow models serve -m PATH
    --env-manager local`` serves it.
    """
    _check_scorer(scorer)
    path = Path(path)
    if path.exists():
        raise TrackingError(f"cannot save the model to {path}: it already exists")
    config = {"on_over_budget": "keep_pins", **dict(compactor or {})}
    with _guard("saving the model", str(path)):
        import mlflow.pyfunc
        import mlflow.sklearn
        from mlflow.models import ModelSignature
        from mlflow.types.schema import AnyType, ColSpec, ParamSchema, ParamSpec, Schema

        clean = scorer.__class__.__new__(scorer.__class__)
        clean.__dict__.update({k: v for k, v in scorer.__dict__.items() if k != "_rows_cache"})
        signature = ModelSignature(
            inputs=Schema([
                ColSpec(AnyType(), "messages"),
                ColSpec(AnyType(), "budget", required=False),
                ColSpec(AnyType(), "query", required=False),
            ]),
            params=ParamSchema([
                ParamSpec("mode", "string", "compact"),
                ParamSpec("budget", "long", int(config.get("budget", 8000))),
                ParamSpec("query", "string", ""),
            ]),
        )
        requirements = _requirements()
        metadata = {"salience_version": __version__, **_scorer_metadata(scorer)}
        with tempfile.TemporaryDirectory(prefix="salience-model-") as tmp:
            sk_dir = Path(tmp) / SCORER_ARTIFACT
            mlflow.sklearn.save_model(clean, str(sk_dir), pip_requirements=requirements, metadata=metadata,
                                      serialization_format="cloudpickle")
            entry = Path(tmp) / "compactor_model.py"
            entry.write_text(_ENTRY, encoding="utf-8")
            mlflow.pyfunc.save_model(
                str(path),
                python_model=str(entry),
                artifacts={SCORER_ARTIFACT: str(sk_dir)},
                model_config={"compactor": config},
                signature=signature,
                pip_requirements=requirements,
                metadata=metadata,
            )
    return path


def _scorer_metadata(scorer: Any) -> dict[str, Any]:
    meta = getattr(scorer, "metadata_", {}) or {}
    keep = ("training_fingerprint", "n_transcripts", "domains", "library_version")
    return {k: meta[k] for k in keep if k in meta}


def read_scorer_model(path: str | os.PathLike[str]) -> ImportanceScorer:
    """The ImportanceScorer in a local MLflow model folder: a scikit-learn flavoured scorer, or a
    salience pyfunc model (its ``artifacts/scorer``)."""
    from salience.scorer.model import ImportanceScorer

    path = Path(path)
    if not (path / "MLmodel").exists() and (path / "artifacts" / SCORER_ARTIFACT / "MLmodel").exists():
        path = path / "artifacts" / SCORER_ARTIFACT
    mlmodel = path / "MLmodel"
    if not mlmodel.exists():
        raise ScorerError(f"{path}: not an MLflow model folder (no MLmodel file)")
    text = mlmodel.read_text(encoding="utf-8", errors="replace")
    if "sklearn:" not in text and (path / "artifacts" / SCORER_ARTIFACT).exists():
        path = path / "artifacts" / SCORER_ARTIFACT
    with _quiet():
        import mlflow.sklearn

        try:
            model = mlflow.sklearn.load_model(str(path))
        except Exception as exc:
            raise ScorerError(f"{path}: cannot load the scikit-learn scorer ({_reason(exc)})") from None
    if not isinstance(model, ImportanceScorer):
        raise ScorerError(f"{path}: the model is a {type(model).__name__}, not a salience ImportanceScorer")
    return model


# --------------------------------------------------------------------------
# Logging a training run
# --------------------------------------------------------------------------


def log_training_run(
    scorer: ImportanceScorer,
    *,
    name: str,
    params: Mapping[str, Any],
    metrics: Mapping[str, float],
    artifacts: Sequence[str | os.PathLike[str]] = (),
    model_path: str | os.PathLike[str] | None = None,
    tags: Mapping[str, str] | None = None,
    experiment: str = DEFAULT_EXPERIMENT,
    compactor: Mapping[str, Any] | None = None,
) -> TrainingRecord:
    """Log a training run and register the scorer as a new version of the model ``name``.

    Logs ``params`` plus ``salience_version``, ``git_commit`` (of the current
    directory, when it is a git checkout), ``training_fingerprint``,
    ``n_transcripts`` and ``domains`` (from ``scorer.metadata_``); ``metrics``; every
    file of ``artifacts`` at the root of the run's artifacts; ``model_path`` (the
    file :meth:`ImportanceScorer.save` wrote) under ``scorer/``; and the model (see
    :func:`save_compactor_model`) under ``model/``, registered as the next version of
    ``name`` (created when new).

    Raises:
        TrackingError: the store cannot be reached or used, a metric or param name
            is not valid for MLflow, an artifact is missing (one line; the run, if
            started, is marked FAILED).
        ScorerError / NotFittedError: ``scorer`` is not a fitted ImportanceScorer.
    """
    _check_scorer(scorer)
    _check_name("registered model", name)
    files = _existing_files(artifacts, "artifact")
    scorer_file = _existing_files([model_path], "scorer file")[0] if model_path is not None else None
    meta = getattr(scorer, "metadata_", {}) or {}
    keys = ("training_fingerprint", "n_transcripts", "domains", "kind", "calibration")  # as fitted
    all_params, commit = _run_params(params, metrics, {key: meta[key] for key in keys if key in meta})
    run_tags = {"salience.model_name": name, "salience.version": __version__, **dict(tags or {})}
    if commit:
        run_tags.setdefault("mlflow.source.git.commit", commit)

    client, uri = _client()
    with _logged_run(client, uri, "logging the training run", experiment, run_tags, all_params, metrics) as run:
        run_id, exp_id = run.info.run_id, run.info.experiment_id
        for f in files:
            if f.is_dir():
                client.log_artifacts(run_id, str(f), f.name)
            else:
                client.log_artifact(run_id, str(f))
        if scorer_file is not None:
            client.log_artifact(run_id, str(scorer_file), "scorer")
        with tempfile.TemporaryDirectory(prefix="salience-run-") as tmp:
            model_dir = save_compactor_model(scorer, Path(tmp) / MODEL_PATH, compactor=compactor)
            client.log_artifacts(run_id, str(model_dir), MODEL_PATH)
        version = _register(client, name, f"{run.info.artifact_uri.rstrip('/')}/{MODEL_PATH}", run_id)
    return TrainingRecord(run_id=run_id, model_name=name, version=version, model_uri=f"models:/{name}/{version}",
                          experiment_id=exp_id, tracking_uri=uri)


def _run_params(params: Mapping[str, Any], metrics: Mapping[str, float],
                defaults: Mapping[str, Any] | None = None) -> tuple[dict[str, Any], str | None]:
    """A run's params: ``params``, then ``salience_version``, ``git_commit`` and ``defaults``
    where not given; every name checked, and the metrics' names and values. Returns the
    params and the git commit (None outside a checkout)."""
    all_params: dict[str, Any] = dict(params)
    all_params.setdefault("salience_version", __version__)
    commit = _git_commit()
    if commit:
        all_params.setdefault("git_commit", commit)
    for key, value in (defaults or {}).items():
        all_params.setdefault(key, value)
    for key in all_params:
        _check_name("param", key)
    for key in metrics:
        _check_name("metric", key)
        _metric_value(key, metrics[key])
    return all_params, commit


@contextlib.contextmanager
def _logged_run(client: MlflowClient, uri: str, what: str, experiment: str, tags: Mapping[str, Any],
                params: Mapping[str, Any], metrics: Mapping[str, float]) -> Iterator[Any]:
    """A new run of ``experiment`` with its tags, params and metrics logged, for the block
    to log the rest to. MLflow's errors, here and in the block, become one-line
    TrackingErrors naming ``what`` (:func:`_guard`); the run ends FINISHED, or FAILED when
    anything raised after it started."""
    run_id: str | None = None
    try:
        with _guard(what, uri):
            from mlflow.entities import Param

            exp_id = _experiment_id(client, experiment, uri)
            run = client.create_run(exp_id, tags={k: str(v) for k, v in tags.items()})
            run_id = run.info.run_id
            plist = [Param(k, _param_value(v)) for k, v in params.items()]
            for i in range(0, len(plist), 90):
                client.log_batch(run_id, params=plist[i : i + 90])
            _log_metrics(client, run_id, metrics)
            yield run
            client.set_terminated(run_id, "FINISHED")
    except BaseException:
        if run_id is not None:
            with contextlib.suppress(Exception), _quiet():
                client.set_terminated(run_id, "FAILED")
        raise


def _register(client: MlflowClient, name: str, source: str, run_id: str) -> int:
    try:
        client.get_registered_model(name)
    except Exception as exc:
        if not _not_found(exc):
            raise
        try:
            client.create_registered_model(name, description="salience importance scorer (pyfunc: the Compactor)")
        except Exception as again:  # registered meanwhile by another process
            if getattr(again, "error_code", None) != "RESOURCE_ALREADY_EXISTS":
                raise
    mv = client.create_model_version(name, source=source, run_id=run_id,
                                     tags={"salience.version": __version__})
    return int(mv.version)


# --------------------------------------------------------------------------
# Reading the registry
# --------------------------------------------------------------------------


def _quote(name: str) -> str:
    return f'"{name}"' if "'" in name else f"'{name}'"


def _registered_names(client: MlflowClient) -> list[str]:
    names: list[str] = []
    token = None
    while True:
        page = client.search_registered_models(max_results=1000, page_token=token)
        names.extend(rm.name for rm in page)
        token = page.token
        if not token:
            return sorted(names)


def _registered(client: MlflowClient, name: str, uri: str) -> Any:
    """The RegisteredModel ``name``, or a ScorerError listing the registered names."""
    try:
        return client.get_registered_model(name)
    except Exception as exc:
        if not _not_found(exc):
            raise
    known = _registered_names(client)
    listing = ", ".join(known) if known else "none"
    raise ScorerError(f"no registered model {name!r} in {uri} (registered: {listing})")


def _versions(client: MlflowClient, name: str) -> list[Any]:
    found = list(client.search_model_versions(f"name={_quote(name)}"))
    return sorted(found, key=lambda mv: int(mv.version))


def _aliases(rm: Any) -> dict[str, int]:
    raw = getattr(rm, "aliases", None) or {}
    if isinstance(raw, Mapping):
        return {str(k): int(v) for k, v in raw.items()}
    return {str(a.alias): int(a.version) for a in raw}


def _resolve(client: MlflowClient, uri: str, store: str) -> tuple[str, int]:
    """``(name, version)`` of a ``models:/`` URI; ScorerError naming what exists when unknown."""
    m = _URI_RE.match(uri)
    if not m:
        raise ScorerError(f"not a model URI: {uri!r} (expected models:/NAME/VERSION, models:/NAME@ALIAS or "
                          "models:/NAME/latest)")
    name = m.group("name")
    rm = _registered(client, name, store)
    versions = [int(mv.version) for mv in _versions(client, name)]
    aliases = _aliases(rm)
    if m.group("alias") is not None:
        alias = m.group("alias")
        if alias not in aliases:
            have = ", ".join(f"@{a} -> {v}" for a, v in sorted(aliases.items())) or "none"
            raise ScorerError(f"registered model {name!r} has no alias @{alias} (aliases: {have})")
        return name, aliases[alias]
    text = m.group("version")
    if text.lower() == "latest":
        if not versions:
            raise ScorerError(f"registered model {name!r} has no versions")
        return name, max(versions)
    try:
        version = int(text.lstrip("vV"))
    except ValueError:
        raise ScorerError(f"model URI {uri!r}: version must be a number, 'latest' or @ALIAS (got {text!r})") from None
    if version not in versions:
        have = ", ".join(map(str, versions)) or "none"
        raise ScorerError(f"registered model {name!r} has no version {version} (versions: {have})")
    return name, version


def _run_uri(uri: str) -> tuple[str, str]:
    rest = uri[len("runs:/"):].strip("/")
    run_id, _, path = rest.partition("/")
    if not run_id:
        raise ScorerError(f"not a run URI: {uri!r} (expected runs:/RUN_ID/PATH)")
    return run_id, path or MODEL_PATH


def _check_run(client: MlflowClient, run_id: str, store: str) -> Any:
    try:
        return client.get_run(run_id)
    except Exception as exc:
        if _not_found(exc):
            raise ScorerError(f"no run {run_id!r} in {store}") from None
        raise


def load_scorer(uri: str) -> ImportanceScorer:
    """The ImportanceScorer of ``models:/NAME/VERSION``, ``models:/NAME@ALIAS``,
    ``models:/NAME/latest`` or ``runs:/RUN_ID[/PATH]`` (PATH defaults to ``model``).

    Raises:
        ScorerError: unknown name, version, alias or run (the message lists what exists),
            or a model that holds no salience scorer.
        TrackingError: the store cannot be reached or used.
    """
    text = os.fspath(uri)
    if not text.startswith(("models:/", "runs:/")):
        raise ScorerError(f"not an MLflow model URI: {text!r} (expected models:/... or runs:/...)")
    client, store = _client()
    with _guard(f"loading {text}", store):
        import mlflow.artifacts

        if text.startswith("models:/"):
            name, version = _resolve(client, text, store)
            source = client.get_model_version_download_uri(name, str(version))
        else:
            run_id, path = _run_uri(text)
            _check_run(client, run_id, store)
            source = f"runs:/{run_id}/{path}"
        with tempfile.TemporaryDirectory(prefix="salience-load-") as tmp:
            try:
                local = mlflow.artifacts.download_artifacts(artifact_uri=source, dst_path=tmp, tracking_uri=store,
                                                            registry_uri=registry_uri())
            except Exception as exc:
                if text.startswith("runs:/") or _not_found(exc):
                    raise ScorerError(f"{text}: no model there ({_reason(exc)})") from None
                raise
            return read_scorer_model(local)


def list_versions(name: str | None = None) -> list[VersionInfo]:
    """Every registered version of ``name``, or every version salience registered (tagged
    ``salience.version``) in the registry; oldest first within each name.

    Each carries its aliases and its run's recall and cross-validation metrics (see
    :func:`reported_metric`). An unknown ``name`` is a ScorerError listing the registered ones.
    """
    client, store = _client()
    with _guard("listing registered models", store):
        names = [name] if name is not None else _registered_names(client)
        out: list[VersionInfo] = []
        for n in names:
            rm = _registered(client, n, store)
            by_version: dict[int, list[str]] = {}
            for alias, v in _aliases(rm).items():
                by_version.setdefault(v, []).append(alias)
            for mv in _versions(client, n):
                if name is None and "salience.version" not in (mv.tags or {}):
                    continue  # a shared registry: list only what salience registered, unless asked by name
                metrics: dict[str, float] = {}
                if mv.run_id:
                    with contextlib.suppress(Exception):
                        run = client.get_run(mv.run_id)
                        metrics = {k: float(v) for k, v in sorted(run.data.metrics.items()) if reported_metric(k)}
                created = (datetime.fromtimestamp(mv.creation_timestamp / 1000, tz=UTC)
                           if mv.creation_timestamp else None)
                out.append(VersionInfo(
                    name=n, version=int(mv.version), run_id=mv.run_id or None, created=created,
                    aliases=tuple(sorted(by_version.get(int(mv.version), []))),
                    metrics=MappingProxyType(metrics),
                ))
        return out


def promote(name: str, version: int | str, alias: str = DEFAULT_ALIAS) -> VersionInfo:
    """Point ``alias`` (default ``champion``) of the registered model ``name`` at ``version``.

    Returns the promoted version. Unknown name or version: a ScorerError listing what exists.
    """
    if not isinstance(alias, str) or not _ALIAS_RE.match(alias) or alias.lower() == "latest" or re.fullmatch(
            r"[vV]\d+", alias):
        raise ScorerError(f"alias must be letters, digits, _ or - (not 'latest' or v<number>) (got {alias!r})")
    text = str(version).strip()
    client, store = _client()
    with _guard(f"promoting {name} version {text}", store):
        _, number = _resolve(client, f"models:/{name}/{text}", store)
        client.set_registered_model_alias(name, alias, str(number))
    for info in list_versions(name):
        if info.version == number:
            return info
    raise TrackingError(f"registered model {name!r} version {number} vanished after promotion")  # pragma: no cover


def resolve_run_id(model_uri: str) -> str:
    """The run that logged ``model_uri`` (``models:/...`` or ``runs:/RUN_ID/...``)."""
    text = os.fspath(model_uri)
    client, store = _client()
    with _guard(f"resolving {text}", store):
        if text.startswith("runs:/"):
            run_id, _ = _run_uri(text)
            _check_run(client, run_id, store)
            return run_id
        if not text.startswith("models:/"):
            raise ScorerError(f"not an MLflow model URI: {text!r} (expected models:/... or runs:/...)")
        name, version = _resolve(client, text, store)
        mv = client.get_model_version(name, str(version))
        if not mv.run_id:
            raise ScorerError(f"{text}: version {version} of {name!r} was registered without a run")
        return str(mv.run_id)


def log_bench_metrics(
    model_uri: str,
    metrics: Mapping[str, float],
    artifacts: Sequence[str | os.PathLike[str]] = (),
    *,
    artifact_path: str = "bench",
) -> str:
    """Log benchmark ``metrics`` (and ``artifacts``, under ``bench/``) to the run of ``model_uri``.

    So each registered version carries its recall figures (:func:`list_versions` shows
    them). Returns the run id. Unknown model: ScorerError; store problems: TrackingError.
    """
    for key in metrics:
        _check_name("metric", key)
        _metric_value(key, metrics[key])
    files = _existing_files(artifacts, "artifact")
    run_id = resolve_run_id(model_uri)
    client, store = _client()
    with _guard(f"logging benchmark metrics to run {run_id}", store):
        _log_metrics(client, run_id, metrics)
        for f in files:
            if f.is_dir():
                client.log_artifacts(run_id, str(f), f"{artifact_path}/{f.name}")
            else:
                client.log_artifact(run_id, str(f), artifact_path)
    return run_id


def log_tuning_run(
    profile_path: str | os.PathLike[str],
    *,
    params: Mapping[str, Any],
    metrics: Mapping[str, float],
    tags: Mapping[str, str] | None = None,
    experiment: str = "salience-tune",
) -> str:
    """Log a ``salience tune`` run: ``params`` (plus ``salience_version`` and ``git_commit``),
    ``metrics``, and the profile file at ``profile_path`` as an artifact (under ``profile/``),
    in the experiment ``experiment``. Returns the run id.

    Raises:
        TrackingError: the store cannot be reached or used, a name is not valid for
            MLflow, or the profile file is missing (one line; a started run is marked FAILED).
    """
    profile = _existing_files([profile_path], "profile file")[0]
    all_params, _ = _run_params(params, metrics)
    run_tags = {"salience.version": __version__, "salience.kind": "tune", **dict(tags or {})}
    client, uri = _client()
    with _logged_run(client, uri, "logging the tuning run", experiment, run_tags, all_params, metrics) as run:
        run_id = run.info.run_id
        client.log_artifact(run_id, str(profile), "profile")
    return run_id
