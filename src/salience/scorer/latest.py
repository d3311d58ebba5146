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
  values are its own, so dropping it loses them.

:class:`LatestState` keeps the running state of a growing transcript: an extension costs
its new entries' handles, and :meth:`LatestState.fill` writes the columns for the
current prefix with numpy plus a look-up per token of the latest call's arguments.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from salience.scorer.columns import _COL

if TYPE_CHECKING:
    from salience.scorer.prefix import _EntryData
    from salience.transcript import Entry

__all__ = ["LATEST_FEATURES", "LatestState"]

#: The columns :class:`LatestState` fills (see the module docstring).
LATEST_FEATURES: tuple[str, ...] = (
    "user_turns_after",
    "calls_after",
    "latest_call_handles",
    "same_tool_latest",
    "unique_handles",
)


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

    def _reserve(self, n: int) -> None:
        cap = len(self.is_user)
        if n <= cap:
            return
        cap = max(64, n, 2 * cap)
        for name in ("is_user", "is_call", "unique", "tool"):
            old = getattr(self, name)
            new = np.zeros(cap, dtype=old.dtype)
            new[: self.n] = old[: self.n]
            setattr(self, name, new)

    def extend(self, entries: Sequence[Entry], data: Sequence[_EntryData]) -> None:
        """Add ``entries`` (with their per-entry ``data``) after the ones seen so far."""
        m = self.n
        self._reserve(m + len(entries))
        holders, unique = self.holders, self.unique
        for i, (e, d) in enumerate(zip(entries, data), start=m):
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
            for h in d.handles:
                held = holders.get(h)
                if held is None:
                    holders[h] = [i]
                    unique[i] += 1
                else:
                    if len(held) == 1:
                        unique[held[0]] -= 1
                    held.append(i)
        self.n = m + len(entries)

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
