"""Value extraction is linear in its input, with the values the patterns always gave (#15: never a hang).

The patterns that scan a run of characters and may fail at its end (a path's first part, a
file name before its extension, an identifier) were tried from every place inside the run
where they may start, each time scanning to the run's end: quadratic ('a-' repeated over
20 KB took 29 s). Wall-clock limits flake, so the tests below count the work instead: the
places inside one run where those patterns get to match (each such try scans the run), which
must stay a few per run, not one per character. :data:`REFERENCE` keeps the patterns as they
were, to check that the values did not change.
"""

from __future__ import annotations

import json
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from salience import values
from salience.values import call_values, extract_values, value_set

# The patterns as they were before they were made linear (src/salience/values.py before #15's
# fix): quadratic on long runs, the reference for what the values are on short texts.
_Q_IN = r"[^\"'`\s:,{}\[\]]"
# A single-quoted string, whose quotes are no apostrophes: the opening one follows no letter or
# digit (but for a string prefix, f'...'), the closing one comes before none.
_SINGLE = (rf"(?:(?<![A-Za-z0-9])|(?<=(?<![A-Za-z0-9])[bfruBFRU]))'({_Q_IN}[^'\n]{{1,78}}{_Q_IN})'"
           r"(?![A-Za-z0-9])(?!\s*:)")
REFERENCE = re.compile("|".join(f"(?P<{name}>{pat})" for name, pat in (
    ("email", r"(?<![A-Za-z0-9._%+-])[A-Za-z0-9._%+-]+@[A-Za-z0-9.-]+\.[A-Za-z]{2,}"),
    ("quoted", rf"\"({_Q_IN}[^\"\n]{{1,78}}{_Q_IN})\"(?!\s*:)"
               rf"|{_SINGLE}"
               rf"|`({_Q_IN}[^`\n]{{1,78}}{_Q_IN})`"),
    ("date", r"\b\d{4}-\d{2}-\d{2}(?:[T ]\d{2}:\d{2}(?::\d{2})?)?\b"),
    ("path", r"(?<![\w/<])(?:~|\.{1,2})?/(?:[\w.\-]+/)*[\w.\-]+|\b[\w\-]+(?:/[\w.\-]+)+\.\w{1,5}\b"
             r"|\b[\w\-]+\.(?:py|js|ts|tsx|jsx|rs|go|java|c|h|cpp|md|json|yaml|yml|toml|txt|csv|html|css|sh|cfg|ini"
             r"|sql|rb|php)\b"),
    ("ident", r"\b(?=[A-Za-z0-9_\-#]*[0-9])(?=[A-Za-z0-9_\-#]*[A-Za-z])[A-Za-z0-9][A-Za-z0-9_\-#]{2,}\b"),
    ("snake", r"\b[a-z][a-z0-9]*(?:_[a-z0-9]+)+\b(?![\"']?\s*[:=])"),
    ("number", r"(?<![\w.])\d{1,3}(?:,\d{3})+(?:\.\d+)?(?![\w])|(?<![\w.])\d{3,}(?:\.\d+)?(?![\w])"
               r"|(?<![\w.])\d+\.\d+(?![\w.])"),
    ("name", r"\b[A-Z][a-z]+(?:[ \t]+[A-Z][a-z]+)+\b(?!\s*:)"),
)))


def reference_matches(text: str) -> list[tuple[str, int, int]]:
    """(kind, start, end) of each value match, as the reference patterns scan ``text``."""
    out = []
    for m in REFERENCE.finditer(text):
        kind = m.lastgroup or ""
        if kind == "quoted":
            group = next(i for i in range(m.re.groupindex["quoted"] + 1, m.re.groupindex["quoted"] + 4)
                         if m.group(i) is not None)
            out.append((kind, m.start(group), m.end(group)))
        else:
            out.append((kind, m.start(), m.end()))
    return out


def matches(text: str) -> list[tuple[str, int, int]]:
    out = []
    for kind, start, end, m in values._matches(text):
        if m is not None and kind == "quoted":
            group = next(i for i in range(m.re.groupindex["quoted"] + 1, m.re.groupindex["quoted"] + 4)
                         if m.group(i) is not None)
            start, end = m.start(group), m.end(group)
        out.append((kind, start, end))
    return out


def reference_values(text: str) -> list[str]:
    out: dict[str, None] = {}
    for kind, start, end in reference_matches(text):
        value = values._normalise(kind, text[start:end])
        if value is not None:
            out.setdefault(value, None)
    return list(out)


# --------------------------------------------------------------------------
# the same values
# --------------------------------------------------------------------------

#: Texts where the first try of a run is not where the run starts: after a match that ends
#: inside the run, behind three or more '-', after a '_' or a non-ASCII letter.
ENTERED_FROM_INSIDE = [
    "see marshmallow/fields.py#L1474 for it",
    "sect_C.7.6.3.html#table_C.7-11c)",
    "2024-01-01-x/y.py and 2024-01-01/x/y.py",
    "2024-01-01-notes.md",
    "1234-abc9 and 12:30-ab12",
    "me@x.com-foo/bar.py and me@x.com1ab2",
    "---abc1 ----x/y.py ###W123 #W123 --v2x",
    "_ab1-cd2 __init__-x1 éa1-b2c",
    "x/y.py-x/y.py-x/y.py",
    "a_b-c1d-e_f-2g3",
]


@pytest.mark.parametrize("text", ENTERED_FROM_INSIDE, ids=range(len(ENTERED_FROM_INSIDE)))
def test_runs_entered_from_inside_give_the_values_they_gave(text: str) -> None:
    assert matches(text) == reference_matches(text)
    assert extract_values(text) == reference_values(text)


def test_the_pinned_values() -> None:
    assert extract_values("see marshmallow/fields.py#L1474") == ["marshmallow/fields.py", "L1474"]
    assert extract_values("2024-01-01-x/y.py") == ["2024-01-01", "-x/y.py"]
    assert extract_values("---abc1 #W123") == ["abc1", "W123"]


def test_an_apostrophe_is_no_quote() -> None:
    """Two apostrophes on a line held a "value" ("t use this account anymore, it"), which stubs and
    digests listed; quotes still give theirs, after a string prefix too."""
    assert extract_values("Yeah, I actually don't use this account anymore, it's better to delete it.") == []
    assert extract_values("Oh shoot, I don't think I'll have the time") == []
    assert extract_values("It is 'Pay bills', at '2023-03-20 12:00:00'.") == ["Pay bills", "2023-03-20 12:00:00"]
    assert extract_values("the user's 'premium plan' and Jeff's") == ["premium plan"]
    assert extract_values("print(f'hello world', b'abc', x='abc_1')") == ["hello world", "abc", "abc_1"]


def test_a_closing_tag_is_no_path() -> None:
    """A closing tag read as a path: every MINT turn's "</thought>" and "</execute>" gave the
    "values" /thought and /execute (15,632 of them in 6,743 MINT entries), which every later
    turn "reused", so the labels and our own recall counted them and digests listed them."""
    assert extract_values("<thought> Solve it. </thought> <execute> print(1) </execute>") == []
    assert extract_values("<solution> 42 </solution>") == []
    assert extract_values("<p>/usr/local/bin</p> and ~/notes, /tmp") == ["/usr/local/bin", "~/notes", "/tmp"]


#: The characters that matter to the patterns, and some pieces that make them match.
PIECES = st.sampled_from(list("aAbZ19_-#./@'\"`: é,~=\nT\t<>") + [
    "py", "com", "2024-01-01", "x@y.io", "Ab Cd", "---", "a_b", "12:30", "1,234", "#L1", "-x1", "</a>"])


@settings(max_examples=1_000, deadline=None, database=None, derandomize=True)
@given(st.lists(PIECES, max_size=30).map("".join))
def test_the_same_matches_as_the_reference_patterns(text: str) -> None:
    assert matches(text) == reference_matches(text)
    assert extract_values(text) == reference_values(text)


def test_a_path_of_many_parts_gives_its_last_parts() -> None:
    """The one change, on purpose: a path has at most _SEGMENTS parts after its first."""
    short = "a/" * values._SEGMENTS + "b.py"
    assert extract_values(short) == [short]
    long = "a/" * (values._SEGMENTS + 5) + "b.py"
    assert extract_values(long) == [long[10:]]


# --------------------------------------------------------------------------
# linear: a few tries per run, whatever its length
# --------------------------------------------------------------------------

#: (run, end): a long run of one kind, and an end that makes a try from inside it succeed,
#: so that each try from inside the run shows (a try that fails costs the same scan).
RUNS = {
    "path part": ("a-" * 1_000, "/x.py"),
    "file name": ("a-" * 1_000, ".py"),
    "identifier": ("a-" * 1_000, "1"),
    "identifier, #": ("a#" * 1_000, "1"),
    "identifier, --": ("a--" * 700, "1"),
    "digits": ("1-" * 1_000, "a"),
    "non-ASCII": ("é-" * 1_000, "/x.py"),
    "snake and kebab": ("a_b-" * 500, "/x.py"),
}
SCANNING = {"path", "ident"}


@pytest.mark.parametrize("run,end", RUNS.values(), ids=list(RUNS))
def test_run_scanning_patterns_are_tried_only_where_a_run_starts(run: str, end: str) -> None:
    text = " " + run + end + " "
    tried = [p for p in range(len(text)) if (m := values._PATTERN.match(text, p)) and m.lastgroup in SCANNING]
    assert len(tried) <= 3, f"{len(tried)} places inside one run: {tried[:5]}..."


def test_a_chain_of_parts_is_scanned_a_bounded_number_of_times() -> None:
    text = "x/" + ".a/" * 1_000 + "b.py"  # a path part may start after each '.'
    tried = [p for p in range(len(text)) if (m := values._PATTERN.match(text, p)) and m.lastgroup == "path"]
    assert len(tried) <= values._SEGMENTS + 2


#: Long inputs that were quadratic: each runs in a fraction of a second now (hours before
#: for the longest); not timed here (see benchmarks/bench_fuzz.py --values), only run.
ADVERSARIAL = ["a-", "a/", "a#", "-a", "1-", "é-", "a/.", "a_b-", "---ab1 ", "x.py#L12 ", "2024-01-01-"]


@pytest.mark.parametrize("unit", ADVERSARIAL)
def test_long_adversarial_runs_are_read(unit: str) -> None:
    text = (unit * (20_000 // len(unit) + 1))[:20_000]
    assert isinstance(extract_values(text), list)
    assert isinstance(call_values(text), list)


def test_arguments_nested_deeper_than_the_json_reader_goes_are_read_as_text() -> None:
    deep = "[" * 5_000 + '"HAT136"' + "]" * 5_000  # json.loads raised RecursionError
    assert call_values(deep) == ["HAT136"]
    fine = "[" * 500 + '"HAT136"' + "]" * 500  # and a walk this deep recursed 500 times
    assert call_values(fine) == ["HAT136"]
    assert call_values(json.dumps({"a": [1234, {"b": "mia_li_3668"}], "c": "x"})) == ["1234", "mia_li_3668"]
    assert value_set("HAT136 and W123") == {"HAT136", "W123"}


# --------------------------------------------------------------------------
# the guarded pattern (speed, issue #12) matches what its alternation as first written matched
# --------------------------------------------------------------------------

#: The linear patterns as written before the guard and the one-scan forms (values.py at 8391822):
#: two path alternatives that each scan the run, three number alternatives that each look
#: behind, snake case and quoted strings that backtrack.
WRITTEN = re.compile("|".join(f"(?P<{name}>{pat})" for name, pat in (
    ("email", values._EMAIL),
    ("quoted", rf"\"({_Q_IN}[^\"\n]{{1,78}}{_Q_IN})\"(?!\s*:)"
               rf"|{_SINGLE}"
               rf"|`({_Q_IN}[^`\n]{{1,78}}{_Q_IN})`"),
    ("date", values._DATE),
    ("path", r"(?<![\w/<])(?:~|\.{1,2})?/(?:[\w.\-]+/)*[\w.\-]+"
             rf"|\b(?=[\w\-]){values._PATH_RUN}[\w\-]++{values._PATH_TAIL}"
             rf"|\b(?=[\w\-]){values._PATH_RUN}[\w\-]++{values._EXT_TAIL}"),
    ("ident", values._IDENT),
    ("snake", r"\b[a-z][a-z0-9]*(?:_[a-z0-9]+)+\b(?![\"']?\s*[:=])"),
    ("number", r"(?<![\w.])\d{1,3}(?:,\d{3})+(?:\.\d+)?(?![\w])|(?<![\w.])\d{3,}(?:\.\d+)?(?![\w])"
               r"|(?<![\w.])\d+\.\d+(?![\w.])"),
    ("name", values._NAME),
)))


def _at_every_place(pattern: re.Pattern[str], text: str) -> list[object]:
    return [(m.lastgroup, m.span(), m.groups()) if (m := pattern.match(text, q)) else None
            for q in range(len(text) + 1)]


def test_the_guarded_pattern_is_built_from_the_same_parts() -> None:
    assert values._PATTERN.pattern.startswith(values._GUARD)
    assert list(values._PATTERN.groupindex) == list(WRITTEN.groupindex)


#: The guard's first part as first written: a character a pattern may start with, not inside a word.
GUARD_WRITTEN = re.compile(r"(?=[\w.%+\-\"'`~/])(?:(?<![A-Za-z0-9_])|(?!\w))")


@settings(max_examples=1_000, deadline=None, database=None, derandomize=True)
@given(st.text(alphabet=st.sampled_from(list("aZ09_-#./@'\"`%+~ \t\n,:;()éÉ٣\u00a0\u2019")), max_size=30))
def test_the_guards_first_part_holds_where_it_did_as_written(text: str) -> None:
    first = re.compile(values._GUARD[: len(values._GUARD) - len(values._PLAIN_WORD)])
    assert [q for q in range(len(text) + 1) if first.match(text, q)] == [
        q for q in range(len(text) + 1) if GUARD_WRITTEN.match(text, q)]


@settings(max_examples=1_000, deadline=None, database=None, derandomize=True)
@given(st.lists(PIECES, max_size=30).map("".join))
def test_the_guarded_pattern_matches_where_and_what_the_written_one_did(text: str) -> None:
    assert _at_every_place(values._PATTERN, text) == _at_every_place(WRITTEN, text)


@pytest.mark.parametrize("text", ENTERED_FROM_INSIDE + [
    'x "ab" "a b": \'it\'s\' `c d` "' + "y" * 80 + '" "' + "y" * 78 + '" "a\nb" "é é"',
    "1,234.5 12,34 1.50 .5 3.14. 0123 v1.2.3 x12.5 caf\u00e91@x.org \u0661\u0662\u0663\u0664-01-01",
    "snake_case_1 a_b: a_b= a_b__c _a_b x_1-y a_B ab_ a__b",
    "~/x ./a ../b /c/d a//b x-y/z.py -a.json a.pyx a.py. x/y.tar.gz",
    # a lower-case word before each character a pattern may take after it (values._PLAIN_WORD)
    "ab%c@x.org ab+c@x.org ab-c@x.org ab.c@x.org ab@x.org abC1 ab#12 ab_c ab/c.py ab.py ab-1x iPhone7 "
    "ab Cd Ab Cd ab\tCd abc1 a1b ab: ab, ab. éab1 ab' ab\" ab`",
    # ... after a '.', and a capitalised word before them, spaces or a tab and a capital, or a '.'
    "ab.%c@x.org ab.+c@x.org ab.-c@x.org ab..c@x.org ab.@x.org ab.#1 ab._c ab./c.py ab.py ab.1 ab.x ab.) ab. Cd",
    "Ab%c@x.org Ab+c@x.org Ab-c@x.org Ab.c@x.org Ab@x.org AbC1 Ab#12 Ab_c Ab/c.py Ab.py Ab-1x Ab\tCd Ab  Cd "
    "Ab  cd Ab. Cd Ab.Cd Ab.1 Ab.) Ab: Ab, Ab) Ab1 ABC1 Ab\nCd",
    # ... and a number of one or two digits before them or a ','
    "12%c@x.org 1+c@x.org 12-c@x.org 12.5 1.c@x.org 12@x.org 12#1 12_c 12/c.py 12a 12-1x 1,234 12,345 12: 1 "
    "12\t12 123 1234-01-01 ١٢ ١٢٣",
], ids=range(len(ENTERED_FROM_INSIDE) + 8))
def test_the_guarded_pattern_on_pinned_texts(text: str) -> None:
    assert _at_every_place(values._PATTERN, text) == _at_every_place(WRITTEN, text)


#: ASCII pieces for the ASCII pattern, with every ASCII character Unicode's \\s holds and re.ASCII's does not.
ASCII_PIECES = st.sampled_from(list("aAbZ19_-#./@'\"`: ,~=\nT\t:=\x1c\x1d\x1e\x1f\x0b\x0c\r") + [
    "ab", "Ab Cd", "a_b", "x1", "12", "1,234", "2024-01-02", "a/b.py", ".py", "x@y.org", '"ab c"', "'ab c'", "`ab`",
    "---", "a-b", "#W1", "foo_bar", "Foo Bar",
])


@settings(max_examples=1_000, deadline=None, database=None, derandomize=True)
@given(st.lists(ASCII_PIECES, max_size=30).map("".join))
def test_the_ascii_pattern_matches_what_the_pattern_does_on_ascii_text(text: str) -> None:
    assert _at_every_place(values._PATTERN_ASCII, text) == _at_every_place(values._PATTERN, text)
    assert matches(text) == reference_matches(text)  # _matches on an ASCII text scans with _PATTERN_ASCII


@pytest.mark.parametrize("text", ['"abc"\x1c: "cde"\x1f:', "a_b\x1e= Ab Cd\x1d:", "'ab c'\x1c\x1c:", '"abc" :x'])
def test_the_ascii_pattern_reads_unicode_whitespace_below_128(text: str) -> None:
    assert _at_every_place(values._PATTERN_ASCII, text) == _at_every_place(values._PATTERN, text)
    assert _at_every_place(values._PATTERN_ASCII, text) == _at_every_place(WRITTEN, text)


def test_the_ascii_form_spells_out_the_whitespace_in_and_out_of_classes() -> None:
    assert values._ascii_form(r"(?!\s*:)[^\"\s:\[\]]\s[]\s][^]\s]") == (
        r"(?![\s\x1c-\x1f]*:)[^\"\s\x1c-\x1f:\[\]][\s\x1c-\x1f][]\s\x1c-\x1f][^]\s\x1c-\x1f]")
    with pytest.raises(ValueError):
        values._ascii_form(r"\S")


def test_the_guarded_pattern_on_the_bundled_samples() -> None:
    from pathlib import Path

    from salience import load_transcripts

    texts = {e.content for t in load_transcripts(Path(__file__).resolve().parents[1] / "data") for e in t.entries}
    for text in texts:
        assert [(m.lastgroup, m.span(), m.groups()) for m in values._PATTERN.finditer(text)] == [
            (m.lastgroup, m.span(), m.groups()) for m in WRITTEN.finditer(text)]
        if text.isascii():
            assert [(m.lastgroup, m.span(), m.groups()) for m in values._PATTERN_ASCII.finditer(text)] == [
                (m.lastgroup, m.span(), m.groups()) for m in WRITTEN.finditer(text)]
