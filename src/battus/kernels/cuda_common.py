"""What every Numba-CUDA kernel module shares: the import guard, launch geometry and block reductions.

Importing this module first makes numba-cuda usable under NumPy >= 2.5, and spares its first
kernel load the import of SciPy's BLAS (:mod:`battus.kernels.cuda_compat`). Reductions use shared memory and
``syncthreads`` under the CUDA simulator, which has no warp shuffles; on a
GPU warps reduce with shuffles (checked against the CPU backend
by tests/test_gpu.py).
"""

from __future__ import annotations

import warnings

from .cuda_compat import ensure_numpy_compat, import_array_math

ensure_numpy_compat()  # before numba.cuda compiles anything
import_array_math()

from numba import cuda  # noqa: E402

# Small graphs and the degree bins of hubs launch few blocks by design; numba-cuda
# warns on every such launch, which buries a user's progress messages.
# (numba-cuda wraps the message in terminal bold codes, hence the leading ".*")
warnings.filterwarnings("ignore", message=".*Grid size .* will likely result in GPU under-utilization")


def simulated() -> bool:
    """True under ``NUMBA_ENABLE_CUDASIM=1`` (every CUDA thread a Python thread)."""
    from numba.cuda import config

    return bool(getattr(config, "ENABLE_CUDASIM", False))


# Lanes of a (logical) warp: the kernels never shuffle under the simulator, so
# the width is only a layout constant there. The CUDA simulator runs each
# thread as a Python thread; a width of 8 keeps CI fast while exercising the
# same code (several candidate groups, warp and hub bins) on tiny graphs.
WARP = 8 if simulated() else 32
BLOCK = 256  # threads per block on a GPU; shared arrays are sized for it
SHUFFLE = not simulated()


def kernel(**options):
    """``cuda.jit`` for a kernel: compiled once and kept in Numba's cache (``cache=True``; a fresh
    process loads it instead of compiling it again), with compile options (``max_registers``, ...)
    that the simulator, which compiles nothing, does not take."""
    if simulated():
        return cuda.jit
    return cuda.jit(cache=True, **options)


def blocks(count: int, threads: int) -> int:
    """Blocks of ``threads`` covering ``count`` items (at least one)."""
    return max(1, (count + threads - 1) // threads)


@cuda.jit(device=True)
def warp_sum(acc):
    """Sum over the warp by shuffles; lane 0 holds the total (same order on every call)."""
    offset = WARP // 2
    while offset > 0:
        acc += cuda.shfl_down_sync(0xFFFFFFFF, acc, offset)
        offset //= 2
    return acc


@cuda.jit(device=True)
def tree_sum(sm, tid, pos, width, stride):
    """Pairwise sum in shared memory over the entries tid + k * stride of a group (``pos``: this thread's
    place in it, ``width``: half its size); the group's first thread ends up holding the total."""
    while width > 0:
        if pos < width:
            sm[tid] += sm[tid + width * stride]
        cuda.syncthreads()
        width //= 2
