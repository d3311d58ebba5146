"""The scores' running counts, added once per entry and handed from one state to the other
(issue #12, thirteenth session), give what the plain per-string loops gave. No timings.

* :class:`~salience.scorer.latest.LatestState` takes each entry's call words from its cached
  data (``_EntryData.call_words``, worked out beside the handles from the same call text)
  instead of parsing the calls' arguments again, and the words an entry introduces from
  :class:`~salience.scorer.prefix._Prefix` (which finds them as it counts them) instead of
  looking each word up in a dictionary of its own;
* both add an entry's counts (its own handles, new handles, pending handles and words) once,
  as whole numbers, instead of one numpy element ``+= 1`` per string;
* :func:`salience.scorer.handles.tokens` scans for runs of 3+ characters and strips their tail
  (``handles._RUN``) instead of taking every match of ``handles._TOKEN`` and dropping the short
  ones: the same tokens, in the same order, on texts built from the characters that decide
  where a token starts and ends, and on the samples;
* :func:`salience.scorer.handles.is_handle` tests an ASCII token's characters with one regex
  (``handles._MARKED``) instead of a loop over them: the same answer as the plain test;
* :func:`salience.scorer.text.count_error_markers` counts each pattern alone where its needles
  are, the words ending in ``Error`` by ``str.find`` (``text._error_words``): the same count as
  the alternation, on texts built around ``Error`` (glued to letters, digits, ``_``, accented
  letters, itself) and on the samples (tests/test_first_call_paths.py checks it too).

The reference below is the loops as they were, written out afresh from the entries; each
column is compared bit for bit on the samples and on histories built to repeat words and
handles across entries, within an entry, and in the calls that use them.
"""

from __future__ import annotations

import json
import re

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import SAMPLES
from salience import Transcript, load_transcripts
from salience.scorer import handles
from salience.scorer import text as text_module
from salience.scorer.columns import _COL
from salience.scorer.features import FeatureExtractor
from salience.scorer.latest import MIN_WORD, call_words
from salience.scorer.prefix import _log1p


def _reference(fe: FeatureExtractor, t: Transcript) -> dict[str, np.ndarray]:
    """The counts behind the columns, by the plain loops over every string of every entry."""
    entries = t.entries
    data = fe._entry_data(entries, fe._caches())
    n = len(entries)
    cols = {k: np.zeros(n) for k in ("unique_handles", "pending_words", "acted_words", "new_handles",
                                     "pending_handles", "acted_handles")}
    holders: dict[str, list[int]] = {}
    word_first: dict[str, int] = {}
    word_acted: set[str] = set()
    handle_first: dict[str, int] = {}
    handle_acted: set[str] = set()

    def act(used: frozenset[str], first: dict[str, int], acted: set[str], a: np.ndarray, p: np.ndarray) -> None:
        for s in used:
            j = first.get(s)
            if j is not None and s not in acted:
                acted.add(s)
                a[j] += 1
                p[j] -= 1

    for i, (e, d) in enumerate(zip(entries, data)):
        for h in d.handles:
            held = holders.get(h)
            if held is None:
                holders[h] = [i]
                cols["unique_handles"][i] += 1
            else:
                if len(held) == 1:
                    cols["unique_handles"][held[0]] -= 1
                held.append(i)
        used = call_words(e)  # from the entry, not from its cached data
        act(used, word_first, word_acted, cols["acted_words"], cols["pending_words"])
        for w in d.content:
            if len(w) < MIN_WORD or w in word_first:
                continue
            word_first[w] = i
            if w in used:
                word_acted.add(w)
            else:
                cols["pending_words"][i] += 1
        act(d.call_tokens, handle_first, handle_acted, cols["acted_handles"], cols["pending_handles"])
        for h in d.handles:
            if h not in handle_first:
                handle_first[h] = i
                cols["new_handles"][i] += 1
                if h in d.call_tokens:
                    handle_acted.add(h)
                else:
                    cols["pending_handles"][i] += 1
    # as the states write them: LatestState.fill with np.log1p, _Prefix._conversation from its table
    return {k: (_log1p(v) if k.endswith("_handles") and k != "unique_handles" else np.log1p(v))
            for k, v in cols.items()}


def _check(t: Transcript) -> int:
    fe = FeatureExtractor(use_embeddings=False).fit()
    X = fe.transform_one(t)
    ref = _reference(fe, t)
    for name, col in ref.items():
        assert np.array_equal(X[:, _COL[name]], col), (t.id, name)
    data = fe._entry_data(t.entries, fe._caches())
    for e, d in zip(t.entries, data):
        assert d.call_words == call_words(e), e.id
    # the same columns when the transcript grows one entry at a time through the caches
    grower = FeatureExtractor(use_embeddings=False).fit()
    for m in range(1, len(t.entries) + 1):
        grower.transform_one(Transcript(id=f"{t.id}-{m}", entries=t.entries[:m]))
    assert np.array_equal(grower.transform_one(t), X), t.id
    return sum(int(np.count_nonzero(c)) for c in ref.values())


def test_counts_match_the_plain_loops_on_the_samples() -> None:
    nonzero = sum(_check(t) for t in load_transcripts(SAMPLES))
    assert nonzero > 100  # the samples exercise every count


WORDS = ["lunch", "moved", "justinkool", "decture", "HAT136", "mia_li_3668", "Paris", "ok", "go", "the", "lunch"]


def _call(cid: str, name: str, words: list[str]) -> dict:
    args = {f"a{k}": w for k, w in enumerate(words)}
    return {"role": "assistant", "content": None,
            "tool_calls": [{"id": cid, "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}]}


@st.composite
def histories(draw: st.DrawFn) -> Transcript:
    messages: list[dict] = []
    for k in range(draw(st.integers(1, 8))):
        kind = draw(st.sampled_from(["user", "call", "assistant"]))
        words = draw(st.lists(st.sampled_from(WORDS), max_size=6))
        if kind == "call":
            cid = f"c{k}"
            messages.append(_call(cid, draw(st.sampled_from(["SendMessage", "Book"])), words))
            messages.append({"role": "tool", "tool_call_id": cid, "content": " ".join(reversed(words)) or "done"})
        else:
            messages.append({"role": kind, "content": " ".join(words) or "."})
    return Transcript.from_openai(messages, id="h")


@settings(max_examples=150, deadline=None, database=None, derandomize=True)
@given(histories())
def test_counts_match_the_plain_loops_on_repeating_histories(t: Transcript) -> None:
    _check(t)


def _plain_tokens(text: str) -> tuple[str, ...]:
    return tuple([t for t in dict.fromkeys(handles._TOKEN.findall(text)) if 3 <= len(t) <= 64])


TOKEN_PIECES = ["a", "Z", "7", "_", ".", "@", "-", "+", "&", "$", "!", "#", "%", "é", "中", " ", "\n", "'", "/",
                ":", "ab", "x1", "..", "a.b", "-x", "mia_li_3668", "j.hester@gahoo.com", "e149636f-d9ca", "v2.0.",
                "abc-", "ab&", "a" * 63, "b" * 65]


@settings(max_examples=3000, deadline=None, database=None, derandomize=True)
@given(st.lists(st.sampled_from(TOKEN_PIECES), max_size=16).map("".join))
def test_tokens_are_the_plain_scans(s: str) -> None:
    assert handles.tokens(s) == _plain_tokens(s)


def test_tokens_are_the_plain_scans_on_the_samples() -> None:
    checked = 0
    for t in load_transcripts(SAMPLES):
        for e in t.entries:
            text = handles.leaf_text(e.content) + "\n" + handles.call_text(e)
            assert handles.tokens(text) == _plain_tokens(text), e.id
            checked += len(handles.tokens(text))
    assert checked > 1000


def _plain_is_handle(token: str) -> bool:
    low = token.lower()
    if low in handles.STOPWORDS:
        return False
    if any(c.isdigit() for c in token) or "@" in token or "_" in token or any(c.isupper() for c in token[1:]):
        return True
    return len(handles._encode()(" " + low)) > 1  # type: ignore[operator]


HANDLE_PIECES = ["a", "b", "Z", "Q", "7", "0", "_", "@", ".", "-", "é", "É", "²", "٣", "the", "The", "lunch", "x"]


@settings(max_examples=2000, deadline=None, database=None, derandomize=True)
@given(st.lists(st.sampled_from(HANDLE_PIECES), min_size=1, max_size=6).map("".join))
def test_is_handle_is_the_plain_test(token: str) -> None:
    assert handles.is_handle.__wrapped__(token) == _plain_is_handle(token)


def test_is_handle_is_the_plain_test_on_the_samples() -> None:
    seen = {t for tr in load_transcripts(SAMPLES) for e in tr.entries for t in handles.tokens(e.content)}
    assert len(seen) > 500
    assert [handles.is_handle.__wrapped__(t) for t in sorted(seen)] == [_plain_is_handle(t) for t in sorted(seen)]


PLAIN_ERROR = re.compile("|".join(f"(?:{p})" for p in text_module.ERROR_PATTERNS))
ERROR_PIECES = ["Error", "ValueError", "ErrorError", "Errors", "9", "_", "é", "É", "x", " ", "\n", ".", ":",
                "Traceback", "Traceback (most recent call last)", "failed", "FAILED", "Failed", "exit code 1",
                "exit status: 2", "Err", "or", "E", "rror", "-"]


@settings(max_examples=4000, deadline=None, database=None, derandomize=True)
@given(st.lists(st.sampled_from(ERROR_PIECES), max_size=14).map("".join))
def test_error_counts_are_the_alternations(s: str) -> None:
    assert text_module.ERROR_PATTERNS[1] == r"\b[A-Za-z]*Error\b"  # the rule _error_words counts
    assert text_module.count_error_markers(s) == len(PLAIN_ERROR.findall(s))
    assert text_module._error_words(s) == len(re.findall(r"\b[A-Za-z]*Error\b", s))


def test_error_counts_are_the_alternations_on_the_samples() -> None:
    found = 0
    for t in load_transcripts(SAMPLES):
        for e in t.entries:
            assert text_module.count_error_markers(e.text) == len(PLAIN_ERROR.findall(e.text)), e.id
            found += text_module.count_error_markers(e.text)
    assert found > 5
