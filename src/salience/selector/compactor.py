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
>>> result = Compactor(scorer=Flat(), budget=80, counter=words, pin_last=2).compact(messages)
>>> result.tokens <= 80, result.stubbed
(True, ('m3',))
>>> result.messages[3]["content"]
'[salience: archived tool result m3 from get_reservation_details (164 tokens); values: ZFA04Y, HAT136; restore id m3]'
>>> result.restore(["m3"]) == messages
True

Steps of :meth:`Compactor.compact`:

1. The messages become a :class:`~salience.transcript.Transcript` (format rules
   below). Entries larger than ``max_entry_tokens`` (all but system entries) are
   trimmed on the way in; their original goes to the archive.
2. When the transcript fits the budget, it comes back unchanged (no scoring, no
   masking). Otherwise:
3. The scorer scores every entry (query-aware when a query is given).
4. Pins may only stay whole: the system prompt (``pin_system``), the last user turn
   (``pin_last_user``), the last ``pin_last`` entries. Entries scored at least
   ``critical`` are pinned too, highest score first, as long as the pins still fit
   the budget (so a generous scorer never causes a :class:`BudgetError` on its own).
5. Phase masking (:mod:`salience.selector.masking`) limits the options of the other
   tool entries. The policy is ``policy`` (a :class:`PhasePolicy` or a domain name),
   else the default for the transcript's domain; the phase is ``phase``, else
   :func:`~salience.selector.masking.detect_phase`.
6. Each entry gets its options: ``FULL`` (whole), ``TRIM`` (head and tail kept, the
   middle replaced by a marker naming the cut and the id to restore, see
   :mod:`salience.selector.render`), ``STUB`` (one line: role or tool name, tokens, up
   to ``stub_values`` key values, the id to restore) and ``DROP``. An option is offered
   only if it is cheaper than the better ones. An assistant entry with tool calls
   keeps its calls in every option but ``DROP``; only its text is trimmed or stubbed.
7. Values: ``(score + eps_i) * retain[option]`` with ``retain`` FULL 1.0, TRIM 0.6,
   STUB 0.15 (defaults) and ``eps_i = 1e-3 * (i + 1) / n`` so that ties go to the
   recent entries. Tool groups are atomic (a call is kept, in any form, iff its
   results are), which keeps the transcript valid for the provider APIs.
8. :func:`salience.selector.knapsack.solve` picks one option per entry; the result
   is rendered back in the caller's format.

Formats: a :class:`Transcript` is taken as is. A list of LangChain messages
(``langchain_core.messages.BaseMessage``) is LangChain's (see
:mod:`salience.adapters.langchain`; a list mixing them with other items is a
:class:`~salience.errors.FormatError`). A list of messages is Anthropic's when
``system=`` is passed or a message has list content with a ``tool_use``,
``tool_result``, ``thinking``, ``redacted_thinking`` or ``document`` block, or an
``image`` block with a ``source``; otherwise it is OpenAI's (plain user and assistant
turns with string content read the same either way). ``format="openai" |
"anthropic" | "langchain" | "transcript"`` forces the choice (``"transcript"``: give
a Transcript back whatever came in).

Incremental work: a compactor keeps, across calls, the entry read from each OpenAI or
LangChain message (reused while the same message object, at the same index, still
equals the copy its entry holds), each entry's token counts and capped, trimmed and
stubbed forms, and each entry's rendering (callers get copies). The scorer's own
caches (:mod:`salience.scorer.features`) do the same for features. So a call after one
new message does that message's work plus an ``O(n)`` pass, the scoring model and the
knapsack. :meth:`Compactor.clear_cache` empties the compactor's caches
(:data:`MEMO_SIZE` items each at most). A :class:`CompactionSession` goes further: a
call that only appends messages and stays below its trigger reads, counts and renders
the new messages alone; what remains ``O(n)`` are comparisons and copies of lists
done in C (the old messages against their copies, the messages handed out before).

Invariants: ``tokens <= budget`` unless the pins alone exceed it (then
:class:`~salience.errors.BudgetError`, or with ``on_over_budget="keep_pins"`` the
cheapest valid selection, pins whole, flagged ``over_budget=True``); order kept;
every tool result next to its call; the caller's messages are never mutated; every
entry that changed is in ``archive``, whole, and :meth:`Compaction.restore` puts it
back.
"""

from __future__ import annotations

import copy
import inspect
import itertools
import json
import math
import os
import sys
import threading
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields
from functools import lru_cache
from pathlib import Path
from types import MappingProxyType
from typing import Any

import numpy as np

from salience.errors import BudgetError, FormatError, SalienceError, ScorerError, describe
from salience.selector import knapsack
from salience.selector.masking import (
    Option,
    Phase,
    PhasePolicy,
    detect_phase,
    mask_options,
    tool_name,
    tool_names,
)
from salience.selector.render import stub_text, trim_text
from salience.tokens import TokenCounter, as_counter
from salience.transcript import Entry, Transcript, _Growth
from salience.values import extract_values, value_set

__all__ = ["DEFAULT_RETAIN", "FORMATS", "Compaction", "CompactionSession", "Compactor", "PrefixReuse", "load_profile"]

#: Share of an entry's value each option keeps (FULL keeps 1.0, DROP 0).
DEFAULT_RETAIN: Mapping[str, float] = MappingProxyType({"trim": 0.6, "stub": 0.15})
#: Weight of the share of an entry's values that a trimmed or stubbed form keeps, in
#: that form's worth (the rest is ``retain``).
VALUE_WEIGHT = 0.5
#: Message formats :meth:`Compactor.compact` reads and writes.
FORMATS: tuple[str, ...] = ("openai", "anthropic", "langchain", "transcript")
ON_OVER_BUDGET: tuple[str, ...] = ("raise", "keep_pins")
#: Recency tie-breaker added to scores (scaled by position, at most this much).
EPSILON = 1e-3

_FULL, _TRIM, _STUB, _DROP = knapsack.FULL, knapsack.TRIM, knapsack.STUB, knapsack.DROP
_ANTHROPIC_BLOCKS = frozenset({"tool_use", "tool_result", "thinking", "redacted_thinking", "document"})
_OPENAI_ROLES = frozenset({"system", "developer", "tool", "function"})
_PROFILE_KEYS = ("budget", "policy", "pin_last", "pin_system", "pin_last_user", "critical", "max_entry_tokens",
                 "trim_keep", "stub_values", "retain", "solver", "on_over_budget")


_got = describe


# --------------------------------------------------------------------------
# Parameters
# --------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Config:
    scorer: Any
    budget: int
    counter: TokenCounter
    policy: PhasePolicy | None
    pin_last: int
    pin_system: bool
    pin_last_user: bool
    critical: float | None
    max_entry_tokens: int | None
    trim_keep: float | int
    stub_values: int
    retain: tuple[float, float, float, float]
    solver: str
    on_over_budget: str


def _check_int(name: str, value: Any, *, minimum: int, none: bool = False) -> int | None:
    if value is None and none:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < minimum:
        what = "a positive int" if minimum == 1 else f"an int >= {minimum}"
        raise ValueError(
            f"Compactor: parameter {name!r} must be {what}{' or None' if none else ''} (got {_got(value)})"
        )
    return int(value)


def _check_bool(name: str, value: Any) -> bool:
    if not isinstance(value, (bool, np.bool_)):
        raise ValueError(f"Compactor: parameter {name!r} must be a bool (got {_got(value)})")
    return bool(value)


def check_budget(value: Any, name: str = "budget") -> int:
    """``value`` as a positive int token budget, else ``ValueError`` saying what came."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise ValueError(f"{name} must be a positive int number of tokens (got {_got(value)})")
    return int(value)


def load_profile(profile: Any) -> Mapping[str, Any]:
    """The Compactor parameters a profile holds: ``profile`` is a mapping or the path of a
    JSON file holding one (the parameters at its top level, or under a ``"compactor"``
    key as ``salience tune`` and :meth:`TuneResult.profile
    <salience.training.tune.TuneResult.profile>` write them), or None (no parameters).
    Unknown keys and unreadable files are a ``ValueError`` naming them; the values are
    checked when the compactor runs.
    """
    if profile is None:
        return {}
    if isinstance(profile, (str, Path)):
        path = Path(profile)
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError) as exc:
            raise ValueError(f"Compactor: parameter 'profile' names {str(path)!r}, which is not a readable JSON "
                             f"file ({type(exc).__name__}: {exc})") from None
        profile = data
    if isinstance(profile, Mapping) and isinstance(profile.get("compactor"), Mapping):
        profile = profile["compactor"]
    if not isinstance(profile, Mapping):
        raise ValueError(f"Compactor: parameter 'profile' must be a mapping of parameters, a JSON file path or None "
                         f"(got {_got(profile)})")
    unknown = sorted(str(k) for k in profile if k not in _PROFILE_KEYS)
    if unknown:
        raise ValueError(
            f"Compactor: parameter 'profile' has unknown keys {unknown} (allowed: {', '.join(_PROFILE_KEYS)})"
        )
    return profile


def _check_policy(value: Any, cache: tuple[Any, PhasePolicy | None] | None) -> PhasePolicy | None:
    """The ``policy`` parameter as a PhasePolicy (None: each transcript's domain default).

    A mapping (as a JSON profile holds it) is read with :meth:`PhasePolicy.from_dict`;
    ``cache`` is the last ``(copy of the mapping, policy)`` read, so a compactor called
    again and again builds it once (and again after the mapping was changed in place).
    """
    if value is None or isinstance(value, PhasePolicy):
        return value
    if isinstance(value, str):
        return PhasePolicy.for_domain(value)
    if isinstance(value, Mapping):
        if cache is not None and cache[0] == value:
            return cache[1]
        try:
            return PhasePolicy.from_dict(value)
        except ValueError as exc:
            raise ValueError(f"Compactor: parameter 'policy': {exc}") from None
    raise ValueError(f"Compactor: parameter 'policy' must be a PhasePolicy, a domain name, a mapping as "
                     f"PhasePolicy.as_dict() writes it, or None (got {_got(value)})")


def _is_default(current: Any, default: Any) -> bool:
    """Whether a parameter was left at its default (so that a profile may set it)."""
    if current is default:
        return True
    if isinstance(current, Mapping) and isinstance(default, Mapping):
        return dict(current) == dict(default)
    if type(current) is type(default) and isinstance(current, (int, float, str)):
        return bool(current == default)
    return False


def _check_retain(value: Any) -> tuple[float, float, float, float]:
    if value is None:
        value = DEFAULT_RETAIN
    if not isinstance(value, Mapping):
        raise ValueError(
            f"Compactor: parameter 'retain' must be a mapping with keys 'trim' and 'stub', or None (got {_got(value)})"
        )
    unknown = sorted(str(k) for k in value if k not in ("trim", "stub"))
    if unknown:
        raise ValueError(f"Compactor: parameter 'retain' has unknown keys {unknown} (allowed: 'trim', 'stub')")
    trim = value.get("trim", DEFAULT_RETAIN["trim"])
    stub = value.get("stub", DEFAULT_RETAIN["stub"])
    for key, v in (("trim", trim), ("stub", stub)):
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0.0 < v <= 1.0:
            raise ValueError(f"Compactor: parameter 'retain[{key!r}]' must be a number in (0, 1] (got {_got(v)})")
    if stub > trim:
        raise ValueError(f"Compactor: parameter 'retain' must keep at least as much for 'trim' as for 'stub' "
                         f"(got trim={trim}, stub={stub})")
    return (1.0, float(trim), float(stub), 0.0)


# --------------------------------------------------------------------------
# Scorers
# --------------------------------------------------------------------------


class _PriorScorer:
    """Recency times role prior: what the compactor uses when no trained scorer is available."""

    ROLE = {"system": 1.0, "user": 0.8, "assistant": 0.6, "tool": 0.5}

    def score(self, transcript: Transcript, query: str | None = None) -> np.ndarray:
        n = len(transcript.entries)
        if n == 0:
            return np.zeros(0)
        recency = 0.5 + 0.5 * (np.arange(n) + 1) / n
        role = np.array([self.ROLE.get(e.role, 0.5) for e in transcript.entries])
        return np.clip(role * recency, 0.0, 1.0)

    def __repr__(self) -> str:
        return "PriorScorer()"


@lru_cache(maxsize=1)
def _default_scorer() -> Any:
    try:
        from salience.scorer.model import default_scorer
    except ImportError:
        return _PriorScorer()
    try:
        return default_scorer()
    except ScorerError as exc:
        warnings.warn(f"salience: the default scorer is unavailable ({exc}); using a recency and role prior instead",
                      RuntimeWarning, stacklevel=3)
        return _PriorScorer()


def _score(scorer: Any, transcript: Transcript, query: str | None) -> np.ndarray:
    name = type(scorer).__name__
    raw = scorer.score(transcript) if query is None else scorer.score(transcript, query=query)
    try:
        scores = np.asarray(raw, dtype=float)
    except (TypeError, ValueError):
        raise ScorerError(f"scorer {name}: score() must return an array of numbers (got {_got(raw)})") from None
    n = len(transcript.entries)
    if scores.shape != (n,):
        raise ScorerError(f"scorer {name}: score() must return shape ({n},) for transcript {transcript.id!r} with "
                          f"{n} entries (got shape {scores.shape})")
    bad = ~np.isfinite(scores) | (scores < -1e-9) | (scores > 1 + 1e-9)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise ScorerError(f"scorer {name}: scores must be in [0, 1] (got {float(scores[i])!r} for entry "
                          f"{transcript.entries[i].id!r})")
    return np.clip(scores, 0.0, 1.0)


# --------------------------------------------------------------------------
# Formats
# --------------------------------------------------------------------------


def _is_anthropic_message(m: Any) -> bool:
    content = m.get("content") if isinstance(m, Mapping) else None
    if not isinstance(content, list):
        return False
    for block in content:
        if isinstance(block, Mapping):
            kind = block.get("type")
            if kind in _ANTHROPIC_BLOCKS or (kind == "image" and "source" in block):
                return True
    return False


def _is_openai_message(m: Any) -> bool:
    return isinstance(m, Mapping) and (m.get("role") in _OPENAI_ROLES or "tool_calls" in m or "tool_call_id" in m)


def detect_format(messages: Any, *, system: Any = None) -> str:
    """``"transcript"``, ``"anthropic"`` or ``"openai"`` for ``messages`` (rules in the module doc).

    >>> detect_format([{"role": "user", "content": "hi"}])
    'openai'
    >>> detect_format([{"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t", "content": "x"}]}])
    'anthropic'
    """
    if isinstance(messages, Transcript):
        return "transcript"
    if isinstance(messages, (str, bytes, Mapping)) or not isinstance(messages, Sequence):
        raise FormatError(f"messages must be a Transcript or a list of message mappings (got {_got(messages)})")
    if _is_langchain_list(messages):
        return "langchain"
    anthropic = system is not None or any(_is_anthropic_message(m) for m in messages)
    if anthropic:
        clash = next((i for i, m in enumerate(messages) if _is_openai_message(m)), None)
        if clash is not None:
            why = "system= was passed" if system is not None else "some messages have Anthropic content blocks"
            raise FormatError(f"messages mix formats: {why}, but message {clash} is OpenAI-style "
                              f"(role {messages[clash].get('role')!r}); pass format='openai' or 'anthropic' to choose")
        return "anthropic"
    return "openai"


def _langchain_base() -> Any:
    """LangChain's ``BaseMessage`` class if LangChain is loaded (no LangChain message can exist otherwise)."""
    module = sys.modules.get("langchain_core.messages.base")
    return getattr(module, "BaseMessage", None)


def _is_langchain_list(messages: Sequence[Any]) -> bool:
    """True for a list of LangChain messages; a list mixing them with other items is a ``FormatError``."""
    base = _langchain_base()
    if base is None or not any(isinstance(m, base) for m in messages):
        return False
    other = next((i for i, m in enumerate(messages) if not isinstance(m, base)), None)
    if other is not None:
        first = next(i for i, m in enumerate(messages) if isinstance(m, base))
        raise FormatError(f"messages mix formats: message {first} is a LangChain message, but message {other} is "
                          f"{_got(messages[other])}; convert them all to one format")
    return True


def _to_transcript(
    messages: Any, *, system: Any, format: str | None, memo: _Memo | None = None
) -> tuple[Transcript, str]:
    if format is not None and format not in FORMATS:
        raise ValueError(f"format must be one of {', '.join(repr(f) for f in FORMATS)} or None (got {_got(format)})")
    if isinstance(messages, Transcript):
        if system is not None:
            raise ValueError("system= is only for Anthropic message lists; a Transcript carries its system entry")
        return messages, format or "transcript"
    if format is None:
        fmt = detect_format(messages, system=system)
    elif format == "transcript":
        fmt = detect_format(messages, system=system)
    else:
        fmt = format
    if fmt == "langchain" and format == "langchain":
        base = _langchain_base()
        other = next((i for i, m in enumerate(messages) if base is None or not isinstance(m, base)), None)
        if other is not None or isinstance(messages, (str, bytes, Mapping)):
            raise ValueError(
                "format must be one of 'openai', 'anthropic', 'transcript' or None for these messages: 'langchain' "
                f"needs LangChain messages (got {_got(messages if other is None else messages[other])}"
                f"{'' if other is None else f' as message {other}'})"
            )
    if fmt in ("openai", "langchain") and system is not None:
        where = "OpenAI" if fmt == "openai" else "LangChain"
        raise ValueError(
            f"system= is only for Anthropic messages; {where} messages carry the system prompt in the list"
        )
    if fmt in ("openai", "langchain") and memo is not None and isinstance(messages, (list, tuple)):
        read, key = _reader(fmt)
        source = _convert_each(messages, memo, fmt, read, lambda e: e.meta[key]["message"])
    elif fmt == "openai":
        source = Transcript.from_openai(messages)
    elif fmt == "langchain":
        from salience.adapters.langchain import from_langchain

        source = from_langchain(messages)
    else:
        source = Transcript.from_anthropic(messages, system=system)
    return source, format or fmt


def _convert_each(messages: Sequence[Any], memo: _Memo, fmt: str, read: Any, snapshot: Any) -> Transcript:
    """``Transcript`` of ``messages`` in a one-message-one-entry format, reusing the entries of
    messages seen before: a hit needs the same message object, at the same index, still equal
    to the copy its entry kept (so a message changed in place is read again)."""
    seen = memo.messages
    entries: list[Entry] = []
    for i, m in enumerate(messages):
        hit = seen.get(id(m))
        if hit is not None and hit[0] is m and hit[1] == i and hit[2] == fmt:
            entry = hit[3]
            if m == snapshot(entry):
                entries.append(entry)
                continue
        entry = read(m, i, transcript_id="transcript")
        entries.append(entry)
        memo.put(seen, id(m), (m, i, fmt, entry))
    return Transcript(id="transcript", entries=tuple(entries))


def _render(transcript: Transcript, fmt: str, memo: _Memo | None = None) -> tuple[Any, Any]:
    """(messages, system) of ``transcript`` in ``fmt``; ``memo`` keeps each entry's rendering
    (the caller gets copies)."""
    if fmt in ("openai", "langchain") and memo is not None:
        render = _renderer(fmt)
        copy_message = _copy_json if fmt == "openai" else _copy_langchain
        return [copy_message(memo.rendered_message(e, render)) for e in transcript.entries], None
    if fmt == "openai":
        return transcript.to_openai(), None
    if fmt == "langchain":
        from salience.adapters.langchain import to_langchain

        return to_langchain(transcript), None
    if fmt == "anthropic":
        return _merge_same_role(transcript.to_anthropic()), transcript.anthropic_system()
    return transcript, None


_ATOMS = (str, int, float, bool, type(None))


def _copy_json(value: Any) -> Any:
    """A deep copy of JSON-like ``value`` (dicts, lists, atoms), faster than ``copy.deepcopy``."""
    kind = type(value)
    if kind is dict:
        return {k: v if type(v) in _ATOMS else _copy_json(v) for k, v in value.items()}
    if kind is list:
        return [v if type(v) in _ATOMS else _copy_json(v) for v in value]
    if kind in _ATOMS:
        return value
    return copy.deepcopy(value)


def _common_prefix(a: Sequence[Any], b: Sequence[Any]) -> int:
    """How many leading items ``a`` and ``b`` have in common."""
    n = min(len(a), len(b))
    if list(a[:n]) == list(b[:n]):  # one C-level pass (same objects compare by identity first)
        return n
    k = 0
    for x, y in zip(a, b):
        if not (x is y or x == y):
            break
        k += 1
    return k


#: How many messages, entries and renderings a compactor's caches keep (each; the oldest go first).
MEMO_SIZE = 50_000


class _Memo:
    """What a compactor keeps between calls, so that a call after one new message does
    work for that message (plus scoring and the knapsack), not for the whole history.

    * ``messages``: message object -> its entry (see :func:`_convert_each`);
    * ``options``: entry object -> its :class:`_Options` (capped form, trimmed and
      stubbed renderings, token counts), valid for one configuration (``config``);
    * ``rendered``: entry object -> its message in the output format.

    Keys are object ids; each value holds its object, so an id is never reused while
    cached. Entries are immutable, so a hit on the same entry object is always right.
    """

    def __init__(self) -> None:
        self.messages: dict[int, tuple[Any, int, str, Entry]] = {}
        self.options: dict[int, _Options] = {}
        self.rendered: dict[int, tuple[Entry, Any]] = {}
        self.config: tuple[Any, ...] | None = None
        self.lock = threading.Lock()

    def put(self, store: dict[int, Any], key: int, value: Any) -> None:
        with self.lock:
            store[key] = value
            if len(store) > MEMO_SIZE:  # drop the oldest tenth
                for old in list(itertools.islice(store, MEMO_SIZE // 10)):
                    store.pop(old, None)

    def check_config(self, cfg: _Config) -> None:
        """Forget the options when the parameters they depend on changed."""
        key = (cfg.counter, cfg.max_entry_tokens, cfg.trim_keep, cfg.stub_values)
        if self.config is None or self.config[0] is not cfg.counter or self.config[1:] != key[1:]:
            self.options = {}
            self.config = key

    def rendered_message(self, entry: Entry, render: Any) -> Any:
        hit = self.rendered.get(id(entry))
        if hit is not None and hit[0] is entry:
            return hit[1]
        message = render(entry)
        self.put(self.rendered, id(entry), (entry, message))
        return message


def _merge_same_role(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Anthropic messages with adjacent same-role messages merged into one.

    Dropping a whole message can leave two user (or two assistant) messages side by
    side, which Anthropic's API does not accept as given. Their content blocks are
    joined (a string becomes a text block), ``tool_result`` blocks first as the API
    requires; the first message's other keys are kept.
    """
    out: list[dict[str, Any]] = []
    for message in messages:
        if out and out[-1].get("role") == message.get("role"):
            prev = out[-1]
            blocks = _as_blocks(prev.get("content")) + _as_blocks(message.get("content"))
            results = [b for b in blocks if isinstance(b, dict) and b.get("type") == "tool_result"]
            others = [b for b in blocks if not (isinstance(b, dict) and b.get("type") == "tool_result")]
            prev["content"] = results + others
        else:
            out.append(message)
    return out


def _as_blocks(content: Any) -> list[Any]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}] if content else []
    return list(content or [])


# --------------------------------------------------------------------------
# The result
# --------------------------------------------------------------------------


def _unpickle_compaction(state: dict[str, Any]) -> Compaction:
    """A pickled :class:`Compaction` back, read-only as it was made."""
    state = dict(state)
    state["archive"] = MappingProxyType(dict(state["archive"]))
    state["choices"] = MappingProxyType(dict(state["choices"]))
    if state["scores"] is not None:
        state["scores"] = np.array(state["scores"], dtype=float)
        state["scores"].setflags(write=False)
    return Compaction(**state)


@dataclass(frozen=True, slots=True, eq=False)
class Compaction:
    """What :meth:`Compactor.compact` returns.

    Attributes:
        messages: the compacted messages in the caller's format (a Transcript for
            ``format="transcript"``); for Anthropic, the system prompt is ``system``.
        kept, trimmed, stubbed, dropped: entry ids by what happened to them (in order).
            ``trimmed`` includes entries cut on the way in (``max_entry_tokens``).
        tokens: tokens of the result (by the compactor's counter).
        budget: the budget it was made for.
        archive: every entry that was trimmed, stubbed or dropped, whole, by id.
        scores: the entries' scores, ``None`` when nothing needed selecting.
        choices: the :class:`Option` of every input entry, by id (``TRIM`` for
            entries cut on the way in).
        format: ``"openai"``, ``"anthropic"`` or ``"transcript"``.
        transcript: the compacted :class:`Transcript` (same id, domain and meta; without
            the input's queries, whose evidence may have left).
        system: the Anthropic system prompt of the result (None for other formats).
        phase: the phase masking used (None when nothing needed selecting).
        over_budget: True when the pins alone exceed the budget and
            ``on_over_budget="keep_pins"`` returned them anyway.
        method: how the selection was made (``"fits"``, a solver method, ``"session-noop"``...).
        source: the input as a Transcript (what :meth:`restore` restores from).
        source_tokens: tokens of the input.
    """

    messages: Any
    kept: tuple[str, ...]
    trimmed: tuple[str, ...]
    stubbed: tuple[str, ...]
    dropped: tuple[str, ...]
    tokens: int
    budget: int
    archive: Mapping[str, Entry]
    scores: np.ndarray | None
    choices: Mapping[str, Option]
    format: str
    transcript: Transcript
    source: Transcript = field(repr=False)
    source_tokens: int = 0
    system: Any = None
    phase: Phase | None = None
    over_budget: bool = False
    method: str = ""

    def __reduce__(self) -> tuple[Any, ...]:
        # pickled with plain dicts: its read-only mappings (mappingproxy) do not pickle themselves
        state = {f.name: getattr(self, f.name) for f in fields(self)}
        state["archive"], state["choices"] = dict(self.archive), dict(self.choices)
        return (_unpickle_compaction, (state,))

    def restore_transcript(self, ids: str | Sequence[str]) -> Transcript:
        """The compacted transcript with the entries ``ids`` put back whole, at their places.

        Whatever their tool group needs comes back too: restoring a dropped tool
        result restores its call and the call's other results; restoring a dropped
        call restores its results. Ids of entries that were kept are ignored; an id
        that names no entry of the input is a ``KeyError``.
        """
        if isinstance(ids, str):
            ids = [ids]
        known = {e.id: i for i, e in enumerate(self.source.entries)}
        unknown = [x for x in ids if x not in known]
        if unknown:
            raise KeyError(f"restore: no entry with id {unknown[0]!r} in the input (of {len(known)} entries)")
        result = {e.id: e for e in self.transcript.entries}
        wanted = {x for x in ids if x in self.archive}
        entries = self.source.entries
        parents = self.source.parents()
        children: dict[int, list[int]] = {}
        for i, p in enumerate(parents):
            if p >= 0:
                children.setdefault(p, []).append(i)
        for x in list(wanted):
            i = known[x]
            root = parents[i] if parents[i] >= 0 else i
            group = [root, *children.get(root, [])]
            if any(entries[g].id not in result for g in group):
                wanted.update(entries[g].id for g in group if entries[g].id not in result)
        out = tuple(e if e.id in wanted else result[e.id] for e in entries if e.id in wanted or e.id in result)
        if out == entries:
            return self.source
        return Transcript(id=self.source.id, entries=out, domain=self.source.domain, meta=self.source.meta)

    def restore(self, ids: str | Sequence[str]) -> Any:
        """The messages with the entries ``ids`` put back whole (see :meth:`restore_transcript`),
        in this result's format. ``restore(list(archive))`` gives back the input exactly."""
        return _render(self.restore_transcript(ids), self.format)[0]

    def summary(self) -> str:
        """One line: counts and tokens."""
        n = len(self.source.entries)
        parts = [f"{len(self.kept)} kept"]
        for name, ids in (("trimmed", self.trimmed), ("stubbed", self.stubbed), ("dropped", self.dropped)):
            if ids:
                parts.append(f"{len(ids)} {name}")
        flag = " OVER BUDGET (pins only)" if self.over_budget else ""
        phase = f", phase {self.phase.value}" if self.phase is not None else ""
        return (f"{n} entries -> {', '.join(parts)}; {self.source_tokens:,} -> {self.tokens:,} tokens "
                f"(budget {self.budget:,}{phase}){flag}")

    def __repr__(self) -> str:
        return f"Compaction({self.format}: {self.summary()})"


@dataclass(frozen=True, slots=True)
class PrefixReuse:
    """How much of the previous output a session step left unchanged at its start.

    ``messages``: leading messages equal to the previous output's; ``share``: that
    over the previous output's message count (1.0 when it had none); ``tokens``:
    the tokens of the leading entries that stayed the same.
    """

    messages: int
    share: float
    tokens: int


# --------------------------------------------------------------------------
# One run over one transcript
# --------------------------------------------------------------------------


def _units(parent: np.ndarray) -> tuple[list[list[int]], np.ndarray]:
    """Tool groups (root then children) and singletons, and each entry's unit index."""
    n = len(parent)
    unit_of = np.full(n, -1, dtype=np.int64)
    units: list[list[int]] = []
    for i in range(n):
        p = int(parent[i])
        if p < 0:
            unit_of[i] = len(units)
            units.append([i])
        else:
            unit_of[i] = unit_of[p]
            units[int(unit_of[p])].append(i)
    return units, unit_of


def _unit_min(costs: np.ndarray, allowed: np.ndarray, members: list[int]) -> float:
    """Least cost of one unit: 0 if every member may drop, else each member's cheapest kept option."""
    if all(allowed[m, _DROP] for m in members):
        return 0.0
    total = 0.0
    for m in members:
        row = allowed[m, :_DROP]
        if not row.any():
            return math.inf
        total += float(costs[m, :_DROP][row].min())
    return total


def _min_cost(costs: np.ndarray, allowed: np.ndarray, units: list[list[int]]) -> float:
    return sum(_unit_min(costs, allowed, u) for u in units)


@dataclass(frozen=True, slots=True)
class _Problem:
    costs: np.ndarray
    values: np.ndarray
    allowed: np.ndarray
    scores: np.ndarray
    phase: Phase
    pins: int


class _Options:
    """One entry's forms and their token counts (what :class:`_Run` needs of it, cached per entry)."""

    __slots__ = ("entry", "name", "src_cost", "full", "full_cost", "done", "trim", "trim_cost", "stub", "stub_cost",
                 "trim_cover", "stub_cover")

    def __init__(self, entry: Entry, name: str | None, src_cost: int, full: Entry, full_cost: int) -> None:
        self.entry = entry
        self.name = name  # the tool name the stub quotes
        self.src_cost = src_cost
        self.full = full  # the entry, or its capped form (max_entry_tokens)
        self.full_cost = full_cost
        self.done = False  # trim and stub worked out
        self.trim: Entry | None = None
        self.trim_cost = 0
        self.stub: Entry | None = None
        self.stub_cost = 0
        self.trim_cover = -1.0  # share of the entry's values the trimmed form shows; -1: no values
        self.stub_cover = -1.0


def _entry_options(cfg: _Config, memo: _Memo | None, entry: Entry, name: str | None) -> _Options:
    """``entry``'s :class:`_Options` (its token count and capped form), from ``memo`` when it has them;
    ``memo.check_config(cfg)`` must have been called."""
    if memo is not None:
        hit = memo.options.get(id(entry))
        if hit is not None and hit.entry is entry and hit.name == name:
            return hit
    counter = cfg.counter
    cost = counter.count_entry(entry)
    capped = _cap(cfg, entry, cost)
    if capped is None:
        opts = _Options(entry, name, cost, entry, cost)
    else:
        opts = _Options(entry, name, cost, capped, counter.count_entry(capped))
    if memo is not None:
        memo.put(memo.options, id(entry), opts)
    return opts


def _cap(cfg: _Config, entry: Entry, cost: int) -> Entry | None:
    """``entry`` trimmed to ``cfg.max_entry_tokens`` (None when it fits, or trimming would not save)."""
    cap = cfg.max_entry_tokens
    if cap is None or cost <= cap or entry.role == "system" or not entry.content:
        return None
    counter = cfg.counter
    text_tokens = counter.count(entry.content)
    keep = cap - (cost - text_tokens) - 24  # room for the marker
    best: Entry | None = None
    for _ in range(4):
        text = trim_text(entry.content, max(0, keep), counter, entry_id=entry.id, total=text_tokens)
        if text is None:
            break
        best = entry.replace(content=text)
        over = counter.count_entry(best) - cap
        if over <= 0 or keep <= 0:
            break
        keep -= over
    if best is not None and counter.count_entry(best) >= cost:
        return None
    return best


class _Run:
    """Everything :meth:`Compactor.compact` works out about one input transcript.

    With a ``memo`` (the compactor's), per-entry work (token counts, capped, trimmed and
    stubbed forms) is looked up for entries seen in earlier calls.
    """

    def __init__(self, cfg: _Config, source: Transcript, fmt: str, memo: _Memo | None = None) -> None:
        self.cfg = cfg
        self.source = source
        self.fmt = fmt
        self.memo = memo
        self.n = n = len(source.entries)
        self.parent = np.asarray(source.parents(), dtype=np.int64).reshape(n)
        self.units, self.unit_of = _units(self.parent)
        self.names = tool_names(source)
        if memo is not None:
            memo.check_config(cfg)
        self.opts = [_entry_options(cfg, memo, e, name) for e, name in zip(source.entries, self.names)]
        self.src_cost = [o.src_cost for o in self.opts]
        self.full: list[Entry] = [o.full for o in self.opts]
        self.pretrimmed: set[int] = {i for i, o in enumerate(self.opts) if o.full is not o.entry}
        self.full_cost = [o.full_cost for o in self.opts]
        self._renders: list[list[Entry | None]] | None = None
        self._costs: np.ndarray | None = None
        self._available: np.ndarray | None = None
        self._cover: np.ndarray | None = None  # (n, 4): share of values each form keeps, -1 if none
        self._scores: dict[str | None, np.ndarray] = {}

    # -- renderings -----------------------------------------------------------
    def _trim_keep(self, i: int) -> int:
        counter = self.cfg.counter
        tokens = counter.count(self.full[i].content)
        k = self.cfg.trim_keep
        return int(round(k * tokens)) if isinstance(k, float) else min(int(k), tokens)

    def options(self) -> tuple[list[list[Entry | None]], np.ndarray, np.ndarray]:
        """Per entry: the FULL, TRIM, STUB renderings (None if not offered), their costs, availability."""
        if self._renders is not None:
            assert self._costs is not None and self._available is not None
            return self._renders, self._costs, self._available
        n = self.n
        for i, o in enumerate(self.opts):
            if not o.done:
                self._work_out(i, o)
        opts = self.opts
        costs = np.zeros((n, 4), dtype=np.int64)
        available = np.zeros((n, 4), dtype=bool)
        if n:
            costs[:, _FULL] = self.full_cost
            costs[:, _TRIM] = [o.trim_cost for o in opts]
            costs[:, _STUB] = [o.stub_cost for o in opts]
            available[:, _FULL] = True
            available[:, _DROP] = True
            available[:, _TRIM] = [o.trim is not None for o in opts]
            available[:, _STUB] = [o.stub is not None for o in opts]
        cover = np.full((n, 4), -1.0)
        if n:
            cover[:, _TRIM] = [o.trim_cover for o in opts]
            cover[:, _STUB] = [o.stub_cover for o in opts]
        self._cover = cover
        renders: list[list[Entry | None]] = [[o.full, o.trim, o.stub] for o in opts]
        self._renders, self._costs, self._available = renders, costs, available
        return renders, costs, available

    def _work_out(self, i: int, o: _Options) -> None:
        """The trimmed and stubbed forms of entry ``i`` (each only if cheaper than the better ones)."""
        cfg, counter = self.cfg, self.cfg.counter
        src = o.entry
        if src.content:
            values = extract_values(src.content)
            text = trim_text(src.content, self._trim_keep(i), counter, entry_id=src.id)
            if text is not None:
                candidate = src.replace(content=text)
                c = counter.count_entry(candidate)
                if c < o.full_cost:
                    o.trim, o.trim_cost = candidate, c
                    if values:
                        o.trim_cover = len(value_set(text) & set(values)) / len(values)
            if values:
                o.stub_cover = min(cfg.stub_values, len(values)) / len(values)
            stub = stub_text(src.id, src.role, tokens=o.src_cost, tool_name=o.name,
                             values=values, max_values=cfg.stub_values)
            candidate = src.replace(content=stub)
            c = counter.count_entry(candidate)
            best_other = o.trim_cost if o.trim is not None else o.full_cost
            if c < best_other:
                o.stub, o.stub_cost = candidate, c
        o.done = True

    # -- scoring, pins ------------------------------------------------------
    def scores(self, query: str | None) -> np.ndarray:
        if query not in self._scores:
            self._scores[query] = _score(self.cfg.scorer, self.source, query)
        return self._scores[query]

    def pins(self) -> np.ndarray:
        cfg, entries = self.cfg, self.source.entries
        pins = np.zeros(self.n, dtype=bool)
        if cfg.pin_system:
            pins |= np.array([e.role == "system" for e in entries], dtype=bool)
        if cfg.pin_last_user:
            users = [i for i, e in enumerate(entries) if e.role == "user"]
            if users:
                pins[users[-1]] = True
        if cfg.pin_last:
            pins[max(0, self.n - cfg.pin_last):] = True
        return pins

    def policy(self) -> PhasePolicy:
        return self.cfg.policy if self.cfg.policy is not None else PhasePolicy.for_domain(self.source.domain)

    # -- the problem ----------------------------------------------------------
    def problem(
        self,
        budget: int,
        *,
        query: str | None,
        phase: Phase | str | None,
        fixed: Mapping[int, tuple[int, Entry | None]] | None = None,
    ) -> _Problem:
        """Costs, values and allowed options for ``budget``; ``fixed`` entries get exactly their option."""
        cfg = self.cfg
        _, base_costs, available = self.options()
        costs = base_costs.copy()
        allowed = available.copy()
        fixed = fixed or {}
        for i, (opt, entry) in fixed.items():
            allowed[i] = False
            allowed[i, opt] = True
            if entry is not None:
                costs[i, opt] = cfg.counter.count_entry(entry)
        scores = self.scores(query)
        pins = self.pins()
        for i in fixed:
            pins[i] = False
        allowed[pins] = np.array([True, False, False, False])
        if self.fmt == "anthropic":
            # Anthropic wants the first message from the user: the first user turn may
            # be trimmed or stubbed, never dropped.
            first = next((i for i, e in enumerate(self.source.entries) if e.role != "system"), None)
            if (
                first is not None
                and first not in fixed
                and self.source.entries[first].role == "user"
                and allowed[first, :_DROP].any()
            ):
                allowed[first, _DROP] = False
        exempt = pins.copy()
        for i in fixed:
            exempt[i] = True
        if cfg.critical is not None:
            unit_cost = [_unit_min(costs, allowed, u) for u in self.units]
            total = sum(unit_cost)
            order = sorted((i for i in range(self.n) if scores[i] >= cfg.critical and not exempt[i]),
                           key=lambda i: (-scores[i], -i))
            for i in order:
                row = allowed[i].copy()
                allowed[i] = np.array([True, False, False, False])
                u = int(self.unit_of[i])
                new = _unit_min(costs, allowed, self.units[u])
                if total - unit_cost[u] + new <= budget:
                    total += new - unit_cost[u]
                    unit_cost[u] = new
                    exempt[i] = True
                else:
                    allowed[i] = row
        policy = self.policy()
        ph = policy.check_phase(phase) if phase is not None else detect_phase(self.source, policy)
        allowed = mask_options(self.source, policy, ph, allowed=allowed, costs=costs, scores=scores,
                               budget=budget, exempt=exempt)
        retain = np.tile(np.asarray(cfg.retain, dtype=float), (self.n, 1))
        # A trimmed or stubbed entry keeps some of its values (ids, numbers, paths) in
        # sight; what the next steps reuse are those values, so the share it keeps
        # counts for half of what the form is worth.
        assert self._cover is not None  # set by options() above
        known = self._cover >= 0
        retain[known] = (1 - VALUE_WEIGHT) * retain[known] + VALUE_WEIGHT * self._cover[known]
        retain[:, _TRIM] = np.maximum(retain[:, _TRIM], retain[:, _STUB])
        eps = EPSILON * (np.arange(self.n) + 1) / max(self.n, 1)
        values = (scores + eps)[:, None] * retain
        return _Problem(costs=costs, values=values, allowed=allowed, scores=scores, phase=ph, pins=int(pins.sum()))

    def min_cost(self, allowed: np.ndarray, costs: np.ndarray) -> float:
        return _min_cost(costs, allowed, self.units)

    def solve(self, prob: _Problem, budget: int, allowed: np.ndarray | None = None) -> tuple[np.ndarray, str, bool]:
        """(choices, method, over_budget); raises :class:`BudgetError` per ``on_over_budget``."""
        allowed = prob.allowed if allowed is None else allowed
        kwargs = dict(allowed=allowed, parent=self.parent, method=self.cfg.solver)
        try:
            sol = knapsack.solve(prob.costs, prob.values, budget, **kwargs)  # type: ignore[arg-type]
            return np.asarray(sol.choices, dtype=np.int64), sol.method, False
        except knapsack.InfeasibleError as exc:
            required = exc.min_cost
            if required is None or self.cfg.on_over_budget == "raise":
                raise self._budget_error(budget, required, prob.pins) from None
            sol = knapsack.solve(prob.costs, prob.values, required, **kwargs)  # type: ignore[arg-type]
            return np.asarray(sol.choices, dtype=np.int64), sol.method, True

    def _budget_error(self, budget: int, required: int | None, pins: int) -> BudgetError:
        cfg = self.cfg
        what = []
        if cfg.pin_system:
            what.append("system prompt")
        if cfg.pin_last_user:
            what.append("last user turn")
        if cfg.pin_last:
            what.append(f"last {cfg.pin_last} entries")
        need = f"need {required} tokens" if required is not None else "cannot all be kept with their tool groups"
        err = BudgetError(
            f"budget of {budget} tokens is too small for transcript {self.source.id!r}: its {pins} pinned entries "
            f"({', '.join(what) or 'none'}) {need}, counting the tool calls and results that must stay beside them; "
            "raise the budget, pin fewer entries (pin_last, pin_system, pin_last_user), or pass "
            "on_over_budget='keep_pins'",
            budget=budget,
            required=required or 0,
        )
        err.pins = pins  # type: ignore[attr-defined]
        return err

    # -- the result -----------------------------------------------------------
    def assemble(
        self,
        choices: np.ndarray,
        *,
        budget: int,
        scores: np.ndarray | None,
        phase: Phase | None,
        method: str,
        over_budget: bool = False,
        fixed: Mapping[int, tuple[int, Entry | None]] | None = None,
    ) -> Compaction:
        fixed = fixed or {}
        entries: list[Entry] = []
        kept: list[str] = []
        trimmed: list[str] = []
        stubbed: list[str] = []
        dropped: list[str] = []
        archive: dict[str, Entry] = {}
        choice_map: dict[str, Option] = {}
        tokens = 0
        counter = self.cfg.counter
        for i, src in enumerate(self.source.entries):
            c = int(choices[i])
            if c == _DROP:
                dropped.append(src.id)
                archive[src.id] = src
                choice_map[src.id] = Option.DROP
                continue
            if i in fixed and fixed[i][1] is not None:
                entry = fixed[i][1]
            elif c == _FULL:
                entry = self.full[i]
            else:
                renders, _, _ = self.options()
                entry = renders[i][c]
            assert entry is not None, (i, c)
            entries.append(entry)
            tokens += self.full_cost[i] if entry is self.full[i] else counter.count_entry(entry)
            if entry is src or entry == src:
                kept.append(src.id)
                choice_map[src.id] = Option.FULL
            elif c == _STUB:
                stubbed.append(src.id)
                archive[src.id] = src
                choice_map[src.id] = Option.STUB
            else:
                trimmed.append(src.id)
                archive[src.id] = src
                choice_map[src.id] = Option.TRIM
        transcript = Transcript(id=self.source.id, entries=tuple(entries), domain=self.source.domain,
                                meta=self.source.meta)
        messages, system = _render(transcript, self.fmt, self.memo)
        if scores is not None:
            scores = np.array(scores, dtype=float)
            scores.setflags(write=False)
        return Compaction(
            messages=messages,
            kept=tuple(kept),
            trimmed=tuple(trimmed),
            stubbed=tuple(stubbed),
            dropped=tuple(dropped),
            tokens=tokens,
            budget=budget,
            archive=MappingProxyType(archive),
            scores=scores,
            choices=MappingProxyType(choice_map),
            format=self.fmt,
            transcript=transcript,
            source=self.source,
            source_tokens=sum(self.src_cost),
            system=system,
            phase=phase,
            over_budget=over_budget,
            method=method,
        )

    def full_choices(self) -> np.ndarray:
        return np.zeros(self.n, dtype=np.int64)


# --------------------------------------------------------------------------
# The compactor
# --------------------------------------------------------------------------


class Compactor:
    """Keeps an agent's context inside a token budget: keep, trim, stub or drop each entry.

    Parameters (keyword-only; stored as given, checked when :meth:`compact` runs):
        scorer: any object with ``score(transcript, query=None) -> array in [0, 1]``.
            ``None``: :func:`salience.scorer.model.default_scorer` when available, else a
            recency and role prior.
        budget: default token budget (a positive int).
        counter: token counter: ``None`` (tiktoken ``cl100k_base``, offline), an encoding
            name, a callable ``str -> int`` or a :class:`~salience.tokens.TokenCounter`.
        policy: a :class:`PhasePolicy`, a domain name, a mapping as
            :meth:`PhasePolicy.as_dict` writes it (how a JSON profile carries a policy of
            your own, phase budget shares included), or ``None`` for the default policy
            of each transcript's domain (no masking when it has none).
        pin_last: how many of the last entries are pinned (kept whole).
        pin_system: pin system entries. pin_last_user: pin the last user turn.
        critical: entries scored at least this are pinned while the pins fit; None: never.
        max_entry_tokens: entries above this are trimmed on the way in (system entries
            excepted); None: never.
        trim_keep: how much a trimmed entry keeps: a float in (0, 1) is a share of its
            tokens, an int a number of tokens.
        stub_values: how many key values a stub quotes.
        retain: share of an entry's value kept by ``"trim"`` and ``"stub"`` (FULL keeps 1);
            ``None`` or missing keys: :data:`DEFAULT_RETAIN` (trim 0.6, stub 0.15).
        solver: ``"auto"``, ``"exact"`` or ``"greedy"`` (see :func:`salience.selector.knapsack.solve`).
        on_over_budget: ``"raise"`` a :class:`BudgetError` when the pins alone exceed the
            budget, or ``"keep_pins"``: return the cheapest valid selection (pins whole,
            the calls and results their groups need, as stubs when possible), flagged
            ``over_budget=True``.
        profile: tuned parameters (a mapping, or the path of a JSON file holding one;
            either optionally under a ``"compactor"`` key, as ``salience tune`` writes
            them) for any of ``budget``, ``policy``, ``pin_last``, ``pin_system``, ``pin_last_user``, ``critical``,
            ``max_entry_tokens``, ``trim_keep``, ``stub_values``, ``retain``, ``solver``,
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
        pin_last: int = 4,
        pin_system: bool = True,
        pin_last_user: bool = True,
        critical: float | None = 0.95,
        max_entry_tokens: int | None = 4000,
        trim_keep: float | int = 0.25,
        stub_values: int = 8,
        retain: Mapping[str, float] | None = None,
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
        self.solver = solver
        self.on_over_budget = on_over_budget
        self.profile = profile

    # -- scikit-learn conventions -------------------------------------------
    @classmethod
    def _param_names(cls) -> list[str]:
        sig = inspect.signature(cls.__init__)
        return [p for p in sig.parameters if p != "self"]

    def get_params(self, deep: bool = True) -> dict[str, Any]:
        """The constructor parameters, as stored."""
        return {name: getattr(self, name) for name in self._param_names()}

    def set_params(self, **params: Any) -> Compactor:
        """Set constructor parameters; unknown names are a ``ValueError``."""
        names = self._param_names()
        for key, value in params.items():
            if key not in names:
                raise ValueError(f"Compactor: unknown parameter {key!r} (known: {', '.join(names)})")
            setattr(self, key, value)
        return self

    def __repr__(self) -> str:
        sig = inspect.signature(type(self).__init__)
        changed = []
        for name, p in sig.parameters.items():
            if name == "self":
                continue
            value = getattr(self, name)
            default = p.default
            same = value is default
            if not same:
                try:
                    same = bool(value == default)
                except Exception:  # arrays and the like
                    same = False
            if not same:
                changed.append(f"{name}={value!r}")
        return f"Compactor({', '.join(changed)})"

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        for key in ("_cache", "_profile_cache"):  # per-process caches: rebuilt on demand
            state.pop(key, None)
        return state

    def _memo(self) -> _Memo:
        """This compactor's caches across calls (see :class:`_Memo`)."""
        memo: _Memo | None = self.__dict__.get("_cache")
        if memo is None:
            memo = self.__dict__["_cache"] = _Memo()
        return memo

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

    def _config(self, budget: Any = None) -> _Config:
        sig = inspect.signature(type(self).__init__)
        params = {name: getattr(self, name) for name in self._param_names()}
        profile = self._profile(params.pop("profile"))
        for key, value in profile.items():
            if _is_default(params[key], sig.parameters[key].default):
                params[key] = value
        scorer = params["scorer"]
        if scorer is None:
            scorer = _default_scorer()
        elif not callable(getattr(scorer, "score", None)):
            raise ValueError(f"Compactor: parameter 'scorer' must have a score(transcript, query=None) method "
                             f"(got {_got(scorer)})")
        try:
            b = check_budget(params["budget"] if budget is None else budget)
        except ValueError as exc:
            raise ValueError(f"Compactor: {exc}") from None
        counter_param = params["counter"]
        cache = getattr(self, "_counter_cache", None)
        if cache is not None and cache[0] is counter_param:
            counter = cache[1]
        else:
            try:
                counter = as_counter(counter_param)
            except (TypeError, ValueError, SalienceError) as exc:
                raise ValueError(f"Compactor: parameter 'counter': {exc}") from None
            self._counter_cache = (counter_param, counter)
        policy = _check_policy(params["policy"], getattr(self, "_policy_cache", None))
        if isinstance(params["policy"], Mapping) and getattr(self, "_policy_cache", (None, None))[1] is not policy:
            self._policy_cache = (copy.deepcopy(params["policy"]), policy)
        critical = params["critical"]
        if critical is not None and (isinstance(critical, bool) or not isinstance(critical, (int, float))
                                     or not 0.0 < critical <= 1.0):
            raise ValueError(
                f"Compactor: parameter 'critical' must be a number in (0, 1] or None (got {_got(critical)})"
            )
        trim_keep = params["trim_keep"]
        if isinstance(trim_keep, bool) or not (
            (isinstance(trim_keep, float) and 0.0 < trim_keep < 1.0)
            or (isinstance(trim_keep, (int, np.integer)) and trim_keep >= 1)
        ):
            raise ValueError(f"Compactor: parameter 'trim_keep' must be a float in (0, 1) (a share of the entry) or an "
                             f"int >= 1 (tokens) (got {_got(trim_keep)})")
        solver = params["solver"]
        if solver not in knapsack.METHODS:
            raise ValueError(f"Compactor: parameter 'solver' must be one of "
                             f"{', '.join(repr(m) for m in knapsack.METHODS)} (got {_got(solver)})")
        on_over = params["on_over_budget"]
        if on_over not in ON_OVER_BUDGET:
            raise ValueError(f"Compactor: parameter 'on_over_budget' must be one of "
                             f"{', '.join(repr(m) for m in ON_OVER_BUDGET)} (got {_got(on_over)})")
        return _Config(
            scorer=scorer,
            budget=b,
            counter=counter,
            policy=policy,
            pin_last=_check_int("pin_last", params["pin_last"], minimum=0),  # type: ignore[arg-type]
            pin_system=_check_bool("pin_system", params["pin_system"]),
            pin_last_user=_check_bool("pin_last_user", params["pin_last_user"]),
            critical=None if critical is None else float(critical),
            max_entry_tokens=_check_int("max_entry_tokens", params["max_entry_tokens"], minimum=1, none=True),
            trim_keep=trim_keep if isinstance(trim_keep, float) else int(trim_keep),
            stub_values=_check_int("stub_values", params["stub_values"], minimum=0),  # type: ignore[arg-type]
            retain=_check_retain(params["retain"]),
            solver=solver,
            on_over_budget=on_over,
        )

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
            ValueError: a parameter or argument out of range (the message names it).
            TranscriptError: malformed messages. FormatError: mixed formats.
            BudgetError: the pins alone exceed the budget (with ``on_over_budget="raise"``).
            ScorerError: the scorer returned bad scores.
        """
        cfg = self._config(budget)
        if query is not None and not isinstance(query, str):
            raise ValueError(f"query must be a str or None (got {_got(query)})")
        memo = self._memo()
        source, fmt = _to_transcript(messages, system=system, format=format, memo=memo)
        run = _Run(cfg, source, fmt, memo)
        if sum(run.full_cost) <= cfg.budget:
            if phase is not None:
                run.policy().check_phase(phase)
            return run.assemble(run.full_choices(), budget=cfg.budget, scores=None, phase=None, method="fits")
        prob = run.problem(cfg.budget, query=query, phase=phase)
        choices, method, over = run.solve(prob, cfg.budget)
        return run.assemble(choices, budget=cfg.budget, scores=prob.scores, phase=prob.phase, method=method,
                            over_budget=over)

    def session(
        self,
        *,
        budget: int | None = None,
        trigger: float = 0.9,
        min_removal: float | int = 0.2,
    ) -> CompactionSession:
        """A :class:`CompactionSession` for an agent loop (prefix-stable compaction)."""
        b = check_budget(self.budget if budget is None else budget)
        if isinstance(trigger, bool) or not isinstance(trigger, (int, float)) or not 0.0 < trigger <= 1.0:
            raise ValueError(f"session: trigger must be a number in (0, 1] (got {_got(trigger)})")
        if isinstance(min_removal, bool) or not (
            (isinstance(min_removal, float) and 0.0 <= min_removal < 1.0)
            or (isinstance(min_removal, (int, np.integer)) and min_removal >= 0)
        ):
            raise ValueError(f"session: min_removal must be a float in [0, 1) (a share of the budget) or an int >= 0 "
                             f"(tokens) (got {_got(min_removal)})")
        return CompactionSession(self, budget=b, trigger=float(trigger), min_removal=min_removal)


# --------------------------------------------------------------------------
# Sessions
# --------------------------------------------------------------------------


class CompactionSession:
    """Compaction across the calls of an agent loop, keeping the cached prefix stable.

    Pass the full, growing history on every call (not the previous output).
    ``compact`` does nothing while the history (with earlier decisions applied) takes
    at most ``trigger * budget`` tokens. Past that it compacts down to
    ``trigger * budget - min_removal`` tokens (``min_removal``: a float is a share of
    the budget, an int tokens), leaving headroom for the next calls. Rules:

    * an entry once trimmed, stubbed or dropped keeps that exact rendering ("settled");
      a result that arrives after its call was dropped is dropped with it;
    * entries kept whole before the last compaction stay whole as far as possible:
      the longest prefix of them that still lets the target be met is fixed, and only
      entries after it are chosen afresh (if the headroom target cannot be met, the
      budget itself is tried);
    * if even the settled decisions alone cannot fit the budget, the session
      recompacts from scratch (``recompacted`` is True, ``full_recompactions`` counts),
      to the target if the pins allow, else to the budget;
    * if the history is not an extension of the previous one (an entry changed or
      went missing), the session starts over (``resets`` counts).

    A call that only appends to the history and stays below the trigger works on the
    new messages alone (OpenAI, Anthropic and LangChain lists, Transcripts): it reads, counts and
    renders them, and checks the old messages still equal what they were and that the
    messages it handed out before were not changed (one given a change is copied
    again). Messages of successive results that did not change are the same objects,
    so copy one before changing it if an earlier result must stay as it was.

    After each call: ``triggered`` (this call compacted), ``recompacted``,
    ``prefix_reuse`` (a :class:`PrefixReuse` against the previous output, None on the
    first call), ``compactions`` (how many calls compacted).
    """

    def __init__(self, compactor: Compactor, *, budget: int, trigger: float, min_removal: float | int) -> None:
        self.compactor = compactor
        self.budget = budget
        self.trigger = trigger
        self.min_removal = min_removal
        self.triggered = False
        self.recompacted = False
        self.prefix_reuse: PrefixReuse | None = None
        self.compactions = 0
        self.full_recompactions = 0
        self.resets = 0
        self._source: Transcript | None = None
        self._settled: dict[str, tuple[int, Entry | None]] = {}
        self._point = 0
        self._last: Compaction | None = None
        self._tail: _Tail | None = None

    def __repr__(self) -> str:
        return (f"CompactionSession(budget={self.budget}, trigger={self.trigger}, min_removal={self.min_removal!r}, "
                f"compactions={self.compactions}, settled={len(self._settled)})")

    @property
    def target(self) -> int:
        """The token count a triggered compaction aims at."""
        removal = self.min_removal
        tokens = int(round(removal * self.budget)) if isinstance(removal, float) else int(removal)
        return max(1, int(self.trigger * self.budget) - tokens)

    def reset(self) -> None:
        """Forget every decision (the next call starts a new history)."""
        self._source = None
        self._settled = {}
        self._point = 0
        self._last = None
        self._tail = None

    def compact(
        self,
        messages: Any,
        *,
        query: str | None = None,
        phase: Phase | str | None = None,
        system: Any = None,
        format: str | None = None,
    ) -> Compaction:
        """This step's messages (see the class doc); never modifies ``messages``."""
        cfg = self.compactor._config(self.budget)
        memo = self.compactor._memo()
        tail, self._tail = self._tail, None
        if tail is not None:
            try:
                appended = self._append(tail, cfg, memo, messages, system, format)
            except SalienceError:  # bad new messages: the full path below says what is wrong
                appended = None
            if appended is not None:
                return appended
        source, fmt = _to_transcript(messages, system=system, format=format, memo=memo)
        if self._source is not None and source.entries[: len(self._source.entries)] != self._source.entries:
            self.reset()
            self.resets += 1
        run = _Run(cfg, source, fmt, memo)
        fixed = {i: self._settled[e.id] for i, e in enumerate(source.entries) if e.id in self._settled}
        for i, p in enumerate(run.parent.tolist()):
            if p >= 0 and i not in fixed and p in fixed and fixed[p][0] == _DROP:
                fixed[i] = (_DROP, None)  # a late result of a dropped call goes with it
                self._settled[source.entries[i].id] = (_DROP, None)
        choices = run.full_choices()
        view = 0
        for i in range(run.n):
            if i in fixed:
                opt, entry = fixed[i]
                choices[i] = opt
                view += 0 if entry is None else cfg.counter.count_entry(entry)
            else:
                view += run.full_cost[i]
        self.recompacted = False
        self.triggered = view > self.trigger * self.budget
        if not self.triggered:
            result = run.assemble(choices, budget=self.budget, scores=None, phase=None, method="session-noop",
                                  fixed=fixed)
        else:
            result = self._compact(run, fixed, query=query, phase=phase)
            self.compactions += 1
        self.prefix_reuse = self._reuse(result, cfg.counter)
        self._source = source
        self._last = result
        self._tail = _Tail.after(self, messages, system, format, cfg, memo, result)
        return result

    def _append(
        self, tail: _Tail, cfg: _Config, memo: _Memo, messages: Any, system: Any, format: str | None
    ) -> Compaction | None:
        """This call's result if the history only grew since the last call and stays within
        the trigger (None otherwise: the full path then does the work), doing work for the
        new messages only, beyond C-level comparisons and copies of lists."""
        fmt = tail.fmt
        if format != tail.format or tail.key != _tail_key(cfg):
            return None
        k = len(tail.source.entries)
        if fmt == "transcript":
            if (
                not isinstance(messages, Transcript)
                or system is not None
                or len(messages.entries) < k
                or (messages.id, messages.domain, messages.meta) != (tail.source.id, tail.source.domain,
                                                                     tail.source.meta)
                or messages.entries[:k] != tail.source.entries
            ):
                return None
            source = messages
            tail.growth.check(source.id, source.entries, k)  # finds the new entries' parents
        else:
            m = len(tail.snaps)
            if (
                not isinstance(messages, (list, tuple))
                or len(messages) < m
                or system != tail.system
                or list(messages[:m]) != tail.snaps
            ):
                return None
            new = messages[m:]
            if new and format is None and not _same_format(new, fmt):
                return None
            read_entries: list[Entry] = []
            if fmt == "anthropic":
                from salience.formats.anthropic import source_messages

                assert tail.reader is not None
                for i, message in enumerate(new, m):
                    read_entries.extend(tail.reader.read(message, i))
                tail.snaps.extend(source_messages(read_entries))
            else:
                read, key = _reader(fmt)
                for i, message in enumerate(new, m):
                    entry = read(message, i, transcript_id="transcript")
                    memo.put(memo.messages, id(message), (message, i, fmt, entry))
                    read_entries.append(entry)
                tail.snaps.extend(e.meta[key]["message"] for e in read_entries)
            source = tail.source._extend(read_entries, tail.growth)
        entries, parents = source.entries, tail.growth.parents
        memo.check_config(cfg)
        opts: list[_Options] = []
        view = tail.tokens
        late: set[int] = set()  # late results of dropped calls: they go with their calls
        for i in range(k, len(entries)):
            p = parents[i]
            o = _entry_options(cfg, memo, entries[i], tool_name(entries, i, p))
            opts.append(o)
            if p in tail.drops:
                late.add(i)
            else:
                view += o.full_cost
        if view > self.trigger * self.budget:
            return None
        out: list[Entry] = []
        for i, o in enumerate(opts, k):
            src = entries[i]
            tail.src_tokens += o.src_cost
            if i in late:
                tail.drops.add(i)
                self._settled[src.id] = (_DROP, None)
                tail.dropped.append(src.id)
                tail.archive[src.id] = src
                tail.choices[src.id] = Option.DROP
                continue
            out.append(o.full)
            if o.full is src:
                tail.kept.append(src.id)
                tail.choices[src.id] = Option.FULL
            else:
                tail.trimmed.append(src.id)
                tail.archive[src.id] = src
                tail.choices[src.id] = Option.TRIM
        tail.tokens = view
        tail.out = tail.out._extend(out, tail.out_growth)
        tail.source = source
        if fmt == "transcript":
            messages_out: Any = tail.out
        else:
            handed, internal = tail.handed, tail.internal
            copy_message = _copy_json if fmt != "langchain" else _copy_langchain
            if fmt == "anthropic":
                from salience.formats.anthropic import render_appended

                rendered = render_appended(out)
                roles = [m.get("role") for m in internal[-1:] + (rendered or [])]
                if rendered is None or any(a == b for a, b in zip(roles, roles[1:])):
                    return None  # messages to merge: the full path merges them
            else:
                render = _renderer(fmt)
                rendered = [memo.rendered_message(e, render) for e in out]
            if handed != internal:  # the caller changed a message it was given: a new copy
                for j, (h, r) in enumerate(zip(handed, internal)):
                    if h != r:
                        handed[j] = copy_message(r)
            internal.extend(rendered)
            handed.extend(copy_message(r) for r in rendered)
            messages_out = list(handed)
        result = Compaction(
            messages=messages_out,
            kept=tuple(tail.kept),
            trimmed=tuple(tail.trimmed),
            stubbed=tuple(tail.stubbed),
            dropped=tuple(tail.dropped),
            tokens=tail.tokens,
            budget=self.budget,
            archive=MappingProxyType(dict(tail.archive)),
            scores=None,
            choices=MappingProxyType(dict(tail.choices)),
            format=fmt,
            transcript=tail.out,
            source=source,
            source_tokens=tail.src_tokens,
            system=copy.deepcopy(tail.system_out),
            method="session-noop",
        )
        self.recompacted = self.triggered = False
        self.prefix_reuse = self._reuse(result, cfg.counter)
        self._source = source
        self._last = result
        self._tail = tail
        return result

    def _compact(
        self, run: _Run, fixed: dict[int, tuple[int, Entry | None]], *, query: str | None, phase: Phase | str | None
    ) -> Compaction:
        target = min(self.target, self.budget)
        point = min(self._point, run.n)
        free_prefix = [i for i in range(point) if i not in fixed]
        for goal in (target, self.budget):
            prob = run.problem(goal, query=query, phase=phase, fixed=fixed)
            if run.min_cost(prob.allowed, prob.costs) > goal:
                continue

            def fixed_prefix(p: int, prob: _Problem = prob) -> np.ndarray:
                allowed = prob.allowed.copy()
                for i in free_prefix[:p]:
                    if allowed[i, _FULL]:
                        allowed[i] = np.array([True, False, False, False])
                return allowed

            lo, hi = 0, len(free_prefix)  # lo is feasible
            while lo < hi:
                mid = (lo + hi + 1) // 2
                if run.min_cost(fixed_prefix(mid), prob.costs) <= goal:
                    lo = mid
                else:
                    hi = mid - 1
            choices, method, over = run.solve(prob, goal, fixed_prefix(lo))
            result = run.assemble(choices, budget=self.budget, scores=prob.scores, phase=prob.phase,
                                  method=f"session-{method}", over_budget=over, fixed=fixed)
            self._settle(run, choices, result)
            return result
        # The settled decisions cannot fit: start over.
        self.recompacted = bool(fixed) or point > 0
        if self.recompacted:
            self.full_recompactions += 1
        goal = target
        prob = run.problem(goal, query=query, phase=phase)
        if run.min_cost(prob.allowed, prob.costs) > goal:  # no headroom possible: the budget itself
            goal = self.budget
            prob = run.problem(goal, query=query, phase=phase)
        choices, method, over = run.solve(prob, goal)
        result = run.assemble(choices, budget=self.budget, scores=prob.scores, phase=prob.phase,
                              method=f"session-full-{method}", over_budget=over)
        self._settled = {}
        self._settle(run, choices, result)
        return result

    def _settle(self, run: _Run, choices: np.ndarray, result: Compaction) -> None:
        rendered = {e.id: e for e in result.transcript.entries}
        for i, src in enumerate(run.source.entries):
            c = int(choices[i])
            if c == _DROP:
                self._settled[src.id] = (c, None)
            elif c != _FULL:
                self._settled[src.id] = (c, rendered[src.id])
        self._point = run.n

    def _reuse(self, result: Compaction, counter: TokenCounter) -> PrefixReuse | None:
        last = self._last
        if last is None:
            return None
        if last.format != result.format or last.system != result.system:
            return PrefixReuse(messages=0, share=0.0, tokens=0)
        if result.format == "transcript":
            prev_msgs: Sequence[Any] = last.transcript.entries
            cur_msgs: Sequence[Any] = result.transcript.entries
        else:
            prev_msgs, cur_msgs = last.messages, result.messages
        k = _common_prefix(prev_msgs, cur_msgs)
        prev_e, cur_e = last.transcript.entries, result.transcript.entries
        j = _common_prefix(prev_e, cur_e)
        tokens = last.tokens if j == len(prev_e) else sum(counter.count_entry(e) for e in cur_e[:j])
        share = k / len(prev_msgs) if prev_msgs else 1.0
        return PrefixReuse(messages=k, share=share, tokens=tokens)


def _tail_key(cfg: _Config) -> tuple[Any, ...]:
    """What an entry's full form and token count depend on."""
    return (cfg.counter, cfg.max_entry_tokens)


def _reader(fmt: str) -> tuple[Any, str]:
    """(read one message as an entry, the entry meta key holding the message's copy) for ``fmt``."""
    if fmt == "openai":
        from salience.formats.openai import KEY, entry_from_openai

        return entry_from_openai, KEY
    from salience.adapters.langchain import KEY as LC_KEY
    from salience.adapters.langchain import entry_from_langchain

    return entry_from_langchain, LC_KEY


def _renderer(fmt: str) -> Any:
    """Render an entry as a message in ``fmt`` (``"openai"`` or ``"langchain"``)."""
    if fmt == "openai":
        from salience.formats.openai import entry_to_openai

        return entry_to_openai
    from salience.adapters.langchain import entry_to_langchain

    return entry_to_langchain


def _copy_langchain(message: Any) -> Any:
    return message.model_copy(deep=True)


def _same_format(messages: Sequence[Any], fmt: str) -> bool:
    """Whether ``messages``, appended to a history in ``fmt``, leave it in that format."""
    if fmt == "anthropic":
        return not _is_langchain_list(messages) and not any(_is_openai_message(m) for m in messages)
    return detect_format(messages) == fmt


@dataclass(slots=True, eq=False)
class _Tail:
    """What a :class:`CompactionSession` keeps after a call, so that a next call that only
    appends messages and does not compact works on the new messages alone
    (:meth:`CompactionSession._append`); the result's parts, kept as lists and dicts
    that grow.

    * ``source``, ``growth``: the history read so far and its validation state;
      ``snaps``: per message, the copy its entry holds (what the message must still equal);
    * ``out``, ``out_growth``: the result's transcript and its validation state;
      ``internal``: the result's messages as cached, ``handed``: the copies given out;
    * ``drops``: indices of entries settled as dropped (their late results go with them).
    """

    fmt: str
    format: str | None  # the format argument
    system: Any  # the system argument (a copy)
    system_out: Any  # the result's system prompt
    reader: Any  # Anthropic: the reader, in the state the history left it
    key: tuple[Any, ...]  # see _tail_key
    source: Transcript
    growth: _Growth
    snaps: list[Any]
    out: Transcript
    out_growth: _Growth
    internal: list[Any]
    handed: list[Any]
    drops: set[int]
    kept: list[str]
    trimmed: list[str]
    stubbed: list[str]
    dropped: list[str]
    archive: dict[str, Entry]
    choices: dict[str, Option]
    tokens: int
    src_tokens: int

    @classmethod
    def after(
        cls, session: CompactionSession, messages: Any, system: Any, format: str | None, cfg: _Config, memo: _Memo,
        result: Compaction,
    ) -> _Tail | None:
        """The tail of a call the full path answered (None for inputs the fast path does not take)."""
        fmt, source = result.format, result.source
        reader = None
        internal: list[Any] = []
        handed: list[Any] = []
        if fmt == "transcript":
            if not isinstance(messages, Transcript):
                return None
            snaps: list[Any] = []
        elif format not in (None, fmt) or not isinstance(messages, (list, tuple)):
            return None
        elif fmt == "anthropic":
            from salience.formats.anthropic import Reader, source_messages

            snaps = source_messages(source.entries)
            reader = Reader.after(source)
            internal = _copy_json(result.messages)
            handed = list(result.messages)
        else:
            _, key = _reader(fmt)
            snaps = [e.meta[key]["message"] for e in source.entries]
            render = _renderer(fmt)
            internal = [memo.rendered_message(e, render) for e in result.transcript.entries]
            handed = list(result.messages)
        settled = session._settled
        drops = {i for i, e in enumerate(source.entries) if settled.get(e.id, (None,))[0] == _DROP}
        return cls(
            fmt=fmt, format=format, system=copy.deepcopy(system), system_out=copy.deepcopy(result.system),
            reader=reader, key=_tail_key(cfg), source=source,
            growth=_Growth().check(source.id, source.entries), snaps=snaps, out=result.transcript,
            out_growth=_Growth().check(result.transcript.id, result.transcript.entries), internal=internal,
            handed=handed, drops=drops, kept=list(result.kept), trimmed=list(result.trimmed),
            stubbed=list(result.stubbed), dropped=list(result.dropped), archive=dict(result.archive),
            choices=dict(result.choices), tokens=result.tokens, src_tokens=result.source_tokens,
        )
