"""What the loaders share: reading a JSON file, or a file of JSON lines, within the limits.

Both apply :mod:`salience.limits` (:func:`salience.limits.current`): a file (for
:func:`read_json`) or a line (for :func:`json_lines`) larger than ``max_bytes``, or
nested deeper than ``max_depth``, is a :class:`~salience.errors.LimitError` naming the
file and line, read no further than the limit.

Both refuse ``NaN``, ``Infinity`` and ``-Infinity`` (a :class:`~salience.errors.FormatError`
naming the file, the line, the column and the field, ``at ['messages'][2]['label']``):
JSON has none of them, though Python's parser reads them, and a non-finite number in a
data set (a label, an argument, a score) would flow into features, labels and the JSON
salience writes, which the providers and standard parsers refuse.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from salience.errors import FormatError
from salience.limits import check_size, current, deeper_than, loads

__all__ = ["json_lines", "read_json"]


class _NotJSON(ValueError):
    """``NaN``, ``Infinity`` or ``-Infinity`` in a line: JSON has none of them."""


def _constant(name: str) -> Any:
    raise _NotJSON(name)


def read_json(path: Path) -> Any:
    """The JSON document in ``path``; a :class:`FormatError` ``<path>: not valid JSON: line L,
    column C: <reason>`` for what is not JSON, ``NaN`` and ``Infinity`` included (JSON has
    neither, though Python's parser reads them; the message also names the field)."""
    limits = current()
    try:
        check_size(path.stat().st_size, where=str(path), limits=limits)
        with path.open("r", encoding="utf-8") as fh:
            text = fh.read()
    except UnicodeDecodeError as exc:
        raise FormatError(f"{path}: not UTF-8 text (byte {exc.start}: {exc.reason})") from None
    except OSError as exc:
        raise FormatError(f"{path}: cannot be read ({exc.strerror or exc})") from None
    return loads(text, where=str(path), limits=limits, strict=True)


def json_lines(path: Path) -> Iterator[tuple[int, str, Any]]:
    """``(line number, "path:line", value)`` for each non-blank line of the JSON-lines file
    ``path`` (a byte-order mark before the first line is skipped); a :class:`FormatError`
    naming the file and line for what cannot be read, ``NaN`` and ``Infinity`` included
    (naming the column and the field too)."""
    limits = current()
    try:
        with path.open("rb") as fh:
            lineno = 0
            while True:
                raw = fh.readline(limits.max_bytes + 1)  # a line is read no further than the limit
                if not raw:
                    break
                lineno += 1
                where = f"{path}:{lineno}"
                if len(raw) > limits.max_bytes:
                    check_size(len(raw), where=where, limits=limits, unit="bytes or more in the line")
                try:
                    line = raw.decode("utf-8-sig" if lineno == 1 else "utf-8").rstrip("\r\n")
                except UnicodeDecodeError as exc:
                    raise FormatError(f"{where}: not UTF-8 text (byte {exc.start + 1} of the line: {exc.reason})"
                                      ) from None
                if not line.strip():
                    continue
                try:
                    value = json.loads(line, parse_constant=_constant)
                except json.JSONDecodeError as exc:  # the column within the line (colno counts past its end)
                    raise FormatError(f"{where}: malformed JSON: {exc.msg} at column {exc.pos + 1}") from None
                except (RecursionError, _NotJSON):  # a LimitError (how deep, where) or a FormatError (NaN, where)
                    value = loads(line, where=where, limits=limits, lines=False, strict=True)
                if deeper_than(value, limits.max_depth):
                    loads(line, where=where, limits=limits, lines=False)
                yield lineno, where, value
    except OSError as exc:
        raise FormatError(f"{path}: cannot be read ({exc.strerror or exc})") from None
