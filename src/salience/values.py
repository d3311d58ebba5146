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
from collections.abc import Iterator
from functools import lru_cache

__all__ = ["call_values", "extract_values", "value_set"]

# Linear time, whatever the text (#15: never a hang), with the matches these patterns
# gave before. Three of them scan a run of characters and may fail at its end: a path's
# first part ('a-b-c' before '/'), a file name before its extension, and an identifier
# (whose lookaheads look for a digit and a letter in its run). Tried again from every place
# in the run where they may start, each scanning to the same end, they were quadratic in
# the run (20 KB of 'a-': 18 to 29 s; 200 KB: half an hour). From a later place in the same run such a
# pattern fails as it failed from the first one (a path part ends where it ends, an
# identifier's run only shrinks), so each is tried only where its run starts (the
# lookbehinds _PATH_RUN and _ID_RUN, which also let it start after one or two leading '-'
# or '#': '--x1', '#W123'), and _matches tries by hand the few places where the first try
# in a run happens elsewhere: in a run entered from inside, where an earlier match ended
# ('fields.py#L1474': the identifier after the path), and in a run whose first place is
# further in than the lookbehinds see ('---abc1', '_ab1-cd2'). There, what the pattern
# needs from the run's end is looked up once per run (_Runs). A path after its first part
# has at most _SEGMENTS more parts: starting again after each '.' of 'a/.a/.a/...', each
# try scanned the rest of the chain. So: the same values, kinds and spans as the patterns
# without these guards on all 19,295 texts of data/ and the shared data and on 800,000
# random strings of the characters that matter (tests/test_values_linear.py keeps a
# smaller such check), except a path of more than _SEGMENTS + 1 parts, which gives its
# last _SEGMENTS + 1. The email pattern was already tried only where its run starts.
_SEGMENTS = 32
_EMAIL = r"(?<![A-Za-z0-9._%+-])[A-Za-z0-9._%+-]+@[A-Za-z0-9.-]+\.[A-Za-z]{2,}"
_PATH_RUN = r"(?:(?<![\w\-])|(?<=(?<![\w\-])-)|(?<=(?<![\w\-])--))"
_PATH_TAIL = rf"(?:/[\w.\-]+){{1,{_SEGMENTS}}}\.\w{{1,5}}\b"
_EXT_TAIL = r"\.(?:py|js|ts|tsx|jsx|rs|go|java|c|h|cpp|md|json|yaml|yml|toml|txt|csv|html|css|sh|cfg|ini|sql|rb|php)\b"
_PATH = (
    r"(?<![\w/<])(?:~|\.{1,2})?/(?:[\w.\-]+/)*[\w.\-]+"
    rf"|\b(?=[\w\-]){_PATH_RUN}[\w\-]++(?:{_PATH_TAIL}|{_EXT_TAIL})"
)
_Q_IN = r"[^\"'`\s:,{}\[\]]"
# A single quote inside a word is an apostrophe, not a quote: "I don't use it anymore, it's
# gone" holds no value "t use it anymore, it" (which stubs and digests listed). A quote opens
# after no letter or digit (or after a string prefix such as f'...' or b'...') and closes
# before none.
_Q_OPEN = r"(?:(?<![A-Za-z0-9])|(?<=(?<![A-Za-z0-9])[bfruBFRU]))'"
_Q_CLOSE = r"'(?![A-Za-z0-9])"
_QUOTED = (
    rf"\"(?={_Q_IN})([^\"\n]{{3,80}}+)(?<={_Q_IN})\"(?!\s*:)"
    rf"|{_Q_OPEN}(?={_Q_IN})([^'\n]{{3,80}}+)(?<={_Q_IN}){_Q_CLOSE}(?!\s*:)"
    rf"|`(?={_Q_IN})([^`\n]{{3,80}}+)(?<={_Q_IN})`"
)
# Identifiers: tokens mixing letters and digits, or snake/kebab case with digits,
# or ALLCAPS codes of 3+ letters with digits (HAT136, W123, ORD-4421).
_K = r"[A-Za-z0-9_\-#]"
_ID_RUN = rf"(?:(?<!{_K})|(?<=(?<!{_K})[\-#])|(?<=(?<!{_K})[\-#][\-#]))"
_IDENT = rf"\b(?=[A-Za-z0-9]){_ID_RUN}(?=[A-Za-z_\-#]*+[0-9])(?=[0-9_\-#]*+[A-Za-z])[A-Za-z0-9]{_K}{{2,}}\b"
_SNAKE = r"\b[a-z][a-z0-9]*+(?:_[a-z0-9]++)+\b(?![\"']?\s*[:=])"
_NUMBER = (
    r"(?<![\w.])(?:\d{1,3}(?:,\d{3})+(?:\.\d+)?(?![\w])"
    r"|\d{3,}(?:\.\d+)?(?![\w])"
    r"|\d+\.\d+(?![\w.]))"
)
_NAME = r"\b[A-Z][a-z]+(?:[ \t]+[A-Z][a-z]+)+\b(?!\s*:)"
_DATE = r"\b\d{4}-\d{2}-\d{2}(?:[T ]\d{2}:\d{2}(?::\d{2})?)?\b"

_KINDS = ("email", "quoted", "date", "path", "ident", "snake", "number", "name")
_ALTERNATION = "|".join(
    f"(?P<{name}>{pat})" for name, pat in zip(_KINDS, (_EMAIL, _QUOTED, _DATE, _PATH, _IDENT, _SNAKE, _NUMBER, _NAME))
)
# Speed, not meaning (the same matches, spans and groups at every place, checked against the
# alternation of the patterns as they were written before on every text of data/ and the shared
# data and on random strings; tests/test_values_linear.py keeps such a check): a match starts only
# on a character that one of the patterns may start with, and never inside a run of word
# characters (every pattern starts after a lookbehind that refuses [A-Za-z0-9_] or at a \b, or
# on a character that is not \w), so _GUARD refuses the other places at once instead of trying
# each pattern there, a third of the search's time; the patterns that repeat a scan are written
# to scan once (a path's two tails after one run, the numbers' shared lookbehind, snake case and
# quoted strings without the backtracking that could only fail again).
# Nor does a match start on most words of prose (_PLAIN_WORD), which _GUARD refuses at once
# too, before the alternation is tried there (a fifth of the search's time on the latency
# benchmark's messages): an email's, a path's and an identifier's runs end where a word of
# ASCII letters does, before a character that is none of _GOES_ON ('@', '.', '-', '/', '#',
# '%', '+' or a word character), or before a '.' and such a character, and then they need an
# '@', a '/', a '.' and an extension, or a digit; snake case needs an '_'; a number, a date and
# a quoted string start on another character. So no match starts on a lower-case word that
# ends so; nor on a capitalised one that ends so and not before a space or a tab, or ends
# before spaces and tabs and no capital (a name's next word); nor on a number of one or two
# digits before a character that is none of _GOES_ON and not ',' (a number needs three
# digits, a ',' or a '.'; a date four digits; an identifier a letter).
_GOES_ON = r"[\w@.\-/#%+]"
_PLAIN_WORD = (
    rf"(?![a-z][A-Za-z]*+\.?(?!{_GOES_ON}))"
    rf"(?![A-Z][A-Za-z]*+(?:[ \t]++(?![A-Z])|\.(?!{_GOES_ON})|(?![ \t])(?!{_GOES_ON})))"
    r"(?!\d{1,2}(?![\w@.\-/#%+,]))"
)
# The guard's first part, "(?=[\w.%+\-\"'`~/])(?:(?<![A-Za-z0-9_])|(?!\w))" as first written (a character a
# pattern may start with, after none of [A-Za-z0-9_] or itself no word character), is written as one
# lookahead: such a character, and not a word character right after one of [A-Za-z0-9_]. The same places
# (De Morgan; at the text's start there is nothing to look behind at), which the engine refuses sooner
# inside a word, where most places are: a fifth of the scan's time on the latency benchmark's messages.
_GUARD = r"(?=[\w.%+\-\"'`~/](?<![A-Za-z0-9_]\w))" + _PLAIN_WORD
_PATTERN = re.compile(f"{_GUARD}(?:{_ALTERNATION})")


def _ascii_form(pattern: str) -> str:
    """``pattern`` for :data:`re.ASCII`, to match what ``pattern`` matches on an ASCII text.

    On an ASCII text, ``re.ASCII``'s ``\\w``, ``\\W``, ``\\d``, ``\\D``, ``\\b`` and ``\\B`` read as
    the Unicode ones do (the word characters and digits below 128 are ``[A-Za-z0-9_]`` and
    ``[0-9]``), but ``\\s`` does not: Unicode's also holds ``\\x1c``-``\\x1f``, which this spells out
    (inside a class and outside one). ``\\S`` would need its complement and is refused.
    """
    out: list[str] = []
    i, in_class, first = 0, False, False  # first: at a class's first character (a ']' there is literal)
    while i < len(pattern):
        c = pattern[i]
        if c == "\\":
            pair = pattern[i : i + 2]
            if pair == "\\S":  # internal: only ever given this module's own patterns, at import
                raise ValueError("_ascii_form: \\S is not rewritten")
            out.append(("\\s\\x1c-\\x1f" if in_class else "[\\s\\x1c-\\x1f]") if pair == "\\s" else pair)
            i, first = i + 2, False
            continue
        if not in_class and c == "[":
            in_class = first = True
            negated = pattern[i + 1 : i + 2] == "^"
            out.append("[^" if negated else "[")
            i += 2 if negated else 1
            continue
        if in_class and c == "]" and not first:
            in_class = False
        first = False
        out.append(c)
        i += 1
    return "".join(out)


# _PATTERN for an ASCII text (what most are): the same matches, spans and groups there
# (tests/test_values_linear.py checks it at every place), and the engine tests its classes
# from a table instead of Unicode's character database: about a sixth of the scan's time.
_PATTERN_ASCII = re.compile(_ascii_form(_PATTERN.pattern), re.ASCII)
_ORDER = {kind: n for n, kind in enumerate(_KINDS)}
# A quoted string's three inner groups (one per quote character, the text between the quotes: exactly one
# takes part in a quoted match, never empty), read by index rather than by a scan of all the groups.
_Q1, _Q2, _Q3 = range(_PATTERN.groupindex["quoted"] + 1, _PATTERN.groupindex["date"])

# For _matches: the first place at or after a position, inside the run it is in, where a
# path part or an identifier may start (a word boundary; for an identifier, a letter or
# digit after '-' or '#')...
_PATH_NEXT = re.compile(r"[\w\-]*?\b(?=[\w\-])")
_IDENT_NEXT = re.compile(rf"{_K}*?(?<=[\-#])(?=[A-Za-z0-9])")
# ... the first such place of a run that the lookbehinds above do not let the pattern try...
_PATH_FIRST = re.compile(r"(?<![\w\-])-{3,}+(?=\w)")
_IDENT_FIRST = re.compile(
    rf"(?<!{_K})(?!(?<!\w)[A-Za-z0-9])(?>{_K}*?(?<=[\-#])(?=[A-Za-z0-9]))"
    rf"(?<!(?<!{_K})[\-#])(?<!(?<!{_K})[\-#][\-#])"
)
# _IDENT_FIRST's matches, found faster (_ident_firsts): each starts a run of _K characters, on
# '_', '-' or '#' (_IDENT_FIRST_MARK) or on a letter or digit right after a word character
# outside _K, which only a text with a non-ASCII character holds (_IDENT_FIRST_WORD). Each is led
# by the character it starts with, which the regex engine looks for alone, instead of trying
# every place of the text (and runs are apart, so the two patterns' matches are _IDENT_FIRST's).
_IDENT_REST = rf"(?>{_K}*?(?<=[\-#])(?=[A-Za-z0-9]))(?<!(?<!{_K})[\-#])(?<!(?<!{_K})[\-#][\-#])"
_IDENT_FIRST_MARK = re.compile(rf"[_\-#](?<!{_K}[_\-#]){_IDENT_REST}")
_IDENT_FIRST_WORD = re.compile(rf"[A-Za-z0-9](?<=[^\W_A-Za-z0-9][A-Za-z0-9]){_IDENT_REST}")
# ... and, from where a run ends, what a path part or an identifier needs there.
_PATH_CHAR = re.compile(r"[\w\-]")
_IDENT_CHAR = re.compile(_K)
_PATH_END = re.compile(r"[\w\-]*+")
_IDENT_END = re.compile(rf"{_K}*+")
_PATH_AFTER = re.compile(_PATH_TAIL)
_EXT_AFTER = re.compile(_EXT_TAIL)
_WORD = re.compile(r"\w")
_DIGIT = re.compile(r"[0-9]")
_LETTER = re.compile(r"[A-Za-z]")
_IDENT_BOUNDARY = re.compile(r"[\-#][A-Za-z0-9_]|[A-Za-z0-9_][\-#]")
_INSIDE = re.compile(r"(?<=[\w\-#])[\w\-#]")  # both _PATH_CHAR and _IDENT_CHAR are in [\w\-#]

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


class _Runs:
    """What _matches learns about the runs it looks into, once per run."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.path_run = (0, 0)  # (where it was first looked at, where it ends)
        self.ident_run = (0, 0)
        self.ident_facts = (-1, -1, -1)  # last digit, last letter, last word boundary

    def path_end(self, q: int) -> int:
        lo, end = self.path_run
        if not lo <= q < end:
            end = _PATH_END.match(self.text, q).end()  # type: ignore[union-attr]  # matches ''
            self.path_run = (q, end)
        return end

    def ident_end(self, q: int) -> tuple[int, int, int, int]:
        lo, end = self.ident_run
        if not lo <= q < end:
            text = self.text
            end = _IDENT_END.match(text, q).end()  # type: ignore[union-attr]  # matches ''
            back = text[q:end][::-1]
            digit, letter, inner = _DIGIT.search(back), _LETTER.search(back), _IDENT_BOUNDARY.search(back)
            at_end = bool(_WORD.match(text[end - 1])) != bool(end < len(text) and _WORD.match(text[end]))
            self.ident_run = (q, end)
            self.ident_facts = (end - 1 - digit.start() if digit else -1,
                                end - 1 - letter.start() if letter else -1,
                                end if at_end else end - 1 - inner.start() if inner else -1)
        return (end, *self.ident_facts)


def _path_at(runs: _Runs, q: int) -> int | None:
    """Where the path pattern, tried at ``q`` (a word boundary in a [\\w-] run), ends; None if it fails."""
    end = runs.path_end(q)
    tail = _PATH_AFTER.match(runs.text, end) or _EXT_AFTER.match(runs.text, end)
    return tail.end() if tail else None


def _ident_at(runs: _Runs, q: int) -> int | None:
    """Where the identifier pattern, tried at ``q`` (a letter or digit after a boundary), ends; None if it fails."""
    _, digit, letter, boundary = runs.ident_end(q)
    return boundary if digit >= q and letter >= q and boundary >= q + 3 else None


def _try(text: str, runs: _Runs, q: int, kinds: set[str],
         pattern: re.Pattern[str] = _PATTERN) -> tuple[str, int, int, re.Match[str] | None] | None:
    """What the patterns, tried in order at ``q``, match there; those in ``kinds`` whatever their lookbehinds
    (``pattern``: :data:`_PATTERN`, or :data:`_PATTERN_ASCII` for an ASCII ``text``)."""
    match = pattern.match(text, q)
    got = (match.lastgroup or "") if match else ""
    rank = _ORDER[got] if match else len(_ORDER)
    for kind, at in (("path", _path_at), ("ident", _ident_at)):
        if kind in kinds and rank >= _ORDER[kind]:
            if got == kind:
                break
            end = at(runs, q)
            if end is not None:
                return kind, q, end, None
    return (got, match.start(), match.end(), match) if match else None


def _ident_firsts(text: str) -> list[tuple[int, str]]:
    """``[(m.end(), "ident") for m in _IDENT_FIRST.finditer(text)]``, by the faster patterns."""
    ends = [m.end() for m in _IDENT_FIRST_MARK.finditer(text)]
    if not text.isascii():
        ends = sorted(ends + [m.end() for m in _IDENT_FIRST_WORD.finditer(text)])
    return [(end, "ident") for end in ends]


def _matches(text: str) -> Iterator[tuple[str, int, int, re.Match[str] | None]]:
    """``_PATTERN.finditer(text)`` as the patterns without their run lookbehinds would scan
    (see the comment above _SEGMENTS): ``(kind, start, end, match or None)``.

    Most texts hold no place where a first try in a run happens elsewhere (no ``firsts``, and
    no match ends inside a run): there the matches are ``_PATTERN.finditer``'s, taken in C
    (each of its matches is the search from where the last one ended, as below, since no
    pattern matches ''); the first match that ends inside a run hands over to the loop."""
    firsts = sorted(([(m.end(), "path") for m in _PATH_FIRST.finditer(text)] if "---" in text else [])
                    + (_ident_firsts(text) if "-" in text or "#" in text else []))
    pos = 0
    pattern = _PATTERN_ASCII if text.isascii() else _PATTERN
    if not firsts:
        inside = _INSIDE.match
        for match in pattern.finditer(text):
            yield match.lastgroup or "", match.start(), match.end(), match
            pos = match.end()
            if inside(text, pos):  # (pos > 0: a match is never empty)
                break
        else:
            return
    yield from _scan(text, firsts, pos, pattern)


def _scan(text: str, firsts: list[tuple[int, str]], pos: int,
          pattern: re.Pattern[str] = _PATTERN) -> Iterator[tuple[str, int, int, re.Match[str] | None]]:
    """:func:`_matches` from ``pos`` (0, or where a match ended), tried place by place (``pattern``: as
    :func:`_try` takes it)."""
    runs = _Runs(text)
    i, n, count = 0, len(text), len(firsts)
    found = pattern.search(text, pos)
    while pos <= n:
        if found is not None and found.start() < pos:  # else still the first match from pos
            found = pattern.search(text, pos)
        limit = found.start() if found else n
        places: dict[int, set[str]] = {}
        # entered a run from inside: the first place in it to try (_INSIDE: at most places no run
        # goes on across pos, which one test tells)
        if 0 < pos < n and _INSIDE.match(text, pos):
            for kind, same, after in (("path", _PATH_CHAR, _PATH_NEXT), ("ident", _IDENT_CHAR, _IDENT_NEXT)):
                if same.match(text, pos - 1) and same.match(text, pos):
                    place = after.match(text, pos)
                    if place is not None and place.end() <= limit:
                        places.setdefault(place.end(), set()).add(kind)
        while i < count and firsts[i][0] < pos:
            i += 1
        chosen = None
        while chosen is None and (places or (i < count and firsts[i][0] <= limit)):  # the places in order, up to
            first = firsts[i][0] if i < count and firsts[i][0] <= limit else n + 1  # the first that matches
            q = min(min(places, default=n + 1), first)
            if q > n:
                break
            kinds = places.pop(q, set())
            while i < count and firsts[i][0] == q:
                kinds.add(firsts[i][1])
                i += 1
            chosen = _try(text, runs, q, kinds, pattern)
        if chosen is None:
            if found is None:
                return
            chosen = (found.lastgroup or "", found.start(), found.end(), found)
        yield chosen
        pos = chosen[2]


@lru_cache(maxsize=100_000)
def _extract(text: str) -> tuple[str, ...]:
    out: dict[str, None] = {}
    for kind, start, end, match in _matches(text):
        if match is None:
            raw = text[start:end]
        elif kind == "quoted":
            raw = match[_Q1] or match[_Q2] or match[_Q3]
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
    # depth first, in document order, without recursion (json.loads reads arguments nested
    # deeper than Python's recursion limit allows a recursive walk)
    stack = [obj]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            stack.extend(reversed(list(item.values())))
        elif isinstance(item, list):
            stack.extend(reversed(item))
        elif isinstance(item, bool) or item is None:
            continue
        elif isinstance(item, (int, float)):
            value = _normalise("number", repr(item))
            if value is not None:
                out.setdefault(value, None)
        elif isinstance(item, str):
            s = item.strip()
            if 3 <= len(s) <= 80 and s.lower() not in _STOP:
                out.setdefault(s, None)
            for v in _extract(s):
                out.setdefault(v, None)


def call_values(arguments: str) -> list[str]:
    """The values a tool call's JSON ``arguments`` use: every leaf string (3 to 80
    characters) and number, and the values inside longer strings; keys are not values.
    Arguments that are not JSON, or nested too deep for the JSON reader, are read as text.

    >>> call_values('{"user_id": "mia_li_3668", "flights": [{"flight_number": "HAT136"}], "n": 2}')
    ['mia_li_3668', 'HAT136']
    """
    try:
        obj = json.loads(arguments)
    except (json.JSONDecodeError, TypeError, RecursionError):
        return extract_values(arguments or "")
    out: dict[str, None] = {}
    _leaves(obj, out)
    return list(out)
