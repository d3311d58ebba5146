"""The learned importance scorer.

:class:`ImportanceScorer` predicts, for each entry of a transcript, the
probability that the agent will need it: without a query, the prior that a later
step uses it; with a query (the task or question at hand), that the answer needs
it. It follows scikit-learn's conventions: a keyword-only ``__init__`` that only
stores parameters, ``fit`` that returns ``self``, fitted attributes ending in ``_``.

Training data comes in two shapes, and a transcript may have both:

* entry labels (``Entry.label``; hindsight labels from :mod:`salience.scorer.labels`
  also record *which* later steps used an entry, ``meta["used_by"]``). With
  ``used_by`` known, the scorer learns from prefix cuts: it sees the history up to
  a step, exactly as at compaction time, and learns which entries steps *after* the
  cut use. That keeps references already made visible as features without leaking
  the answer.
* queries with evidence (``Transcript.queries``): one row per (query, entry),
  labelled 1 for the query's evidence entries. These teach the query-aware score.

>>> ImportanceScorer().score  # doctest: +ELLIPSIS
<bound method ImportanceScorer.score of ImportanceScorer()>
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import time
from collections.abc import Iterable, Sequence
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from sklearn.base import BaseEstimator, clone

from salience._threads import one_thread
from salience._version import __version__
from salience.errors import NotFittedError, ParameterError, ParameterTypeError, ScorerError
from salience.scorer.estimators import conversation_estimator, default_estimator
from salience.scorer.features import BASE_FEATURES, QUERY_FEATURES, FeatureExtractor
from salience.scorer.loaders import load_uri
from salience.scorer.rows import TrainingRows, build_rows
from salience.scorer.weights import fit_weighted

if TYPE_CHECKING:
    from salience.transcript import Transcript

__all__ = ["ImportanceScorer", "TrainingRows", "build_rows", "default_scorer", "DEFAULT_MODEL_PATH"]

#: Where the scorer that ships with the package lives.
DEFAULT_MODEL_PATH = Path(__file__).resolve().parents[1] / "models" / "default.salience"
_MAGIC = "salience-scorer"
_FORMAT = 1
_HEAD_START = b'{"magic": "salience-scorer"'


def _header_line(metadata: Any, payload: bytes) -> bytes:
    """The header line :meth:`ImportanceScorer.save` writes for ``metadata`` and ``payload``
    (so that :meth:`~ImportanceScorer.load` can tell a header changed by even one byte)."""
    header = {
        "magic": _MAGIC,
        "format": _FORMAT,
        "library_version": __version__,
        "sha256": hashlib.sha256(payload).hexdigest(),
        "metadata": metadata,
    }
    return json.dumps(header, default=str).encode() + b"\n"



def _fingerprint(transcripts: Sequence[Transcript]) -> str:
    h = hashlib.sha256()
    for t in transcripts:
        h.update(t.id.encode())
        for e in t.entries:
            h.update(b"\x00")
            h.update(e.id.encode())
            h.update(e.content.encode("utf-8", "surrogatepass"))
            h.update(repr(e.label).encode())
        for q in t.queries:
            h.update(q.text.encode())
            h.update(",".join(q.evidence).encode())
    return h.hexdigest()[:16]


class ImportanceScorer(BaseEstimator):  # type: ignore[misc]
    """Predicts which entries of a transcript an agent will need.

    Parameters
    ----------
    estimator:
        A scikit-learn classifier with ``predict_proba``, cloned for each model
        fitted. ``None`` picks by the training data: a histogram gradient-boosting
        classifier where an agent acts in some transcript (:meth:`Transcript.acts
        <salience.transcript.Transcript.acts>`), and for conversations a soft vote of
        a logistic regression and shallow boosted trees, which transfers better to
        conversations it never saw (``kind_`` says which).
    features:
        A :class:`FeatureExtractor`; ``None`` means the default one.
    calibration:
        ``"auto"``, ``"isotonic"``, ``"sigmoid"`` or ``None``: calibrate the
        probabilities on out-of-fold predictions, the folds grouped by transcript.
        ``"auto"`` is isotonic for agent logs and sigmoid (Platt) for conversations,
        where isotonic's steps flatten the order the Compactor's knapsack weighs
        (``calibration_`` says which).
    cv:
        Folds for calibration and for the cross-validated metrics.
    cut_points:
        How many history cuts per transcript for hindsight-labelled data.
    random_state:
        Seed for the estimator and the splits.
    """

    def __init__(
        self,
        *,
        estimator: Any = None,
        features: FeatureExtractor | None = None,
        calibration: str | None = "auto",
        cv: int = 3,
        cut_points: int = 6,
        random_state: int | None = 0,
    ) -> None:
        self.estimator = estimator
        self.features = features
        self.calibration = calibration
        self.cv = cv
        self.cut_points = cut_points
        self.random_state = random_state

    # -- fitting -------------------------------------------------------------
    def _check_params(self) -> None:
        if self.calibration not in ("auto", "isotonic", "sigmoid", None):
            raise ParameterError(
                f"calibration must be 'auto', 'isotonic', 'sigmoid' or None (got {self.calibration!r})")
        if not isinstance(self.cv, int) or self.cv < 2:
            raise ParameterError(f"cv must be an int >= 2 (got {self.cv!r})")
        if not isinstance(self.cut_points, int) or self.cut_points < 1:
            raise ParameterError(f"cut_points must be a positive int (got {self.cut_points!r})")
        if self.estimator is not None and not hasattr(self.estimator, "predict_proba"):
            raise ParameterTypeError(
                f"estimator must be a classifier with predict_proba (got {type(self.estimator).__name__})"
            )

    def _new_estimator(self) -> Any:
        if self.estimator is not None:
            return clone(self.estimator)
        if getattr(self, "kind_", "agent") == "conversation":
            return conversation_estimator(self.random_state)
        return default_estimator(self.random_state)

    def _fit_one(self, rows: TrainingRows, prefix: str) -> tuple[Any, dict[str, float]]:
        """One model on ``rows``, calibrated on grouped out-of-fold predictions, and the
        cross-validated metrics those same predictions give (names start with ``cv_<prefix>_``).
        """
        groups = np.unique(rows.groups)
        oof = np.full(len(rows.y), np.nan)
        # OpenMP threads cost more than they give below ~100k rows (and much more on a busy machine)
        with one_thread("openmp", when=len(rows.y) < 100_000):
            return self._fit_folds(rows, groups, oof, prefix)

    def _fit_folds(
        self, rows: TrainingRows, groups: np.ndarray, oof: np.ndarray, prefix: str
    ) -> tuple[Any, dict[str, float]]:
        from sklearn.model_selection import GroupKFold

        w = rows.shares if self.kind_ == "conversation" else None  # agents: unweighted, as ever
        if len(groups) >= 2:
            for tr, te in GroupKFold(n_splits=min(self.cv, len(groups))).split(rows.X, rows.y, rows.groups):
                if 0 < rows.y[tr].sum() < len(tr):
                    est = fit_weighted(self._new_estimator(), rows.X[tr], rows.y[tr], None if w is None else w[tr])
                    oof[te] = _predict(est, rows.X[te])
        model = fit_weighted(self._new_estimator(), rows.X, rows.y, w)
        ok = ~np.isnan(oof)
        metrics: dict[str, float] = {}
        if ok.sum() and 0 < rows.y[ok].sum() < ok.sum():
            metrics = _classification_metrics(rows.y[ok], oof[ok], prefix)
            if self.calibration_ is not None:
                model = _Calibrated(model, _calibrator(self.calibration_, oof[ok], rows.y[ok]))
        return model, metrics

    def fit(self, transcripts: Iterable[Transcript], y: Any = None, *, progress: bool = False) -> ImportanceScorer:
        """Learn from labelled transcripts; returns ``self``.

        Every transcript must carry entry labels or queries with evidence; one that
        has neither is an error naming it (label agent logs first with
        :func:`salience.scorer.labels.label` or ``salience label``).
        """
        from salience.transcript import Transcript

        self._check_params()
        transcripts = list(transcripts)
        if not transcripts:
            raise ScorerError("fit needs at least one transcript (got none)")
        for i, t in enumerate(transcripts):
            if not isinstance(t, Transcript):
                raise ScorerError(f"fit: item {i} must be a Transcript (got a {type(t).__name__})")
            has_labels = any(e.label is not None for e in t.entries)
            has_evidence = any(q.evidence for q in t.queries)
            if not (has_labels or has_evidence):
                raise ScorerError(
                    f"transcript {t.id!r} has no entry labels and no queries with evidence: label it first "
                    "(salience.scorer.labels.label or `salience label`)"
                )
        features = self.features if self.features is not None else FeatureExtractor()
        self.features_ = clone(features).fit()
        # What the default estimator is fitted to: conversations (no transcript acts) or agents.
        self.kind_ = "agent" if any(t.acts() for t in transcripts) else "conversation"
        self.calibration_ = self.calibration
        if self.calibration == "auto":
            self.calibration_ = "sigmoid" if self.kind_ == "conversation" else "isotonic"
        started = time.perf_counter()
        prior_rows = build_rows(transcripts, self.features_, query=False, cut_points=self.cut_points)
        query_rows = build_rows(transcripts, self.features_, query=True)
        if len(prior_rows) == 0 or prior_rows.y.min() == prior_rows.y.max():
            raise ScorerError(
                "fit needs both needed and not-needed entries among the labels "
                f"(got {int(prior_rows.y.sum())} needed of {len(prior_rows)} rows)"
            )
        self.prior_model_, cv_metrics = self._fit_one(prior_rows, "prior")
        self.query_model_ = None
        if len(query_rows) and 0 < query_rows.y.sum() < len(query_rows):
            self.query_model_, query_metrics = self._fit_one(query_rows, "query")
            cv_metrics.update(query_metrics)
        self.cv_metrics_ = cv_metrics
        self.feature_names_ = list(BASE_FEATURES)
        self.query_feature_names_ = list(BASE_FEATURES + QUERY_FEATURES)
        self.n_rows_ = {"prior": len(prior_rows), "query": len(query_rows)}
        self.metadata_: dict[str, Any] = {
            "library_version": __version__,
            "format": _FORMAT,
            "feature_names": self.feature_names_,
            "query_feature_names": self.query_feature_names_,
            "training_fingerprint": _fingerprint(transcripts),
            "n_transcripts": len(transcripts),
            "kind": self.kind_,
            "calibration": self.calibration_,
            "prior_weights": None if self.kind_ == "agent" or prior_rows.shares is None else "question share",
            "n_rows": self.n_rows_,
            "positive_rate": {
                "prior": float(prior_rows.y.mean()),
                "query": float(query_rows.y.mean()) if len(query_rows) else None,
            },
            "domains": sorted({t.domain for t in transcripts if t.domain}),
            "fit_seconds": round(time.perf_counter() - started, 2),
            "metrics": dict(cv_metrics),
        }
        return self

    # -- scoring ---------------------------------------------------------------
    def _check_fitted(self) -> None:
        if not hasattr(self, "prior_model_"):
            raise NotFittedError(
                f"This {type(self).__name__} instance is not fitted yet. Call 'fit' with appropriate "
                "arguments before using this estimator, or use salience.default_scorer()."
            )

    def score(self, transcript: Transcript, query: str | None = None) -> np.ndarray:
        """Probability, per entry, that it is needed: shape ``(len(transcript.entries),)``, in [0, 1].

        With ``query`` the score is query-aware; without, it is the prior that a
        later step will need the entry. A scorer trained without query data scores
        a query as the mean of its prior and the query's fused BM25/embedding rank.
        """
        self._check_fitted()
        n = len(transcript.entries)
        if n == 0:
            return np.zeros(0, dtype=np.float64)
        if query is not None and not isinstance(query, str):
            raise ParameterTypeError(f"query must be a str or None (got {type(query).__name__})")
        if query is not None and query.strip():
            X = self.features_.transform_one(transcript, query)
            if self.query_model_ is not None:
                p = _predict(self.query_model_, X)
            else:
                prior = _predict(self.prior_model_, X[:, : len(BASE_FEATURES)])
                rrf = X[:, len(BASE_FEATURES) + QUERY_FEATURES.index("rrf")]
                p = 0.5 * prior + 0.5 * rrf
        else:
            X = self.features_.transform_one(transcript)
            p = _predict(self.prior_model_, X)
        return np.clip(np.asarray(p, dtype=np.float64), 0.0, 1.0)

    def feature_importances(self, *, query: bool = False) -> dict[str, float]:
        """Permutation-free importances: the mean gain the boosted trees give each feature.

        Falls back to ``feature_importances_`` or ``coef_`` of other estimators;
        empty when the estimator exposes none.
        """
        self._check_fitted()
        model = self.query_model_ if query and self.query_model_ is not None else self.prior_model_
        names = self.query_feature_names_ if model is self.query_model_ else self.feature_names_
        estimators = [model.estimator if isinstance(model, _Calibrated) else model]
        members = getattr(estimators[0], "estimators_", None)
        if members is not None:  # a vote (conversations): its members that expose importances
            estimators = [m for m in members if any(hasattr(m, a) for a in ("feature_importances_", "_predictors"))]
        values = []
        for est in estimators:
            if hasattr(est, "feature_importances_"):
                values.append(np.asarray(est.feature_importances_, dtype=float))
            elif hasattr(est, "coef_"):
                values.append(np.abs(np.asarray(est.coef_, dtype=float)).ravel())
            elif hasattr(est, "_predictors"):
                values.append(_hgb_gain(est, len(names)))
        if not values:
            return {}
        mean = np.mean(values, axis=0)
        total = mean.sum() or 1.0
        return dict(sorted(zip(names, (mean / total).tolist()), key=lambda kv: -kv[1]))

    # -- persistence -------------------------------------------------------------
    def save(self, path: str | os.PathLike[str]) -> Path:
        """Write the fitted scorer to ``path``: a JSON header line (``magic``, ``format``,
        ``library_version``, the payload's ``sha256``, ``metadata``) and the payload, a
        joblib pickle of the scorer's state. Anyone who loads the file runs that pickle:
        see :meth:`load`."""
        import joblib

        self._check_fitted()
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        state = dict(self.__dict__)
        buf = io.BytesIO()
        joblib.dump({"class": type(self).__name__, "state": state}, buf, compress=3)
        payload = buf.getvalue()
        tmp = path.with_name(path.name + ".tmp")
        with tmp.open("wb") as fh:
            fh.write(_header_line(self.metadata_, payload))
            fh.write(payload)
        os.replace(tmp, path)
        return path

    @classmethod
    def read_header(cls, path: str | os.PathLike[str]) -> dict[str, Any]:
        """The metadata header of a saved scorer, without loading the model."""
        path = Path(path)
        try:
            with path.open("rb") as fh:
                line = fh.readline(1_000_000)
        except OSError as exc:
            raise ScorerError(f"{path}: cannot read scorer file ({exc.strerror or exc})") from None
        try:
            header = json.loads(line)
        except (json.JSONDecodeError, UnicodeDecodeError, RecursionError):
            header = None
        if not isinstance(header, dict) or header.get("magic") != _MAGIC:
            if line.startswith(_HEAD_START) or (_MAGIC.encode() in line[:40] and line[:1] == b"{"):
                raise ScorerError(f"{path}: a salience scorer file whose header is damaged (it does not parse, or "
                                  "was cut short); refusing to load")
            raise ScorerError(f"{path}: not a salience scorer file (no salience header)")
        return header

    @classmethod
    def load(cls, path_or_uri: str | os.PathLike[str]) -> ImportanceScorer:
        """Load a scorer saved with :meth:`save`, or an MLflow ``models:/`` / ``runs:/`` URI.

        URIs go to the loader registered for their prefix (:mod:`salience.scorer.loaders`;
        :mod:`salience.training` registers MLflow's when it is imported, so this layer
        imports nothing from training).

        A file written by another library version, or changed after it was written,
        is refused with a :class:`~salience.errors.ScorerError` that says which: a
        flipped byte or a file cut short anywhere (the header must parse, carry this
        version and format, and be byte for byte the header its payload was saved with;
        the payload must match the header's sha256 digest).

        **A scorer file is trusted code.** The payload is a joblib pickle, and loading a
        pickle runs whatever code it names, as loading an MLflow model stored as a
        pickle does. The digest catches damage, not an attack: whoever can write a file
        can write its matching digest. Load only scorer files you made or got from
        someone you trust, from a place only they can write (the bundled default, your
        own ``salience train``, your MLflow registry); never one that arrives with a
        request.
        """
        import joblib

        text = os.fspath(path_or_uri)
        from_uri = load_uri(text)  # a registered URI loader (models:/ and runs:/: salience.training)
        if from_uri is not None:
            return from_uri
        path = Path(text)
        header = cls.read_header(path)
        if header.get("format") != _FORMAT or header.get("library_version") != __version__:
            raise ScorerError(
                f"{path}: written by salience {header.get('library_version')} (file format "
                f"{header.get('format')}); this is salience {__version__} (format {_FORMAT}): retrain it with "
                "`salience train`"
            )
        with path.open("rb") as fh:
            head = fh.readline(1_000_000)
            payload = fh.read()
        if hashlib.sha256(payload).hexdigest() != header.get("sha256"):
            raise ScorerError(f"{path}: the file was changed after it was saved, or cut short (checksum mismatch); "
                              "refusing to load")
        try:
            obj = joblib.load(io.BytesIO(payload))
        except Exception as exc:
            raise ScorerError(f"{path}: cannot read the scorer payload ({type(exc).__name__}: {exc})") from None
        if not isinstance(obj, dict) or obj.get("class") != cls.__name__ or not isinstance(obj.get("state"), dict):
            raise ScorerError(f"{path}: payload is not an {cls.__name__}")
        if _header_line(obj["state"].get("metadata_"), payload) != head:
            raise ScorerError(f"{path}: a salience scorer file whose header is damaged: it is not the header "
                              "its payload was saved with; refusing to load")
        scorer = cls.__new__(cls)
        scorer.__dict__.update(obj["state"])
        return scorer


#: Weight of the raw probability in an isotonic-calibrated one. Isotonic calibration is a
#: step function (a few dozen steps), so without it the entries of one step tie and a
#: packer breaks the tie by position, not by what the model saw; with it the order
#: within a step is the model's, and the calibrated value moves by at most this much.
TIE_BREAK = 1e-6


class _Calibrated:
    """A fitted classifier whose probabilities go through a fitted 1-d calibrator."""

    def __init__(self, estimator: Any, calibrator: Any) -> None:
        self.estimator = estimator
        self.calibrator = calibrator
        self.classes_ = getattr(estimator, "classes_", np.array([0, 1]))

    def predict_proba(self, X: np.ndarray) -> np.ndarray:
        raw = _positive_proba(self.estimator, X)
        if hasattr(self.calibrator, "predict_proba"):  # Platt: a logistic regression on the raw score
            p = self.calibrator.predict_proba(raw.reshape(-1, 1))[:, 1]
        else:  # isotonic: a step function; the raw score orders the entries of each step
            p = (1.0 - TIE_BREAK) * _isotonic_predict(self.calibrator, raw) + TIE_BREAK * raw
        p = np.clip(p, 0.0, 1.0)
        return np.column_stack([1.0 - p, p])


def _isotonic_predict(calibrator: Any, raw: np.ndarray) -> np.ndarray:
    """``calibrator.predict(raw)``: for a fitted ``IsotonicRegression`` and a 1-d float64
    array of finite values, what its ``predict`` computes (clip to the fitted range, then
    interpolate) without re-validating ``raw``, which on a process's first call scans every
    installed package's entry points (about 30 ms); anything else goes to ``predict``.
    tests/test_speed_paths.py checks it against ``predict``.
    """
    from sklearn.isotonic import IsotonicRegression

    if (
        type(calibrator) is IsotonicRegression
        and type(raw) is np.ndarray
        and raw.ndim == 1
        and raw.size > 0
        and raw.dtype == np.float64
        and all(hasattr(calibrator, a) for a in ("X_thresholds_", "X_min_", "X_max_", "f_"))
        and calibrator.X_thresholds_.dtype == np.float64
        and calibrator.out_of_bounds in ("clip", "nan")
        and bool(np.isfinite(raw).all())  # validation refuses NaN, infinity and no rows: let predict say so
    ):
        T = np.clip(raw, calibrator.X_min_, calibrator.X_max_) if calibrator.out_of_bounds == "clip" else raw
        return np.asarray(calibrator.f_(T).astype(T.dtype))
    return np.asarray(calibrator.predict(raw))


def _calibrator(method: str, raw: np.ndarray, y: np.ndarray) -> Any:
    """Isotonic regression or Platt's sigmoid from out-of-fold ``raw`` probabilities to ``y``."""
    if method == "isotonic":
        from sklearn.isotonic import IsotonicRegression

        return IsotonicRegression(y_min=0.0, y_max=1.0, out_of_bounds="clip").fit(raw, y)
    from sklearn.linear_model import LogisticRegression

    return LogisticRegression(C=1e6).fit(raw.reshape(-1, 1), y)


def _classification_metrics(y: np.ndarray, p: np.ndarray, prefix: str) -> dict[str, float]:
    from sklearn.metrics import average_precision_score, brier_score_loss, roc_auc_score

    return {
        f"cv_{prefix}_roc_auc": float(roc_auc_score(y, p)),
        f"cv_{prefix}_average_precision": float(average_precision_score(y, p)),
        f"cv_{prefix}_brier": float(brier_score_loss(y, p)),
        f"cv_{prefix}_positive_rate": float(y.mean()),
    }


#: Inputs up to this many rows are predicted on one OpenMP thread.
_ONE_THREAD_ROWS = 20_000


def _predict(model: Any, X: np.ndarray) -> np.ndarray:
    """``predict_proba(X)[:, 1]`` on one thread when ``X`` is small.

    OpenMP's thread start-up and spinning cost far more than a few hundred rows take
    to predict (100x on a busy two-core machine), so small inputs run single-threaded.
    """
    if isinstance(model, _Calibrated):
        return np.asarray(model.predict_proba(X)[:, 1])  # its estimator's call picks the threads
    return _positive_proba(model, X)


def _positive_proba(estimator: Any, X: np.ndarray) -> np.ndarray:
    """``estimator.predict_proba(X)[:, 1]``, on one OpenMP thread when ``X`` is small
    (:data:`_ONE_THREAD_ROWS`): a histogram gradient-boosting classifier's by :func:`_hgb_proba`,
    any other's inside :func:`~salience._threads.one_thread`."""
    small = len(X) <= _ONE_THREAD_ROWS
    if small:
        fast = _hgb_proba(estimator, X)
        if fast is not None:
            return fast
    with one_thread("openmp", when=small):
        return np.asarray(estimator.predict_proba(X)[:, 1])


#: What :func:`_hgb_proba` reads of a fitted HistGradientBoostingClassifier.
_HGB_ATTRS = ("_predictors", "_baseline_prediction", "_loss", "_bin_mapper", "_predict_iterations",
              "n_trees_per_iteration_", "n_features_in_")


_LAYOUTS: dict[Any, bool] = {}  # class -> whether _hgb_proba may read it


def _hgb_layout_known(cls: Any) -> bool:
    """Whether ``cls._predict_iterations`` takes what :func:`_hgb_proba` passes (scikit-learn 1.9's does; any
    other signature: the plain path)."""
    known = _LAYOUTS.get(cls)
    if known is None:
        import inspect

        try:
            params = list(inspect.signature(cls._predict_iterations).parameters)
        except (AttributeError, TypeError, ValueError):
            params = []
        known = _LAYOUTS[cls] = params == ["self", "X", "predictors", "raw_predictions", "is_binned", "n_threads"]
    return known


def _hgb_proba(est: Any, X: Any) -> np.ndarray | None:
    """``est.predict_proba(X)[:, 1]`` of a fitted ``HistGradientBoostingClassifier`` on one
    OpenMP thread, bit for bit (each row's prediction is its own, whatever the threads), or
    None when ``est`` or ``X`` is not the plain case this handles.

    What ``predict_proba`` does (``_raw_predict``, then the loss's link), with the thread
    count passed to the trees instead of set process-wide through threadpoolctl (whose
    controller costs 20-40 ms to build on a process's first prediction), and without
    re-validating ``X``: a 2-d float64 array with the fitted feature count is what
    validation would return as it is (``ensure_all_finite=False``), and skipping it skips
    its first call's scan of every installed package's entry points (about 30 ms).
    tests/test_speed_paths.py checks it against ``predict_proba``.
    """
    from sklearn.ensemble import HistGradientBoostingClassifier

    if (
        type(est) is not HistGradientBoostingClassifier
        or not _hgb_layout_known(HistGradientBoostingClassifier)
        or type(X) is not np.ndarray
        or X.dtype != np.float64
        or X.ndim != 2
        or X.shape[0] == 0  # validation refuses an empty input: let predict_proba say so
        or not all(hasattr(est, a) for a in _HGB_ATTRS)
        or X.shape[1] != est.n_features_in_
        or getattr(est, "_preprocessor", None) is not None  # categorical features: sklearn encodes them first
        or getattr(est, "feature_names_in_", None) is not None  # fitted on a frame: sklearn checks the names
        or getattr(est, "_in_fit", False)
    ):
        return None
    from salience.scorer.treememo import raw_predict  # the rows whose tree paths an earlier call took, looked up

    return np.asarray(est._loss.predict_proba(raw_predict(est, X))[:, 1])


def _hgb_gain(est: Any, n_features: int) -> np.ndarray:
    """Split-gain importances of a fitted HistGradientBoostingClassifier."""
    gains = np.zeros(n_features)
    for stage in est._predictors:
        for predictor in stage:
            nodes = predictor.nodes
            inner = nodes[~nodes["is_leaf"].astype(bool)]
            np.add.at(gains, inner["feature_idx"], np.maximum(inner["gain"], 0))
    return gains


@lru_cache(maxsize=1)
def _default() -> ImportanceScorer:
    if not DEFAULT_MODEL_PATH.exists():
        raise ScorerError(
            f"the bundled default scorer is missing ({DEFAULT_MODEL_PATH}); reinstall salience or train one "
            "with `salience train PATH --out FILE`"
        )
    return ImportanceScorer.load(DEFAULT_MODEL_PATH)


def default_scorer() -> ImportanceScorer:
    """The scorer that ships with salience (trained on permissively licensed agent logs).

    Loaded once per process.
    """
    return _default()
