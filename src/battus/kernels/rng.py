"""Counter-based random numbers shared by the CPU and CUDA simulators.

A draw is a pure function of (seed, stream, step, index): splitmix64's
finaliser over a mixed 64-bit key. No generator state exists, so any
parallel schedule (threads, GPU blocks) gives bit-identical draws, and CPU and
GPU simulations of the same seed agree exactly.
"""

from __future__ import annotations

import numba
import numpy as np

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_STREAM = np.uint64(0xD1B54A32D192ED03)
_STEP = np.uint64(0x8CB92BA72F3D8DD7)
_MIX1 = np.uint64(0xBF58476D1CE4E5B9)
_MIX2 = np.uint64(0x94D049BB133111EB)
_S30 = np.uint64(30)
_S27 = np.uint64(27)
_S31 = np.uint64(31)
_S11 = np.uint64(11)
_INV53 = 1.0 / 9007199254740992.0  # 2**-53

STREAM_TRANSMISSION = 1
STREAM_RECOVERY = 2


def uniform_py(seed, stream, step, index):
    """Uniform double in [0, 1) from a 64-bit key (53 random bits).

    A plain function: ``uniform`` below compiles it for the CPU, and
    :mod:`battus.kernels.simulate_cuda` compiles the same function as a device function.
    """
    x = (
        np.uint64(seed) * _GOLDEN
        + np.uint64(stream) * _STREAM
        + np.uint64(step) * _STEP
        + np.uint64(index)
    )
    x = (x ^ (x >> _S30)) * _MIX1
    x = (x ^ (x >> _S27)) * _MIX2
    x = x ^ (x >> _S31)
    return float(x >> _S11) * _INV53


uniform = numba.njit(cache=True, inline="always")(uniform_py)
