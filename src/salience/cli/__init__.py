"""The ``salience`` command line.

Usage::

    salience stats PATH... [--json] [--top N]
    salience label PATH... --out FILE [--mode auto|hindsight|evidence] [--overwrite]
    salience train PATH... --out FILE [...]
    salience bench PATH... [--scorer S] [...]
    salience tune PATH... --domain NAME [--scorer S] [...]
    salience compact FILE --budget N [--scorer S] [...]
    salience inspect FILE [--budget N] [--scorer S] [...]
    salience versions [--name NAME] [--json]
    salience promote NAME VERSION [--alias champion]
    salience demo [DATA]
    salience --version

Inputs are files or folders in any layout :func:`salience.load_transcripts` knows.
Exit codes: 0 on success; 2 on bad input (a missing file, a malformed one, a bad
argument), with one line on stderr, ``salience: error: <message>``; 1 on an internal
error (a bug: ``--verbose`` shows its traceback); 130 when interrupted.

The package::

    cli/
      __init__.py   this page; exposes main (the ``salience`` script, ``python -m salience``)
      dispatch.py   COMMANDS, build_parser, main: which command runs, and its exit code
      common.py     helpers every command uses: stdout, progress, load_inputs, print_stats, exit_code
      scorers.py    the one --scorer grammar (file, models:/..., runs:/..., baseline name, default)
      stats.py label.py train.py bench.py tune.py compact.py inspect.py registry.py demo.py
                    one module per command (registry: versions and promote)
      compaction.py what compact and inspect share: the input file, --budget, --phase, --policy, --profile

Commands import their helpers from :mod:`salience.cli.common`, not from this package.
"""

from __future__ import annotations

from salience.cli.dispatch import COMMANDS, build_parser, main

__all__ = ["COMMANDS", "build_parser", "main"]
