"""No source module over 700 lines (issue #11), so that each question has a room of its own.

The few modules still over it are listed with their ceiling (they may shrink, not grow)
and the reason they are not split yet; a module that drops under the limit must leave
the list.
"""

from __future__ import annotations

from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src" / "salience"
LIMIT = 700

#: Module -> (the most lines it may have, why it is over the limit for now).
OVER: dict[str, tuple[int, str]] = {
    "training/tracking.py": (892, "the only module that imports mlflow (DESIGN.md); splitting it means a "
                                  "tracking package, with that rule moved to the package"),
}

MODULES = sorted(SRC.rglob("*.py"))


def _lines(path: Path) -> int:
    return len(path.read_text(encoding="utf-8").splitlines())


@pytest.mark.parametrize("path", MODULES, ids=[str(p.relative_to(SRC)) for p in MODULES])
def test_module_is_at_most_700_lines(path: Path) -> None:
    name = str(path.relative_to(SRC))
    ceiling, _ = OVER.get(name, (LIMIT, ""))
    lines = _lines(path)
    assert lines <= ceiling, f"{name} has {lines} lines (at most {ceiling}): split it by what its parts do"


@pytest.mark.parametrize("name", sorted(OVER), ids=sorted(OVER))
def test_the_exceptions_are_still_over_the_limit(name: str) -> None:
    assert (SRC / name).exists(), f"{name} is gone: take it off OVER"
    assert _lines(SRC / name) > LIMIT, f"{name} is within {LIMIT} lines now: take it off OVER"
