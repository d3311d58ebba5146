"""What the loaders share: reading a JSON file, or a file of JSON lines."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from salience.errors import FormatError

__all__ = ["json_lines", "read_json"]


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


def json_lines(path: Path) -> Iterator[tuple[int, str, Any]]:
    """``(line number, "path:line", value)`` for each non-blank line of the JSON-lines file
    ``path`` (a byte-order mark before the first line is skipped); a :class:`FormatError`
    naming the file and line for what cannot be read."""
    try:
        with path.open("rb") as fh:
            for lineno, raw in enumerate(fh, 1):
                where = f"{path}:{lineno}"
                try:
                    line = raw.decode("utf-8-sig" if lineno == 1 else "utf-8").rstrip("\r\n")
                except UnicodeDecodeError as exc:
                    raise FormatError(f"{where}: not UTF-8 text (byte {exc.start + 1} of the line: {exc.reason})"
                                      ) from None
                if not line.strip():
                    continue
                try:
                    value = json.loads(line)
                except json.JSONDecodeError as exc:  # the column within the line (colno counts past its end)
                    raise FormatError(f"{where}: malformed JSON: {exc.msg} at column {exc.pos + 1}") from None
                yield lineno, where, value
    except OSError as exc:
        raise FormatError(f"{path}: cannot be read ({exc.strerror or exc})") from None
