"""Shared fixtures: paths to the project's samples and to ../shared/data."""

from __future__ import annotations

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
