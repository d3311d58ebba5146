"""``salience versions`` and ``salience promote``: the model registry from the command line.

Usage::

    salience versions [--name NAME] [--metrics GLOB]... [--json]
    salience promote NAME VERSION [--alias champion]

``versions`` lists every registered scorer version with its run's recall and
cross-validation metrics side by side, the champion marked ★. ``promote`` points an
alias (default ``champion``) at a version; ``models:/NAME@champion`` then loads it.
Both use the store :func:`salience.training.tracking.tracking_uri` names
(``MLFLOW_TRACKING_URI``, else ``.salience/mlflow.db``). MLflow is imported only when a
command runs.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from salience.cli.common import stdout

if TYPE_CHECKING:
    from rich.console import Console

    from salience.training.tracking import VersionInfo

__all__ = [
    "add_promote_parser",
    "add_versions_parser",
    "metric_columns",
    "print_versions",
    "run_promote",
    "run_versions",
]

CHAMPION_MARK = "★"


# --------------------------------------------------------------------------
# salience versions
# --------------------------------------------------------------------------


def add_versions_parser(subparsers: Any) -> argparse.ArgumentParser:
    parser = subparsers.add_parser(
        "versions",
        help="list registered scorer versions with their recall metrics",
        description="List every registered scorer version (MLflow model registry) with its aliases and the "
        "recall and cross-validation metrics of its run, side by side; the champion is marked ★. "
        "The store is MLFLOW_TRACKING_URI, else .salience/mlflow.db (SALIENCE_HOME moves it).",
    )
    parser.add_argument("--name", metavar="NAME", help="only this registered model (default: all)")
    parser.add_argument("--metrics", action="append", default=[], metavar="GLOB",
                        help="show the metrics matching GLOB (repeatable; '*' for all; default: the scorer's own "
                        "recall and test figures and the cross-validated AUCs, without the baselines)")
    parser.add_argument("--json", action="store_true",
                        help="print machine-readable JSON (every recall, test and cv metric) instead of a table")
    parser.set_defaults(handler=run_versions)
    return parser


def _variant(key: str, keys: set[str]) -> bool:
    """``recall_query_10pct_bm25`` is a variant (a baseline) of ``recall_query_10pct`` when both exist."""
    parts = key.split("_")
    return any("_".join(parts[:i]) in keys for i in range(1, len(parts)))


def metric_columns(versions: Sequence[VersionInfo], patterns: Sequence[str] = ()) -> list[str]:
    """The metric columns of the versions table: recall figures first, then held-out tests, then the rest.

    With ``patterns`` (shell globs; ``*`` for all): the metrics matching any of them. Without:
    the scorer's own figures, that is recall and test metrics that are not a baseline variant
    of another one (``recall_query_10pct_bm25`` beside ``recall_query_10pct``), and the
    cross-validated AUCs.

    >>> from salience.training.tracking import VersionInfo
    >>> v = VersionInfo("m", 1, None, None, metrics={"cv_prior_roc_auc": 0.9, "cv_prior_brier": 0.1,
    ...     "recall_query_10pct": 0.5, "recall_query_10pct_bm25": 0.4, "recall_agnostic_10pct": 0.3})
    >>> metric_columns([v])
    ['recall_agnostic_10pct', 'recall_query_10pct', 'cv_prior_roc_auc']
    >>> metric_columns([v], ["*bm25", "cv_*"])
    ['recall_query_10pct_bm25', 'cv_prior_brier', 'cv_prior_roc_auc']
    """
    from fnmatch import fnmatchcase

    names = {k for v in versions for k in v.metrics}
    if patterns:
        chosen = {k for k in names if any(fnmatchcase(k, p) for p in patterns)}
    else:
        chosen = {k for k in names if (k.startswith(("recall", "test_")) and not _variant(k, names))
                  or (k.startswith("cv") and k.endswith("auc"))}

    def order(k: str) -> tuple[int, str]:
        return (0 if "recall" in k else 1 if k.startswith("test_") else 2, k)

    return sorted(chosen, key=order)


def _format_metric(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:.3f}" if abs(value) < 1000 else f"{value:,.0f}"


def print_versions(
    versions: Sequence[VersionInfo], console: Console | None = None, *, patterns: Sequence[str] = ()
) -> None:
    """A rich table: one row per version, one column per metric :func:`metric_columns` picks."""
    from rich.table import Table

    console = console or stdout()
    columns = metric_columns(versions, patterns)
    table = Table(title="Registered scorer versions", title_justify="left")
    table.add_column("model", no_wrap=True)
    table.add_column("version", justify="right", no_wrap=True)
    table.add_column("aliases", no_wrap=True)
    table.add_column("created (UTC)", no_wrap=True)
    for name in columns:
        table.add_column(name, justify="right", no_wrap=True)
    table.add_column("run", no_wrap=True)
    for v in versions:
        aliases = ", ".join(f"@{a}" for a in v.aliases)
        if v.champion:
            aliases = f"{CHAMPION_MARK} {aliases}"
        created = v.created.strftime("%Y-%m-%d %H:%M") if v.created else "-"
        cells = [_format_metric(v.metrics.get(name)) for name in columns]
        table.add_row(v.name, str(v.version), aliases, created, *cells, (v.run_id or "-")[:8])
    if not console.is_terminal:  # a pipe or a file: as wide as the table needs, not 80 columns
        from rich.measure import Measurement

        natural = Measurement.get(console, console.options.update_width(10_000), table).maximum
        console.width = max(console.width, natural)
    console.print(table)


def run_versions(args: argparse.Namespace) -> int:
    from salience.training.tracking import list_versions, tracking_uri

    versions = list_versions(args.name)
    if args.json:
        print(json.dumps([v.to_dict() for v in versions], indent=2))
        return 0
    if not versions:
        where = f"registered model {args.name!r}" if args.name else tracking_uri()
        print(f"no registered scorer versions in {where}; `salience train PATH... --out FILE` registers one")
        return 0
    print_versions(versions, patterns=args.metrics)
    return 0


# --------------------------------------------------------------------------
# salience promote
# --------------------------------------------------------------------------


def _version(text: str) -> str:
    stripped = text.strip().lstrip("vV")
    if not stripped.isdigit() or int(stripped) < 1:
        raise argparse.ArgumentTypeError(f"expected a version number like 3 (got {text!r})")
    return stripped


def add_promote_parser(subparsers: Any) -> argparse.ArgumentParser:
    parser = subparsers.add_parser(
        "promote",
        help="point an alias (default: champion) at a registered scorer version",
        description="Point an alias (default: champion) of a registered scorer at VERSION, so that "
        "models:/NAME@ALIAS loads it (ImportanceScorer.load, mlflow models serve).",
    )
    parser.add_argument("name", metavar="NAME", help="the registered model, e.g. salience-airline")
    parser.add_argument("version", metavar="VERSION", type=_version, help="the version number to promote")
    parser.add_argument("--alias", default="champion", help="the alias to move (default: champion)")
    parser.set_defaults(handler=run_promote)
    return parser


def run_promote(args: argparse.Namespace) -> int:
    from salience.training.tracking import list_versions, promote

    before = [v.version for v in list_versions(args.name) if args.alias in v.aliases]
    info = promote(args.name, args.version, alias=args.alias)
    if before and before[0] == info.version:
        note = " (it already was)"
    elif before:
        note = f" (was version {before[0]})"
    else:
        note = ""
    print(f"{info.name} version {info.version} is now @{args.alias}{note}; models:/{info.name}@{args.alias} loads it")
    return 0
