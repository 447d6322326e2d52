"""Numba-CUDA kernels of the device layout (:mod:`battus.backends.cuda.layout`): over a graph's
arcs, each a thread, on the device that already holds them rather than on the host, one core.

Integer counts and copies only: the layout is the same array whichever device computes it.
"""

from __future__ import annotations

from .cuda_common import cuda, kernel


@kernel()
def count_sources(indices, counts):
    """``counts[v]`` += the arcs whose source is ``v`` (``np.bincount(indices)``; ``counts`` zeroed)."""
    i = cuda.grid(1)
    if i < indices.shape[0]:
        cuda.atomic.add(counts, indices[i], 1)


@kernel()
def renumber_sources(gather_id, indices, out):
    """``out[i] = gather_id[indices[i]]``: each arc's source at its position in gather order."""
    i = cuda.grid(1)
    if i < indices.shape[0]:
        out[i] = gather_id[indices[i]]
