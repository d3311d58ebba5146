"""Small numeric work on one thread: BLAS and OpenMP thread pools limited for a block.

Starting and syncing threads costs more than a small matrix product or a prediction
on a few hundred rows takes (8-100x more on two busy cores), so such work runs on one
thread. threadpoolctl's limits are process-wide and each restores, on exit, the count
it found on entry; two limits from different threads that end out of order would
leave the pools at one thread for good. :func:`one_thread` counts the blocks that
hold a limit per API instead: the first sets it, the last one out restores it.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from functools import lru_cache
from typing import Any

__all__ = ["one_thread"]

_LOCK = threading.Lock()
_HELD: dict[str, tuple[int, Any]] = {}  # api -> (blocks holding the limit, its limiter)


@lru_cache(maxsize=1)
def _controller() -> Any:
    from threadpoolctl import ThreadpoolController

    return ThreadpoolController()


@contextmanager
def one_thread(api: str, when: bool = True) -> Iterator[None]:
    """For this block, the ``api`` thread pools (``"blas"`` or ``"openmp"``) on one thread;
    nothing when ``when`` is False.

    >>> with one_thread("blas"):
    ...     pass
    """
    if not when:
        yield
        return
    with _LOCK:
        count, limiter = _HELD.get(api, (0, None))
        if count == 0:
            limiter = _controller().limit(limits=1, user_api=api)
        _HELD[api] = (count + 1, limiter)
    try:
        yield
    finally:
        with _LOCK:
            count, limiter = _HELD.pop(api)
            if count > 1:
                _HELD[api] = (count - 1, limiter)
            else:
                limiter.restore_original_limits()
