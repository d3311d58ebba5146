"""Scorer files (#15): a flipped byte anywhere, a file cut short anywhere and a file from
another version are each refused with a ScorerError that says which; the bundled default
scorer is the sample. A scorer file is trusted code (a joblib pickle): the digest catches
damage, not a crafted file, and the docs say so."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from salience import ImportanceScorer
from salience.errors import ScorerError
from salience.scorer.model import DEFAULT_MODEL_PATH

pytestmark = pytest.mark.skipif(not DEFAULT_MODEL_PATH.exists(), reason="the bundled default scorer is missing")

REFUSED = (r"not a salience scorer file|header is damaged|changed after it was saved|written by salience|"
           r"cannot read the scorer payload")


@pytest.fixture(scope="module")
def original() -> bytes:
    return DEFAULT_MODEL_PATH.read_bytes()


@pytest.fixture(scope="module")
def header_length(original: bytes) -> int:
    return original.index(b"\n") + 1


def test_the_bundled_file_loads(original: bytes, tmp_path: Path) -> None:
    path = tmp_path / "s.salience"
    path.write_bytes(original)
    assert isinstance(ImportanceScorer.load(path), ImportanceScorer)


def test_a_flipped_byte_anywhere_is_refused(original: bytes, header_length: int, tmp_path: Path) -> None:
    rng = random.Random(0)
    digits = [i for i in range(header_length) if original[i:i + 1].isdigit()]
    # the header's structure (its first and last bytes: magic, format, version, digest, the newline), a sample of
    # its metadata (a float's last digit too: a change no parser sees), and a sample of the payload
    positions = [*range(120), *range(header_length - 40, header_length), *rng.sample(range(120, header_length), 12),
                 *rng.sample(digits, 6), 2458, *rng.sample(range(header_length, len(original)), 100)]
    path = tmp_path / "s.salience"
    messages: set[str] = set()
    for pos in positions:
        for bit in (0x01, 0x80):
            data = bytearray(original)
            data[pos] ^= bit
            path.write_bytes(bytes(data))
            with pytest.raises(ScorerError, match=REFUSED) as info:
                ImportanceScorer.load(path)
            messages.add(str(info.value).split(": ", 1)[1][:40])
    assert len(messages) >= 3, messages  # the messages say which part broke


def test_the_header_checks_name_what_broke(original: bytes, header_length: int, tmp_path: Path) -> None:
    header = json.loads(original[:header_length])
    path = tmp_path / "s.salience"
    payload = original[header_length:]

    def load_with(h: object, body: bytes = payload) -> str:
        path.write_bytes(json.dumps(h).encode() + b"\n" + body)
        with pytest.raises(ScorerError) as info:
            ImportanceScorer.load(path)
        return str(info.value)

    assert "written by salience 0.0.1" in load_with({**header, "library_version": "0.0.1"})
    assert "file format 99" in load_with({**header, "format": 99})
    assert "header is damaged" in load_with({**header, "metadata": {**header["metadata"], "n_rows": -1}})
    assert "changed after it was saved" in load_with({**header, "sha256": "0" * 64})
    assert "changed after it was saved" in load_with(header, payload + b"\x00")


def test_a_file_cut_short_anywhere_is_refused(original: bytes, header_length: int, tmp_path: Path) -> None:
    path = tmp_path / "s.salience"
    cuts = [0, 1, 10, header_length // 2, header_length - 1, header_length, header_length + 1,
            len(original) // 2, len(original) - 1]
    for cut in cuts:
        path.write_bytes(original[:cut])
        with pytest.raises(ScorerError, match=REFUSED):
            ImportanceScorer.load(path)


def test_the_docs_say_a_scorer_file_is_trusted_code() -> None:
    doc = ImportanceScorer.load.__doc__ or ""
    assert "trusted code" in doc and "pickle" in doc
    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text(encoding="utf-8")
    assert "trusted code" in readme
