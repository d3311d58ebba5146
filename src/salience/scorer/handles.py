"""Handles: the distinctive strings of a text, in any domain.

A later tool call copies strings out of the history: a user's handle (``justinkool``),
a password (``Meizuch4uu``), an e-mail, an order id, a session token, a city. Many of
them are not what :mod:`salience.values` calls a value (an id mixing letters and digits,
a path, a capitalised name), and a scorer that only counts those values thinks a user
turn that gives ``"Justin (justinkool), Virginia (decture)"`` holds nothing.

A *handle* is a token (a run of letters, digits and ``_ . @ - $ ! # % & +`` that starts
and ends with a word character) of 3 to 64 characters that is not a stop word and

* holds a digit, an ``@`` or an ``_`` (ids, e-mails, snake case), or a capital after its
  first letter (``SunnyB3ach``, ``iPhone``); or
* is not one token of the tokenizer's vocabulary (``cl100k_base``), lowercased with its
  leading space: common words are one token each, invented strings are several.

>>> handles("Justin (justinkool), Virginia (decture), and Michael (mstein)")
('Justin', 'justinkool', 'Virginia', 'decture', 'mstein')
>>> handles("How about tomorrow for half an hour starting at 9?")
()
>>> handles('{"session_token": "e149636f-d9ca-0792", "email": "j.hester@gahoo.com"}')
('session_token', 'e149636f-d9ca-0792', 'j.hester@gahoo.com')
>>> tokens("CreateEvent(attendees=['justinkool'])")
('CreateEvent', 'attendees', 'justinkool')
"""

from __future__ import annotations

import json
import re
from functools import lru_cache
from itertools import compress
from typing import TYPE_CHECKING

from salience.scorer.text import STOPWORDS
from salience.tokens import OFFLINE_ENCODINGS

if TYPE_CHECKING:
    from salience.transcript import Entry

__all__ = ["call_text", "entry_handles", "handles", "is_handle", "leaf_text", "tokens"]

#: A token: starts with a letter or digit, ends with a word character (or ``$ ! # %``).
#: Linear: a failed match can only start on a letter or digit and gives up at the run's end.
_TOKEN = re.compile(r"[A-Za-z0-9](?:[\w.@$!#%&+\-]*[\w$!#%])?")
_MIN, _MAX = 3, 64
#: What :func:`tokens` scans for: a run of :data:`_TOKEN`'s characters from a letter or digit, at
#: least :data:`_MIN` long. A match of ``_TOKEN`` is such a run, whole, less the characters that
#: may not end a token (:data:`_TAIL`), which cannot start one either; so the tokens of 3+
#: characters are the runs of 3+ stripped of that tail, and a shorter run gives no match here
#: (nor does any place inside it). tests/test_scorer_first_call.py checks it against ``_TOKEN``.
_RUN = re.compile(r"[A-Za-z0-9][\w.@$!#%&+\-]{2,}")
#: :data:`_RUN` for an ASCII text, where ``re.ASCII``'s ``\w`` is the Unicode one and is tested from a
#: table (the same runs, faster; tests/test_scorer_first_call.py).
_RUN_ASCII = re.compile(r"[A-Za-z0-9][\w.@$!#%&+\-]{2,}+", re.ASCII)
_TAIL = ".@&+-"
#: In an ASCII token, what makes it a handle by its characters: a digit, ``@`` or ``_``, or a
#: capital after its first character (:func:`is_handle`'s test, for ASCII).
_MARKED = re.compile(r"[0-9@_]|(?<!^)[A-Z]")


@lru_cache(maxsize=1)
def _encode() -> object:
    import tiktoken

    return tiktoken.get_encoding(OFFLINE_ENCODINGS["cl100k_base"]).encode_ordinary


def leaf_text(text: str) -> str:
    """The string and number leaves of ``text`` when it is a JSON object or array, one
    per line (keys are a schema's words, not what a call copies); else ``text``.

    >>> leaf_text('{"user_id": "mia_li_3668", "legs": [{"flight": "HAT136", "seats": 2}]}')
    'mia_li_3668\\nHAT136\\n2'
    """
    stripped = text.lstrip()
    if stripped[:1] not in ("{", "["):
        return text
    try:
        data = json.loads(text)
    except (ValueError, RecursionError):
        return text
    out: list[str] = []
    stack = [data]
    while stack:  # depth-first, in document order
        node = stack.pop()
        if isinstance(node, dict):
            stack.extend(reversed(list(node.values())))
        elif isinstance(node, list):
            stack.extend(reversed(node))
        elif isinstance(node, str):
            out.append(node)
        elif isinstance(node, (int, float)) and not isinstance(node, bool):
            out.append(str(node))
    return "\n".join(out)


def tokens(text: str) -> tuple[str, ...]:
    """The distinct tokens of ``text`` of 3 to 64 characters, in order of first use."""
    # each distinct token measured once (a token's length is the same wherever it stands)
    runs = (_RUN_ASCII if text.isascii() else _RUN).findall(text)
    return tuple([t for t in dict.fromkeys([r.rstrip(_TAIL) for r in runs]) if _MIN <= len(t) <= _MAX])


@lru_cache(maxsize=1 << 17)
def is_handle(token: str) -> bool:
    """Whether ``token`` (as :func:`tokens` gives it) is a handle (see the module doc)."""
    low = token.lower()
    if low in STOPWORDS:
        return False
    if token.isascii():  # where the digits are 0-9 and the capitals A-Z: one scan in C
        if _MARKED.search(token) is not None:
            return True
    elif any(c.isdigit() for c in token) or "@" in token or "_" in token or any(c.isupper() for c in token[1:]):
        return True
    encode = _encode()
    return len(encode(" " + low)) > 1  # type: ignore[operator]


def handles(text: str) -> tuple[str, ...]:
    """The handles of ``text``, each once, in order of first use."""
    found = tokens(text)
    return tuple(compress(found, map(is_handle, found)))


def call_text(entry: Entry) -> str:
    """The leaves (:func:`leaf_text`) of ``entry``'s calls' arguments, one call after another:
    what a call copies."""
    return "\n".join(leaf_text(c.arguments) for c in entry.tool_calls)


def entry_handles(entry: Entry, calls: str | None = None) -> tuple[str, ...]:
    """The handles ``entry`` holds: in its content's leaves and its calls' (``calls``:
    :func:`call_text` of ``entry``, when the caller has it already)."""
    calls = call_text(entry) if calls is None else calls
    content = leaf_text(entry.content)
    return handles(f"{content}\n{calls}" if calls else content)
