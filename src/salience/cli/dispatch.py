"""The ``salience`` parser and :func:`main`: which command runs, and its exit code.

Adding a command
----------------
Write ``salience/cli/NAME.py`` with a function ``add_parser(subparsers)`` that calls
``subparsers.add_parser(NAME, help=..., description=...)``, adds its arguments, sets
``parser.set_defaults(handler=run)`` where ``run(args) -> int`` does the work, and returns
the parser. List it in :data:`COMMANDS` as ``(NAME, "module:function")``. Modules are
imported only when the parser is built and a command whose module does not exist (yet)
is left out, so keep heavy imports (torch, mlflow) inside ``run``. Helpers live in
:mod:`salience.cli.common`, the ``--scorer`` grammar in :mod:`salience.cli.scorers`.
Errors for bad input should be raised as :class:`~salience.errors.SalienceError`;
:func:`main` turns them into the one-line message (:func:`~salience.cli.common.exit_code`).
"""

from __future__ import annotations

import argparse
import importlib
from collections.abc import Callable, Sequence
from typing import Any

from salience._version import __version__
from salience.cli.common import PROG, exit_code
from salience.limits import from_options, limited

__all__ = ["COMMANDS", "build_parser", "main"]

#: Commands that read input, and so take ``--max-depth``, ``--max-bytes``, ``--max-entries`` (:mod:`salience.limits`).
READERS = frozenset({"stats", "label", "train", "bench", "tune", "compact", "demo", "inspect", "proxy"})

#: ``(command name, "module:function")``: the function registers the command's parser.
COMMANDS: list[tuple[str, str]] = [
    ("stats", "salience.cli.stats:add_parser"),
    ("label", "salience.cli.label:add_parser"),
    ("train", "salience.cli.train:add_parser"),
    ("bench", "salience.cli.bench:add_parser"),
    ("tune", "salience.cli.tune:add_parser"),
    ("versions", "salience.cli.registry:add_versions_parser"),
    ("promote", "salience.cli.registry:add_promote_parser"),
    ("compact", "salience.cli.compact:add_parser"),
    ("demo", "salience.cli.demo:add_parser"),
    ("inspect", "salience.cli.inspect:add_parser"),
    ("proxy", "salience.cli.proxy:add_parser"),
]


def _registrar(spec: str) -> Callable[[Any], argparse.ArgumentParser] | None:
    """The ``add_parser`` function named by ``"module:function"``, or None if the module does not exist."""
    module_name, _, func = spec.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        missing = exc.name or ""
        if module_name == missing or module_name.startswith(missing + "."):
            return None
        raise
    return getattr(module, func)  # type: ignore[no-any-return]


def build_parser() -> argparse.ArgumentParser:
    """The ``salience`` parser with every command in :data:`COMMANDS` whose module exists."""
    parser = argparse.ArgumentParser(
        prog=PROG,
        description="Learn which entries of an LLM agent's context matter, and keep those inside a token budget.",
    )
    parser.add_argument("--version", action="version", version=f"{PROG} {__version__}")
    parser.add_argument("-v", "--verbose", action="store_true", help="show tracebacks of errors")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", title="commands")
    subparsers.required = True
    for _name, spec in COMMANDS:
        register = _registrar(spec)
        if register is None:
            continue
        sub = register(subparsers)
        if "--verbose" not in sub._option_string_actions:
            sub.add_argument("-v", "--verbose", action="store_true", default=argparse.SUPPRESS,
                             help="show tracebacks of errors")
        if _name in READERS:
            _add_limit_arguments(sub)
    return parser


def _add_limit_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("input limits", "bounds on every input read (see salience.limits)")
    group.add_argument("--max-depth", metavar="N", default=None, help="how deeply JSON may nest (default: 64)")
    group.add_argument("--max-bytes", metavar="SIZE", default=None,
                       help="the largest file, JSON line, message list or request body, in bytes or with KiB, MiB, "
                            "GiB (default: 64MiB)")
    group.add_argument("--max-entries", metavar="N", default=None,
                       help="the most messages in one message list or transcript (default: 100000)")


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line with ``argv`` (default ``sys.argv[1:]``); returns the exit code."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # --help, --version, or a bad argument (argparse printed why)
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 2)
    verbose = bool(getattr(args, "verbose", False))
    try:
        chosen = from_options(max_depth=getattr(args, "max_depth", None), max_bytes=getattr(args, "max_bytes", None),
                              max_entries=getattr(args, "max_entries", None))
        with limited(chosen):
            return int(args.handler(args))
    except BaseException as exc:  # noqa: BLE001 - exit_code sorts them, and raises again what is not ours
        return exit_code(exc, verbose=verbose)
