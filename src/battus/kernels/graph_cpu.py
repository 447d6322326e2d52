"""Numba kernels of graph cleaning (:mod:`battus.graph`): weak components and relabelling.

Apart from :mod:`battus.graph`, which holds the ``Graph`` every reader and writer
uses, so that a command that only reads or writes graphs does not import Numba.
"""

from __future__ import annotations

import numba
import numpy as np


@numba.njit(cache=True)
def _find(parent: np.ndarray, x: int) -> int:
    root = x
    while parent[root] != root:
        root = parent[root]
    while parent[x] != root:  # path compression keeps later finds short
        nxt = parent[x]
        parent[x] = root
        x = nxt
    return root


@numba.njit(cache=True)
def weak_component_labels(n: int, src: np.ndarray, dst: np.ndarray) -> np.ndarray:
    parent = np.arange(n)
    for e in range(src.shape[0]):
        a = _find(parent, src[e])
        b = _find(parent, dst[e])
        if a != b:
            if a < b:
                parent[b] = a
            else:
                parent[a] = b
    for x in range(n):
        parent[x] = _find(parent, x)
    return parent


@numba.njit(cache=True)
def appearance_labels(src: np.ndarray, dst: np.ndarray, offset: int, size: int):
    """Label ids ``0..N-1`` in order of first appearance in ``src[0], dst[0], src[1], ...``."""
    label = np.full(size, -1, dtype=np.int64)
    order = np.empty(size, dtype=np.int64)
    out_s = np.empty(src.shape[0], dtype=np.int64)
    out_d = np.empty(src.shape[0], dtype=np.int64)
    nxt = 0
    for i in range(src.shape[0]):
        for side in range(2):
            x = src[i] if side == 0 else dst[i]
            lab = label[x - offset]
            if lab < 0:
                lab = nxt
                label[x - offset] = lab
                order[nxt] = x
                nxt += 1
            if side == 0:
                out_s[i] = lab
            else:
                out_d[i] = lab
    return out_s, out_d, order[:nxt].copy()
