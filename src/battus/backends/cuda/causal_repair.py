"""Host side of the causal repair on the GPU: which compilation of the cooperative kernel
(:mod:`battus.kernels.causal_cuda`) a graph runs, its grid, its one device workspace, and the counts
it reports (the CPU's, :func:`battus.kernels.causal_rules.summary`)."""

from __future__ import annotations

import numpy as np

from ...kernels import causal_rules
from ...kernels.causal_cuda import (
    B_ROWS,
    C_AFTER,
    C_BEFORE,
    C_MOVED,
    C_SIZE,
    F_ROWS,
    MAX_T,
    S_LEFT,
    S_SIZE,
    W_ROWS,
    X_ROWS,
    repair_capped,
    repair_per_sm,
)
from ...kernels.cuda_common import cuda, simulated
from ...kernels.grid_cuda import THREADS

# In-arcs a vertex walks alone before the grid finishes its search arc by arc.
LIGHT_ARCS = 32
# Graphs of at least LARGE_ARCS arcs run the kernel capped at REPAIR_REGISTERS registers, on every block that
# can be resident (several per SM); smaller ones run it uncapped (255 registers, no spills), one block per
# SM, where the barriers cost less. See _launch.
LARGE_ARCS = 1 << 24


_SPECIALIZED: dict = {}  # (device, argument kinds) -> ((kernel, grid blocks) per sm, (kernel, grid blocks) large)


def _arg_kind(a):
    """What Numba's typing sees of a launch argument (dtype, rank, layout of an array; a scalar's type)."""
    if hasattr(a, "__cuda_array_interface__") or isinstance(a, np.ndarray):
        return a.dtype.str, a.ndim, bool(a.flags["C_CONTIGUOUS"]), bool(a.flags["F_CONTIGUOUS"])
    return type(a)


def _launch(args: tuple) -> None:
    """One cooperative launch of the repair: the kernel capped at
    :data:`~battus.kernels.causal_cuda.REPAIR_REGISTERS` registers on every resident block for a graph
    of at least :data:`LARGE_ARCS` arcs, else the uncapped one on one block per SM. The hitting times
    do not depend on either choice.

    The uncapped kernel needs 255 registers, so only one block per SM is
    resident; that is the faster on small graphs (Web-Stanford- and
    Web-Google-sized), whose steps have little work each and whose grid
    barriers then wait for fewer blocks. Capped at 80 registers, on every
    resident block (several per SM), it is the faster on large graphs
    (LiveJournal- and Orkut-sized), whose steps hide memory latency with the
    extra blocks.

    The specialized kernels and their grid sizes are kept per device and argument kinds (specializing
    types every argument again, about a millisecond a call on the host); both are specialized together,
    so that a warm-up on a tiny graph also compiles the one for large graphs."""
    if simulated():
        repair_capped[1, THREADS](*args)
        return
    key = (cuda.get_current_device().id, tuple(_arg_kind(a) for a in args))
    found = _SPECIALIZED.get(key)
    if found is None:
        found = []
        for large, dispatcher in enumerate((repair_per_sm, repair_capped)):
            specialized, resident = _specialize(dispatcher, args)
            found.append((specialized, grid_blocks(bool(large), resident)))
        found = _SPECIALIZED[key] = tuple(found)
    specialized, blocks = found[is_large(args[1])]
    specialized[blocks, THREADS](*args)


def is_large(indices) -> bool:
    """Whether a graph of these arcs runs the capped kernel (else the one per SM; see :func:`_launch`)."""
    return indices.shape[0] >= LARGE_ARCS


def grid_blocks(large: bool, resident: int) -> int:
    """Blocks of the cooperative grid (:func:`_launch`): every resident one for a large graph, else one per SM."""
    return resident if large else min(resident, cuda.get_current_device().MULTIPROCESSOR_COUNT)


def _specialize(dispatcher, args: tuple) -> tuple:
    """(``dispatcher`` specialized to the kinds of ``args``, its resident blocks of :data:`THREADS`)."""
    specialized = dispatcher.specialize(*args)
    resident = next(iter(specialized.overloads.values())).max_cooperative_grid_blocks(THREADS)
    return specialized, max(1, resident)


class _Workspace:
    """Device scratch carved from one allocation (one cudaMalloc instead of ~30: ~0.1 ms each), as
    C-contiguous arrays of the given shapes."""

    def __init__(self, layout: list[tuple[tuple[int, ...], type]]) -> None:
        offsets = []
        total = 0
        for shape, dtype in layout:
            offsets.append(total)
            total += -(-int(np.prod(shape)) * np.dtype(dtype).itemsize // 16) * 16  # 16-byte aligned
        self.buffer = cuda.device_array(max(16, total), dtype=np.uint8)
        self.arrays = [self._view(o, shape, np.dtype(d)) for o, (shape, d) in zip(offsets, layout, strict=True)]

    def _view(self, offset: int, shape: tuple[int, ...], dtype: np.dtype):
        size = int(np.prod(shape)) * dtype.itemsize
        if simulated():  # the simulator's arrays are numpy arrays underneath
            return self.buffer[offset:offset + size].view(dtype).reshape(shape)
        # built directly on a child pointer: slicing and re-viewing a device array twice per piece costs
        # host time in Numba for each of the ~40 pieces, more than a small graph's repair
        from numba.cuda.cudadrv.devicearray import DeviceNDArray

        strides = tuple(int(np.prod(shape[k + 1:])) * dtype.itemsize for k in range(len(shape)))
        data = self.buffer.gpu_data.view(offset, offset + size)
        return DeviceNDArray(shape=shape, strides=strides, dtype=dtype, gpu_data=data)


def _run(indptr, indices, gamma, obs_times, obs_states, orig_inf, orig_rec, t_inf, t_rec, T: int,
         census_only: bool, light_arcs: int) -> tuple[np.ndarray, np.ndarray]:
    """One launch of the repair: the hitting times ``orig_*`` (read only) repaired into ``t_*`` (the same
    arrays to repair in place), the observation windows computed from the snapshots ``obs_times``,
    ``obs_states`` by the kernel; returns the control counters and the stats on the host."""
    n = t_inf.shape[0]
    if T > MAX_T:
        raise ValueError(f"causal decoding on the GPU needs T <= {MAX_T}, got T = {T}")
    blocks_cap = 2 if simulated() else 1 << 17  # two entries per block (_grid_scan)
    arcs = 1 if census_only else max(1, indices.shape[0])  # a frame's candidates can reach every arc
    # per-vertex state is initialised by the kernel itself (no host-to-device copies of n-sized arrays)
    ws32, ws64, wsf64, ws8, arc32, small = _Workspace([
        ((W_ROWS, n), np.int32), ((X_ROWS, n + 1), np.int64), ((F_ROWS, n), np.float64), ((B_ROWS, n), np.int8),
        ((2, arcs), np.int32),  # candidate owners and ids
        ((C_SIZE + S_SIZE + 2 * (T + 2) + blocks_cap,), np.int64),  # ctl, stats, bucket_ptr, bucket_fill, block_sums
    ]).arrays
    args = (indptr, indices, gamma, obs_times, obs_states, orig_inf, orig_rec, t_inf, t_rec, int(T),
            int(causal_rules.UNANIMOUS_ROUNDS), int(light_arcs), bool(census_only), ws32, ws64, wsf64, ws8, arc32,
            small)
    _launch(args)
    head = small[:C_SIZE + S_SIZE].copy_to_host()  # one download for both
    return head[:C_SIZE], head[C_SIZE:]


def census_device(indptr, indices, t_inf, t_rec, obs_times, obs_states, T: int,
                  light_arcs: int = LIGHT_ARCS) -> tuple[int, int, int]:
    """(events, violations, forced) of device hitting times, as :func:`causal_rules.violation_census`."""
    gamma = cuda.device_array((1, 1, 1), dtype=np.float32)  # not read by the census
    ctl, _ = _run(indptr, indices, gamma, obs_times, obs_states, t_inf, t_rec, t_inf, t_rec, T, True, light_arcs)
    return int(ctl[C_BEFORE]), int(ctl[C_BEFORE + 1]), int(ctl[C_BEFORE + 2])


def _census_counts(ctl, stats) -> tuple[tuple, tuple]:
    before = (int(ctl[C_BEFORE]), int(ctl[C_BEFORE + 1]), int(ctl[C_BEFORE + 2]))
    after = (int(ctl[C_AFTER]), int(stats[S_LEFT]), int(stats[S_LEFT]))  # every violation left is forced
    return before, after


def causal_repair_arrays(indptr, indices, gamma, obs_times, obs_states, t_inf, t_rec, T: int,
                         light_arcs: int = LIGHT_ARCS, census: bool = False):
    """Frame rounds on device arrays, in place on ``t_inf``/``t_rec``; returns the stats vector of the CPU
    (violators seen, self moves, rounds, violations left), and with ``census`` also the input's and the
    output's (events, violations, forced)."""
    ctl, stats = _run(indptr, indices, gamma, obs_times, obs_states, t_inf, t_rec, t_inf, t_rec, T, False,
                      light_arcs)
    if not census:
        return stats
    return (stats, *_census_counts(ctl, stats))


def causal_repair_device(prep, gamma, t_inf, t_rec, T: int) -> tuple:
    """CUDA path of :func:`battus.decode.causal_decode`: (t_inf, t_rec, counts), hitting times on the device.

    The decoded times are kept (to count the vertices moved) and the repaired ones returned in new arrays,
    which the kernel fills from the decoded ones."""
    n = prep.n
    out_inf = cuda.device_array(n, dtype=np.int64)
    out_rec = cuda.device_array(n, dtype=np.int64)
    ctl, stats = _run(prep.indptr, prep.indices, gamma, prep.obs_times, prep.obs_states, t_inf, t_rec, out_inf,
                      out_rec, T, False, LIGHT_ARCS)
    before, after = _census_counts(ctl, stats)
    return out_inf, out_rec, causal_rules.summary(before, after, stats, int(ctl[C_MOVED]))
