"""Phase masking: what each phase of an agent's work may see of old tool outputs.

An agent's needs change with its phase. A coding agent exploring a repository
needs its reads and searches; once it edits, old search listings are noise and
the files it reads matter; once it verifies, test output matters and old reads
can be cut. A :class:`PhasePolicy` writes this down per domain: for each
:class:`Phase` and each :class:`~salience.tooltypes.ToolType`, a :class:`Limit`
giving the best :class:`Option` the outputs of that type may keep (``FULL``,
``TRIM`` or ``STUB``), and optionally the largest share of the token budget those
outputs may take together.

>>> policy = PhasePolicy.coding()
>>> policy.limit(Phase.EDIT, ToolType.SEARCH)
Limit(best=<Option.STUB: 2>, share=None)
>>> PhasePolicy.for_domain("airline").name
'customer_service'
>>> PhasePolicy.for_domain("locomo").masks
False

Rules, which :func:`mask_options` applies to the solver's option matrix:

* masking touches **tool entries only** (role ``tool``), never an exempt entry
  (the compactor exempts its pins: the last ``k`` entries, the last user turn,
  the system prompt, critical entries);
* the cap: options better than the limit's ``best`` are disallowed. If that
  leaves an entry no kept option at all (a short entry has no trimmed or stubbed
  form cheaper than itself), its cheapest kept option is allowed again: it is
  small, and dropping is still up to the solver;
* the share: the outputs of one type may cost at most ``share * budget``, each
  counted at its best allowed option (exempt entries included, as they cost
  tokens too). While they cost more, the lowest-scored non-exempt outputs of
  that type are moved down one option level (``FULL`` to ``TRIM`` to ``STUB``),
  lowest score first, round after round, until the type fits its share or
  every one is at ``STUB`` (the floor: whether to drop is the solver's call).

Phase detection (:func:`detect_phase`) reads the tool types of the most recent
tool calls: each call votes for the phases whose ``signals`` contain its type,
with weight ``0.5 ** k`` for the ``k``-th most recent calling turn, so the latest
call decides unless its type signals nothing. No votes gives the policy's
``default`` phase; ``after_user`` then moves a phase on when a user turn came after
the last tool call (customer service: ``ACT`` becomes ``CONFIRM``).
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from types import MappingProxyType
from typing import Any

import numpy as np

from salience.errors import ParameterError, ParameterTypeError, describe
from salience.tooltypes import ToolType, tool_type
from salience.transcript import Entry, Transcript

__all__ = [
    "Limit",
    "Option",
    "Phase",
    "PhasePolicy",
    "detect_phase",
    "mask_options",
    "tool_name",
    "tool_names",
    "tool_types",
]


class Option(enum.IntEnum):
    """What the compactor may do with an entry; the values are the solver's columns."""

    FULL = 0
    TRIM = 1
    STUB = 2
    DROP = 3

    def __str__(self) -> str:
        return self.name.lower()


class Phase(enum.StrEnum):
    """Phases of an agent's work.

    Coding: ``EXPLORE``, ``EDIT``, ``VERIFY``. Customer service: ``IDENTIFY``,
    ``LOOKUP``, ``ACT``, ``CONFIRM``. Anything else: ``CHAT`` (no masking).
    """

    EXPLORE = "explore"
    EDIT = "edit"
    VERIFY = "verify"
    IDENTIFY = "identify"
    LOOKUP = "lookup"
    ACT = "act"
    CONFIRM = "confirm"
    CHAT = "chat"


_got = partial(describe, typed=False)


@dataclass(frozen=True, slots=True)
class Limit:
    """What the outputs of one tool type may keep in one phase.

    ``best``: the best option allowed (``FULL``, ``TRIM`` or ``STUB``).
    ``share``: the largest share of the budget, in (0, 1], the outputs of the type
    may take together; ``None`` for no share limit.
    """

    best: Option = Option.FULL
    share: float | None = None

    def __post_init__(self) -> None:
        best = self.best
        if isinstance(best, str) and not isinstance(best, Option):
            try:
                best = Option[best.upper()]
            except KeyError:
                best = None  # type: ignore[assignment]
        elif isinstance(best, int) and not isinstance(best, bool) and 0 <= best <= 3:
            best = Option(best)
        if not isinstance(best, Option) or best is Option.DROP:
            raise ParameterError(
                f"Limit: field 'best' must be Option.FULL, Option.TRIM or Option.STUB (got {_got(self.best)})"
            )
        object.__setattr__(self, "best", best)
        share = self.share
        if share is not None:
            if isinstance(share, bool) or not isinstance(share, (int, float)) or not 0.0 < share <= 1.0:
                raise ParameterError(f"Limit: field 'share' must be a number in (0, 1] or None (got {_got(share)})")
            object.__setattr__(self, "share", float(share))


LimitLike = Limit | Option | str | int | tuple
_FULL = Limit()


def _as_limit(value: LimitLike, where: str) -> Limit:
    if isinstance(value, Limit):
        return value
    try:
        if isinstance(value, (tuple, list)):  # (best, share); a list as JSON gives it
            return Limit(*value)
        return Limit(value)  # type: ignore[arg-type]
    except (TypeError, ValueError) as exc:
        raise ParameterError(
            f"PhasePolicy: {where} must be a Limit, an Option or (best, share) (got {_got(value)}): {exc}"
        ) from None


def _as_phase(value: Phase | str, where: str) -> Phase:
    try:
        return value if isinstance(value, Phase) else Phase(value)
    except ValueError:
        allowed = ", ".join(repr(p.value) for p in Phase)
        raise ParameterError(f"{where} must be a Phase, one of {allowed} (got {_got(value)})") from None


def _as_type(value: ToolType | str, where: str) -> ToolType:
    try:
        return value if isinstance(value, ToolType) else ToolType(value)
    except ValueError:
        allowed = ", ".join(repr(t.value) for t in ToolType)
        raise ParameterError(f"{where} must be a ToolType, one of {allowed} (got {_got(value)})") from None


@dataclass(frozen=True, slots=True)
class PhasePolicy:
    """Per phase, per tool type, the :class:`Limit` on tool outputs; and how to detect the phase.

    Attributes:
        name: the policy's name (``"coding"``, ``"customer_service"``, ``"chat"``, or yours).
        rules: ``{phase: {tool_type: limit}}``. A type missing from a phase falls back
            to that phase's ``ToolType.OTHER`` rule, then to ``FULL`` without share.
            Limits may be given as :class:`Limit`, an :class:`Option` (or its name) or a
            ``(best, share)`` tuple. The phases named here are the policy's phases.
        signals: ``{phase: tool types whose calls point at that phase}`` for :func:`detect_phase`.
        default: the phase when no recent call signals anything.
        after_user: ``{phase: next phase}`` applied when a user turn follows the last tool call.
        window: how many recent calling turns :func:`detect_phase` reads.
        tool_types: exact tool names mapped to types, overriding the keyword rules of
            :func:`salience.tooltypes.tool_type`.
    """

    # Annotated with what the constructor accepts; after validation the mappings are
    # read-only and typed as in the docstring (Phase -> ToolType -> Limit, and so on).
    name: str
    rules: Mapping[Any, Mapping[Any, Any]]
    signals: Mapping[Any, Any] = field(default_factory=dict)
    default: Phase | str = Phase.CHAT
    after_user: Mapping[Any, Any] = field(default_factory=dict)
    window: int = 6
    tool_types: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise ParameterError(f"PhasePolicy: field 'name' must be a non-empty str (got {_got(self.name)})")
        if not isinstance(self.rules, Mapping) or not self.rules:
            raise ParameterError(
                f"PhasePolicy {self.name!r}: field 'rules' must be a non-empty mapping (got {_got(self.rules)})"
            )
        rules: dict[Phase, Mapping[ToolType, Limit]] = {}
        for phase, per_type in self.rules.items():
            ph = _as_phase(phase, f"PhasePolicy {self.name!r}: a key of 'rules'")
            if not isinstance(per_type, Mapping):
                raise ParameterTypeError(
                    f"PhasePolicy {self.name!r}: rules[{ph.value!r}] must be a mapping tool type -> limit "
                    f"(got {_got(per_type)})"
                )
            rules[ph] = MappingProxyType({
                _as_type(t, f"PhasePolicy {self.name!r}: a key of rules[{ph.value!r}]"):
                    _as_limit(lim, f"rules[{ph.value!r}][{str(t)!r}]")
                for t, lim in per_type.items()
            })
        object.__setattr__(self, "rules", MappingProxyType(rules))
        if not isinstance(self.signals, Mapping):
            raise ParameterTypeError(
                f"PhasePolicy {self.name!r}: field 'signals' must be a mapping (got {_got(self.signals)})"
            )
        signals = {}
        for phase, types in self.signals.items():
            ph = _as_phase(phase, f"PhasePolicy {self.name!r}: a key of 'signals'")
            if ph not in rules:
                raise ParameterError(f"PhasePolicy {self.name!r}: signals name phase {ph.value!r}, which has no rules")
            if isinstance(types, (str, ToolType)) or not isinstance(types, Iterable):
                raise ParameterTypeError(
                    f"PhasePolicy {self.name!r}: signals[{ph.value!r}] must be a set of tool types (got {_got(types)})"
                )
            signals[ph] = frozenset(_as_type(t, f"PhasePolicy {self.name!r}: signals[{ph.value!r}]") for t in types)
        object.__setattr__(self, "signals", MappingProxyType(signals))
        default = _as_phase(self.default, f"PhasePolicy {self.name!r}: field 'default'")
        if default not in rules:
            raise ParameterError(
                f"PhasePolicy {self.name!r}: field 'default' must be one of its phases (got {default.value!r})"
            )
        object.__setattr__(self, "default", default)
        if not isinstance(self.after_user, Mapping):
            raise ParameterTypeError(
                f"PhasePolicy {self.name!r}: field 'after_user' must be a mapping (got {_got(self.after_user)})"
            )
        after = {}
        for a, b in self.after_user.items():
            pa = _as_phase(a, f"PhasePolicy {self.name!r}: a key of 'after_user'")
            pb = _as_phase(b, f"PhasePolicy {self.name!r}: after_user[{pa.value!r}]")
            if pa not in rules or pb not in rules:
                raise ParameterError(
                    f"PhasePolicy {self.name!r}: after_user maps {pa.value!r} to {pb.value!r}; both need rules"
                )
            after[pa] = pb
        object.__setattr__(self, "after_user", MappingProxyType(after))
        if isinstance(self.window, bool) or not isinstance(self.window, int) or self.window < 1:
            raise ParameterError(
                f"PhasePolicy {self.name!r}: field 'window' must be an int >= 1 (got {_got(self.window)})"
            )
        if not isinstance(self.tool_types, Mapping):
            raise ParameterTypeError(
                f"PhasePolicy {self.name!r}: field 'tool_types' must be a mapping (got {_got(self.tool_types)})"
            )
        object.__setattr__(self, "tool_types", MappingProxyType({
            str(k): _as_type(v, f"PhasePolicy {self.name!r}: tool_types[{k!r}]") for k, v in self.tool_types.items()
        }))

    def _key(self) -> tuple[Any, ...]:
        return (
            self.name,
            tuple(sorted((p.value, tuple(sorted((t.value, lim.best, lim.share) for t, lim in r.items())))
                         for p, r in self.rules.items())),
            tuple(sorted((p.value, tuple(sorted(t.value for t in s))) for p, s in self.signals.items())),
            str(self.default),
            tuple(sorted((a.value, b.value) for a, b in self.after_user.items())),
            self.window,
            tuple(sorted((k, v.value) for k, v in self.tool_types.items())),
        )

    def __eq__(self, other: object) -> bool:
        return isinstance(other, PhasePolicy) and self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def __reduce__(self) -> tuple[Any, ...]:
        # pickled as plain data: the read-only mappings (mappingproxy) do not pickle themselves
        return (PhasePolicy.from_dict, (self.as_dict(),))

    # -- queries --------------------------------------------------------------
    @property
    def phases(self) -> tuple[Phase, ...]:
        """The phases this policy has rules for."""
        return tuple(self.rules)

    @property
    def masks(self) -> bool:
        """False when no rule limits anything (the policy never changes an option)."""
        return any(lim != _FULL for r in self.rules.values() for lim in r.values())

    def limit(self, phase: Phase | str, kind: ToolType | str) -> Limit:
        """The :class:`Limit` on outputs of tool type ``kind`` in ``phase``."""
        ph = self.check_phase(phase)
        per_type: Mapping[ToolType, Limit] = self.rules[ph]
        kind = _as_type(kind, "tool type")
        return per_type.get(kind) or per_type.get(ToolType.OTHER) or _FULL

    def check_phase(self, phase: Phase | str) -> Phase:
        """``phase`` as a :class:`Phase` of this policy, or ``ParameterError`` naming the allowed ones."""
        ph = _as_phase(phase, "phase")
        if ph not in self.rules:
            allowed = ", ".join(repr(p.value) for p in self.rules)
            raise ParameterError(f"phase must be one of policy {self.name!r}'s phases, {allowed} (got {ph.value!r})")
        return ph

    def replace(self, **changes: Any) -> PhasePolicy:
        """A copy with ``changes`` applied (validated again)."""
        fields = {f: getattr(self, f) for f in self._FIELDS}
        fields.update(changes)
        return PhasePolicy(**fields)

    # -- plain data (JSON profiles) -------------------------------------------
    _FIELDS = ("name", "rules", "signals", "default", "after_user", "window", "tool_types")

    def as_dict(self) -> dict[str, Any]:
        """The policy as plain data (strings, numbers, lists) that :func:`json.dumps` writes
        and :meth:`from_dict` reads back; a Compactor profile may hold it under ``"policy"``.

        >>> data = PhasePolicy.coding().as_dict()
        >>> data["rules"]["edit"]["read"], data["default"]
        (['full', 0.6], 'explore')
        >>> PhasePolicy.from_dict(data) == PhasePolicy.coding()
        True
        """
        return {
            "name": self.name,
            "rules": {p.value: {t.value: [str(lim.best), lim.share] for t, lim in r.items()}
                      for p, r in self.rules.items()},
            "signals": {p.value: sorted(t.value for t in types) for p, types in self.signals.items()},
            "default": str(self.default),
            "after_user": {a.value: b.value for a, b in self.after_user.items()},
            "window": self.window,
            "tool_types": {k: v.value for k, v in self.tool_types.items()},
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> PhasePolicy:
        """A policy from plain data as :meth:`as_dict` writes it (``name`` and ``rules``
        required, the other fields optional). A limit may be an option name (``"trim"``)
        or ``[best, share]``. Unknown keys and bad values are a ``ParameterError`` naming them.
        """
        if not isinstance(data, Mapping):
            raise ParameterTypeError(
                f"PhasePolicy.from_dict: expected a mapping of the policy's fields (got {_got(data)})"
            )
        unknown = sorted(str(k) for k in data if k not in cls._FIELDS)
        if unknown:
            raise ParameterError(f"PhasePolicy.from_dict: unknown keys {unknown} (allowed: {', '.join(cls._FIELDS)})")
        missing = [k for k in ("name", "rules") if k not in data]
        if missing:
            raise ParameterError(f"PhasePolicy.from_dict: missing {' and '.join(repr(k) for k in missing)}")
        return cls(**{str(k): v for k, v in data.items()})

    # -- defaults -------------------------------------------------------------
    @classmethod
    def coding(cls) -> PhasePolicy:
        """Coding agents: ``EXPLORE`` (reads, searches), ``EDIT`` (edits), ``VERIFY`` (runs).

        * EXPLORE: everything may stay whole, except old run outputs (trimmed, and at
          most 30% of the budget) and edit confirmations (trimmed).
        * EDIT: files read stay whole (at most 60% of the budget); old search listings
          and web pages are stubbed at most; old run outputs trimmed.
        * VERIFY: run outputs whole (at most 60%); old reads and edits trimmed
          (reads at most 40%); searches and web pages stubbed at most.
        """
        S, T, F = Option.STUB, Option.TRIM, Option.FULL
        R, SE, X, E, W, D, OT = (ToolType.READ, ToolType.SEARCH, ToolType.EXECUTE, ToolType.EDIT, ToolType.WEB,
                                ToolType.DATABASE, ToolType.OTHER)
        return cls(
            name="coding",
            rules={
                Phase.EXPLORE: {R: F, SE: F, X: Limit(T, 0.3), E: T, W: F, D: F, OT: F},
                Phase.EDIT: {R: Limit(F, 0.6), SE: S, X: T, E: F, W: S, D: T, OT: T},
                Phase.VERIFY: {R: Limit(T, 0.4), SE: S, X: Limit(F, 0.6), E: T, W: S, D: T, OT: T},
            },
            signals={Phase.EXPLORE: {R, SE, W}, Phase.EDIT: {E}, Phase.VERIFY: {X}},
            default=Phase.EXPLORE,
        )

    @classmethod
    def customer_service(cls) -> PhasePolicy:
        """Customer-service agents (tau-bench airline and retail, ToolTalk, API-Bank).

        * IDENTIFY (no lookups yet): no masking.
        * LOOKUP (reading records, searching): records stay whole; old search
          listings trimmed (at most 50% of the budget); scratch outputs (think,
          calculate) stubbed at most.
        * ACT (the last call changed something): records stay whole, as the
          action's arguments come from them; searches trimmed; scratch stubbed.
        * CONFIRM (the user spoke after an action): action results whole; records
          trimmed; searches and scratch stubbed at most.
        """
        S, T, F = Option.STUB, Option.TRIM, Option.FULL
        R, SE, X, E, W, D, OT = (ToolType.READ, ToolType.SEARCH, ToolType.EXECUTE, ToolType.EDIT, ToolType.WEB,
                                ToolType.DATABASE, ToolType.OTHER)
        return cls(
            name="customer_service",
            rules={
                Phase.IDENTIFY: {OT: F},
                Phase.LOOKUP: {D: F, R: F, SE: Limit(T, 0.5), X: S, E: F, W: T, OT: F},
                Phase.ACT: {D: F, R: F, SE: T, X: S, E: F, W: T, OT: F},
                Phase.CONFIRM: {D: T, R: T, SE: S, X: S, E: F, W: S, OT: T},
            },
            signals={Phase.LOOKUP: {D, R, SE, W}, Phase.ACT: {E}},
            default=Phase.IDENTIFY,
            after_user={Phase.ACT: Phase.CONFIRM},
        )

    @classmethod
    def chat(cls) -> PhasePolicy:
        """Plain conversations: one phase, ``CHAT``, no masking."""
        return cls(name="chat", rules={Phase.CHAT: {ToolType.OTHER: Option.FULL}}, default=Phase.CHAT)

    @classmethod
    def for_domain(cls, name: str | None) -> PhasePolicy:
        """The default policy for a domain name; unknown names (and None) get :meth:`chat`.

        Coding: names containing ``swe``, ``code``, ``coding``, ``program``, ``software``,
        ``repo``. Customer service: ``airline``, ``retail``, ``telecom``, ``customer``,
        ``support``, ``service``, ``tau``, ``tooltalk``, ``api-bank``/``apibank``.

        >>> PhasePolicy.for_domain("swe-agent").name, PhasePolicy.for_domain("retail").name
        ('coding', 'customer_service')
        """
        if name is None:
            return cls.chat()
        if not isinstance(name, str):
            raise ParameterTypeError(f"domain name must be a str or None (got {_got(name)})")
        key = name.lower()
        if any(w in key for w in ("swe", "code", "coding", "program", "software", "repo")):
            return cls.coding()
        if any(w in key for w in ("airline", "retail", "telecom", "customer", "support", "service", "tau",
                                  "tooltalk", "api-bank", "apibank", "api_bank")):
            return cls.customer_service()
        return cls.chat()


# --------------------------------------------------------------------------
# Tool names and types per entry
# --------------------------------------------------------------------------


def tool_names(transcript: Transcript) -> list[str | None]:
    """Per entry, the tool name of a tool entry (its own ``name``, else its call's), else None."""
    entries = transcript.entries
    return [tool_name(entries, i, p) for i, p in enumerate(transcript.parents())]


def tool_name(entries: Sequence[Entry], i: int, parent: int) -> str | None:
    """The tool name of ``entries[i]`` if it is a tool entry (its own ``name``, else that of
    the call it answers, ``entries[parent]``; see :meth:`Transcript.parents`), else None."""
    e = entries[i]
    if e.role != "tool":
        return None
    if e.name or parent < 0:
        return e.name
    # the call it answers (ids may be reused once answered: parents() knows which call)
    return next((c.name for c in entries[parent].tool_calls if c.id == e.tool_call_id), None)


def tool_types(transcript: Transcript, policy: PhasePolicy | None = None) -> list[ToolType | None]:
    """Per entry, the :class:`ToolType` of a tool entry (``OTHER`` if unnamed), else None."""
    overrides = policy.tool_types if policy is not None else None
    return [None if e.role != "tool" else tool_type(n, overrides)
            for e, n in zip(transcript.entries, tool_names(transcript))]


# --------------------------------------------------------------------------
# Phase detection
# --------------------------------------------------------------------------


def detect_phase(transcript: Transcript, policy: PhasePolicy) -> Phase:
    """The phase ``transcript`` ends in, from its most recent tool calls (see the module doc).

    >>> from salience.transcript import Entry, ToolCall
    >>> t = Transcript(id="t", entries=(
    ...     Entry(id="a", role="assistant", tool_calls=(ToolCall(id="c1", name="open_file"),)),
    ...     Entry(id="r", role="tool", tool_call_id="c1", content="..."),
    ...     Entry(id="b", role="assistant", tool_calls=(ToolCall(id="c2", name="run_tests"),)),
    ... ))
    >>> detect_phase(t, PhasePolicy.coding())
    <Phase.VERIFY: 'verify'>
    """
    default = Phase(policy.default)
    if not policy.signals:
        return default
    overrides = policy.tool_types
    votes: dict[Phase, float] = {}
    turns = 0
    user_after = False
    seen_call = False
    for entry in reversed(transcript.entries):
        if turns >= policy.window:
            break
        kinds: list[ToolType] = []
        if entry.tool_calls:
            kinds = [tool_type(c.name, overrides) for c in entry.tool_calls]
        elif entry.role == "tool" and entry.tool_call_id is None:
            kinds = [tool_type(entry.name, overrides)]  # an observation without a call
        elif entry.role == "user" and not seen_call:
            user_after = True
        if not kinds:
            continue
        seen_call = True
        weight = 0.5 ** turns
        turns += 1
        for kind in kinds:
            for phase, types in policy.signals.items():
                if kind in types:
                    votes[phase] = votes.get(phase, 0.0) + weight / len(kinds)
    if not votes:
        return default
    order = {p: i for i, p in enumerate(policy.rules)}
    best = max(votes, key=lambda p: (votes[p], -order[p]))
    if user_after and best in policy.after_user:
        best = policy.after_user[best]
    return best


# --------------------------------------------------------------------------
# Masking the option matrix
# --------------------------------------------------------------------------


def mask_options(
    transcript: Transcript,
    policy: PhasePolicy,
    phase: Phase | str,
    *,
    allowed: np.ndarray,
    costs: np.ndarray,
    scores: Sequence[float] | np.ndarray,
    budget: int,
    exempt: Sequence[bool] | np.ndarray,
) -> np.ndarray:
    """Apply ``policy``'s limits for ``phase`` to an ``(n, 4)`` boolean ``allowed`` matrix.

    ``costs`` is the ``(n, 4)`` token cost of each option, ``scores`` the entries'
    importance (the share rule demotes the lowest first), ``exempt`` marks entries
    masking must not touch. Returns a new matrix (inputs are not modified); an entry
    keeps at least one non-DROP option if it had one. See the module doc for the rules.
    """
    ph = policy.check_phase(phase)
    allowed = np.array(allowed, dtype=bool, copy=True)
    costs = np.asarray(costs)
    n = len(transcript.entries)
    if allowed.shape != (n, 4) or costs.shape != (n, 4):
        raise ParameterError(f"allowed and costs must have shape ({n}, 4) (got {allowed.shape} and {costs.shape})")
    exempt_arr = np.asarray(exempt, dtype=bool)
    score_arr = np.asarray(scores, dtype=float)
    if exempt_arr.shape != (n,) or score_arr.shape != (n,):
        raise ParameterError(f"exempt and scores must have shape ({n},) (got {exempt_arr.shape} and {score_arr.shape})")
    if not policy.masks:
        return allowed
    kinds = tool_types(transcript, policy)
    limits: dict[int, Limit] = {}
    for i, kind in enumerate(kinds):
        if kind is None:
            continue
        lim = policy.limit(ph, kind)
        limits[i] = lim
        if exempt_arr[i] or lim.best is Option.FULL:
            continue
        had = allowed[i, :3].copy()
        allowed[i, : int(lim.best)] = False
        if had.any() and not allowed[i, :3].any():
            options = np.flatnonzero(had)
            allowed[i, options[np.argmin(costs[i, options])]] = True

    def top_cost(i: int) -> int:
        options = np.flatnonzero(allowed[i, :3])
        return int(costs[i, options[0]]) if len(options) else 0

    by_type: dict[ToolType, list[int]] = {}
    for i, kind in enumerate(kinds):
        if kind is not None:
            by_type.setdefault(kind, []).append(i)
    for members in by_type.values():
        share = limits[members[0]].share
        if share is None:
            continue
        cap = share * budget
        total = sum(top_cost(i) for i in members)
        candidates = sorted((i for i in members if not exempt_arr[i]), key=lambda i: (score_arr[i], i))
        progress = True
        while total > cap and progress:
            progress = False
            for i in candidates:
                if total <= cap:
                    break
                options = np.flatnonzero(allowed[i, :3])
                if len(options) < 2:
                    continue  # already at its floor
                before = int(costs[i, options[0]])
                allowed[i, options[0]] = False
                total += int(costs[i, options[1]]) - before
                progress = True
    return allowed
