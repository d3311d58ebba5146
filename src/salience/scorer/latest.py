"""Features that place an entry relative to what the agent is doing *now*, whatever the domain.

A tool-using agent's next call is most often about the newest user request, and in a
loop (a message sent to one attendee after another, one file read after another) it
repeats the arguments of the call before it. None of that hinges on a tool's name:

* ``user_turns_after``: how many user turns came after the entry (``log1p``); 0 for the
  entries of the current request;
* ``calls_after``: how many assistant entries with tool calls came after it (``log1p``);
  0 for the latest call and what followed it;
* ``latest_call_handles``: how many of the entry's handles
  (:mod:`salience.scorer.handles`) the latest call's arguments use (``log1p``); the
  latest call itself counts its own;
* ``same_tool_latest``: the entry is a call of the latest call's tool, or the result of
  one (a loop repeats that tool);
* ``unique_handles``: how many of its handles no other entry holds (``log1p``): its
  values are its own, so dropping it loses them;
* ``pending_words``: how many words (3+ characters, not stop words) the entry introduced
  that no call's arguments have used yet (``log1p``); ``acted_words``: how many a call has
  used. A slot-filling answer (``"Call mom"``, ``"The topic is New Employee Orientation"``)
  holds no handle, and the next call copies it as it stands: plain words are what the
  handle columns cannot see. A call's own new words are acted on where they appear.

:class:`LatestState` keeps the running state of a growing transcript: an extension costs
its new entries' handles, and :meth:`LatestState.fill` writes the columns for the
current prefix with numpy plus a look-up per token of the latest call's arguments.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING

import numpy as np

from salience.scorer.columns import _COL
from salience.scorer.handles import call_text
from salience.scorer.text import content_words

if TYPE_CHECKING:
    from salience.scorer.prefix import _EntryData
    from salience.transcript import Entry

__all__ = ["LATEST_FEATURES", "LatestState", "act_on"]

#: The columns :class:`LatestState` fills (see the module docstring).
LATEST_FEATURES: tuple[str, ...] = (
    "user_turns_after",
    "calls_after",
    "latest_call_handles",
    "same_tool_latest",
    "unique_handles",
    "pending_words",
    "acted_words",
)

#: Words shorter than this are not counted by ``pending_words`` / ``acted_words`` (as the
#: independent references count argument strings of 3+ characters).
MIN_WORD = 3


def call_words(entry: Entry) -> frozenset[str]:
    """The words (:func:`~salience.scorer.text.content_words`, 3+ characters) of ``entry``'s
    calls' argument leaves: what its calls copy, without the JSON keys."""
    if not entry.tool_calls:
        return frozenset()
    return arg_words(call_text(entry))


def arg_words(args: str) -> frozenset[str]:
    """:func:`call_words` of an entry with calls, from their leaves ``args`` (its
    :func:`~salience.scorer.handles.call_text`, which the features have already)."""
    return frozenset(w for w in content_words(args) if len(w) >= MIN_WORD)


def act_on(used: Iterable[str], first: Mapping[str, int], acted: set[str], acted_counts: np.ndarray,
           pending_counts: np.ndarray) -> None:
    """Mark the strings a call ``used`` as acted on: each one an earlier entry introduced
    (``first``: string -> that entry) and no call had used yet moves from the entry's
    pending count to its acted count. Shared by the handles (``salience.scorer.prefix``) and
    the plain words here."""
    for s in used:
        j = first.get(s)
        if j is not None and s not in acted:
            acted.add(s)
            acted_counts[j] += 1
            pending_counts[j] -= 1


class LatestState:
    """The running state behind :data:`LATEST_FEATURES` for a transcript that grows."""

    def __init__(self) -> None:
        self.n = 0
        self.is_user = np.zeros(0, dtype=bool)
        self.is_call = np.zeros(0, dtype=bool)
        self.unique = np.zeros(0)
        self.tool = np.zeros(0, dtype=np.int64)  # code of the tool an entry calls (its first) or answers; -1: none
        self.tool_codes: dict[str, int] = {}
        self.call_tokens: list[frozenset[str]] = []
        self.holders: dict[str, list[int]] = {}  # handle -> the entries that hold it, in order
        self.call_names: dict[str, str] = {}  # call id -> tool name
        self.latest_call = -1
        self.pending_words = np.zeros(0)
        self.acted_words = np.zeros(0)
        self.word_first: dict[str, int] = {}  # word -> the entry that introduced it
        self.word_acted: set[str] = set()  # words a call has used

    def _reserve(self, n: int) -> None:
        cap = len(self.is_user)
        if n <= cap:
            return
        cap = max(64, n, 2 * cap)
        for name in ("is_user", "is_call", "unique", "tool", "pending_words", "acted_words"):
            old = getattr(self, name)
            new = np.zeros(cap, dtype=old.dtype)
            new[: self.n] = old[: self.n]
            setattr(self, name, new)

    def extend(self, entries: Sequence[Entry], data: Sequence[_EntryData], fresh: Sequence[list[str]]) -> None:
        """Add ``entries`` (with their per-entry ``data``) after the ones seen so far; ``fresh``:
        for each, the words of its ``data.content`` that no entry before it used, in order (what
        :class:`~salience.scorer.prefix._Prefix` finds as it counts them; every entry this state
        has seen went through the same ``_Prefix``, so its words are the ones that state has)."""
        m = self.n
        self._reserve(m + len(entries))
        holders, unique = self.holders, self.unique
        for i, (e, d, new) in enumerate(zip(entries, data, fresh, strict=True), start=m):
            self.is_user[i] = e.role == "user"
            if e.tool_calls:
                self.is_call[i] = True
                self.latest_call = i
                for c in e.tool_calls:
                    self.call_names[c.id] = c.name
                tool: str | None = e.tool_calls[0].name
            elif e.role == "tool":
                tool = self.call_names.get(e.tool_call_id or "", e.name)
            else:
                tool = None
            self.tool[i] = -1 if tool is None else self.tool_codes.setdefault(tool, len(self.tool_codes))
            self.call_tokens.append(d.call_tokens)
            own = 0  # the handles entry i is first to hold, counted here and added once
            for h in d.handles:
                held = holders.get(h)
                if held is None:
                    holders[h] = [i]
                    own += 1
                else:
                    if len(held) == 1:
                        unique[held[0]] -= 1
                    held.append(i)
            if own:
                unique[i] += own
            self._words(i, d, new)
        self.n = m + len(entries)

    def _words(self, i: int, d: _EntryData, fresh: list[str]) -> None:
        """Words entry ``i`` introduces (``fresh``: those of ``d.content`` no earlier entry
        used), and those of earlier entries its calls use: a word is pending from the entry
        that introduced it until a call's arguments use it."""
        first, acted = self.word_first, self.word_acted
        used = d.call_words  # call_words(entry), worked out with the entry's data
        # act_on moves counts of earlier entries only: ``first`` holds none of entry i's words yet
        act_on(used, first, acted, self.acted_words, self.pending_words)
        pending = 0  # counted here and added once (whole numbers: the same float)
        for w in fresh:  # the words of d.content not in ``first`` (which holds those of 3+ characters)
            if len(w) < MIN_WORD:
                continue
            first[w] = i
            if w in used:  # a call's own new word: acted on where it appears
                acted.add(w)
            else:
                pending += 1
        if pending:
            self.pending_words[i] += pending

    def fill(self, X: np.ndarray) -> None:
        """Write :data:`LATEST_FEATURES` of the ``n`` entries seen so far into ``X``'s columns."""
        n = self.n
        if n == 0:
            return
        users = self.is_user[:n]
        calls = self.is_call[:n]
        X[:, _COL["user_turns_after"]] = np.log1p(users.sum() - np.cumsum(users))
        X[:, _COL["calls_after"]] = np.log1p(calls.sum() - np.cumsum(calls))
        X[:, _COL["unique_handles"]] = np.log1p(self.unique[:n])
        X[:, _COL["pending_words"]] = np.log1p(self.pending_words[:n])
        X[:, _COL["acted_words"]] = np.log1p(self.acted_words[:n])
        shared = np.zeros(n)
        k = self.latest_call
        if k >= 0:
            holders = self.holders
            held = [np.asarray(holders[t], dtype=np.int64) for t in self.call_tokens[k] if t in holders]
            if held:
                shared = np.bincount(np.concatenate(held), minlength=n).astype(np.float64)
            X[:, _COL["same_tool_latest"]] = self.tool[:n] == self.tool[k]
        else:
            X[:, _COL["same_tool_latest"]] = 0.0
        X[:, _COL["latest_call_handles"]] = np.log1p(shared)
