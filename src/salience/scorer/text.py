"""Small text utilities the scorers share: entry text, words, keyword rules.

Pure functions over strings and entries, no heavy imports. The keyword lists
(:data:`DECISION_WORDS`, :data:`ERROR_PATTERNS`) are module constants so that the
keyword baseline and the learned scorer's features read the same rules.

>>> tokenize("Refund order #W123 for mia_li_3668, don't wait")
['refund', 'order', 'w123', 'for', 'mia_li_3668', "don't", 'wait']
>>> tokenize("确认预算")
['确', '认', '预', '算', '确认', '认预', '预算']
>>> content_words("What is the budget for the trip?")
['budget', 'trip']
>>> count_decision_words("We decided: budget must stay under $500. 必须确认")
5
>>> has_error_marker("Process finished with exit code 0")
False
>>> has_error_marker("ValueError: bad input")
True
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from salience.transcript import Entry, Transcript

__all__ = [
    "DECISION_WORDS",
    "ERROR_PATTERNS",
    "STOPWORDS",
    "content_words",
    "count_error_markers",
    "count_decision_words",
    "entry_text",
    "entry_texts",
    "has_error_marker",
    "last_user_text",
    "query_overlap",
    "tokenize",
    "truncate",
]

#: Words that mark a decision, a constraint or a commitment (English, then Chinese).
#: English words match whole words, case-insensitively (``don't`` also with ``’``);
#: Chinese ones match as substrings.
DECISION_WORDS: tuple[str, ...] = (
    "confirm",
    "confirmed",
    "decide",
    "decided",
    "decision",
    "must",
    "budget",
    "don't",
    "do not",
    "rejected",
    "deadline",
    "compatible",
    "required",
    "never",
    "always",
    "important",
    "确认",
    "决定",
    "必须",
    "预算",
    "不要",
    "已否决",
    "兼容",
    "截止",
)

#: Regular expressions (case-sensitive) that mark an error in a tool result or a
#: message: a Python traceback, an ``...Error`` name, ``failed``/``FAILED``, a
#: non-zero exit code or status.
ERROR_PATTERNS: tuple[str, ...] = (
    r"Traceback \(most recent call last\)|\bTraceback\b",
    r"\b[A-Za-z]*Error\b",
    r"\b[Ff]ailed\b|\bFAILED\b",
    r"\bexit (?:code|status)[ :=]*[1-9]\d*\b",
)

#: A small English stop-word list for query-overlap features (not used by BM25).
STOPWORDS: frozenset[str] = frozenset(
    """a about above after again all am an and any are as at be been before being below
    between both but by can could did do does doing down during each few for from further
    had has have having he her here hers him his how i if in into is it its itself just me
    more most my no nor not now of off on once only or other our ours out over own same she
    should so some such than that the their theirs them then there these they this those
    through to too under until up very was we were what when where which while who whom why
    will with would you your yours please can't i'm it's let's ok okay""".split()
)

_CJK = "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
_TOKEN = re.compile(rf"[{_CJK}]+|[^\W{_CJK}]+(?:'[^\W{_CJK}]+)*")
_CJK_RUN = re.compile(rf"[{_CJK}]+")


def _keyword_pattern(words: Iterable[str]) -> re.Pattern[str]:
    """One case-insensitive alternation of ``words`` (English ones as whole words).

    Led by a lookahead for the characters a word can start with: every match starts
    with one, so the matches are the same, and the engine skips the other positions at
    once instead of trying each alternative there (about 5x faster on agent logs).
    """
    words = list(words)
    parts = []
    lead: set[str] = set()
    for word in words:
        if _CJK_RUN.search(word):
            parts.append(re.escape(word))
            lead.add(word[:1])
        else:
            body = r"\s+".join(re.escape(w) for w in word.split())
            body = body.replace("'", "['’]")
            parts.append(rf"\b{body}\b")
            first = word.split()[0][:1] if word.split() else ""
            lead.update(("'", "’") if first == "'" else (first,))
    alternation = "|".join(parts)
    if "" in lead:  # a blank word matches where no character leads: no lookahead
        return re.compile(alternation, re.IGNORECASE)
    chars = "".join(re.escape(c) for c in sorted(lead))
    return re.compile(rf"(?=[{chars}])(?:{alternation})", re.IGNORECASE)


def _ascii_stems(words: Iterable[str]) -> tuple[str, ...] | None:
    """For each of ``words`` that can match an ASCII text, its longest piece without spaces or
    apostrophes, lower-cased: every match of :func:`_keyword_pattern` in an ASCII text holds one
    of these (case aside), so an ASCII text that holds none has no match.

    Words with a CJK character never match an ASCII text (CJK has no case), so they add
    nothing. None (no prefilter) when an English word is not ASCII: case-insensitive, a
    non-ASCII letter may match an ASCII one (the Kelvin sign matches ``k``).
    """
    stems: list[str] = []
    for word in words:
        if _CJK_RUN.search(word):
            continue
        pieces = [p for p in re.split(r"\s+|'", word.lower()) if p]
        if not word.isascii() or not pieces:
            return None
        stems.append(max(pieces, key=len))
    return tuple(dict.fromkeys(stems))


def _ascii_word_patterns(words: Iterable[str]) -> tuple[tuple[str, re.Pattern[str]], ...] | None:
    """For each of ``words`` that can match an ASCII text, its stem (:func:`_ascii_stems`) and a
    pattern of its whole-word matches in that text lower-cased, led by the word's first piece
    as a literal (which the regex engine looks for alone) with the word boundary before it
    looked behind: ``confirm(?<=\\bconfirm)\\b``. None when :func:`_ascii_stems` is None.

    In an ASCII text, :func:`_keyword_pattern`'s matches are these patterns' matches in the
    text lower-cased (the case-insensitive match of an ASCII word in ASCII text is the
    lower-cased match), and no two of them overlap: each is a whole word (or two, ``do not``)
    between word boundaries, and no keyword is a whole word inside another. So the count of
    the one is the sum of the counts of the others, each pattern run only on a text that
    holds its stem, instead of the whole alternation tried at every place.
    """
    words = [w for w in words if not _CJK_RUN.search(w)]
    stems = _ascii_stems(words)
    if stems is None:
        return None
    out = []
    for word in words:
        pieces = word.lower().split()
        if not pieces:
            return None
        lead = re.split("'", pieces[0])[0]
        if not lead or not lead[0].isalnum():
            return None  # a word that starts with an apostrophe: no literal lead
        body = r"\s+".join(re.escape(w) for w in pieces).replace("'", "['’]")
        rest = body[len(re.escape(lead)):]
        stem = max((p for p in re.split(r"\s+|'", word.lower()) if p), key=len)
        out.append((stem, re.compile(rf"{re.escape(lead)}(?<=\b{re.escape(lead)}){rest}\b")))
    return tuple(out)


_DECISION_RE = _keyword_pattern(DECISION_WORDS)
_DECISION_STEMS = _ascii_stems(DECISION_WORDS)
_DECISION_ASCII = _ascii_word_patterns(DECISION_WORDS)
#: Led by a lookahead for an ASCII letter, which every match of every pattern starts with (the
#: same matches; the engine skips the other places at once: half the time on agent logs).
_ERROR_RE = re.compile("(?=[A-Za-z])(?:" + "|".join(f"(?:{p})" for p in ERROR_PATTERNS) + ")")
#: For each of :data:`ERROR_PATTERNS`, in order, the strings one of which each of its
#: matches holds (case-sensitive, as the patterns are). A text that holds none of them has no
#: error marker, and the regex is not run on it. Keep in step with ``ERROR_PATTERNS``
#: (tests/test_speed_paths.py checks each pattern's alternatives against them).
_ERROR_NEEDLES: tuple[tuple[str, ...], ...] = (("Traceback",), ("Error",), ("ailed", "FAILED"), ("exit ",))
_ERROR_ANY = tuple(n for needles in _ERROR_NEEDLES for n in needles)
#: Each of :data:`ERROR_PATTERNS` alone. No two patterns' matches overlap (each is whole words:
#: ``Traceback``, optionally with its header; a word of letters ending in ``Error``; ``failed``;
#: ``exit code`` or ``exit status`` and a number), and one place starts a match of one pattern at
#: most, so the alternation's count is the sum of theirs, each run only where its needles are.
#: The third and fourth are written led by their literal text, with the word boundary before it looked
#: behind (``[Ff]ailed(?<=\b[Ff]ailed)``), which the regex engine looks for alone instead of trying
#: every place: the same matches (tests/test_speed_paths.py), in a third of the time or less.
_ERROR_EACH = (
    re.compile(ERROR_PATTERNS[0]),
    re.compile(ERROR_PATTERNS[1]),
    re.compile(r"[Ff]ailed(?<=\b[Ff]ailed)\b|FAILED(?<=\bFAILED)\b"),
    re.compile(r"exit (?<=\bexit )(?:code|status)[ :=]*[1-9]\d*\b"),
)
_ASCII_LETTERS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz")
#: A word as :data:`_TOKEN` reads it, in a text without CJK characters.
_WORD = re.compile(r"\w+(?:'\w+)*")
#: :data:`_WORD` for an ASCII text: there ``re.ASCII``'s ``\w`` is the Unicode one (the word characters
#: below 128 are [A-Za-z0-9_]), which the engine tests from a table instead of Unicode's character
#: database, and nothing follows a repeat that could need it to give a character back (possessive):
#: the same words in about 60% of the time (tests/test_scorer_first_call.py).
_WORD_ASCII = re.compile(r"\w++(?:'\w++)*+", re.ASCII)


def truncate(text: str, max_chars: int) -> str:
    """The first ``max_chars`` characters of ``text`` (the head is what readers see first)."""
    return text if len(text) <= max_chars else text[:max_chars]


def tokenize(text: str) -> list[str]:
    """Lower-cased words of ``text``, for BM25 and overlap features.

    Latin words, digits and underscores stay together (``mia_li_3668``, ``w123``),
    an inner apostrophe too (``don't``); other punctuation splits. A run of CJK
    characters gives its characters, then its bigrams, so Chinese text without
    spaces still matches word-level queries.
    """
    low = text.replace("’", "'").lower()
    if low.isascii():
        return _WORD_ASCII.findall(low)
    if _CJK_RUN.search(low) is None:
        return _WORD.findall(low)  # no CJK: the words alone, in a simpler regex
    tokens: list[str] = []
    bigrams: list[str] = []
    for match in _TOKEN.finditer(low):
        word = match.group()
        if _CJK_RUN.fullmatch(word):
            tokens.extend(word)
            bigrams.extend(word[i : i + 2] for i in range(len(word) - 1))
        else:
            tokens.append(word)
    return tokens + bigrams


def content_words(text: str) -> list[str]:
    """:func:`tokenize` without :data:`STOPWORDS`, duplicates removed, order kept."""
    seen: dict[str, None] = {}
    for token in tokenize(text):
        if token not in STOPWORDS:
            seen.setdefault(token, None)
    return list(seen)


def query_overlap(query_words: Iterable[str], text: str) -> float:
    """Share of ``query_words`` that occur among the words of ``text``, in [0, 1].

    >>> query_overlap(["refund", "flight"], "Your flight HAT136 is booked")
    0.5
    """
    wanted = set(query_words)
    if not wanted:
        return 0.0
    return len(wanted & set(tokenize(text))) / len(wanted)


def count_decision_words(text: str) -> int:
    """How many :data:`DECISION_WORDS` occurrences ``text`` holds."""
    if _DECISION_ASCII is not None and text.isascii():
        low = text.lower()
        # each stem looked for in C; a word's pattern run only where its stem is (_ascii_word_patterns)
        return sum([len(pattern.findall(low)) for stem, pattern in _DECISION_ASCII if stem in low])
    return len(_DECISION_RE.findall(text))  # findall: the same matches, without a match object each


def count_error_markers(text: str) -> int:
    """How many :data:`ERROR_PATTERNS` matches ``text`` holds.

    >>> count_error_markers("Traceback (most recent call last): ValueError: x; 2 failed")
    3
    """
    if not any(map(text.__contains__, _ERROR_ANY)):
        return 0
    total = 0  # the second pattern, a word ending in Error, by _error_words (a test ties the two)
    for k, (needles, pattern) in enumerate(zip(_ERROR_NEEDLES, _ERROR_EACH)):
        if any(map(text.__contains__, needles)):
            total += _error_words(text) if k == 1 else len(pattern.findall(text))
    return total


def _word_char(c: str) -> bool:
    """Whether ``c`` is a word character as ``re``'s ``\\w`` reads a ``str``."""
    return c.isalnum() or c == "_"


def _error_words(text: str) -> int:
    """How many matches of ``\\b[A-Za-z]*Error\\b`` ``text`` holds: each ``Error`` followed by a
    word boundary whose run of ASCII letters before it starts at one (the regex engine tries
    the pattern at every place; ``str.find`` skips to the few places that end a match)."""
    count = 0
    size = len(text)
    i = text.find("Error")
    while i >= 0:
        end = i + 5
        if end == size or not _word_char(text[end]):
            j = i
            while j and text[j - 1] in _ASCII_LETTERS:
                j -= 1
            if j == 0 or not _word_char(text[j - 1]):
                count += 1
        i = text.find("Error", end)  # "Error" cannot overlap itself
    return count


def has_error_marker(text: str) -> bool:
    """True when ``text`` matches one of :data:`ERROR_PATTERNS`."""
    return any(map(text.__contains__, _ERROR_ANY)) and _ERROR_RE.search(text) is not None


def entry_text(entry: Entry) -> str:
    """The text a scorer reads for ``entry``: :attr:`Entry.text` (content, then each
    call as ``name(arguments)``), prefixed with ``"<tool name>: "`` for tool entries
    that carry a name.

    >>> entry_text(Entry(id="r", role="tool", name="get_user", content='{"id": 7}'))
    'get_user: {"id": 7}'
    """
    text = entry.text
    if entry.role == "tool" and entry.name:
        return f"{entry.name}: {text}" if text else entry.name
    return text


def entry_texts(transcript: Transcript) -> list[str]:
    """:func:`entry_text` of every entry of ``transcript``, in order."""
    return [entry_text(e) for e in transcript.entries]


def last_user_text(transcript: Transcript) -> str | None:
    """Content of the last user entry with non-blank content, or None if there is none."""
    for entry in reversed(transcript.entries):
        if entry.role == "user" and entry.content.strip():
            return entry.content
    return None
