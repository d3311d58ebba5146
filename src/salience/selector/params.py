"""The compactor's parameters: their checks, tuned profiles, and the checked configuration.

:class:`~salience.selector.compactor.Compactor` stores its parameters as given
(scikit-learn's rule); :func:`make_config` checks them when a compaction runs and
gives the :class:`Config` every later step reads. A bad value is a
:class:`~salience.errors.ParameterError` (a ``ValueError``) whose message names the
parameter, what was expected and what came.

A profile (:func:`load_profile`) holds tuned values for any of :data:`PROFILE_KEYS`;
a profile value applies where the parameter was left at its default
(:func:`is_default`).

>>> check_budget(800)
800
>>> check_budget(0)
Traceback (most recent call last):
...
salience.errors.ParameterError: budget must be a positive int number of tokens (got 0 that is a int)
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any

import numpy as np

from salience.errors import ParameterError, ParameterTypeError, describe
from salience.selector import knapsack
from salience.selector.masking import PhasePolicy
from salience.tokens import TokenCounter

__all__ = [
    "DEFAULT_RETAIN",
    "ON_OVER_BUDGET",
    "PROFILE_KEYS",
    "Config",
    "check_budget",
    "check_policy",
    "is_default",
    "load_profile",
    "make_config",
]

#: Share of an entry's value each option keeps (FULL keeps 1.0, DROP 0).
DEFAULT_RETAIN: Mapping[str, float] = MappingProxyType({"trim": 0.6, "stub": 0.15})
#: What ``on_over_budget`` may be.
ON_OVER_BUDGET: tuple[str, ...] = ("raise", "keep_pins")
#: The parameters a profile may set.
PROFILE_KEYS: tuple[str, ...] = ("budget", "policy", "pin_last", "pin_system", "pin_last_user", "critical",
                                 "max_entry_tokens", "trim_keep", "stub_values", "retain", "digest", "solver",
                                 "on_over_budget")

_got = describe


@dataclass(frozen=True, slots=True)
class Config:
    """A compactor's parameters, checked (what one compaction reads)."""

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
    digest: float
    solver: str
    on_over_budget: str


def _check_int(name: str, value: Any, *, minimum: int, none: bool = False) -> int | None:
    if value is None and none:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < minimum:
        what = "a positive int" if minimum == 1 else f"an int >= {minimum}"
        raise ParameterError(
            f"Compactor: parameter {name!r} must be {what}{' or None' if none else ''} (got {_got(value)})"
        )
    return int(value)


def _check_bool(name: str, value: Any) -> bool:
    if not isinstance(value, (bool, np.bool_)):
        raise ParameterTypeError(f"Compactor: parameter {name!r} must be a bool (got {_got(value)})")
    return bool(value)


def check_budget(value: Any, name: str = "budget") -> int:
    """``value`` as a positive int token budget, else ``ParameterError`` saying what came."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise ParameterError(f"{name} must be a positive int number of tokens (got {_got(value)})")
    return int(value)


def load_profile(profile: Any) -> Mapping[str, Any]:
    """The Compactor parameters a profile holds: ``profile`` is a mapping or the path of a
    JSON file holding one (the parameters at its top level, or under a ``"compactor"``
    key as ``salience tune`` and :meth:`TuneResult.profile
    <salience.training.tune.TuneResult.profile>` write them), or None (no parameters).
    Unknown keys and unreadable files are a ``ParameterError`` naming them; the values are
    checked when the compactor runs.
    """
    if profile is None:
        return {}
    if isinstance(profile, (str, Path)):
        path = Path(profile)
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError) as exc:
            raise ParameterError(f"Compactor: parameter 'profile' names {str(path)!r}, which is not a readable JSON "
                                 f"file ({type(exc).__name__}: {exc})") from None
        profile = data
    if isinstance(profile, Mapping) and isinstance(profile.get("compactor"), Mapping):
        profile = profile["compactor"]
    if not isinstance(profile, Mapping):
        raise ParameterTypeError(f"Compactor: parameter 'profile' must be a mapping of parameters, a JSON file path or "
                                 f"None (got {_got(profile)})")
    unknown = sorted(str(k) for k in profile if k not in PROFILE_KEYS)
    if unknown:
        raise ParameterError(
            f"Compactor: parameter 'profile' has unknown keys {unknown} (allowed: {', '.join(PROFILE_KEYS)})"
        )
    return profile


def check_policy(value: Any, cache: tuple[Any, PhasePolicy | None] | None) -> PhasePolicy | None:
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
            raise ParameterError(f"Compactor: parameter 'policy': {exc}") from None
    raise ParameterTypeError(f"Compactor: parameter 'policy' must be a PhasePolicy, a domain name, a mapping as "
                             f"PhasePolicy.as_dict() writes it, or None (got {_got(value)})")


def is_default(current: Any, default: Any) -> bool:
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
        raise ParameterTypeError(
            f"Compactor: parameter 'retain' must be a mapping with keys 'trim' and 'stub', or None (got {_got(value)})"
        )
    unknown = sorted(str(k) for k in value if k not in ("trim", "stub"))
    if unknown:
        raise ParameterError(f"Compactor: parameter 'retain' has unknown keys {unknown} (allowed: 'trim', 'stub')")
    trim = value.get("trim", DEFAULT_RETAIN["trim"])
    stub = value.get("stub", DEFAULT_RETAIN["stub"])
    for key, v in (("trim", trim), ("stub", stub)):
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0.0 < v <= 1.0:
            raise ParameterError(f"Compactor: parameter 'retain[{key!r}]' must be a number in (0, 1] (got {_got(v)})")
    if stub > trim:
        raise ParameterError(f"Compactor: parameter 'retain' must keep at least as much for 'trim' as for 'stub' "
                             f"(got trim={trim}, stub={stub})")
    return (1.0, float(trim), float(stub), 0.0)


def make_config(
    params: Mapping[str, Any], *, scorer: Any, budget: int, counter: TokenCounter, policy: PhasePolicy | None
) -> Config:
    """The :class:`Config` of the parameters ``params`` (profile applied), the ones
    needing the compactor's own fallbacks and caches given already checked."""
    critical = params["critical"]
    if critical is not None and (isinstance(critical, bool) or not isinstance(critical, (int, float))
                                 or not 0.0 < critical <= 1.0):
        raise ParameterError(
            f"Compactor: parameter 'critical' must be a number in (0, 1] or None (got {_got(critical)})"
        )
    trim_keep = params["trim_keep"]
    if isinstance(trim_keep, bool) or not (
        (isinstance(trim_keep, float) and 0.0 < trim_keep < 1.0)
        or (isinstance(trim_keep, (int, np.integer)) and trim_keep >= 1)
    ):
        raise ParameterError(f"Compactor: parameter 'trim_keep' must be a float in (0, 1) (a share of the entry) or an "
                             f"int >= 1 (tokens) (got {_got(trim_keep)})")
    digest = params["digest"]
    if isinstance(digest, bool) or not isinstance(digest, (int, float)) or not 0.0 <= digest <= 0.5:
        raise ParameterError(f"Compactor: parameter 'digest' must be a number in [0, 0.5] (a share of the budget; "
                             f"0 turns digests off) (got {_got(digest)})")
    solver = params["solver"]
    if solver not in knapsack.METHODS:
        raise ParameterError(f"Compactor: parameter 'solver' must be one of "
                             f"{', '.join(repr(m) for m in knapsack.METHODS)} (got {_got(solver)})")
    on_over = params["on_over_budget"]
    if on_over not in ON_OVER_BUDGET:
        raise ParameterError(f"Compactor: parameter 'on_over_budget' must be one of "
                             f"{', '.join(repr(m) for m in ON_OVER_BUDGET)} (got {_got(on_over)})")
    return Config(
        scorer=scorer,
        budget=budget,
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
        digest=float(digest),
        solver=solver,
        on_over_budget=on_over,
    )
