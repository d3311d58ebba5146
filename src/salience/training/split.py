"""The held-out split that ``salience train``, ``salience tune`` and ``salience bench`` share.

:func:`split_transcripts` splits by group (:func:`group_key`: a task's trials stay
together), deterministically for a seed, so the same ``test_size`` and ``seed`` give
``salience bench`` a held-out set that ``salience train`` never saw.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Iterable

from salience.errors import ParameterError, ParameterTypeError
from salience.transcript import Transcript

__all__ = ["group_key", "split_transcripts"]


def group_key(transcript: Transcript) -> str:
    """What keeps transcripts together in a split: the task (``meta["task_id"]``,
    with the domain, so tau-bench's trials of one task share it), else the id.

    >>> from salience.transcript import Transcript
    >>> group_key(Transcript(id="tau-airline-3-1", domain="airline", meta={"task_id": 3}))
    'task:airline:3'
    >>> group_key(Transcript(id="locomo-26"))
    'id:locomo-26'
    """
    task = transcript.meta.get("task_id")
    if task is not None:
        return f"task:{transcript.domain or ''}:{task}"
    return f"id:{transcript.id}"


def split_transcripts(
    transcripts: Iterable[Transcript], test_size: float | int = 0.25, seed: int = 0
) -> tuple[list[Transcript], list[Transcript]]:
    """Split ``transcripts`` into ``(train, test)`` by group (:func:`group_key`).

    Deterministic: each group's place comes from a hash of ``seed`` and its key, so
    the same data and seed always give the same split, whatever the input order,
    and a transcript added later does not move the others' groups (except at the
    size boundary). ``test_size`` is a share of the groups in (0, 1) (rounded up,
    as scikit-learn does) or a number of groups; with two groups or more, each side
    gets at least one. Both lists keep the input order. ``salience train`` and
    ``salience bench`` use this split, so the same ``test_size`` and ``seed`` give
    a held-out set that training never saw.

    >>> from salience.transcript import Transcript
    >>> ts = [Transcript(id=f"t{i}") for i in range(6)]
    >>> train, test = split_transcripts(ts, 0.33, seed=0)
    >>> len(train), len(test)
    (4, 2)
    >>> split_transcripts(ts, 1.5)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    salience.errors.ParameterError: split_transcripts: test_size must be a share in (0, 1) or ... (got 1.5)
    """
    items = list(transcripts)
    bad = isinstance(test_size, bool) or not isinstance(test_size, (int, float))
    if not bad and isinstance(test_size, float):
        bad = not 0.0 < test_size < 1.0
    elif not bad:
        bad = test_size < 1
    if bad:
        raise ParameterError(
            f"split_transcripts: test_size must be a share in (0, 1) or a number of groups >= 1 (got {test_size!r})"
        )
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise ParameterTypeError(f"split_transcripts: seed must be an int (got {seed!r})")
    keys = [group_key(t) for t in items]
    groups = list(dict.fromkeys(keys))
    g = len(groups)
    if g < 2:
        return items, []
    n_test = math.ceil(test_size * g) if isinstance(test_size, float) else int(test_size)
    n_test = min(max(n_test, 1), g - 1)

    def rank(key: str) -> tuple[int, str]:
        digest = hashlib.blake2b(f"{seed}\x00{key}".encode(), digest_size=8).digest()
        return int.from_bytes(digest, "big"), key

    test_keys = set(sorted(groups, key=rank)[:n_test])
    train = [t for t, k in zip(items, keys) if k not in test_keys]
    test = [t for t, k in zip(items, keys) if k in test_keys]
    return train, test

