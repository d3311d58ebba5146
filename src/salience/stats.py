"""Counts over a set of transcripts: entries, tokens, roles, tools, labels, queries.

>>> from salience import Transcript
>>> t = Transcript.from_openai([
...     {"role": "user", "content": "Find order W123", "label": 1},
...     {"role": "assistant", "content": None, "tool_calls": [{"id": "c1", "type": "function",
...      "function": {"name": "find_order", "arguments": '{"order_id": "W123"}'}}], "label": 0},
...     {"role": "tool", "tool_call_id": "c1", "name": "find_order", "content": "shipped"},
... ], id="t1", domain="retail")
>>> s = transcript_stats([t], counter=lambda text: len(text.split()))
>>> (s.transcripts, s.entries, s.labeled, s.needed, s.needed_share)
(1, 3, 2, 1, 0.5)
>>> s.by_role["tool"].entries, list(s.by_tool), list(s.by_domain)
(1, ['find_order'], ['retail'])
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from salience.errors import ParameterError
from salience.tokens import TokenCounter, as_counter, default_counter
from salience.transcript import Transcript

__all__ = ["NO_DOMAIN", "Stats", "Tally", "transcript_stats"]

#: The key under which transcripts without a domain are counted in ``by_domain``.
NO_DOMAIN = "(none)"
_NO_TOOL = "(unnamed)"


@dataclass(frozen=True, slots=True)
class Tally:
    """Entries and tokens of one group (a role, a tool), and how many carry a label
    and how many of those are labelled needed (label >= 0.5)."""

    entries: int = 0
    tokens: int = 0
    labeled: int = 0
    needed: int = 0

    @property
    def needed_share(self) -> float | None:
        """Share of the labelled entries that are needed; ``None`` when none is labelled."""
        return self.needed / self.labeled if self.labeled else None

    def to_dict(self) -> dict[str, Any]:
        return {
            "entries": self.entries,
            "tokens": self.tokens,
            "labeled": self.labeled,
            "needed": self.needed,
            "needed_share": self.needed_share,
        }


@dataclass(frozen=True, slots=True)
class Stats:
    """Counts over transcripts.

    ``by_role`` maps each role present to its :class:`Tally`; ``by_tool`` maps the
    names of tool entries (the results) to theirs, the ``top`` largest by tokens;
    ``tool_calls`` counts the calls made, ``evidence`` the evidence ids listed by all
    queries. ``by_domain`` holds the same counts per domain (``"(none)"`` for
    transcripts without one), each without a ``by_domain`` of its own.
    """

    transcripts: int = 0
    entries: int = 0
    tokens: int = 0
    labeled: int = 0
    needed: int = 0
    tool_calls: int = 0
    queries: int = 0
    evidence: int = 0
    by_role: Mapping[str, Tally] = field(default_factory=dict)
    by_tool: Mapping[str, Tally] = field(default_factory=dict)
    by_domain: Mapping[str, Stats] = field(default_factory=dict)

    @property
    def needed_share(self) -> float | None:
        """Share of labelled entries that are needed; ``None`` when none is labelled."""
        return self.needed / self.labeled if self.labeled else None

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-ready dict (shares included)."""
        out: dict[str, Any] = {
            "transcripts": self.transcripts,
            "entries": self.entries,
            "tokens": self.tokens,
            "labeled": self.labeled,
            "needed": self.needed,
            "needed_share": self.needed_share,
            "tool_calls": self.tool_calls,
            "queries": self.queries,
            "evidence": self.evidence,
            "by_role": {k: v.to_dict() for k, v in self.by_role.items()},
            "by_tool": {k: v.to_dict() for k, v in self.by_tool.items()},
        }
        if self.by_domain:
            out["by_domain"] = {k: v.to_dict() for k, v in self.by_domain.items()}
        return out


class _Acc:
    """Mutable accumulator behind :func:`transcript_stats`."""

    __slots__ = ("transcripts", "entries", "tokens", "labeled", "needed", "tool_calls", "queries", "evidence",
                 "roles", "tools")

    def __init__(self) -> None:
        self.transcripts = self.entries = self.tokens = self.labeled = self.needed = 0
        self.tool_calls = self.queries = self.evidence = 0
        self.roles: dict[str, list[int]] = {}
        self.tools: dict[str, list[int]] = {}

    def add(self, transcript: Transcript, counts: list[int]) -> None:
        self.transcripts += 1
        self.queries += len(transcript.queries)
        self.evidence += sum(len(q.evidence) for q in transcript.queries)
        for entry, n in zip(transcript.entries, counts):
            labeled = entry.label is not None
            needed = labeled and entry.label >= 0.5  # type: ignore[operator]
            self.entries += 1
            self.tokens += n
            self.labeled += labeled
            self.needed += needed
            self.tool_calls += len(entry.tool_calls)
            groups = [self.roles.setdefault(entry.role, [0, 0, 0, 0])]
            if entry.role == "tool":
                groups.append(self.tools.setdefault(entry.name or _NO_TOOL, [0, 0, 0, 0]))
            for g in groups:
                g[0] += 1
                g[1] += n
                g[2] += labeled
                g[3] += needed

    def freeze(self, top: int | None, by_domain: Mapping[str, Stats]) -> Stats:
        tools = sorted(self.tools.items(), key=lambda kv: (-kv[1][1], kv[0]))
        if top is not None:
            tools = tools[:top]
        return Stats(
            transcripts=self.transcripts,
            entries=self.entries,
            tokens=self.tokens,
            labeled=self.labeled,
            needed=self.needed,
            tool_calls=self.tool_calls,
            queries=self.queries,
            evidence=self.evidence,
            by_role={k: Tally(*v) for k, v in sorted(self.roles.items(), key=lambda kv: _role_order(kv[0]))},
            by_tool={k: Tally(*v) for k, v in tools},
            by_domain=dict(by_domain),
        )


def _role_order(role: str) -> int:
    order = ("system", "user", "assistant", "tool")
    return order.index(role) if role in order else len(order)


def transcript_stats(
    transcripts: Iterable[Transcript],
    *,
    top: int | None = 10,
    counter: TokenCounter | str | Callable[[str], int] | None = None,
) -> Stats:
    """Counts over ``transcripts``; tokens with ``counter`` (default
    :func:`salience.tokens.default_counter`, ``cl100k_base``). ``top`` limits
    ``by_tool`` to the tools with the most tokens (``None``: all)."""
    if top is not None and (isinstance(top, bool) or not isinstance(top, int) or top < 0):
        raise ParameterError(f"top must be a non-negative int or None (got {top!r})")
    tc = default_counter() if counter is None else as_counter(counter)
    total = _Acc()
    domains: dict[str, _Acc] = {}
    for transcript in transcripts:
        counts = tc.count_entries(transcript.entries)
        total.add(transcript, counts)
        domains.setdefault(transcript.domain or NO_DOMAIN, _Acc()).add(transcript, counts)
    by_domain = {name: acc.freeze(top, {}) for name, acc in sorted(domains.items())}
    return total.freeze(top, by_domain)
