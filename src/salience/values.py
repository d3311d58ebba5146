"""Values an agent carries from one step to another: ids, numbers, paths, names.

These are what make an old entry needed later (a flight number read in a tool
result and used in a booking call), so the same extraction serves hindsight labels,
reference features, stubs (which keep an entry's key values) and the agent
reference-recall benchmark.

>>> extract_values('Booked HAT136 for mia_li_3668, card credit_card_4421486, total $1,250.')
['HAT136', 'mia_li_3668', 'credit_card_4421486', '1250']
>>> extract_values('see "Blue Lagoon" in /src/app/main.py line 1458, mail a.b@x.org')
['Blue Lagoon', '/src/app/main.py', '1458', 'a.b@x.org']
>>> extract_values('the cat sat on 12 mats')
[]
"""

from __future__ import annotations

import json
import re
from functools import lru_cache

__all__ = ["call_values", "extract_values", "value_set"]

# Only from the start of a run of local-part characters: tried at every position inside a
# long run (60 KB of letters, say), the local part was scanned to the run's end each time,
# quadratic in the run (6.9 s for 60,000 letters; #15's fuzz found it). From inside a run
# it could only end where the match from its start ends: the values are the same (on all
# 23,530 texts of the samples and the shared data, match for match).
_EMAIL = r"(?<![A-Za-z0-9._%+-])[A-Za-z0-9._%+-]+@[A-Za-z0-9.-]+\.[A-Za-z]{2,}"
_PATH = (
    r"(?<![\w/])(?:~|\.{1,2})?/(?:[\w.\-]+/)*[\w.\-]+"
    r"|\b[\w\-]+(?:/[\w.\-]+)+\.\w{1,5}\b"
    r"|\b[\w\-]+\.(?:py|js|ts|tsx|jsx|rs|go|java|c|h|cpp|md|json|yaml|yml|toml|txt|csv|html|css|sh|cfg|ini|sql|rb|php)\b"
)
_Q_IN = r"[^\"'`\s:,{}\[\]]"
_QUOTED = (
    rf"\"({_Q_IN}[^\"\n]{{1,78}}{_Q_IN})\"(?!\s*:)"
    rf"|'({_Q_IN}[^'\n]{{1,78}}{_Q_IN})'(?!\s*:)"
    rf"|`({_Q_IN}[^`\n]{{1,78}}{_Q_IN})`"
)
# Identifiers: tokens mixing letters and digits, or snake/kebab case with digits,
# or ALLCAPS codes of 3+ letters with digits (HAT136, W123, ORD-4421).
_IDENT = r"\b(?=[A-Za-z0-9_\-#]*[0-9])(?=[A-Za-z0-9_\-#]*[A-Za-z])[A-Za-z0-9][A-Za-z0-9_\-#]{2,}\b"
_SNAKE = r"\b[a-z][a-z0-9]*(?:_[a-z0-9]+)+\b(?![\"']?\s*[:=])"
_NUMBER = (
    r"(?<![\w.])\d{1,3}(?:,\d{3})+(?:\.\d+)?(?![\w])"
    r"|(?<![\w.])\d{3,}(?:\.\d+)?(?![\w])"
    r"|(?<![\w.])\d+\.\d+(?![\w.])"
)
_NAME = r"\b[A-Z][a-z]+(?:[ \t]+[A-Z][a-z]+)+\b(?!\s*:)"
_DATE = r"\b\d{4}-\d{2}-\d{2}(?:[T ]\d{2}:\d{2}(?::\d{2})?)?\b"

_PATTERN = re.compile(
    "|".join(
        f"(?P<{name}>{pat})"
        for name, pat in (
            ("email", _EMAIL),
            ("quoted", _QUOTED),
            ("date", _DATE),
            ("path", _PATH),
            ("ident", _IDENT),
            ("snake", _SNAKE),
            ("number", _NUMBER),
            ("name", _NAME),
        )
    )
)

# Very common tokens that look like values but carry no information.
_STOP = {
    "utf-8", "http", "https", "e.g", "i.e", "json", "none", "null", "true", "false",
    "the", "this", "that", "self",
}


def _normalise(kind: str, text: str) -> str | None:
    text = text.strip().strip(".,;:")
    if kind == "number":
        text = text.replace(",", "")
        if "." in text:
            head, _, tail = text.partition(".")
            text = head if set(tail) <= {"0"} else text
        if len(text.replace(".", "")) < 3:
            return None
    if len(text) < 3 or text.lower() in _STOP:
        return None
    return text


@lru_cache(maxsize=100_000)
def _extract(text: str) -> tuple[str, ...]:
    out: dict[str, None] = {}
    for match in _PATTERN.finditer(text):
        kind = match.lastgroup or ""
        if kind == "quoted":
            raw = next((g for g in match.groups() if g is not None and g != match.group(0)), "")
        else:
            raw = match.group(kind)
        value = _normalise(kind, raw)
        if value is not None:
            out.setdefault(value, None)
    return tuple(out)


def extract_values(text: str) -> list[str]:
    """The distinct values in ``text`` (ids, numbers of 3+ digits, quoted strings,
    paths, emails, multi-word names), in order of first appearance.

    Numbers are normalised (``1,250`` and ``1250.00`` both give ``1250``) so that
    a value reads the same in a tool result and in the JSON arguments that reuse it.
    """
    if not text:
        return []
    return list(_extract(text))


def value_set(text: str) -> frozenset[str]:
    """:func:`extract_values` as a set."""
    return frozenset(_extract(text)) if text else frozenset()


def _leaves(obj: object, out: dict[str, None]) -> None:
    if isinstance(obj, dict):
        for v in obj.values():
            _leaves(v, out)
    elif isinstance(obj, list):
        for v in obj:
            _leaves(v, out)
    elif isinstance(obj, bool) or obj is None:
        return
    elif isinstance(obj, (int, float)):
        value = _normalise("number", repr(obj))
        if value is not None:
            out.setdefault(value, None)
    elif isinstance(obj, str):
        s = obj.strip()
        if 3 <= len(s) <= 80 and s.lower() not in _STOP:
            out.setdefault(s, None)
        for v in _extract(s):
            out.setdefault(v, None)


def call_values(arguments: str) -> list[str]:
    """The values a tool call's JSON ``arguments`` use: every leaf string (3 to 80
    characters) and number, and the values inside longer strings; keys are not values.
    Arguments that are not JSON are read as text.

    >>> call_values('{"user_id": "mia_li_3668", "flights": [{"flight_number": "HAT136"}], "n": 2}')
    ['mia_li_3668', 'HAT136']
    """
    try:
        obj = json.loads(arguments)
    except (json.JSONDecodeError, TypeError):
        return extract_values(arguments or "")
    out: dict[str, None] = {}
    _leaves(obj, out)
    return list(out)
