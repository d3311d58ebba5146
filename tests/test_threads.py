"""salience._threads.one_thread: small work on one thread, limits that never stick."""

from __future__ import annotations

import numpy as np
import pytest
from threadpoolctl import threadpool_info

from salience._threads import one_thread


def blas_threads() -> list[int]:
    return [lib["num_threads"] for lib in threadpool_info() if lib["user_api"] == "blas"]


@pytest.fixture
def two_blas_threads():
    """BLAS loaded and on more than one thread (as on any multi-core machine)."""
    np.ones((2, 2)) @ np.ones((2, 2))
    before = blas_threads()
    if not before or min(before) < 2:
        pytest.skip("no multi-threaded BLAS library that threadpoolctl can see")
    yield before
    assert blas_threads() == before


def test_one_thread_inside_and_restored_after(two_blas_threads: list[int]) -> None:
    with one_thread("blas"):
        assert set(blas_threads()) == {1}
        with one_thread("blas"):
            assert set(blas_threads()) == {1}
        assert set(blas_threads()) == {1}  # the outer block still holds the limit
    assert blas_threads() == two_blas_threads
    with one_thread("blas", when=False):
        assert blas_threads() == two_blas_threads


def test_blocks_that_end_out_of_order_restore_the_count(two_blas_threads: list[int]) -> None:
    """A enters, B enters, A leaves, B leaves: what two threads' blocks do when they
    overlap (threadpoolctl's own limits, each restoring the count it found, would end
    with one thread for good). Driven from one thread: OpenBLAS reports its count per
    calling thread in some versions, which would blur what this checks."""
    a, b = one_thread("blas"), one_thread("blas")
    a.__enter__()
    b.__enter__()
    a.__exit__(None, None, None)
    assert set(blas_threads()) == {1}  # B still holds the limit
    b.__exit__(None, None, None)
    assert blas_threads() == two_blas_threads
