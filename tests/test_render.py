"""Where a trimmed entry's cuts fall (:func:`salience.selector.render._snap`), against its definition."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from salience.selector.render import _snap


def snap_by_definition(text: str, pos: int, span: int, *, after: bool) -> int:
    """The nearest line start within ``span`` characters, else the nearest word start within
    40, else ``pos``; a tie goes to the side ``after`` names (the later start when True)."""
    n = len(text)
    if pos <= 0 or pos >= n:
        return max(0, min(pos, n))
    for sep, width in (("\n", max(1, span)), (" ", min(40, max(1, span)))):
        starts = [c + 1 for c in range(max(0, pos - width), min(n, pos + width)) if text[c] == sep]
        before = [s for s in starts if s <= pos]
        later = [s for s in starts if s > pos]
        cands = ([max(before)] if before else []) + ([min(later)] if later else [])
        if cands:
            return min(cands, key=lambda c: (abs(c - pos), -c if after else c))
    return pos


@settings(max_examples=500, deadline=None)
@given(text=st.text(alphabet="ab \n", max_size=60), pos=st.integers(-2, 62), span=st.integers(-1, 70),
       after=st.booleans())
def test_snap_follows_its_definition(text: str, pos: int, span: int, after: bool) -> None:
    assert _snap(text, pos, span, after=after) == snap_by_definition(text, pos, span, after=after)
