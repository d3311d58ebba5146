"""What the loaders share: reading a JSON file."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from salience.errors import FormatError

__all__ = ["read_json"]


def read_json(path: Path) -> Any:
    """The JSON document in ``path``; a :class:`FormatError` naming the file (and line) otherwise."""
    try:
        with path.open("r", encoding="utf-8") as fh:
            return json.load(fh)
    except UnicodeDecodeError as exc:
        raise FormatError(f"{path}: not UTF-8 text (byte {exc.start}: {exc.reason})") from None
    except json.JSONDecodeError as exc:
        raise FormatError(f"{path}:{exc.lineno}: malformed JSON: {exc.msg} at column {exc.colno}") from None
    except OSError as exc:
        raise FormatError(f"{path}: cannot be read ({exc.strerror or exc})") from None
