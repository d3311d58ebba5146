"""Shared fixtures: paths to the project's samples and to ../shared/data, and hand-made packages."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SAMPLES = ROOT / "data"
SHARED = ROOT.parent / "shared" / "data"


def shared_path(name: str) -> Path:
    """Path of a shared data set; skips the test with a reason when it is absent."""
    path = SHARED / name
    if not path.exists():
        pytest.skip(f"shared data set {name!r} not found at {path} (put ../shared/data beside the repo)")
    return path


@pytest.fixture
def shared() -> object:
    return shared_path


@pytest.fixture
def fake_package(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[[dict[str, str]], Path]]:
    """Writes a hand-made package (``{relative path: text}``) under a temporary folder and returns
    the folder; ``sys.path`` is restored afterwards, and the package's modules are forgotten, so that
    a benchmark that imports it (``bench_bfcl``, ``bench_agentdojo``) finds this one and no other."""
    tops: set[str] = set()

    def write(files: dict[str, str]) -> Path:
        for name, text in files.items():
            path = tmp_path / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
            tops.add(Path(name).parts[0])
        return tmp_path

    monkeypatch.setattr(sys, "path", list(sys.path))
    yield write
    for name in [m for m in sys.modules if m.split(".")[0] in tops]:
        del sys.modules[name]
