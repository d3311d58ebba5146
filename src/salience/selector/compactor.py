"""The compactor: score, mask, solve, render. Keeps an agent's context inside a token budget.

>>> from salience.selector.compactor import Compactor
>>> messages = [
...     {"role": "system", "content": "You are a booking agent."},
...     {"role": "user", "content": "Find my reservation ZFA04Y please."},
...     {"role": "assistant", "content": None, "tool_calls": [{"id": "c1", "type": "function",
...         "function": {"name": "get_reservation_details", "arguments": '{"id": "ZFA04Y"}'}}]},
...     {"role": "tool", "tool_call_id": "c1", "content": "reservation ZFA04Y flight HAT136 " * 40},
...     {"role": "assistant", "content": "Your flight is HAT136."},
...     {"role": "user", "content": "Thanks! Now cancel it."},
... ]
>>> class Flat:  # any object with score(transcript, query=None) -> scores in [0, 1]
...     def score(self, transcript, query=None):
...         return [0.5] * len(transcript.entries)
>>> words = lambda text: len(text.split())
>>> result = Compactor(scorer=Flat(), budget=80, counter=words).compact(messages)
>>> result.tokens <= 80, result.stubbed
(True, ('m3',))
>>> print(result.messages[3]["content"])
[salience: archived m3: HAT136]
>>> result.restore(["m3"]) == messages
True

The selector's modules, in the order a compaction runs through them:

* :mod:`salience.messages.dispatch`: the messages' format (OpenAI, Anthropic, LangChain,
  Transcript), read into a :class:`~salience.transcript.Transcript` and written back;
* :mod:`salience.selector.params`: the parameters, checked, and tuned profiles;
* :mod:`salience.selector.scoring`: the scorer's scores, checked, and the fallback scorer;
* :mod:`salience.selector.options`: each entry's options (whole, capped, trimmed,
  stubbed, dropped) and their costs; tool-group units;
* :mod:`salience.selector.masking`: what each phase may see;
* :mod:`salience.selector.run`: pins, values, the knapsack problem, solved
  (:mod:`salience.selector.knapsack`) and assembled;
* :mod:`salience.selector.result`: the :class:`Compaction` it returns;
* :mod:`salience.selector.session`: :class:`CompactionSession`, across an agent loop's calls.

:meth:`Compactor.compact`: the messages become a Transcript; entries larger than
``max_entry_tokens`` (all but system entries) are trimmed on the way in (their original
goes to the archive). When the transcript fits the budget, it comes back unchanged (no
scoring, no masking); otherwise the run scores, pins, masks and solves (steps in
:mod:`salience.selector.run`), and the choice is rendered back in the caller's format.

Incremental work: a compactor keeps, across calls, the entry read from each OpenAI or
LangChain message and each entry's rendering (:class:`~salience.messages.dispatch.MessageCache`),
and each entry's token counts and capped, trimmed and stubbed forms
(:class:`~salience.selector.options.OptionsCache`); the scorer's own caches
(:mod:`salience.scorer.features`) do the same for features. So a call after one new
message does that message's work plus an ``O(n)`` pass, the scoring model and the
knapsack. :meth:`Compactor.clear_cache` empties the compactor's caches
(:data:`MEMO_SIZE` items each at most). A :class:`CompactionSession` goes further (see
:mod:`salience.selector.session`).

Invariants: ``tokens <= budget`` unless what may not give way exceeds it: the system
prompt whole (with ``pin_system``), Anthropic's first message from the user (the first user
turn as a stub, where the selection would open with anything else), and the calls
their results need, or a budget that holds no message at all, not even the latest in its
cheapest form (an empty list is no answer; then :class:`~salience.errors.BudgetError`, or
with ``on_over_budget="keep_pins"`` that cheapest valid selection, flagged
``over_budget=True``). Every other pin stays whole whenever the budget allows and
degrades (trimmed, stubbed, dropped), oldest first, before anything raises; order kept;
every tool result next to its call; the caller's messages are never mutated; every
entry that changed is in ``archive``, whole, and :meth:`Compaction.restore` puts it
back.

This module also re-exports, for one release, the names it held before the split
(``DEFAULT_RETAIN``, ``FORMATS``, ``load_profile``, ``detect_format``, ``check_budget``...).
"""

from __future__ import annotations

import copy
import inspect
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

import numpy as np
from sklearn.base import BaseEstimator

from salience.errors import ParameterError, ParameterTypeError, SalienceError, describe
from salience.messages.dispatch import FORMATS, MessageCache, to_transcript
from salience.messages.dispatch import MEMO_SIZE as MEMO_SIZE  # re-exported (module doc)
from salience.messages.dispatch import detect_format as detect_format  # re-exported
from salience.selector.masking import Phase, PhasePolicy
from salience.selector.opening import choose
from salience.selector.options import OptionsCache
from salience.selector.params import (
    DEFAULT_RETAIN,
    Config,
    check_budget,
    check_policy,
    is_default,
    load_profile,
    make_config,
)
from salience.selector.params import ON_OVER_BUDGET as ON_OVER_BUDGET  # re-exported
from salience.selector.restore import RestoreError, RestoreTool
from salience.selector.result import Compaction, PrefixReuse
from salience.selector.run import EPSILON as EPSILON  # re-exported
from salience.selector.run import VALUE_WEIGHT as VALUE_WEIGHT  # re-exported
from salience.selector.run import Run
from salience.selector.scoring import fallback_scorer
from salience.selector.session import CACHE_MIN, RESTART_GAIN, CompactionSession
from salience.tokens import as_counter

__all__ = ["DEFAULT_RETAIN", "FORMATS", "Compaction", "CompactionSession", "Compactor", "PrefixReuse", "load_profile"]

_got = describe


_SIGNATURES: dict[type, tuple[tuple[str, ...], Mapping[str, Any]]] = {}


def _signature(cls: type) -> tuple[tuple[str, ...], Mapping[str, Any]]:
    """``cls``'s parameter names (scikit-learn's ``_get_param_names``) and their defaults, read
    from its ``__init__`` once per class (``inspect.signature`` costs more than the rest of
    :meth:`Compactor._config`)."""
    hit = _SIGNATURES.get(cls)
    if hit is None:
        sig = inspect.signature(cls.__init__)  # type: ignore[misc]
        names = tuple(cls._get_param_names())  # type: ignore[attr-defined]
        hit = _SIGNATURES[cls] = (names, MappingProxyType({k: sig.parameters[k].default for k in names}))
    return hit


@dataclass(slots=True, eq=False)
class Caches:
    """What a compactor keeps between calls, one cache per layer: the format layer's
    (messages read, entries rendered) and the selector's (each entry's options)."""

    messages: MessageCache = field(default_factory=MessageCache)
    options: OptionsCache = field(default_factory=OptionsCache)


class Compactor(BaseEstimator):  # type: ignore[misc]  # scikit-learn has no type hints
    """Keeps an agent's context inside a token budget: keep, trim, stub or drop each entry.

    A scikit-learn estimator in its parameters: ``get_params``, ``set_params`` (nested
    ``scorer__...`` keys too), ``sklearn.base.clone`` and the repr follow scikit-learn's
    rules.

    Parameters (keyword-only; stored as given, checked when :meth:`compact` runs):
        scorer: any object with ``score(transcript, query=None) -> array in [0, 1]``.
            ``None``: :func:`salience.scorer.model.default_scorer` when available, else a
            recency and role prior. The selection weighs a user turn whose values the
            agent's calls have all passed at :data:`~salience.selector.run.ACTED_WEIGHT` of its
            score (:attr:`Compaction.scores` reports the scorer's).
        budget: default token budget (a positive int).
        counter: token counter: ``None`` (tiktoken ``cl100k_base``, offline), an encoding
            name, a callable ``str -> int`` or a :class:`~salience.tokens.TokenCounter`.
        policy: a :class:`PhasePolicy`, a domain name, a mapping as
            :meth:`PhasePolicy.as_dict` writes it (how a JSON profile carries a policy of
            your own, phase budget shares included), or ``None`` for the default policy
            of each transcript's domain (no masking when it has none).
        pin_last: how many of the last entries are pinned: kept whole whenever the budget
            allows, degraded (trimmed, stubbed, dropped) oldest first when it does not. The
            assistant's plain text (no tool call, no code action) is neither pinned nor
            counted: it is what the agent said, not what it answers, and its score weighs
            it; the default 1 pins the latest user turn, result or action.
        pin_system: keep system entries whole (the only pins that never degrade: a budget
            below them is a :class:`BudgetError`).
        pin_last_user: also pin the last user turn when newer entries came after it (like
            ``pin_last``, it degrades only when nothing else can give way; one that alone
            costs more than the budget is scored like any other entry instead). Off by
            default: a user turn that is the newest entry the agent answers is pinned by
            ``pin_last`` already, and an older one is weighed by its score. (Held out, leave
            one data set out, system + 10% / + 25%: ToolTalk 0.127 / 0.483 -> 0.131 / 0.491
            of the independent references, API-Bank 0.201 / 0.523 -> 0.205 / 0.530,
            SWE-agent's actions kept whole 0.218 / 0.518 -> 0.398 / 0.659; airline within
            0.004; MINT and conversations, where the last user turn is the newest entry
            answered, unchanged.)
        critical: entries scored at least this are pinned while they fit beside the other
            pins whole and the agent's actions (calls, code actions) that a sliding window of
            whole messages keeps, which are held whole first so that no compaction keeps fewer
            of them than the window; None: never.
        max_entry_tokens: entries above this are trimmed on the way in (system entries
            excepted); None: never.
        trim_keep: how much a trimmed entry keeps: a float in (0, 1) is a share of its
            tokens, an int a number of tokens. The newest pin, where it cannot stay whole,
            is trimmed to what fits beside what must stay instead, if that keeps more.
        stub_values: how many key values a stub quotes.
        digest: the largest share of the budget (0 to 0.5) that a plain ``compact()`` may give
            to a *digest*, which takes what the pins whole leave beside them up to that share
            (that share where they cannot be whole at all), so that it never costs a pin its form:
            one archived entry's stub that also lists the values of the other archived
            entries that nothing kept shows, each under its entry's id (the agent's newest
            action first, where it is archived), taken only when the
            answer is then worth more; the agent's actions and the user's turns that the plain
            answer keeps stay as they are, but for an older user turn whose every value two or
            more of the agent's calls passed, which the digest lists (:meth:`Run.digest
            <salience.selector.run.Run.digest>`; never in a conversation without tool
            calls or code; in a session's compaction too, where a settled entry hosts none).
            ``0`` turns it off.
        retain: share of an entry's value kept by ``"trim"`` and ``"stub"`` (FULL keeps 1);
            ``None`` or missing keys: :data:`DEFAULT_RETAIN` (trim 0.6, stub 0.15).
        solver: ``"auto"``, ``"lp"``, ``"exact"`` or ``"greedy"`` (see :func:`salience.selector.knapsack.solve`).
        on_over_budget: ``"raise"`` a :class:`BudgetError` when what may not give way (the
            system prompt whole, Anthropic's opening user turn, the calls their results need)
            exceeds the budget, or ``"keep_pins"``: return that cheapest valid selection,
            flagged ``over_budget=True``.
        profile: tuned parameters (a mapping, or the path of a JSON file holding one;
            either optionally under a ``"compactor"`` key, as ``salience tune`` writes
            them) for any of ``budget``, ``policy``, ``pin_last``, ``pin_system``, ``pin_last_user``, ``critical``,
            ``max_entry_tokens``, ``trim_keep``, ``stub_values``, ``retain``, ``digest``, ``solver``,
            ``on_over_budget``. A profile value applies where the parameter was left at
            its default; a value you set yourself wins.
    """

    def __init__(
        self,
        *,
        scorer: Any = None,
        budget: int = 8000,
        counter: Any = None,
        policy: PhasePolicy | str | Mapping[str, Any] | None = None,
        pin_last: int = 1,
        pin_system: bool = True,
        pin_last_user: bool = False,
        critical: float | None = 0.95,
        max_entry_tokens: int | None = 4000,
        trim_keep: float | int = 0.25,
        stub_values: int = 8,
        retain: Mapping[str, float] | None = None,
        digest: float = 0.5,
        solver: str = "auto",
        on_over_budget: str = "raise",
        profile: Mapping[str, Any] | str | Path | None = None,
    ) -> None:
        self.scorer = scorer
        self.budget = budget
        self.counter = counter
        self.policy = policy
        self.pin_last = pin_last
        self.pin_system = pin_system
        self.pin_last_user = pin_last_user
        self.critical = critical
        self.max_entry_tokens = max_entry_tokens
        self.trim_keep = trim_keep
        self.stub_values = stub_values
        self.retain = retain
        self.digest = digest
        self.solver = solver
        self.on_over_budget = on_over_budget
        self.profile = profile

    # -- scikit-learn conventions (get_params, set_params, clone, repr: BaseEstimator's) --------
    def set_params(self, **params: Any) -> Compactor:
        """Set parameters by scikit-learn's rules (``scorer__cv=3`` sets the scorer's ``cv``);
        an unknown name is a ``ParameterError`` naming it and the known ones."""
        names = self._get_param_names()
        for key in params:
            if key.partition("__")[0] not in names:
                raise ParameterError(f"Compactor: unknown parameter {key!r} (known: {', '.join(names)})")
        super().set_params(**params)
        return self

    def __getstate__(self) -> dict[str, Any]:
        state = dict(super().__getstate__())
        for key in ("_cache", "_profile_cache"):  # per-process caches: rebuilt on demand
            state.pop(key, None)
        return state

    def _caches(self) -> Caches:
        """This compactor's caches across calls (see :class:`Caches`)."""
        caches: Caches | None = self.__dict__.get("_cache")
        if caches is None:
            caches = self.__dict__["_cache"] = Caches()
        return caches

    def clear_cache(self) -> None:
        """Forget what earlier calls cached (messages read, entry renderings, token counts)."""
        self.__dict__.pop("_cache", None)

    # -- validation -------------------------------------------------------------
    def _profile(self, value: Any) -> Mapping[str, Any]:
        """:func:`load_profile` of ``value``; a file is read again only once it changed."""
        if not isinstance(value, (str, Path)):
            return load_profile(value)
        try:
            st = os.stat(value)
        except OSError:
            return load_profile(value)  # says what is wrong with the path
        key = (os.fspath(value), st.st_mtime_ns, st.st_size)
        cached = self.__dict__.get("_profile_cache")
        if cached is not None and cached[0] == key:
            return cached[1]  # type: ignore[no-any-return]
        loaded = MappingProxyType(dict(load_profile(value)))
        self.__dict__["_profile_cache"] = (key, loaded)
        return loaded

    def _config(self, budget: Any = None) -> Config:
        """The parameters, profile applied, checked (:func:`~salience.selector.params.make_config`)."""
        names, defaults = _signature(type(self))
        params = {name: getattr(self, name) for name in names}
        profile = self._profile(params.pop("profile"))
        for key, value in profile.items():
            if is_default(params[key], defaults[key]):
                params[key] = value
        scorer = params["scorer"]
        if scorer is None:
            scorer = fallback_scorer()
        elif not callable(getattr(scorer, "score", None)):
            raise ParameterTypeError(f"Compactor: parameter 'scorer' must have a score(transcript, query=None) method "
                                     f"(got {_got(scorer)})")
        try:
            b = check_budget(params["budget"] if budget is None else budget)
        except ValueError as exc:
            raise ParameterError(f"Compactor: {exc}") from None
        counter_param = params["counter"]
        cache = getattr(self, "_counter_cache", None)
        if cache is not None and cache[0] is counter_param:
            counter = cache[1]
        else:
            try:
                counter = as_counter(counter_param)
            except (TypeError, ValueError, SalienceError) as exc:
                raise ParameterError(f"Compactor: parameter 'counter': {exc}") from None
            self._counter_cache = (counter_param, counter)
        policy = check_policy(params["policy"], getattr(self, "_policy_cache", None))
        if isinstance(params["policy"], Mapping) and getattr(self, "_policy_cache", (None, None))[1] is not policy:
            self._policy_cache = (copy.deepcopy(params["policy"]), policy)
        return make_config(params, scorer=scorer, budget=b, counter=counter, policy=policy)

    # -- compaction -------------------------------------------------------------
    def compact(
        self,
        messages: Any,
        *,
        budget: int | None = None,
        query: str | None = None,
        phase: Phase | str | None = None,
        system: Any = None,
        format: str | None = None,
    ) -> Compaction:
        """Compact ``messages`` to ``budget`` tokens (default: the compactor's ``budget``).

        ``messages``: a :class:`Transcript`, OpenAI messages or Anthropic messages (with
        the Anthropic system prompt as ``system``); ``format`` forces the format (module
        doc). ``query``: what the next step is about, for a query-aware scorer.
        ``phase``: the phase for masking (default: detected). Never modifies ``messages``.

        Raises:
            ParameterError: a parameter or argument out of range (the message names it; also a ValueError).
            TranscriptError: malformed messages. FormatError: mixed formats.
            BudgetError: the system prompt (with ``pin_system``) and what must stay beside it
                exceed the budget, or the budget holds no message at all (with
                ``on_over_budget="raise"``); other pins degrade first.
            ScorerError: the scorer returned bad scores.
        """
        cfg = self._config(budget)
        if query is not None and not isinstance(query, str):
            raise ParameterTypeError(f"query must be a str or None (got {_got(query)})")
        caches = self._caches()
        source, fmt = to_transcript(messages, system=system, format=format, cache=caches.messages)
        run = Run(cfg, source, fmt, options=caches.options, messages=caches.messages)
        if sum(run.full_cost) <= cfg.budget:
            if phase is not None:
                run.policy().check_phase(phase)
            return run.assemble(run.full_choices(), budget=cfg.budget, scores=None, phase=None, method="fits")
        c = choose(run, cfg, query=query, phase=phase)  # (Anthropic's first message from the user: opening.py)
        return run.assemble(c.choices, budget=cfg.budget, scores=c.prob.scores, phase=c.prob.phase, method=c.method,
                            over_budget=c.over, fixed=c.fixed)

    def session(
        self,
        *,
        budget: int | None = None,
        trigger: float = 1.0,
        min_removal: float | int = 0.1,
        restart_gain: float | None = RESTART_GAIN,
        cache_min: int = CACHE_MIN,
    ) -> CompactionSession:
        """A :class:`CompactionSession` for an agent loop (prefix-stable compaction): it compacts
        once the history passes the system prompt plus ``trigger`` of the budget above it, down
        to ``min_removal`` (a share of that room, or tokens) below that, and starts over where
        an answer from scratch is worth ``restart_gain`` more than its earlier decisions allow;
        where that room is under ``cache_min`` tokens (a prefix no provider caches alone, and that
        saves little beside a longer system prompt), it compacts as ``compact`` does, afresh at the
        budget (0: always prefix-stable)."""
        b = check_budget(self.budget if budget is None else budget)
        if isinstance(trigger, bool) or not isinstance(trigger, (int, float)) or not 0.0 < trigger <= 1.0:
            raise ParameterError(f"session: trigger must be a number in (0, 1] (got {_got(trigger)})")
        if isinstance(min_removal, bool) or not (
            (isinstance(min_removal, float) and 0.0 <= min_removal < 1.0)
            or (isinstance(min_removal, (int, np.integer)) and min_removal >= 0)
        ):
            raise ParameterError(f"session: min_removal must be a float in [0, 1) (a share of the budget above the "
                                 f"system prompt) or an int >= 0 (tokens) (got {_got(min_removal)})")
        if restart_gain is not None and (isinstance(restart_gain, bool) or not isinstance(restart_gain, (int, float))
                                         or not 0.0 <= restart_gain < math.inf):
            raise ParameterError(f"session: restart_gain must be a number >= 0 or None (got {_got(restart_gain)})")
        if isinstance(cache_min, bool) or not isinstance(cache_min, (int, np.integer)) or cache_min < 0:
            raise ParameterError(f"session: cache_min must be an int >= 0 (tokens) (got {_got(cache_min)})")
        return CompactionSession(self, budget=b, trigger=float(trigger), min_removal=min_removal,
                                 restart_gain=None if restart_gain is None else float(restart_gain),
                                 cache_min=int(cache_min))

    def restore_tool(self, *, max_ids: int = 8) -> RestoreTool:
        """The tool a model calls to get archived entries back (:mod:`salience.selector.restore`):
        its definition per provider format and its handler, ``answer(compaction, arguments)``."""
        if isinstance(max_ids, bool) or not isinstance(max_ids, int) or max_ids < 1:
            raise RestoreError(f"restore_tool: max_ids must be an int >= 1 (got {_got(max_ids)})")
        return RestoreTool(max_ids=max_ids)
