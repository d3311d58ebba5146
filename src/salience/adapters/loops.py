"""Drop-in helpers for hand-written agent loops over the OpenAI and Anthropic APIs.

Call one of these right before each model call, with the whole history so far; send
what it returns. Nothing here talks to a provider: the helpers only choose what to send.

* :class:`OpenAIContext` / :class:`AnthropicContext`: one per conversation. Each
  :meth:`~OpenAIContext.prepare` runs a prefix-stable
  :class:`~salience.selector.compactor.CompactionSession` (once an entry is trimmed,
  stubbed or dropped it keeps that form, and entries kept whole stay whole as long as
  the budget allows, so the provider's prompt cache keeps hitting) and records a
  :class:`StepStats` per call; :meth:`~OpenAIContext.stats` sums them up.
* :func:`compact_openai` / :func:`compact_anthropic`: one-shot functions, with an
  optional session of your own.

>>> from salience import Compactor
>>> context = OpenAIContext(Compactor(), budget=2_000)
>>> history = [{"role": "system", "content": "You are terse."}, {"role": "user", "content": "Hi"}]
>>> context.prepare(history) == history
True
>>> step = context.history[-1]
>>> (step.step, step.tokens_before == step.tokens_after, step.compacted)
(1, True, False)
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from salience.errors import ParameterError
from salience.selector.session import CACHE_MIN, RESTART_GAIN

if TYPE_CHECKING:
    from salience.selector.compactor import Compaction, CompactionSession, Compactor
    from salience.selector.masking import Phase

__all__ = [
    "AnthropicContext",
    "ContextStats",
    "OpenAIContext",
    "StepStats",
    "compact_anthropic",
    "compact_openai",
]


@dataclass(frozen=True, slots=True)
class StepStats:
    """What one :meth:`OpenAIContext.prepare` call did.

    Attributes:
        step: 1 for the first call, then 2, 3...
        messages: messages in the history given.
        tokens_before: tokens of the history given; ``tokens_after``: of what was returned.
        kept, trimmed, stubbed, dropped: how many entries each.
        compacted: this call chose afresh (the history passed the session's trigger);
            otherwise earlier decisions were replayed and new messages kept whole.
        prefix_messages, prefix_share, prefix_tokens: how much of the previous call's
            output starts this one unchanged (what a provider's prompt cache can reuse);
            None on the first call.
        ms: wall time of the call.
    """

    step: int
    messages: int
    tokens_before: int
    tokens_after: int
    kept: int
    trimmed: int
    stubbed: int
    dropped: int
    compacted: bool
    prefix_messages: int | None
    prefix_share: float | None
    prefix_tokens: int | None
    ms: float

    def line(self) -> str:
        """One line for a log: ``step 4: 12,034 -> 7,950 tokens (...)``."""
        parts = [f"{self.kept} kept"]
        for name in ("trimmed", "stubbed", "dropped"):
            if getattr(self, name):
                parts.append(f"{getattr(self, name)} {name}")
        reuse = "" if self.prefix_share is None else (
            f", prefix reuse {self.prefix_messages} msgs / {self.prefix_tokens:,} tokens ({self.prefix_share:.0%})"
        )
        flag = " [compacted]" if self.compacted else ""
        return (f"step {self.step}: {self.tokens_before:,} -> {self.tokens_after:,} tokens "
                f"({', '.join(parts)}){reuse}, {self.ms:.1f} ms{flag}")


@dataclass(frozen=True, slots=True)
class ContextStats:
    """Totals over a context's calls (see :class:`StepStats`).

    ``tokens_before`` and ``tokens_after`` add up every call's input and output (what a
    provider would bill without and with compaction); ``mean_prefix_share`` is the mean
    prefix reuse over calls after the first (None before the second call).
    """

    steps: int
    compactions: int
    resets: int
    tokens_before: int
    tokens_after: int
    mean_prefix_share: float | None
    ms: float

    @property
    def saved(self) -> float:
        """Share of input tokens saved, in [0, 1]."""
        return 1.0 - self.tokens_after / self.tokens_before if self.tokens_before else 0.0

    def summary(self) -> str:
        reuse = "n/a" if self.mean_prefix_share is None else f"{self.mean_prefix_share:.0%}"
        return (f"{self.steps} calls, {self.compactions} compactions, {self.tokens_before:,} -> "
                f"{self.tokens_after:,} input tokens in all ({self.saved:.0%} saved), mean prefix reuse {reuse}, "
                f"{self.ms:.0f} ms in all ({self.ms / max(self.steps, 1):.1f} ms per call)")


def _check_budget(budget: int | None, session: CompactionSession | None) -> None:
    if session is not None and budget is not None and budget != session.budget:
        raise ParameterError(f"budget {budget} differs from the session's budget {session.budget}; "
                         "a session keeps the budget it was made with")


class _Context:
    """Shared by :class:`OpenAIContext` and :class:`AnthropicContext`."""

    format = ""

    def __init__(
        self,
        compactor: Compactor,
        *,
        budget: int | None = None,
        trigger: float = 1.0,
        min_removal: float | int = 0.1,
        restart_gain: float | None = RESTART_GAIN,
        cache_min: int = CACHE_MIN,
    ) -> None:
        self.compactor = compactor
        self.session = compactor.session(budget=budget, trigger=trigger, min_removal=min_removal,
                                         restart_gain=restart_gain, cache_min=cache_min)
        self.history: list[StepStats] = []
        self.last: Compaction | None = None

    @property
    def budget(self) -> int:
        return self.session.budget

    def __repr__(self) -> str:
        return f"{type(self).__name__}(budget={self.budget}, steps={len(self.history)})"

    def reset(self) -> None:
        """Start a new conversation: forget the session's decisions and the statistics."""
        self.session.reset()
        self.history = []
        self.last = None

    def _run(self, messages: Any, *, system: Any, query: str | None, phase: Phase | str | None) -> Compaction:
        started = time.perf_counter()
        result = self.session.compact(messages, query=query, phase=phase, system=system, format=self.format)
        ms = (time.perf_counter() - started) * 1000
        reuse = self.session.prefix_reuse
        self.history.append(StepStats(
            step=len(self.history) + 1,
            messages=len(messages),
            tokens_before=result.source_tokens,
            tokens_after=result.tokens,
            kept=len(result.kept),
            trimmed=len(result.trimmed),
            stubbed=len(result.stubbed),
            dropped=len(result.dropped),
            compacted=self.session.triggered,
            prefix_messages=None if reuse is None else reuse.messages,
            prefix_share=None if reuse is None else reuse.share,
            prefix_tokens=None if reuse is None else reuse.tokens,
            ms=ms,
        ))
        self.last = result
        return result

    def stats(self) -> ContextStats:
        """Totals over the calls so far."""
        shares = [s.prefix_share for s in self.history if s.prefix_share is not None]
        return ContextStats(
            steps=len(self.history),
            compactions=self.session.compactions,
            resets=self.session.resets,
            tokens_before=sum(s.tokens_before for s in self.history),
            tokens_after=sum(s.tokens_after for s in self.history),
            mean_prefix_share=sum(shares) / len(shares) if shares else None,
            ms=sum(s.ms for s in self.history),
        )


class OpenAIContext(_Context):
    """One OpenAI conversation: :meth:`prepare` gives the messages to send this step.

    ``budget`` (default: the compactor's), ``trigger``, ``min_removal``, ``restart_gain`` and ``cache_min`` are the
    :meth:`Compactor.session <salience.selector.compactor.Compactor.session>` parameters.
    """

    format = "openai"

    def prepare(
        self, messages: Sequence[Any], *, query: str | None = None, phase: Phase | str | None = None
    ) -> list[dict[str, Any]]:
        """The messages to send: the whole history ``messages`` compacted (never modified)."""
        return list(self._run(messages, system=None, query=query, phase=phase).messages)


class AnthropicContext(_Context):
    """One Anthropic conversation: :meth:`prepare` gives ``(system, messages)`` to send this step."""

    format = "anthropic"

    def prepare(
        self,
        messages: Sequence[Any],
        *,
        system: Any = None,
        query: str | None = None,
        phase: Phase | str | None = None,
    ) -> tuple[Any, list[dict[str, Any]]]:
        """``(system, messages)`` to send: the history compacted (never modified)."""
        result = self._run(messages, system=system, query=query, phase=phase)
        return result.system, list(result.messages)


def compact_openai(
    messages: Sequence[Any],
    compactor: Compactor,
    *,
    budget: int | None = None,
    query: str | None = None,
    session: CompactionSession | None = None,
) -> list[dict[str, Any]]:
    """OpenAI ``messages`` compacted to ``budget`` (default: the compactor's, or the session's).

    With ``session`` (from ``compactor.session(...)``, one per conversation) the
    compaction is prefix-stable across calls; ``budget`` must then be None or the
    session's.
    """
    _check_budget(budget, session)
    if session is not None:
        return list(session.compact(messages, query=query, format="openai").messages)
    return list(compactor.compact(messages, budget=budget, query=query, format="openai").messages)


def compact_anthropic(
    messages: Sequence[Any],
    compactor: Compactor,
    *,
    system: Any = None,
    budget: int | None = None,
    query: str | None = None,
    session: CompactionSession | None = None,
) -> tuple[Any, list[dict[str, Any]]]:
    """``(system, messages)`` of an Anthropic conversation compacted to ``budget`` (see :func:`compact_openai`)."""
    _check_budget(budget, session)
    if session is not None:
        result = session.compact(messages, query=query, system=system, format="anthropic")
    else:
        result = compactor.compact(messages, budget=budget, query=query, system=system, format="anthropic")
    return result.system, list(result.messages)
