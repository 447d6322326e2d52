"""Device memory: every array the CUDA backend allocates is counted here, and what cannot fit is
refused, with its estimate, before anything is allocated.

Device bytes of a problem (n vertices, m arcs, T+1 frames, K observed frames):
``8(n+1) + 4m`` the CSR, ``4m + 4n`` the same CSR in gather order and the
gather ids, ``K n`` observations, ``~12 n + 32 (m / hub_chunk)`` the degree
bins and hub partials, ``28 (n + m / item_arcs) + 12 n`` the fitting work
items (:func:`work_items_bytes`), ``4 (T+1) n`` log-pressures, ``12 (T+1) n``
posteriors, ``16 n`` hitting times, ``8 n`` mean-field state: O(m + T n)
(:func:`inference_bytes`, checked by ``prepare``). Fitting adds, checked as it
is allocated, ``G L n 20`` (float32 state and the two term buffers of G groups
of L lanes; 40 for float64, :func:`fit_state_bytes`) and, for each snapshot a
pass resets to, the compact steps' work items and held rows (at most
``work_items_bytes(n, m) + 4 n``, :func:`battus.backends.cuda.layout.compact_items`).
docs/benchmarks.md has measured peaks.
"""

from __future__ import annotations

import threading
import weakref

import numpy as np

from ...errors import InputError
from ...kernels.cuda_common import cuda
from ...kernels.fit_cuda import SCORE_BLOCKS
from ...memory import format_bytes
from .settings import CUDASettings


class DeviceMemory:
    """Live and peak bytes of the device arrays allocated through it, and the refusal of what
    cannot fit on ``device`` (a name for messages); ``simulated``: no device, no limit."""

    def __init__(self, device: str, simulated: bool) -> None:
        self.device = device
        self.simulated = simulated
        self.live_bytes = 0
        self.peak_bytes = 0
        # a problem is prepared in one thread while the warm-up allocates in another; re-entrant,
        # since a release runs from a finalizer, on whichever thread collects the array
        self._counting = threading.RLock()

    def alloc(self, shape, dtype):
        arr = cuda.device_array(shape, dtype=dtype)
        self._track(arr)
        return arr

    def upload(self, host):
        arr = cuda.to_device(np.ascontiguousarray(host))
        self._track(arr)
        return arr

    def _track(self, arr) -> None:
        nbytes = int(np.prod(arr.shape)) * np.dtype(arr.dtype).itemsize
        with self._counting:
            self.live_bytes += nbytes
            self.peak_bytes = max(self.peak_bytes, self.live_bytes)
        weakref.finalize(arr, self._release, nbytes)

    def _release(self, nbytes: int) -> None:
        with self._counting:
            self.live_bytes -= nbytes

    def reset_peak(self) -> None:
        self.peak_bytes = self.live_bytes

    def free_bytes(self) -> int | None:
        """Free memory on the current device (None under the simulator, which has no such limit)."""
        if self.simulated:
            return None
        return int(cuda.current_context().get_memory_info()[0])

    def require(self, needed: int, what: str) -> None:
        """A one-line :class:`InputError` naming the estimate when ``needed`` exceeds the free memory."""
        free = self.free_bytes()
        if free is not None and needed > free:
            raise InputError("--backend", "device memory",
                             f"{what} needs about {format_bytes(needed)} on the GPU, more than the "
                             f"{format_bytes(free)} free on {self.device}; use --backend cpu")


def inference_bytes(n: int, m: int, T: int, n_obs: int, settings: CUDASettings) -> int:
    """Device bytes of ``prepare`` plus Battus-Z's pressures, posteriors and decoding (the module
    docstring's terms; fitting state is checked when a fit allocates it)."""
    n, m, frames = int(n), int(m), int(T) + 1
    hub_chunks = m // settings.hub_chunk + 1
    return (8 * (n + 1) + 4 * m            # CSR
            + 4 * m + 4 * n                # the CSR in gather order, gather ids
            + int(n_obs) * n + 24 * n_obs + 8 * frames
            + 12 * n + 32 * hub_chunks     # degree bins, hub partials
            + work_items_bytes(n, m, settings.item_arcs)  # fitting work items
            + 4 * frames * n + 12 * frames * n  # log-pressures, posteriors
            + 16 * n + 8 * n)              # hitting times, mean-field state


def work_items_bytes(vertices: int, arcs: int, item_arcs: int) -> int:
    """Device bytes of :func:`battus.backends.cuda.layout.build_items` over ``vertices`` holding
    ``arcs`` in-arcs, at most: 28 per work item (row, start, end, slot), 12 per vertex if every one
    were split."""
    vertices, arcs = int(vertices), int(arcs)
    return 28 * (vertices + arcs // int(item_arcs) + 1) + 12 * vertices


def fit_state_bytes(n: int, groups: int, dtype, lanes: int, n_slots: int) -> int:
    """Device bytes of one fitting state (:meth:`battus.backends.cuda.passes.FitPasses.state`)."""
    cells = int(n) * int(groups) * int(lanes)
    return (5 * cells * np.dtype(dtype).itemsize + 8 * max(1, int(n_slots)) * groups * lanes
            + 8 * SCORE_BLOCKS * groups * lanes)
