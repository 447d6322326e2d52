"""battus.kernels.atomics: exact counts and one list entry per value from parallel threads."""

from __future__ import annotations

import numba
import numpy as np
from numba import prange

from battus.kernels import atomics
from battus.kernels.atomics import atomic_add


@numba.njit(parallel=True)
def _count_and_list(values, counts, listed, size):
    for i in prange(values.shape[0]):
        if atomic_add(counts, values[i], 1) == 0:
            listed[atomic_add(size, 0, 1)] = values[i]


def test_atomic_add_counts_exactly_under_prange():
    rng = np.random.default_rng(0)
    values = rng.integers(0, 500, 200_000)
    table = np.zeros((500, 4), dtype=np.int64)  # a strided column, as the decoder's per-vertex rows
    listed = np.full(500, -1, dtype=np.int64)
    size = np.zeros(1, dtype=np.int64)
    _count_and_list(values, table[:, 0], listed, size)
    np.testing.assert_array_equal(table[:, 0], np.bincount(values, minlength=500))
    assert np.all(table[:, 1:] == 0)
    expected = np.unique(values)
    assert size[0] == expected.size
    np.testing.assert_array_equal(np.sort(listed[:size[0]]), expected)


def test_python_fallback_returns_previous_value():
    array = np.array([3, 5], dtype=np.int64)
    assert atomics._atomic_add_python(array, 1, 4) == 5
    assert array.tolist() == [3, 9]
