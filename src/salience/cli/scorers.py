"""The one ``--scorer`` grammar, shared by every command that takes a scorer.

``--scorer S`` is, checked in this order:

* ``default``: the scorer that ships with the package (:func:`salience.default_scorer`);
  what a command does when it is missing is the command's choice (``compact`` and
  ``inspect`` fall back to a recency and role prior, ``tune`` to the ``recency``
  baseline, ``bench`` stops);
* a baseline name, a key of :data:`salience.scorer.baselines.BASELINES` (``recency``,
  ``keyword``, ``bm25``, ``embedding``, ``fusion``, ``random``, ``oracle``);
  ``baseline:NAME`` is a deprecated alias that still works (a warning says so once the
  command is done); a file of the same name is ``./NAME``;
* a registered version, loaded through MLflow: ``models:/NAME/3``,
  ``models:/NAME@champion``, ``models:/NAME/latest`` or ``runs:/ID/PATH``;
* otherwise a scorer file written by ``salience train`` (it must exist).

A value that is none of these is a :class:`~salience.errors.SalienceError` with one line
that lists the accepted forms (exit 2):

>>> parse_scorer("bm25").kind, parse_scorer("baseline:bm25").name, parse_scorer("models:/m@champion").kind
(<ScorerKind.BASELINE: 'baseline'>, 'bm25', <ScorerKind.REGISTERED: 'registered'>)
>>> parse_scorer("baseline:nope")
Traceback (most recent call last):
...
salience.errors.SalienceError: --scorer: unknown baseline 'nope': --scorer must be a scorer file, a registered \
version (models:/NAME/3, models:/NAME@champion, runs:/ID/PATH), a baseline name (bm25, embedding, fusion, keyword, \
oracle, random, recency) or 'default' (got 'baseline:nope')
"""

from __future__ import annotations

import argparse
import enum
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from salience.errors import SalienceError

__all__ = [
    "DEPRECATED_PREFIX",
    "HELP_BASELINES",
    "ScorerKind",
    "ScorerSpec",
    "accepted_forms",
    "add_scorer_argument",
    "parse_scorer",
]

#: The deprecated spelling of a baseline, ``baseline:NAME``.
DEPRECATED_PREFIX = "baseline:"
_REGISTERED = ("models:/", "runs:/")
#: The baseline names ``--help`` lists (without importing scikit-learn to build the parser);
#: a test pins them to :data:`salience.scorer.baselines.BASELINES`.
HELP_BASELINES: tuple[str, ...] = ("bm25", "embedding", "fusion", "keyword", "oracle", "random", "recency")


class ScorerKind(enum.Enum):
    """What a ``--scorer`` value names."""

    DEFAULT = "default"
    BASELINE = "baseline"
    REGISTERED = "registered"
    FILE = "file"


def _baselines() -> list[str]:
    from salience.scorer.baselines import BASELINES

    return sorted(BASELINES)


def accepted_forms() -> str:
    """The accepted forms, as the error message and ``--help`` list them."""
    return (f"a scorer file, a registered version (models:/NAME/3, models:/NAME@champion, runs:/ID/PATH), "
            f"a baseline name ({', '.join(_baselines())}) or 'default'")


@dataclass(frozen=True, slots=True)
class ScorerSpec:
    """A parsed ``--scorer`` value.

    ``text``: as given; ``kind``: what it names; ``name``: the baseline's name, the MLflow
    URI or the file's path (``"default"`` for the default); ``deprecated``: written in a
    deprecated spelling (``baseline:NAME``).
    """

    text: str
    kind: ScorerKind
    name: str
    deprecated: bool = False

    @property
    def uri(self) -> str | None:
        """The MLflow URI of a registered version, else None."""
        return self.name if self.kind is ScorerKind.REGISTERED else None

    @property
    def deprecation(self) -> str | None:
        """The one-line warning for a deprecated spelling, else None."""
        if not self.deprecated:
            return None
        return f"--scorer {self.text} is deprecated; write --scorer {self.name}"

    def load(self) -> Any:
        """The scorer. The default's and a registered version's failures propagate
        (:class:`~salience.errors.ScorerError`, ``ImportError``)."""
        if self.kind is ScorerKind.DEFAULT:
            from salience.scorer.model import default_scorer

            return default_scorer()
        if self.kind is ScorerKind.BASELINE:
            from salience.scorer.baselines import make_baseline

            return make_baseline(self.name)
        from salience.scorer.model import ImportanceScorer

        return ImportanceScorer.load(self.name)

    def warn_if_deprecated(self) -> None:
        """Print :attr:`deprecation` on stderr, if any (commands call it once their work is done)."""
        if self.deprecation:
            print(f"salience: warning: {self.deprecation}", file=sys.stderr)


def _bad(text: str, why: str | None = None, got: str = "") -> SalienceError:
    lead = f"--scorer: {why}: --scorer" if why else "--scorer"
    return SalienceError(f"{lead} must be {accepted_forms()} (got {text!r}{got})")


def parse_scorer(text: str | None) -> ScorerSpec:
    """``text`` (``None``: ``default``) as a :class:`ScorerSpec`; the grammar is in the module doc.

    Raises :class:`~salience.errors.SalienceError` naming the value and the accepted forms
    for an unknown baseline or a scorer file that does not exist. Nothing is loaded.
    """
    if text is None or text == "default":
        return ScorerSpec("default" if text is None else text, ScorerKind.DEFAULT, "default")
    baselines = _baselines()
    if text in baselines:
        return ScorerSpec(text, ScorerKind.BASELINE, text)
    if text.startswith(DEPRECATED_PREFIX):
        name = text[len(DEPRECATED_PREFIX):]
        if name not in baselines:
            raise _bad(text, f"unknown baseline {name!r}")
        return ScorerSpec(text, ScorerKind.BASELINE, name, deprecated=True)
    if text.startswith(_REGISTERED):
        return ScorerSpec(text, ScorerKind.REGISTERED, text)
    if not text.strip():
        raise _bad(text)
    path = Path(text)
    if path.is_dir():
        raise _bad(text, f"{text} is a folder, not a scorer file", ": a folder")
    if not path.is_file():
        raise _bad(text, f"{text} does not exist", ": no such file")
    return ScorerSpec(text, ScorerKind.FILE, text)


def add_scorer_argument(parser: argparse.ArgumentParser, *, what: str = "the scorer") -> None:
    """Add ``--scorer S`` (default ``default``) with the grammar's help."""
    parser.add_argument(
        "--scorer", default="default", metavar="SCORER",
        help=f"{what}: a scorer file, models:/NAME/VERSION, models:/NAME@ALIAS, runs:/ID/PATH, a baseline name "
        f"({', '.join(HELP_BASELINES)}) or 'default' (default: default; baseline:NAME is a deprecated alias)",
    )
