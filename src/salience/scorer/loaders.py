"""Where :meth:`ImportanceScorer.load <salience.scorer.model.ImportanceScorer.load>` finds
scorers that are not files: a registry of URI loaders.

A loader takes a URI and returns a fitted scorer. It is registered under a prefix
(``"models:/"``); ``ImportanceScorer.load`` hands any text that starts with a
registered prefix to its loader, and reads anything else as a scorer file.

The scorer layer imports nothing from :mod:`salience.training`: the training package
registers its MLflow loader (``models:/`` and ``runs:/`` URIs,
:func:`salience.training.tracking.load_scorer`) into this registry when it is imported,
and ``import salience`` imports it (cheaply: mlflow waits for the first URI). Without
it, such a URI is a :class:`~salience.errors.ScorerError` that says what to import.

>>> loader_for("scorer.salience") is None
True
>>> register_loader("scorer.salience", lambda uri: None)  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
salience.errors.ScorerError: register_loader: prefix must be a URI scheme ending with ':/', ... (got 'scorer.salience')
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from salience.errors import ScorerError

if TYPE_CHECKING:
    from salience.scorer.model import ImportanceScorer

__all__ = ["MLFLOW_PREFIXES", "UriLoader", "load_uri", "loader_for", "register_loader"]

#: Loads the scorer a URI names.
UriLoader = Callable[[str], "ImportanceScorer"]

#: The MLflow URI prefixes :mod:`salience.training` registers a loader for.
MLFLOW_PREFIXES: tuple[str, ...] = ("models:/", "runs:/")

_LOADERS: dict[str, UriLoader] = {}


def register_loader(prefix: str, loader: UriLoader) -> None:
    """Make ``ImportanceScorer.load`` hand URIs starting with ``prefix`` to ``loader``.

    Registering a prefix again replaces its loader. ``prefix`` must end with ``":/"``
    (a URI scheme, so that it cannot be mistaken for a file name).
    """
    if not isinstance(prefix, str) or not prefix.endswith(":/") or len(prefix) < 4:
        raise ScorerError(f"register_loader: prefix must be a URI scheme ending with ':/', like 'models:/' "
                          f"(got {prefix!r})")
    if not callable(loader):
        raise ScorerError(f"register_loader: loader for {prefix!r} must be callable (got a {type(loader).__name__})")
    _LOADERS[prefix] = loader


def loader_for(text: str) -> UriLoader | None:
    """The loader registered for the prefix ``text`` starts with, or None."""
    for prefix, loader in _LOADERS.items():
        if text.startswith(prefix):
            return loader
    return None


def load_uri(text: str) -> ImportanceScorer | None:
    """The scorer ``text`` names when it is a URI with a loader; None when it is not a URI
    (a file name).

    Raises:
        ScorerError: ``text`` is an MLflow URI (:data:`MLFLOW_PREFIXES`) but no loader is
            registered for it (:mod:`salience.training` was not imported).
    """
    loader = loader_for(text)
    if loader is not None:
        scorer = loader(text)
        if scorer is None:
            raise ScorerError(f"cannot load {text!r}: its loader returned no scorer")
        return scorer
    if text.startswith(MLFLOW_PREFIXES):
        raise ScorerError(f"cannot load {text!r}: no loader is registered for {text.split(':/', 1)[0]}:/ URIs "
                          "(`import salience.training` registers the MLflow one)")
    return None
