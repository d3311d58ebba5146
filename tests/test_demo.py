"""The README's main job: ``salience demo`` on the bundled samples."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import SAMPLES
from salience.cli import main


@pytest.mark.slow
def test_demo_runs_the_whole_loop(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["demo", str(SAMPLES), "--out", str(tmp_path / "out"), "--no-track"])
    out = capsys.readouterr().out
    assert code == 0, out
    for heading in ("1. the sample transcripts", "2. train a scorer", "3. compact an agent transcript"):
        assert heading in out
    words = " ".join(out.split())
    assert "restore gives the original back: True" in words
    assert "held-out sample transcripts are too few to rank these methods" in words  # a toy split says so
    assert (tmp_path / "out" / "scorer.salience").exists()
    assert (tmp_path / "out" / "recall.png").exists()


def test_demo_without_samples(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo", str(tmp_path / "nowhere"), "--no-track"]) == 2
    assert "no such folder" in capsys.readouterr().err
