"""Numba-CUDA kernel of the SI/SIR simulator; the CPU twin is :mod:`battus.kernels.simulate_cpu`.

The step rule (:mod:`battus.kernels.vertex_rules`) and the counter-based draw
(:mod:`battus.kernels.rng`) are the CPU's functions compiled as device
functions, so histories are bit-identical to the CPU's for a seed.
"""

from __future__ import annotations

import numpy as np

from . import rng, vertex_rules
from .cuda_common import BLOCK, WARP, blocks, cuda, kernel, simulated

_sir_step_vertex = cuda.jit(device=True)(vertex_rules.sir_step_rule(cuda.jit(device=True)(rng.uniform_py)))


@kernel()
def _sir_step(indptr, indices, current, nxt, beta_i, beta_r, seed, step, same_step_recovery):
    u = cuda.grid(1)
    if u < indptr.shape[0] - 1:
        nxt[u] = _sir_step_vertex(indptr, indices, current, u, beta_i, beta_r, seed, step, same_step_recovery)


def simulate(indptr: np.ndarray, indices: np.ndarray, states: np.ndarray, beta_i: float, beta_r: float, seed: int,
             same_step_recovery: bool) -> np.ndarray:
    """The (T+1, n) uint8 history grown on the device from row 0 of ``states``."""
    d_states = cuda.to_device(states)
    d_indptr = cuda.to_device(np.ascontiguousarray(indptr, dtype=np.int64))
    d_indices = cuda.to_device(np.ascontiguousarray(indices, dtype=np.int32))
    threads = WARP if simulated() else BLOCK
    for t in range(states.shape[0] - 1):
        _sir_step[blocks(states.shape[1], threads), threads](
            d_indptr, d_indices, d_states[t], d_states[t + 1], float(beta_i), float(beta_r), np.uint64(seed), t,
            bool(same_step_recovery))
    return d_states.copy_to_host()
