"""``python -m salience``: the same as the ``salience`` command."""

from __future__ import annotations

import sys

from salience.cli import main

if __name__ == "__main__":
    sys.exit(main())
