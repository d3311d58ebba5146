"""Small helpers the loaders share: reading a JSON file, quoting a bad value."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from salience.errors import FormatError

__all__ = ["got", "read_json"]


def got(value: object) -> str:
    """A short quote of ``value`` for an error message, with its type unless it is a str.

    >>> got("abc"), got(3)
    ("'abc'", '3 that is a int')
    """
    text = repr(value)
    if len(text) > 60:
        text = text[:57] + "..."
    return text if isinstance(value, str) else f"{text} that is a {type(value).__name__}"


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
