"""The first call's faster text paths give what the plain ones gave (issue #12). No timings.

* the error-marker regex, led by a lookahead for the ASCII letter every match starts with,
  against the plain alternation of :data:`~salience.scorer.text.ERROR_PATTERNS`, on texts
  built from the patterns' own pieces (a traceback header inside a word, ``Error`` names
  glued to other words, exit codes), match for match;
* :func:`salience.values._matches`, which takes ``finditer``'s matches until one ends
  inside a run, against the place-by-place loop alone (``_scan`` from 0) on the same kind
  of texts (tests/test_values_linear.py checks both against the reference patterns);
* the places where an identifier's run starts further in than its lookbehinds see
  (``values._ident_firsts``: two patterns, each led by the character a run starts with)
  against the one pattern that tries every place (``values._IDENT_FIRST``);
* a quoted string's value, read from its inner groups by index (``values._Q1`` to ``_Q3``),
  against the scan of all the match's groups that :func:`salience.values._extract` made;
* :func:`salience.tooltypes.tool_type`, whose keyword rules are worked out once per name
  (``tooltypes._by_rules``), against the rules applied afresh, and its overrides, which the
  memo never holds.
"""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import SAMPLES
from salience import load_transcripts, tooltypes
from salience import values as values_module
from salience.scorer import text
from salience.scorer.text import ERROR_PATTERNS, count_error_markers, has_error_marker

PLAIN_ERROR = re.compile("|".join(f"(?:{p})" for p in ERROR_PATTERNS))

PIECES = ["Traceback (most recent call last)", "Traceback", "Error", "ValueError", "failed", "Failed", "FAILED",
          "exit code 1", "exit status: 23", "exit 0", "x", "_", "9", " ", "\n", ":", "(", "é", "-", "/", ".", "'",
          "\"", "@", "#", "mia_li_3668", "HAT136", "a-b-c", "--x1", "src/app/main.py", "2024-01-02", "1,250.00",
          "Blue Lagoon", "a.b@x.org"]
texts = st.lists(st.sampled_from(PIECES), max_size=30).map("".join)


def spans(pattern: re.Pattern[str], s: str) -> list[tuple[int, int]]:
    return [m.span() for m in pattern.finditer(s)]


def test_every_error_pattern_starts_with_an_ascii_letter() -> None:
    """What the lead lookahead relies on: no match of any pattern starts elsewhere."""
    assert text._ERROR_RE.pattern.startswith("(?=[A-Za-z])")
    for s in ("XTraceback (most recent call last)", "_Error", "9failed", "éFAILED", " exit code 3", "(ValueError)"):
        assert spans(text._ERROR_RE, s) == spans(PLAIN_ERROR, s), s


@settings(max_examples=500, deadline=None)
@given(texts)
def test_error_counts_match_the_plain_alternation(s: str) -> None:
    assert spans(text._ERROR_RE, s) == spans(PLAIN_ERROR, s)
    assert count_error_markers(s) == len(spans(PLAIN_ERROR, s))
    assert has_error_marker(s) == (PLAIN_ERROR.search(s) is not None)


def _slow(s: str) -> list[tuple[str, int, int]]:
    """The place-by-place loop from the start, as _matches ran before its finditer path."""
    firsts = sorted(([(m.end(), "path") for m in values_module._PATH_FIRST.finditer(s)] if "---" in s else [])
                    + ([(m.end(), "ident") for m in values_module._IDENT_FIRST.finditer(s)]
                       if "-" in s or "#" in s else []))
    return [(k, a, b) for k, a, b, _ in values_module._scan(s, firsts, 0)]


def _fast(s: str) -> list[tuple[str, int, int]]:
    return [(k, a, b) for k, a, b, _ in values_module._matches(s)]


@settings(max_examples=500, deadline=None)
@given(texts)
def test_value_matches_are_the_loops(s: str) -> None:
    assert _fast(s) == _slow(s)


def test_value_matches_are_the_loops_on_the_samples() -> None:
    checked = 0
    for t in load_transcripts(SAMPLES):
        for e in t.entries:
            assert _fast(e.content) == _slow(e.content), e.id
            checked += 1
    assert checked > 100


IDENT_PIECES = ["---abc1", "_ab1-cd2", "#W123", "-x1", "--x1", "é", "éa-b1", "ü_x-1", "a", "1", "-", "#", "_", " ",
                "\n", "ab-cd", "x#1", "é1-a2", "中a-1", "—a-1", "ß9-z", "٣a-1"]


@settings(max_examples=3000, deadline=None, database=None, derandomize=True)
@given(st.lists(st.sampled_from(IDENT_PIECES), max_size=14).map("".join))
def test_ident_firsts_are_the_one_patterns(s: str) -> None:
    assert values_module._ident_firsts(s) == [(m.end(), "ident") for m in values_module._IDENT_FIRST.finditer(s)]


def plain_tool_type(name: str) -> tooltypes.ToolType:
    """The keyword rules applied afresh, as tool_type did before its memo."""
    words = [w.lower() for w in tooltypes._SPLIT.split(name) if w]
    return next((kind for kind, keys in tooltypes._RULES if any(w in keys for w in words)),
                tooltypes.ToolType.OTHER)


NAME_PIECES = ["get", "reservation", "details", "read", "File", "search", "web", "x", "_", "-", ".", "/", " ", ":",
               "Run", "python", "ls", "book", "LIST", "frob"]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(NAME_PIECES), min_size=1, max_size=6).map("".join))
def test_tool_types_by_name_are_the_rules_applied_afresh(name: str) -> None:
    tooltypes._by_rules.cache_clear()
    first = tooltypes.tool_type(name)
    assert first is plain_tool_type(name)
    assert tooltypes.tool_type(name) is first  # the memo's answer


def test_overrides_win_over_the_memo_and_never_enter_it() -> None:
    tooltypes._by_rules.cache_clear()
    assert tooltypes.tool_type("get_flight") is tooltypes.ToolType.DATABASE  # memoised by the rules
    assert tooltypes.tool_type("get_flight", {"get_flight": "edit"}) is tooltypes.ToolType.EDIT
    assert tooltypes.tool_type("frobnicate", {"frobnicate": "edit"}) is tooltypes.ToolType.EDIT
    assert tooltypes.tool_type("frobnicate") is tooltypes.ToolType.OTHER  # the override was not remembered
    assert tooltypes.tool_type("get_flight") is tooltypes.ToolType.DATABASE


def extract_by_all_groups(s: str) -> tuple[str, ...]:
    """values._extract as it read a quoted string's value before: the first group that took
    part and is not the whole match."""
    out: dict[str, None] = {}
    for kind, start, end, match in values_module._matches(s):
        if match is None:
            raw = s[start:end]
        elif kind == "quoted":
            raw = next((g for g in match.groups() if g is not None and g != match.group(0)), "")
        else:
            raw = match.group(kind)
        value = values_module._normalise(kind, raw)
        if value is not None:
            out.setdefault(value, None)
    return tuple(out)


QUOTE_PIECES = ["\"", "'", "`", "abc", "Blue Lagoon", "HAT136", " ", ":", "\n", "x", "{", "1,250", "a.b@x.org"]


@settings(max_examples=500, deadline=None)
@given(st.lists(st.sampled_from(QUOTE_PIECES), max_size=25).map("".join))
def test_quoted_values_by_group_index_are_the_groups_scan(s: str) -> None:
    assert values_module._extract.__wrapped__(s) == extract_by_all_groups(s)


def test_quoted_values_by_group_index_on_the_samples() -> None:
    found = 0
    for t in load_transcripts(SAMPLES):
        for e in t.entries:
            for s in [e.content, *(c.arguments for c in e.tool_calls)]:
                assert values_module._extract.__wrapped__(s) == extract_by_all_groups(s)
                found += sum(1 for m in values_module._PATTERN.finditer(s) if m.lastgroup == "quoted")
    assert found > 100  # the samples hold quoted strings (JSON arguments and outputs)
