"""The text of trimmed and stubbed entries.

Both leave a marker starting with ``[salience:`` that names the entry id and the
tool a model calls to get the entry back, :data:`RESTORE_TOOL` (see
:mod:`salience.selector.restore`; code can also call
:meth:`salience.selector.compactor.Compaction.restore`).

A trimmed entry keeps its head and its tail; the middle becomes one line (a tool result's
also lists the values that only the middle held); given the lines of the action a result
answers (``quoting``), the cut is the run of lines that quotes the fewest of them, so that a
traceback keeps the frames that show the agent's own code::

    [salience: trimmed 640 tokens (38 lines) from m12; restore id m12 via salience_restore; cut: HAT136]

A stub replaces the whole content with one short line that keeps the entry's id, its key
values (ids, numbers, paths, names, see :func:`salience.values.extract_values`) and, from
:data:`SIZE_MIN` tokens, its size:

>>> print(stub_text("m12", tokens=812, values=["ZFA04Y", "HAT136"]))
[salience: archived m12: ZFA04Y, HAT136]
>>> print(stub_text("m7", tokens=2400, values=["src/app.py"]))
[salience: archived m7 (2400 tokens): src/app.py]

A stub is what a budget buys most of, so it says only that much. It names no tool: a tool
result's call is kept beside its stub in every compaction (tool groups stay whole), and the
call names the tool. (The stub of a flight search with two values cost 24 tokens with the name,
19 without; the longer form before those, which named the role and the restore tool, cost 36,
and that budget went to fewer values in sight: issue #14.) The restore tool's description
(:mod:`salience.selector.restore`) tells a model that the id in a marker is what it passes;
:func:`marker_ids` reads them back.
"""

from __future__ import annotations

import bisect
import itertools
import re
from collections.abc import Callable, Sequence

from salience.scorer.handles import call_text
from salience.tokens import TokenCounter
from salience.transcript import Entry

__all__ = ["MARKER", "QUOTE_MIN_CHARS", "RESTORE_TOOL", "SIZE_MIN", "action_lines", "archived_head", "digest_part",
           "fitting_prefix", "marker_ids", "quote_value", "quoted_cut", "stub_text", "trim_text"]

#: Every marker salience writes into an entry starts with this.
MARKER = "[salience:"
#: The name of the tool that gives an archived entry back (every marker names it).
RESTORE_TOOL = "salience_restore"

#: Share of the kept tokens that go to the head (the rest to the tail).
HEAD_SHARE = 0.6
#: Shortest line of an action (stripped) that :func:`trim_text` looks for in a result (``quoting``).
QUOTE_MIN_CHARS = 10
#: Longest value a stub quotes (longer ones are cut with "...").
MAX_VALUE_CHARS = 40
#: A stub names its entry's size (``(2400 tokens)``) only from this many tokens, where what restoring it
#: costs matters to a reader. Below, the size took three tokens of every stub at the small budgets where stubs
#: are most of what fits: held out, 10% / 25% over the window, ToolTalk +0.107 / +0.116 -> +0.122 / +0.124,
#: API-Bank +0.050 / +0.100 -> +0.055 / +0.104 (BENCHMARKS.md, twentieth session).
SIZE_MIN = 1000

#: The id a stub (``archived m3:``, ``archived m3]``, ``archived m3 (``; a digest's host ``archived m3;``) or a
#: trim marker (``from m3;``) names; an id may hold a colon (``D1:3``), never followed by a space.
_MARKER_ID = re.compile(r"\[salience: (?:archived (\S+?)(?: \(\d+ tokens\))?(?=: |\]|;)|trimmed [^\]]*? from (\S+);)")


def _snap(text: str, pos: int, span: int, *, after: bool) -> int:
    """``pos`` moved to the nearest line start within ``span`` characters, else to
    the nearest word start within 40, else left where it is.

    A line start is the position just after a ``\n``. ``after`` says which side of
    ``pos`` to prefer on a tie (the side that keeps fewer characters).
    """
    n = len(text)
    if pos <= 0 or pos >= n:
        return max(0, min(pos, n))
    for sep, width in (("\n", max(1, span)), (" ", min(40, max(1, span)))):
        lo, hi = max(0, pos - width), min(n, pos + width)
        back = text.rfind(sep, lo, pos) + 1  # 0: none; else a line (word) start <= pos
        fwd = text.find(sep, pos, hi) + 1  # 0: none; else one > pos
        if back and fwd:
            near_back, near_fwd = pos - back, fwd - pos
            if near_back != near_fwd:
                return back if near_back < near_fwd else fwd
            return fwd if after else back
        if back or fwd:
            return back or fwd
    return pos


def trim_text(
    text: str,
    keep: int,
    counter: TokenCounter,
    *,
    entry_id: str,
    total: int | None = None,
    values: Sequence[str] = (),
    max_values: int = 8,
    quoting: Sequence[str] = (),
) -> str | None:
    """``text`` with about ``keep`` tokens kept (60% head, 40% tail) and the middle
    replaced by a one-line marker; ``None`` when there is nothing worth cutting.

    Cuts fall on line breaks when one is near (within 30% of the kept part, or 60 characters), else
    on spaces (within 40 characters), else anywhere. The marker says how many tokens and line breaks were
    cut, and the id that restores the entry. Of ``values`` (the entry's key values), those that
    only the cut middle held, at most ``max_values``, are listed at the marker's end (``; cut:
    ...``), as a stub lists its values: the ids of a search result's middle rows stay in sight.

    ``quoting``: lines of the action that ``text`` answers (see :func:`quoted_cut`). Where lines
    of ``text`` quote them, the cut is the run of whole lines that quotes the fewest.

    >>> from salience.tokens import TokenCounter
    >>> words = TokenCounter(lambda t: len(t.split()))
    >>> text = "\\n".join(f"line {i} of the log" for i in range(20))
    >>> print(trim_text(text, 10, words, entry_id="m3"))
    line 0 of the log
    [salience: trimmed 90 tokens (18 lines) from m3; restore id m3 via salience_restore]
    line 19 of the log
    >>> print(trim_text(text.replace("line 7 ", "line ZFA04Y "), 10, words, entry_id="m3", values=["ZFA04Y"]))
    line 0 of the log
    [salience: trimmed 90 tokens (18 lines) from m3; restore id m3 via salience_restore; cut: ZFA04Y]
    line 19 of the log
    """
    if not text:
        return None
    total = counter.count(text) if total is None else total
    if keep < 0 or total <= 0 or keep >= total:
        return None
    parts = quoted_cut(text, keep, counter, total, quoting) if quoting else None
    if parts is not None:
        head, middle, tail = parts
    else:
        chars_per_token = len(text) / total
        head_chars = int(keep * HEAD_SHARE * chars_per_token)
        tail_chars = int((keep - keep * HEAD_SHARE) * chars_per_token)
        if head_chars + tail_chars >= len(text):
            return None
        head_end = _snap(text, head_chars, max(60, int(head_chars * 0.3)), after=False)
        tail_start = _snap(text, len(text) - tail_chars, max(60, int(tail_chars * 0.3)), after=True)
        if tail_start <= head_end:
            return None
        head, middle, tail = text[:head_end], text[head_end:tail_start], text[tail_start:]
    cut = max(1, total - counter.count(head) - counter.count(tail))
    lines = middle.count("\n")
    line_part = f" ({lines} line{'s' if lines != 1 else ''})" if lines else ""
    lost: list[str] = []  # the first max_values of them: the values after those are not looked at
    if max_values > 0 and values:
        kept = head + tail
        for v in values:
            if v in middle and v not in kept:
                lost.append(quote_value(v))
                if len(lost) >= max_values:
                    break
    listed = f"; cut: {', '.join(lost)}" if lost else ""
    marker = (f"{MARKER} trimmed {cut} token{'s' if cut != 1 else ''}{line_part} from {entry_id}; "
              f"restore id {entry_id} via {RESTORE_TOOL}{listed}]")
    sep_head = "" if not head or head.endswith("\n") else "\n"
    sep_tail = "\n" if tail else ""
    return f"{head}{sep_head}{marker}{sep_tail}{tail}"


def quoted_cut(text: str, keep: int, counter: TokenCounter, total: int,
               quoting: Sequence[str]) -> tuple[str, str, str] | None:
    """``(head, middle, tail)`` of ``text`` where the middle is the run of whole lines (never the
    first) that frees ``total - keep`` tokens and quotes the fewest of ``quoting`` (lines of the
    action that ``text`` answers, each held as a substring), nearest to where :func:`trim_text`
    would cut on ties; ``None`` when no line after the first quotes one (then the middle goes).

    A traceback shows the agent's code where it failed, between a header and the error, and
    the next action rewrites those lines: a middle cut lost them. (MINT held out, system +
    10%: the code lines its actions copy, +0.079 -> +0.173 over the sliding window.)

    >>> from salience.tokens import TokenCounter
    >>> words = TokenCounter(lambda t: len(t.split()))
    >>> text = ("Traceback (most recent call last):\\n  line 3, in <module>\\n    total = price * qty\\n"
    ...         "  line 9, in mul\\n    return a * b\\nTypeError: can't multiply str by int")
    >>> head, middle, tail = quoted_cut(text, 14, words, 24, ["total = price * qty"])
    >>> "total = price * qty" in head + tail, "return a * b" in middle
    (True, True)
    """
    hits = [q for q in quoting if q in text]  # most lines of an action are in no result: one scan each
    if not hits:
        return None
    lines = text.splitlines(keepends=True)
    starts = list(itertools.accumulate((len(line) for line in lines[:-1]), initial=0))
    quotes = [False] * len(lines)
    for q in hits:  # a quoted line holds no line break, so each match falls within one line
        at = text.find(q)
        while at >= 0:
            quotes[bisect.bisect_right(starts, at) - 1] = True
            at = text.find(q, at + 1)
    if len(lines) < 3 or not any(quotes[1:]):
        return None
    cost = [counter.count(line) for line in lines]
    need = total - keep
    target, acc, mid = keep * HEAD_SHARE, 0.0, 1  # the line trim_text's cut would start near
    for k, c in enumerate(cost):
        if acc >= target:
            mid = max(1, k)
            break
        acc += c
    best: tuple[int, int, int, int] | None = None  # (quoted lines cut, distance from mid, start, stop)
    stop, freed, lost = 1, 0, 0
    for start in range(1, len(lines)):
        while stop < len(lines) and freed < need:
            freed += cost[stop]
            lost += quotes[stop]
            stop += 1
        if freed < need:
            break
        if best is None or (lost, abs(start - mid)) < best[:2]:
            best = (lost, abs(start - mid), start, stop)
        freed -= cost[start]
        lost -= quotes[start]
    if best is None:
        return None
    a, b = best[2], best[3]
    return "".join(lines[:a]), "".join(lines[a:b]), "".join(lines[b:])


def action_lines(entry: Entry, code: bool) -> tuple[str, ...]:
    """The lines (stripped, :data:`QUOTE_MIN_CHARS` or longer) of an agent's action: its code
    (``code``: the action is written in the reply) and the string arguments of its calls.

    >>> from salience.transcript import ToolCall
    >>> call = ToolCall(id="c1", name="edit", arguments='{"new": "def f(a, b):\\\\n    return a + b"}')
    >>> action_lines(Entry(id="m3", role="assistant", tool_calls=(call,)), False)
    ('def f(a, b):', 'return a + b')
    """
    texts = [entry.content] if code and entry.content else []
    if entry.tool_calls:
        texts.append(call_text(entry))  # the arguments' leaves, one after another
    lines = (line.strip() for t in texts for line in t.splitlines())
    return tuple(dict.fromkeys(line for line in lines if len(line) >= QUOTE_MIN_CHARS))


def stub_text(entry_id: str, *, tokens: int, values: Sequence[str] = (), max_values: int = 8) -> str:
    """The one line that stands for an archived entry (see the module doc): its id, its
    size from :data:`SIZE_MIN` tokens (:func:`archived_head`), then its values.

    ``values`` beyond ``max_values`` are left out; each is cut to 40 characters.
    """
    shown = [quote_value(v) for v in list(values)[: max(0, max_values)]]
    vals = f": {', '.join(shown)}" if shown else ""
    return f"{archived_head(entry_id, tokens)}{vals}]"


def archived_head(entry_id: str, tokens: int) -> str:
    """How a stub begins: the marker and the id, and the size from :data:`SIZE_MIN` tokens.

    >>> archived_head("m3", 40), archived_head("m4", 1200)
    ('[salience: archived m3', '[salience: archived m4 (1200 tokens)')
    """
    return f"{MARKER} archived {entry_id}" + (f" ({tokens} tokens)" if tokens >= SIZE_MIN else "")


def quote_value(value: str) -> str:
    """``value`` as a stub lists it: on one line, cut to :data:`MAX_VALUE_CHARS` characters.

    >>> quote_value("Blue\\n  Lagoon"), quote_value("x" * 50)[-5:]
    ('Blue Lagoon', 'xx...')
    """
    v = " ".join(value.split())
    return v if len(v) <= MAX_VALUE_CHARS else v[: MAX_VALUE_CHARS - 3] + "..."


def marker_ids(text: str) -> list[str]:
    """The entry ids that the markers in ``text`` name, in order (a stub's, a trim's):
    what a model passes to :data:`RESTORE_TOOL`.

    >>> marker_ids("[salience: archived m12: ZFA04Y] [salience: archived D1:3 (1812 tokens)] [salience: archived m4]")
    ['m12', 'D1:3', 'm4']
    >>> marker_ids("[salience: archived m5; also: m6 (search): HAT136]")
    ['m5']
    >>> marker_ids("head\\n[salience: trimmed 90 tokens (18 lines) from m3; restore id m3 via salience_restore]")
    ['m3']
    """
    return [a or b for a, b in _MARKER_ID.findall(text)]


def digest_part(entry_id: str, label: str | None, values: list[str], *, more: bool) -> str:
    """A digest's part for one entry: ``id (label): v1, v2``, or ``, v1, v2`` where it adds
    to that entry's part (``more``: its recurring values were listed first)."""
    listing = ", ".join(quote_value(v) for v in values)
    return ", " + listing if more else entry_id + (f" ({label})" if label else "") + ": " + listing


def fitting_part(entry_id: str, label: str | None, values: list[str], more: bool, count: Callable[[str], int],
                 limit: int) -> str:
    """:func:`digest_part` (``more`` as there), without its ``label`` where only that way it fits in
    ``limit`` tokens (``count``): a tool's name is the first thing a digest gives up, before any value.
    Held out, salience − window, 10% / 25%: ToolTalk +0.157 / +0.137 -> +0.172 / +0.144 (on the three
    training splits +0.015 to +0.019 at 10%, +0.006 to +0.007 at 25%), airline and API-Bank within
    0.002 either way.

    >>> fitting_part("m6", "get_reservation_details", ["M20IZO"], False, len, 40)
    'm6 (get_reservation_details): M20IZO'
    >>> fitting_part("m6", "get_reservation_details", ["M20IZO"], False, len, 20)
    'm6: M20IZO'
    """
    text = digest_part(entry_id, label, values, more=more)
    return text if more or not label or count(text) <= limit else digest_part(entry_id, None, values, more=False)


def fitting_prefix(values: list[str], render: Callable[[list[str]], str], count: Callable[[str], int],
                    limit: int) -> int:
    """How many of ``values``, from the first, ``render`` in at most ``limit`` tokens (``count``):
    a longer prefix never costs fewer.

    >>> fitting_prefix(["ab", "cd", "ef", "gh"], ", ".join, len, 7)
    2
    >>> fitting_prefix(["abcdefgh"], ", ".join, len, 7)
    0
    """
    lo, hi = 0, len(values) + 1  # lo values fit; hi do not, or are more than there are
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if count(render(values[:mid])) <= limit else (lo, mid)
    return lo
