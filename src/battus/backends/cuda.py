"""The Numba-CUDA backend: every stage on the device, data resident between stages.

Same primitives and semantics as :class:`battus.backends.cpu.CPUBackend`; only
the decoded hitting times (and posteriors, when asked) come back to the host.
Kernels: :mod:`battus.kernels.infer_cuda` (pressures, forward-backward,
decoding), :mod:`battus.kernels.fit_cuda`, :mod:`battus.kernels.causal_cuda`,
:mod:`battus.kernels.simulate_cuda`; this module holds the host side: memory
accounting, the upload and the degree bins, and the launches.

Device memory (bytes, n vertices, m arcs, T+1 frames, K observed frames):
``8(n+1) + 4m`` CSR, ``4m + 4n`` the same CSR in gather order, ``K n``
observations, ``~12 n + 24 (m / hub_chunk)`` bins, ``28 (n + m / item_arcs)``
fitting work items, ``4 (T+1) n`` log-pressures, ``12 (T+1) n`` posteriors,
``16 n`` hitting times, ``8 n`` state: O(m + T n). Fitting adds
``G * 32 * n * 20`` (float32 state and the two term buffers of G groups per
pass, G = ceil(chunk / 32)) and ``8 * n * 40`` (the float64 re-score group of
8 lanes; ``8 * n * 80`` when its pass is folded into 16 lanes,
:func:`fold_pieces`), plus ``G * 32 * 8`` per split work item, and for each snapshot a pass
resets to, the compact steps' work items and rows (at most ``28 (n + m / item_arcs) + 16 n``,
:meth:`CUDABackend._compact_layout`, each checked before it is uploaded). Measured peaks
(H100, docs/benchmarks.md): 3.85 GiB for Battus-Z and 7.44 GiB for fitted
Battus SIR on an Orkut-sized graph
(n = 3.07 M, m = 234 M, T = 40). :meth:`CUDABackend.prepare` checks this
estimate (:meth:`CUDABackend.inference_bytes`) against the device's free memory
before uploading anything, and each fitting state is checked before it is
allocated: a problem that cannot fit gets a one-line :class:`InputError`.
"""

from __future__ import annotations

import itertools
import math
import time
import weakref
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..errors import InputError
from ..graph import Graph
from ..kernels import causal_cuda, simulate_cuda
from ..kernels import fit_cuda as KF
from ..kernels import infer_cuda as K
from ..kernels.cuda_common import BLOCK, WARP, blocks, cuda, simulated
from ..memory import format_bytes
from ..problem import Problem, segments, settled_frame
from .base import Prepared, needs_warm_up


@dataclass
class CUDAPrepared(Prepared):
    """A problem as held on the device, plus the degree bins of its graph."""

    bins: dict
    items: dict
    gather_id: Any = None
    gather_indices: Any = None
    # the key under which every fitting worker holds this problem (None: no workers)
    worker_key: int | None = None
    # obs_rows[k] = [k]: snapshot k for every lane of a fitting pass (batch_score_reset)
    obs_rows: Any = None
    # segment_pieces of the observed frames by number of parts, computed once per problem (the cut
    # is a small dynamic programme, 0.2 s on 1,000 observed frames, asked for by every round)
    pieces: dict = field(default_factory=dict)
    # what a compact fitting step needs of the host side, and its layouts by snapshot, built when a
    # pass first resets to that snapshot (CUDABackend._compact_layout)
    host_indptr: Any = None
    host_gather_id: Any = None
    host_obs_states: Any = None
    compact: dict = field(default_factory=dict)


class DevicePressures:
    """Log-pressures ``L[t, u] = log rho[t, u]`` (float32, device); ``to_host`` gives rho."""

    def __init__(self, log_rho) -> None:
        self.log_rho = log_rho

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self.log_rho.shape)


class CUDABackend:
    """Numba-CUDA backend: float32 device state, float64 accumulators.

    ``kernel`` is ``"binned"`` (default) or ``"thread"`` (thread per vertex,
    the reference); ``fit_precision`` is ``"mixed"`` (float32 rounds plus a
    float64 re-score of the best candidates) or ``"float64"``.
    """

    name = "cuda"
    max_causal_frames = causal_cuda.MAX_T

    def __init__(self, kernel: str = "binned", fit_precision: str = "mixed",
                 warp_min_degree: int = 32, hub_min_degree: int = 1024, hub_chunk: int = 2048,
                 item_arcs: int = 1024, threads: int | None = None, reorder: bool = True,
                 narrow_lanes: int | None = None, fit_pairs: bool = True, fold: bool | None = None,
                 skip_absorbed: bool = True, prune: bool = True, two_lane_max_arcs: float = 32.0,
                 compact_steps: bool = True, devices: Sequence[int] | None = None) -> None:
        if kernel not in ("binned", "thread"):
            raise ValueError(f"kernel must be 'binned' or 'thread', got {kernel!r}")
        if fit_precision not in ("mixed", "float64"):
            raise ValueError(f"fit_precision must be 'mixed' or 'float64', got {fit_precision!r}")
        self.kernel = kernel
        self.fit_precision = fit_precision
        self.reorder = bool(reorder)
        self.warp_min_degree = int(warp_min_degree)
        self.hub_min_degree = int(hub_min_degree)
        self.hub_chunk = int(hub_chunk)
        self.item_arcs = int(item_arcs)
        # group width of the float64 passes of at most POLISH candidates (re-score, small rounds)
        self.narrow_lanes = int(narrow_lanes) if narrow_lanes else KF.NARROW
        if self.narrow_lanes < 1 or WARP % self.narrow_lanes:
            raise ValueError(f"narrow_lanes must divide {WARP}")
        self.fit_pairs = bool(fit_pairs)
        # fitting passes skip the gathers of vertices without susceptible mass (fit_cuda._absorbed)
        self.skip_absorbed = bool(skip_absorbed)
        # float32 rounds of several passes: the second piece only for candidates that can still
        # reach the re-score (_evaluate_pruned)
        self.prune = bool(prune)
        # group-pair steps on graphs of at most this many arcs per work item, on average, take two
        # lanes per thread (fit_cuda.batch_pressure_pair_two_lanes); 0 never
        self.two_lane_max_arcs = float(two_lane_max_arcs)
        # with skip_absorbed: after a pass resets to a snapshot, its steps launch work items only for
        # the vertices observed S there (_compact_layout)
        self.compact_steps = bool(compact_steps)
        # float64 passes of <= narrow_lanes candidates folded (_evaluate_folded); by default only where
        # the steps are not compact: a folded pass's lanes reset to different snapshots, so none of
        # its steps is, and on one H200 (2026-11-28) the compact unfolded re-score made a
        # LiveJournal-sized SIR fit 3.333 s against 3.406 s folded, Orkut-sized 4.675 against 4.804 s
        self.fold = not (self.compact_steps and self.skip_absorbed) if fold is None else bool(fold)
        self.devices = tuple(int(d) for d in devices) if devices else ()
        if any(d < 0 for d in self.devices):
            raise ValueError(f"devices must be CUDA device ordinals >= 0, got {list(self.devices)}")
        # what a worker's own backend is built with: the same kernels and precision, one device
        self._settings = {"kernel": kernel, "fit_precision": fit_precision, "warp_min_degree": warp_min_degree,
                          "hub_min_degree": hub_min_degree, "hub_chunk": hub_chunk, "item_arcs": item_arcs,
                          "threads": threads, "reorder": reorder, "narrow_lanes": narrow_lanes,
                          "fit_pairs": fit_pairs, "fold": fold, "skip_absorbed": skip_absorbed,
                          "prune": prune, "two_lane_max_arcs": two_lane_max_arcs, "compact_steps": compact_steps}
        self._workers: list = []  # one DeviceWorker per device after the first, started with the fit
        self._spread = False  # whether problems and fitting rounds go to the workers too
        self._problem_keys = itertools.count()
        self._freed_keys: list[int] = []  # problems dropped here, to be dropped by the workers next
        self.simulated = simulated()
        if self.devices and not self.simulated:
            cuda.select_device(self.devices[0])
        # The simulator runs every thread as a Python thread: small blocks keep tests fast.
        self.threads = int(threads) if threads else (WARP if self.simulated else BLOCK)
        if self.threads % WARP or self.threads > BLOCK or self.threads & (self.threads - 1):
            raise ValueError(f"threads must be a power of two multiple of {WARP} up to {BLOCK}")
        if self.simulated:
            self.device = "CUDA simulator"
        else:
            dev = cuda.get_current_device()
            name = dev.name.decode() if isinstance(dev.name, bytes) else str(dev.name)
            self.device = f"{name} (cc {dev.compute_capability[0]}.{dev.compute_capability[1]})"
        if len(self.devices) > 1:
            self.device += f"; fit over CUDA devices {', '.join(map(str, self.devices))}"
        self.live_bytes = 0
        self.peak_bytes = 0
        self._warmed: set[tuple[bool, bool]] = set()  # the (causal, fit) warm_up has run with

    # -- memory accounting: every device array of the algorithm comes from here

    def _alloc(self, shape, dtype):
        arr = cuda.device_array(shape, dtype=dtype)
        self._track(arr)
        return arr

    def _upload(self, host):
        arr = cuda.to_device(np.ascontiguousarray(host))
        self._track(arr)
        return arr

    def _track(self, arr) -> None:
        nbytes = int(np.prod(arr.shape)) * np.dtype(arr.dtype).itemsize
        self.live_bytes += nbytes
        self.peak_bytes = max(self.peak_bytes, self.live_bytes)
        weakref.finalize(arr, self._release, nbytes)

    def _release(self, nbytes: int) -> None:
        self.live_bytes -= nbytes

    def reset_peak(self) -> None:
        self.peak_bytes = self.live_bytes

    # -- interface

    def synchronize(self) -> None:
        cuda.synchronize()

    def start_interval(self):
        """Record a CUDA event opening the algorithm interval (device timeline)."""
        if self.simulated:  # the CUDA simulator has no timing events
            return time.perf_counter()
        start = cuda.event(timing=True)
        start.record()
        return start

    def stop_interval(self, start) -> float:
        """Seconds between ``start`` and a closing event, after the device finished."""
        if self.simulated:
            return time.perf_counter() - start
        stop = cuda.event(timing=True)
        stop.record()
        stop.synchronize()
        return cuda.event_elapsed_time(start, stop) / 1e3

    def warm_up(self, exercise, causal: bool = False, fit: bool = True) -> None:
        """Compile every kernel on a tiny problem, outside the timed interval.

        With several ``devices`` a warm-up for a fit also starts one worker
        process per extra device (each compiles while this one does); problems
        prepared after that are held by every worker, and their fitting rounds
        are spread over all devices.
        """
        starting = fit and len(self.devices) > 1 and not self._workers
        if starting:
            from .cuda_workers import DeviceWorker

            self._workers = [DeviceWorker(d, self._settings) for d in self.devices[1:]]
            for worker in self._workers:
                worker.request({"op": "warm_up"})
        try:
            if needs_warm_up(self._warmed, causal, fit) and not self.simulated:  # the simulator compiles nothing
                spread, self._spread = self._spread, False  # warm up this device alone
                limit = self.two_lane_max_arcs
                try:
                    # a fit's group-pair step has two kernels, picked by the graph's work items
                    # (two_lane_max_arcs): the tiny problem takes each in turn
                    for forced in ((0.0, math.inf) if fit else (limit,)):
                        self.two_lane_max_arcs = forced
                        exercise(self, causal, fit)
                finally:
                    self._spread = spread
                    self.two_lane_max_arcs = limit
                self._warmed.add((causal, fit))
        finally:
            if starting:
                for worker in self._workers:
                    worker.reply()
                self._spread = True

    def close(self) -> None:
        """Stop the fitting workers (also done when the backend is garbage-collected or at exit)."""
        for worker in self._workers:
            worker.close()
        self._workers = []
        self._spread = False

    # -- device memory: refuse, with the estimate, what cannot fit before allocating it

    def inference_bytes(self, n: int, m: int, T: int, n_obs: int) -> int:
        """Device bytes of :meth:`prepare` plus Battus-Z's pressures, posteriors and decoding
        (the module docstring's terms; fitting state is checked when a fit allocates it)."""
        n, m, frames = int(n), int(m), int(T) + 1
        hub_chunks = m // self.hub_chunk + 1
        return (8 * (n + 1) + 4 * m            # CSR
                + 4 * m + 4 * n                # the CSR in gather order, gather ids
                + int(n_obs) * n + 24 * n_obs + 8 * frames
                + 12 * n + 32 * hub_chunks     # degree bins, hub partials
                + self.work_items_bytes(n, m)  # fitting work items
                + 4 * frames * n + 12 * frames * n  # log-pressures, posteriors
                + 16 * n + 8 * n)              # hitting times, mean-field state

    def work_items_bytes(self, vertices: int, arcs: int) -> int:
        """Device bytes of :meth:`_build_items` over ``vertices`` holding ``arcs`` in-arcs, at most:
        28 per work item (row, start, end, slot), 12 per vertex if every one were split."""
        vertices, arcs = int(vertices), int(arcs)
        return 28 * (vertices + arcs // self.item_arcs + 1) + 12 * vertices

    def fit_state_bytes(self, n: int, groups: int, dtype, lanes: int, n_slots: int) -> int:
        """Device bytes of :meth:`_fit_state`."""
        cells = int(n) * int(groups) * int(lanes)
        return (5 * cells * np.dtype(dtype).itemsize + 8 * max(1, int(n_slots)) * groups * lanes
                + 8 * (KF.SCORE_BLOCKS if not self.simulated else 2) * groups * lanes)

    def free_device_bytes(self) -> int | None:
        """Free memory on the current device (None under the simulator, which has no such limit)."""
        if self.simulated:
            return None
        return int(cuda.current_context().get_memory_info()[0])

    def require_device(self, needed: int, what: str) -> None:
        """A one-line :class:`InputError` naming the estimate when ``needed`` exceeds the free memory."""
        free = self.free_device_bytes()
        if free is not None and needed > free:
            raise InputError("--backend", "device memory",
                             f"{what} needs about {format_bytes(needed)} on the GPU, more than the "
                             f"{format_bytes(free)} free on {self.device}; use --backend cpu")

    def prepare(self, problem: Problem) -> CUDAPrepared:
        """Upload graph and observations and build the degree bins (outside the timed interval).

        First checks that the problem's device arrays fit (:meth:`require_device`)."""
        self.require_device(
            self.inference_bytes(problem.n, problem.graph.m, problem.T, problem.observations.times.shape[0]),
            f"a graph of {problem.n:,} vertices and {problem.graph.m:,} arcs over {problem.T + 1} frames")
        obs = problem.observations
        left, right = segments(obs.times, problem.T)
        obs_index = obs.index(problem.T)
        indptr = np.ascontiguousarray(problem.graph.indptr, dtype=np.int64)
        indices = np.ascontiguousarray(problem.graph.indices, dtype=np.int32)
        prep = CUDAPrepared(
            n=problem.n,
            T=problem.T,
            indptr=self._upload(indptr),
            indices=self._upload(indices),
            obs_times=self._upload(np.asarray(obs.times, dtype=np.int64)),
            obs_states=self._upload(np.asarray(obs.states, dtype=np.uint8)),
            obs_index=self._upload(obs_index),
            seg_left=self._upload(left),
            seg_right=self._upload(right),
            host_obs_times=np.asarray(obs.times, dtype=np.int64),
            host_obs_index=obs_index,
            settled_frame=settled_frame(obs.times, obs.states, problem.T),
            bins={},
            items={},
        )
        prep.obs_rows = self._upload(np.arange(obs.times.shape[0], dtype=np.int64).reshape(-1, 1))
        gather_id = self._gather_order(indices, problem.n)
        prep.gather_id = self._upload(gather_id)
        prep.gather_indices = self._upload(gather_id[indices])
        prep.bins = self._build_bins(indptr)
        prep.items = self._build_items(indptr, gather_id)
        prep.host_indptr, prep.host_gather_id, prep.host_obs_states = indptr, gather_id, obs.states
        if self._spread:
            self._prepare_on_workers(prep, problem)
        return prep

    def _prepare_on_workers(self, prep: CUDAPrepared, problem: Problem) -> None:
        """Every worker prepares its own copy of ``problem``, all at the same time.

        A transfer blocks until its worker has read the whole problem, so each
        worker is sent it from a thread of its own (the pipes are independent
        and each is written by that one thread), and the answers are read once
        the transfers are done. Every worker whose transfer went through is
        answered for, so the pipes stay in step whatever failed; the first
        failure in device order is raised, and the workers that did prepare
        drop their copy with the next request.
        """
        from concurrent.futures import ThreadPoolExecutor

        from .cuda_workers import problem_message

        key = next(self._problem_keys)
        header, arrays = problem_message(problem)
        self._flush_freed()
        request = dict(header, op="prepare", key=key)
        with ThreadPoolExecutor(max_workers=len(self._workers), thread_name_prefix="battus-prepare") as pool:
            sent = [pool.submit(worker.request, request, arrays) for worker in self._workers]
        failure = None
        for worker, transfer in zip(self._workers, sent, strict=True):
            try:
                transfer.result()  # the transfer's own error (a stopped worker), if any: then no answer comes
                worker.reply()
            except Exception as exc:
                failure = failure or exc
        if failure is not None:
            self._freed_keys.append(key)
            raise failure
        prep.worker_key = key
        # the workers drop their copy once this one is gone; the message waits for the next request,
        # since a finalizer may run in the middle of another message
        weakref.finalize(prep, self._freed_keys.append, key)  # kept alive by the weakref module

    def _flush_freed(self) -> None:
        while self._freed_keys:
            key = self._freed_keys.pop()
            for worker in self._workers:
                worker.request({"op": "free", "key": key})

    def _gather_order(self, indices: np.ndarray, n: int) -> np.ndarray:
        """Position of each vertex in the arrays the pressure kernels gather from.

        Vertices are ranked by how often they are gathered (out-degree), so the
        marginals of hubs share cache lines and stay in L1/L2: with power-law
        degrees the top 10% of sources take about 40% of all gathers. Only the
        gathered marginals and the fitting state use this order; rows, pressures,
        posteriors and outputs keep the caller's vertex ids.
        """
        if not self.reorder:
            return np.arange(n, dtype=np.int32)
        times_gathered = np.bincount(indices, minlength=n)
        rank = np.argsort(-times_gathered, kind="stable")
        gather_id = np.empty(n, dtype=np.int32)
        gather_id[rank] = np.arange(n, dtype=np.int32)
        return gather_id

    def _build_bins(self, indptr: np.ndarray) -> dict:
        deg = np.diff(indptr)
        # The thread bin stays in vertex order: neighbouring threads then read
        # neighbouring CSR rows, which share sectors (sorting it by degree made
        # the LiveJournal-sized pull step 1.6x slower on an H100). Warp-bin
        # vertices read their own rows coalesced, so there degree order only
        # groups warps of similar work into a block.
        thread_verts = np.nonzero(deg < self.warp_min_degree)[0].astype(np.int32)
        warp_verts = np.nonzero((deg >= self.warp_min_degree) & (deg < self.hub_min_degree))[0]
        warp_verts = warp_verts[np.argsort(-deg[warp_verts], kind="stable")]
        hub_verts = np.nonzero(deg >= self.hub_min_degree)[0]
        per_hub = (deg[hub_verts] + self.hub_chunk - 1) // self.hub_chunk
        hub_ptr = np.zeros(hub_verts.shape[0] + 1, dtype=np.int64)
        np.cumsum(per_hub, out=hub_ptr[1:])
        owner = np.repeat(np.arange(hub_verts.shape[0]), per_hub)
        offset = np.arange(int(hub_ptr[-1]), dtype=np.int64) - hub_ptr[owner]
        hub_start = indptr[hub_verts][owner] + offset * self.hub_chunk
        hub_end = np.minimum(hub_start + self.hub_chunk, indptr[hub_verts + 1][owner])
        warps_per_block = self.threads // WARP
        return {
            "thread_verts": self._upload(thread_verts),
            "warp_verts": self._upload(warp_verts.astype(np.int32)),
            "hub_verts": self._upload(hub_verts.astype(np.int32)),
            "hub_ptr": self._upload(hub_ptr),
            "hub_start": self._upload(hub_start.astype(np.int64)),
            "hub_end": self._upload(hub_end.astype(np.int64)),
            "hub_vertex": self._upload(hub_verts[owner].astype(np.int32)),  # each chunk's vertex
            "partial": self._alloc(max(1, int(hub_ptr[-1])), np.float64),
            "n_thread_blocks": (thread_verts.shape[0] + self.threads - 1) // self.threads,
            "n_warp_blocks": (warp_verts.shape[0] + warps_per_block - 1) // warps_per_block,
            "n_hub_chunks": int(hub_ptr[-1]),
            "n_hubs": int(hub_verts.shape[0]),
            "max_degree": int(deg.max()) if deg.size else 0,
        }

    def _build_items(self, indptr: np.ndarray, gather_id: np.ndarray, vertices: np.ndarray | None = None) -> dict:
        """Fitting work items: each vertex's in-arcs in ranges of at most ``item_arcs``, a vertex of
        several ranges (split) summed from its partials (:func:`battus.kernels.fit_cuda.batch_finish_split`).
        Every vertex, or only ``vertices`` (ascending ids: a compact step's, :meth:`_compact_layout`)."""
        if vertices is None:
            vertices = np.arange(indptr.shape[0] - 1, dtype=np.int64)
        deg = indptr[vertices + 1] - indptr[vertices]
        per_vertex = np.maximum(1, (deg + self.item_arcs - 1) // self.item_arcs)
        ptr = np.zeros(vertices.shape[0] + 1, dtype=np.int64)
        np.cumsum(per_vertex, out=ptr[1:])
        total = int(ptr[-1])
        position = np.repeat(np.arange(vertices.shape[0], dtype=np.int64), per_vertex)
        vertex = vertices[position]
        offset = np.arange(total, dtype=np.int64) - ptr[position]
        start = indptr[vertex] + offset * self.item_arcs
        end = np.minimum(start + self.item_arcs, indptr[vertex + 1])
        split = per_vertex[position] > 1
        slot = np.full(total, -1, dtype=np.int64)
        slot[split] = np.arange(int(split.sum()), dtype=np.int64)
        split_vertex = vertices[per_vertex > 1]
        split_ptr = np.zeros(split_vertex.shape[0] + 1, dtype=np.int64)
        np.cumsum(per_vertex[per_vertex > 1], out=split_ptr[1:])
        # largest items first: blocks of similar work, short tail (slots stay with their items)
        order = np.argsort(-(end - start), kind="stable")
        vertex, start, end, slot = vertex[order], start[order], end[order], slot[order]
        return {
            "vertex": self._upload(gather_id[vertex]),  # state rows are in gather order
            "start": self._upload(start),
            "end": self._upload(end),
            "slot": self._upload(slot),
            "split_vertex": self._upload(gather_id[split_vertex]),
            "split_ptr": self._upload(split_ptr),
            "n_items": total,
            "mean_arcs": int(deg.sum()) / total if total else 0.0,
            "n_split": int(split_vertex.shape[0]),
            "n_slots": int(split.sum()),
        }

    # -- mean-field pressures

    def _pressure_step(self, prep: CUDAPrepared, f_i, beta32, log_rho_t, pinned) -> None:
        """One frame's log-pressures; ``pinned`` is the snapshot of the last reset (its I and R
        vertices take L = 0 without gathering), or None."""
        n = prep.n
        tpb = self.threads
        pinning = pinned is not None
        pinned = pinned if pinning else prep.obs_states[0]  # a typed placeholder, never read
        if self.kernel == "thread":
            K.pressure_thread[blocks(n, tpb), tpb](prep.indptr, prep.gather_indices, f_i, beta32,
                                                   log_rho_t, pinned, pinning)
            return
        b = prep.bins
        grid = b["n_thread_blocks"] + b["n_warp_blocks"] + b["n_hub_chunks"]
        if grid:
            K.pressure_binned[grid, tpb](
                prep.indptr, prep.gather_indices, f_i, beta32, log_rho_t, b["thread_verts"],
                b["warp_verts"], b["hub_start"], b["hub_end"], b["hub_vertex"], b["partial"],
                b["n_thread_blocks"], b["n_warp_blocks"], pinned, pinning,
            )
        if b["n_hubs"]:
            K.finish_hubs[blocks(b["n_hubs"], tpb), tpb](b["hub_verts"], b["hub_ptr"], b["partial"],
                                                         log_rho_t)

    def pressures(self, prep: CUDAPrepared, prior, beta_i: float, beta_r: float,
                  reset: bool) -> DevicePressures:
        """Mean-field recursion (Eq. 3) keeping every frame's log-pressure on the device.

        The update stays a separate launch: fusing it into the pull kernels
        (commit 0bb21a6) made the Orkut-sized Battus-Z run 118.8 ms instead of
        100.7 ms on an H100 (the inlined float64 update raised the pull
        kernel's register use even on steps without it). With ``reset``, the
        vertices the last reset put in I or R are pinned: L = 0, not gathered,
        as on the CPU (:func:`battus.kernels.infer_cpu.mean_field_pressures`);
        after the settled frame every frame is L = 0 and the recursion stops.
        """
        n, T = prep.n, prep.T
        tpb = self.threads
        grid = blocks(n, tpb)
        prior = np.asarray(prior, dtype=np.float64)
        log_rho = self._alloc((T + 1, n), np.float32)
        f_s = self._alloc(n, np.float32)
        f_i = self._alloc(n, np.float32)
        obs_index = prep.host_obs_index
        K.fill_state[grid, tpb](np.float32(prior[0]), np.float32(prior[1]), f_s, f_i)
        beta32 = np.float32(beta_i)
        pinned = None
        for t in range(T + 1):
            if t > prep.settled_frame:  # every vertex pinned from here on: neutral, nothing to propagate
                rest = log_rho[t:]
                K.zero_rows[blocks(rest.size, tpb), tpb](rest.reshape(rest.size))
                break
            if t == 0:  # the pressure of frame 0 always comes from the uniform prior
                K.uniform_pressure[grid, tpb](prep.indptr, beta32, np.float32(prior[1]), log_rho[0])
            else:
                self._pressure_step(prep, f_i, beta32, log_rho[t], pinned)
            if t < T:
                do_reset = bool(reset and obs_index[t] >= 0)
                row = prep.obs_states[obs_index[t]] if do_reset else prep.obs_states[0]
                K.mean_field_update[grid, tpb](log_rho[t], float(beta_r), f_s, f_i, prep.gather_id, row,
                                              do_reset)
                if do_reset:
                    pinned = row
        return DevicePressures(log_rho)

    def posteriors(self, prep: CUDAPrepared, rho: DevicePressures, prior, beta_r: float,
                   backward: bool):
        gamma = self._alloc((3, prep.T + 1, prep.n), np.float32)
        prior_d = cuda.to_device(np.asarray(prior, dtype=np.float64))
        K.forward_backward[blocks(prep.n, self.threads), self.threads](
            rho.log_rho, float(beta_r), prior_d, prep.seg_left, prep.seg_right, prep.obs_index,
            prep.obs_states, bool(backward), gamma,
        )
        return gamma

    def hitting_times(self, prep: CUDAPrepared, gamma, decoder: str, tau: float,
                      with_recovery: bool, projection: bool):
        t_inf = self._alloc(prep.n, np.int64)
        t_rec = self._alloc(prep.n, np.int64)
        grid, tpb = blocks(prep.n, self.threads), self.threads
        if decoder == "threshold":
            K.threshold_hitting_times[grid, tpb](gamma, float(tau), bool(with_recovery), t_inf, t_rec)
        else:
            K.map_hitting_times[grid, tpb](gamma, bool(with_recovery), t_inf, t_rec)
        if projection:
            K.project_hitting_times[grid, tpb](prep.obs_times, prep.obs_states, t_inf, t_rec)
        return t_inf, t_rec

    def posterior_hitting_times(self, prep: CUDAPrepared, rho: DevicePressures, prior, beta_r: float,
                                backward: bool, decoder: str, tau: float, with_recovery: bool, projection: bool):
        """posteriors, then hitting_times: the device holds the posteriors in float32, and its
        forward-backward, a thread per vertex, has no block of vertices to decode in a small buffer."""
        gamma = self.posteriors(prep, rho, prior, beta_r, backward)
        return self.hitting_times(prep, gamma, decoder, tau, with_recovery, projection)

    def to_host(self, array) -> np.ndarray:
        if isinstance(array, DevicePressures):
            return np.exp(array.log_rho.copy_to_host().astype(np.float64))
        if isinstance(array, np.ndarray):
            return array
        return array.copy_to_host()

    # -- batched likelihood (fitting)

    def _piece_events(self, prep: CUDAPrepared, frames: tuple[int, int] | None) -> tuple[int, dict]:
        """(steps, events) of a pass, or of one piece ``frames = (start, stop)`` of it
        (:func:`segment_pieces`): from the prior when ``start`` is 0, else from the
        observation at ``start`` (reset to it, not scored: the piece before scores it),
        to the observed frame ``stop``. ``events`` maps a frame (counted from ``start``)
        to the snapshot every lane resets to there (its row of ``obs_rows`` and its index) and
        whether it is scored.
        """
        obs_index = prep.host_obs_index
        observed = np.nonzero(obs_index >= 0)[0]
        start, stop = frames if frames is not None else (0, int(observed[-1]) if observed.size else -1)
        events = {t - start: (prep.obs_rows[obs_index[t]], t > start or start == 0, int(obs_index[t]))
                  for t in range(start, stop + 1) if obs_index[t] >= 0}
        return stop - start, events

    def _loglik_pass(self, prep: CUDAPrepared, prior_d, beta_gather, beta_r, c0: int, count: int, ll,
                     state: dict, steps: int, events: dict, piece_lanes: int) -> None:
        """Add Eq. 4's unnormalised sum for candidates c0..c0+count-1 into ``ll``.

        The group width ``L`` (candidates per work item) is the state's last
        dimension. The pass starts from the prior, takes ``steps`` steps and at
        each frame of ``events`` (:meth:`_piece_events`, :meth:`_evaluate_folded`)
        resets lane ``lane`` to snapshot ``rows[lane // piece_lanes]``, first
        adding its score when the event is scored: into ``ll``, or with ``ll``
        2-D into its next row, one per scored frame, so that the caller can add
        the rows in frame order.
        """
        n = prep.n
        lanes = state["f_s"].shape[2]
        groups = (count + lanes - 1) // lanes
        # leading-axis slices stay C-contiguous; the partials and block sums go whole (the kernels
        # index them by group): a pass over fewer groups than the state holds then launches the
        # kernels compiled for a full one instead of compiling them again for strided arrays
        f_s, f_i, f_r, t_a, t_b = (state[k][:groups] for k in ("f_s", "f_i", "f_r", "t_a", "t_b"))
        partial = state["partial"]
        tpb = self.threads
        fill_grid = (blocks(n * lanes, tpb), groups)
        KF.batch_fill[fill_grid, (tpb, 1)](prior_d, beta_gather, c0, count, f_s, f_i, f_r, t_a)
        block_ll = state["block_ll"]
        # group pairs share their index reads (batch_pressure_pair); the last odd group runs alone
        # (batch_pressure: running it as a pair with itself made the Orkut-sized SI fit 3.85 s
        # instead of 2.39 s on an H100)
        pairs = groups // 2 if self.fit_pairs else 0
        # rows per score block as at L = WARP, so every candidate's sum has the same order
        score_tpb = (tpb // WARP) * lanes
        scored = 0
        # vertices without susceptible mass skip their gathers (fit_cuda._absorbed); looking from
        # the first step on, not only after a reset, catches the candidates whose f_S underflows
        # (Orkut-sized SIR fit on an H100: 6.50 s against 7.86 s, LiveJournal-sized within 1%)
        check = int(self.skip_absorbed)
        compact = self.compact_steps and check
        it = prep.items  # every vertex's work items, until a reset lets the steps go compact
        step = self._step_plan(it, lanes, f_s.dtype)
        read_a, read_b = t_a.view(step["read"]), t_b.view(step["read"])  # the term buffers as the pair step reads them
        for t in range(steps + 1):
            if t in events:
                rows, score, snapshot = events[t]
                KF.batch_score_reset[(block_ll.shape[0], groups), score_tpb](
                    prep.obs_states, rows, piece_lanes, prep.gather_id, f_s, f_i, f_r, t_a, t_b, beta_gather, c0,
                    count, block_ll)
                if score:
                    row = ll if ll.ndim == 1 else ll[scored]
                    KF.batch_accumulate[blocks(count, tpb), tpb](block_ll, row, c0, count)
                    scored += 1
                if compact and snapshot is not None and t < steps:
                    it = self._compact_layout(prep, snapshot)
                    step = self._step_plan(it, lanes, f_s.dtype)
                    read_a, read_b = t_a.view(step["read"]), t_b.view(step["read"])
            if t == steps:
                break
            g0 = 0
            if pairs and it["n_items"]:
                step["pair"][(step["pair_blocks"], pairs), tpb](
                    prep.gather_indices, it["vertex"], it["start"], it["end"], it["slot"], read_a, t_b, f_s, f_i,
                    f_r, beta_gather, beta_r, c0, count, partial, check,
                )
                g0 = 2 * pairs
            if g0 < groups and it["n_items"]:
                KF.batch_pressure[(step["item_blocks"], groups - g0), tpb](
                    prep.gather_indices, it["vertex"], it["start"], it["end"], it["slot"], t_a, t_b, f_s, f_i,
                    f_r, beta_gather, beta_r, c0, count, partial, g0, check,
                )
            if it["n_split"]:
                KF.batch_finish_split[(blocks(it["n_split"] * lanes, tpb), groups), (tpb, 1)](
                    it["split_vertex"], it["split_ptr"], partial, t_b, f_s, f_i, f_r,
                    beta_gather, beta_r, c0, count,
                )
            if it.get("n_held"):
                KF.batch_advance_held[(blocks(it["n_held"] * lanes, tpb), groups), (tpb, 1)](
                    it["held"], f_s, f_i, f_r, t_b, beta_gather, beta_r, c0, count)
            t_a, t_b = t_b, t_a
            read_a, read_b = read_b, read_a

    def _step_plan(self, items: dict, lanes: int, dtype) -> dict:
        """How a fitting step launches over ``items``: its group-pair kernel, grid and term view.

        On graphs of short work items a pair step takes two adjacent lanes per thread, reading the
        terms as complex pairs of lanes, so that a warp holds two items
        (fit_cuda.batch_pressure_pair_two_lanes)."""
        tpb = self.threads
        item_blocks = blocks(items["n_items"], tpb // lanes)
        if lanes % 2 == 0 and items["mean_arcs"] <= self.two_lane_max_arcs:
            return {"pair": KF.batch_pressure_pair_two_lanes, "item_blocks": item_blocks,
                    "pair_blocks": blocks(items["n_items"], tpb // (lanes // 2)),
                    "read": np.complex128 if dtype == np.float64 else np.complex64}
        return {"pair": KF.batch_pressure_pair, "pair_blocks": item_blocks, "read": dtype, "item_blocks": item_blocks}

    def _compact_layout(self, prep: CUDAPrepared, snapshot: int) -> dict:
        """The work items of the vertices observed S at ``snapshot``, and ``held``: the state rows of
        those observed I (:func:`battus.kernels.fit_cuda.batch_advance_held`); built the first
        time a pass resets every lane to that snapshot and kept with the problem.

        After such a reset a vertex observed I or R has f_S = 0.0 in every lane until the next
        reset, so it gathers nothing (:func:`battus.kernels.fit_cuda._absorbed`) and advances with
        L = 0: one observed R keeps its marginals and its term (the reset wrote it into both term
        buffers), one observed I advances in ``batch_advance_held``. The steps then launch work
        items only for the vertices observed S: the same values bit for bit, without a warp on
        each absorbed vertex's items (docs/benchmarks.md has the times).
        """
        layout = prep.compact.get(snapshot)
        if layout is None:
            states = np.asarray(prep.host_obs_states[snapshot])
            susceptible = np.nonzero(states == 0)[0].astype(np.int64)
            indptr = prep.host_indptr
            arcs = int((indptr[susceptible + 1] - indptr[susceptible]).sum())
            held_bytes = 4 * prep.n  # at most every vertex is observed I
            self.require_device(self.work_items_bytes(susceptible.shape[0], arcs) + held_bytes,
                                f"the fitting steps after the snapshot {snapshot} of {prep.n:,} vertices")
            layout = self._build_items(indptr, prep.host_gather_id, susceptible)
            # in row order, so that a warp's rows of the state lie in order
            held = np.sort(prep.host_gather_id[states == 1]).astype(np.int32)
            layout["held"], layout["n_held"] = self._upload(held), int(held.shape[0])
            prep.compact[snapshot] = layout
        return layout

    def _fit_state(self, prep: CUDAPrepared, groups: int, dtype, lanes: int = WARP) -> dict:
        n = prep.n
        self.require_device(self.fit_state_bytes(n, groups, dtype, lanes, prep.items["n_slots"]),
                            f"fitting {groups * lanes} candidates at a time on {n:,} vertices")
        state = {
            "f_s": self._alloc((groups, n, lanes), dtype),
            "f_i": self._alloc((groups, n, lanes), dtype),
            "f_r": self._alloc((groups, n, lanes), dtype),
            # log1p(-beta fI) of every vertex, read by its neighbours: this step's and the next's
            "t_a": self._alloc((groups, n, lanes), dtype),
            "t_b": self._alloc((groups, n, lanes), dtype),
            "partial": self._alloc((max(1, prep.items["n_slots"]), groups, lanes), np.float64),
            "block_ll": self._alloc((KF.SCORE_BLOCKS if not self.simulated else 2, groups, lanes),
                                    np.float64),
        }
        return state

    def _loglik_device(self, prep, prior, beta_i_d, beta_r_d, gather_d, n_cand: int, chunk: int, ll_d,
                       state, frames: tuple[int, int] | None = None) -> None:
        prior_d = cuda.to_device(np.asarray(prior, dtype=np.float64))
        steps, events = self._piece_events(prep, frames)
        lanes = state["f_s"].shape[2]
        for c0 in range(0, n_cand, chunk):
            count = min(chunk, n_cand - c0)
            self._loglik_pass(prep, prior_d, gather_d, beta_r_d, c0, count, ll_d, state, steps, events, lanes)

    def loglik_batch(self, prep: CUDAPrepared, prior, beta_i: np.ndarray,
                     beta_r: np.ndarray, lanes: int = WARP) -> np.ndarray:
        """Unnormalised Eq. 4 for a batch of candidates (float32 state, float64 sums), ``lanes``
        candidates per group (the values do not depend on it), all in one pass.

        The state is float64 when ``fit_precision`` is ``"float64"``; it is sized and the
        passes launched by :meth:`_evaluate_groups`, as for :meth:`evaluate`, in a fresh scratch.
        """
        lanes = int(lanes)
        if lanes < 1 or WARP % lanes:
            raise ValueError(f"lanes must divide {WARP}, got {lanes}")
        dtype = np.float64 if self.fit_precision == "float64" else np.float32
        n_cand = np.shape(beta_i)[0]
        return self._evaluate_groups(prep, prior, beta_i, beta_r, dtype, lanes, -(-n_cand // lanes) * lanes, {})

    def _scratch_state(self, prep: CUDAPrepared, scratch: dict, groups: int, dtype,
                       lanes: int = WARP) -> dict:
        """Fitting state of at least ``groups`` candidate groups, kept in the caller's ``scratch``."""
        key = (np.dtype(dtype).name, lanes)
        state = scratch.get(key)
        if state is None or state["f_s"].shape[0] < groups:
            state = scratch[key] = self._fit_state(prep, groups, dtype, lanes)
        return state

    def evaluate(self, prep: CUDAPrepared, prior, beta_i: np.ndarray, beta_r: np.ndarray, mode: str, chunk: int,
                 scratch: dict, frames: tuple[int, int] | None = None, lanes: int | None = None) -> np.ndarray:
        """Unnormalised Eq. 4 of each candidate on this device, on the host.

        ``mode``: ``float32`` or ``float64`` state in groups of :data:`WARP`
        candidates, at most ``chunk`` (rounded up to whole groups) per pass; or
        ``narrow64``, float64 state in groups of ``lanes`` (default
        ``narrow_lanes``), all at once, the pass folded where ``fold`` and
        the default width allow (:meth:`_evaluate_folded`).
        ``frames``: one piece of the pass (:meth:`_loglik_pass`); a piece that
        does not start at frame 0 gives one row per frame it scores.
        """
        n_cand = np.shape(beta_i)[0]
        if mode == "narrow64":
            dtype = np.float64
            folds = self.fold and frames is None and lanes is None
            lanes = lanes or self.narrow_lanes
            chunk = -(-n_cand // lanes) * lanes
            pieces = fold_pieces(prep.host_obs_index, lanes) if folds else []
            if pieces and n_cand <= lanes:
                return self._evaluate_folded(prep, prior, beta_i, beta_r, lanes, pieces, scratch)
        elif mode in ("float32", "float64"):
            dtype, lanes = np.dtype(mode), WARP
            chunk = max(WARP, -(-chunk // WARP) * WARP)
            chunk = min(chunk, -(-n_cand // WARP) * WARP)
        else:
            raise ValueError(f"unknown evaluation mode {mode!r}")
        return self._evaluate_groups(prep, prior, beta_i, beta_r, dtype, lanes, chunk, scratch, frames)

    def _evaluate_groups(self, prep: CUDAPrepared, prior, beta_i: np.ndarray, beta_r: np.ndarray, dtype,
                         lanes: int, chunk: int, scratch: dict,
                         frames: tuple[int, int] | None = None) -> np.ndarray:
        """Unnormalised Eq. 4 of each candidate, on the host: ``dtype`` state in groups of ``lanes``
        candidates, ``chunk`` (whole groups) per pass, the state kept in ``scratch``.

        The one place that sizes fitting state and launches its passes
        (:meth:`evaluate` and :meth:`loglik_batch` both come here).
        """
        beta_i = np.ascontiguousarray(beta_i, dtype=np.float64)
        beta_r = np.ascontiguousarray(beta_r, dtype=np.float64)
        n_cand = beta_i.shape[0]
        rows = self._scored_rows(prep, frames)
        ll = cuda.to_device(np.zeros(n_cand if rows is None else (rows, n_cand)))
        state = self._scratch_state(prep, scratch, chunk // lanes, dtype, lanes)
        gather = cuda.to_device(beta_i.astype(dtype))
        self._loglik_device(prep, prior, cuda.to_device(beta_i), cuda.to_device(beta_r), gather, n_cand, chunk,
                            ll, state, frames)
        return ll.copy_to_host()

    def _evaluate_folded(self, prep: CUDAPrepared, prior, beta_i: np.ndarray, beta_r: np.ndarray, lanes: int,
                         pieces: list[tuple[int, int]], scratch: dict) -> np.ndarray:
        """:meth:`evaluate` of at most ``lanes`` candidates in float64, the pass folded: its
        pieces (:func:`fold_pieces`) run side by side, one copy of the candidates per piece in
        the lanes of one group, for a piece's steps only.

        A float64 step of 8 lanes is bound by its row requests rather than its bytes
        (Orkut-sized pass on an H100: 270 ms with 8 lanes, 394 ms with 16), so two
        pieces of 20 steps in 16 lanes cost less than 40 steps in 8. Every piece after
        the first starts from the snapshot at its start frame; each scored frame's sums
        go to a row of their own, and the host adds every candidate's rows piece by
        piece, in frame order, from 0.0, as one pass adds them on the device, so each
        value is the same bit for bit.
        """
        beta_i = np.ascontiguousarray(beta_i, dtype=np.float64)
        beta_r = np.ascontiguousarray(beta_r, dtype=np.float64)
        n_cand = beta_i.shape[0]
        parts = len(pieces)
        width = parts * lanes
        pick = np.tile(np.minimum(np.arange(lanes), n_cand - 1), parts)  # spare lanes repeat the last one
        obs_index = prep.host_obs_index
        starts = [start for start, _ in pieces]
        steps = pieces[0][1] - pieces[0][0]
        scored = [t for t in range(1, steps + 1) if obs_index[t] >= 0]
        rows = np.array([[-1] + [obs_index[start] for start in starts[1:]]]
                        + [[obs_index[start + t] for start in starts] for t in scored], dtype=np.int64)
        rows_d = cuda.to_device(rows)
        # its lanes reset to different snapshots: no compact steps (snapshot None)
        events = {0: (rows_d[0], False, None)} | {t: (rows_d[k + 1], True, None) for k, t in enumerate(scored)}
        ll = cuda.to_device(np.zeros((len(scored), width)))
        state = self._scratch_state(prep, scratch, 1, np.float64, width)
        prior_d = cuda.to_device(np.asarray(prior, dtype=np.float64))
        self._loglik_pass(prep, prior_d, cuda.to_device(beta_i[pick]), cuda.to_device(beta_r[pick]), 0, width, ll,
                          state, steps, events, lanes)
        sums = ll.copy_to_host()
        total = np.zeros(n_cand)
        for piece in range(parts):
            for row in sums:
                total = total + row[piece * lanes:piece * lanes + n_cand]
        return total

    @staticmethod
    def _segment(prep: CUDAPrepared, parts: int) -> list[tuple[int, int]]:
        """:func:`segment_pieces` of the problem's observed frames, once per problem and ``parts``."""
        if parts not in prep.pieces:
            prep.pieces[parts] = segment_pieces(prep.host_obs_index, parts)
        return prep.pieces[parts]

    def _spreads(self, prep: CUDAPrepared) -> bool:
        """Whether this problem's fitting rounds go to the workers too (prepared there)."""
        return self._spread and prep.worker_key is not None

    @staticmethod
    def _scored_rows(prep: CUDAPrepared, frames: tuple[int, int] | None) -> int | None:
        """What an evaluation over ``frames`` answers: one value per candidate (None) for a whole
        pass or a piece from frame 0, else one row per frame the piece scores (:meth:`evaluate`)."""
        if frames is None or frames[0] == 0:
            return None
        start, stop = frames
        return int(np.count_nonzero(prep.host_obs_index[start + 1:stop + 1] >= 0))

    def _on_devices(self, prep: CUDAPrepared, prior, beta_i: np.ndarray, beta_r: np.ndarray, mode: str,
                    chunk: int, scratch: dict, picks: list[np.ndarray],
                    frames: list[tuple[int, int] | None], lanes: int | None = None) -> list[np.ndarray]:
        """:meth:`evaluate` of candidates ``picks[k]`` (indices) over piece ``frames[k]`` on device k
        (this one first, then each worker; every pick non-empty), all at once; the answers in
        device order."""
        self._flush_freed()
        prior = np.asarray(prior, dtype=np.float64)
        asked = []
        for worker, pick, piece in zip(self._workers, picks[1:], frames[1:], strict=False):
            header = {"op": "evaluate", "key": prep.worker_key, "mode": mode, "chunk": int(chunk)}
            if piece is not None:
                header["frames"] = [int(piece[0]), int(piece[1])]
            if lanes is not None:
                header["lanes"] = int(lanes)
            worker.request(header, {"prior": prior, "beta_i": beta_i[pick], "beta_r": beta_r[pick]})
            asked.append((worker, pick.size, piece))
        parts = []
        try:
            parts.append(self.evaluate(prep, prior, beta_i[picks[0]], beta_r[picks[0]], mode, chunk, scratch,
                                       frames[0], lanes))
        finally:  # every answer is read, so that the pipes stay in step even when this device failed
            for worker, count, piece in asked:
                values = worker.reply()["arrays"].get("values")
                rows = self._scored_rows(prep, piece)
                shape = (count,) if rows is None else (rows, count)
                if values is None or values.dtype != np.float64 or values.shape != shape:
                    raise RuntimeError(f"CUDA device {worker.device} answered {count} candidates wrongly")
                parts.append(values)
        return parts

    def _evaluate_candidates_spread(self, prep: CUDAPrepared, prior, beta_i: np.ndarray, beta_r: np.ndarray,
                                    mode: str, chunk: int, scratch: dict,
                                    frames: tuple[int, int] | None = None, lanes: int | None = None) -> np.ndarray:
        """:meth:`evaluate` over the pass or one piece of it, the candidates' groups (of
        :data:`WARP`, or of ``lanes`` in ``narrow64``) dealt over this device and the workers
        (:func:`deal_candidates`; one device, or one group: here alone); each answer put back in
        its candidates' places."""
        n_cand = beta_i.shape[0]
        unit = lanes or WARP
        if not self._spreads(prep) or n_cand <= unit:
            return self.evaluate(prep, prior, beta_i, beta_r, mode, chunk, scratch, frames, lanes)
        picks = [pick for pick in deal_candidates(n_cand, unit, 1 + len(self._workers)) if pick.size]
        parts = self._on_devices(prep, prior, beta_i, beta_r, mode, chunk, scratch, picks, [frames] * len(picks),
                                 lanes)
        rows = self._scored_rows(prep, frames)
        values = np.empty(n_cand if rows is None else (rows, n_cand))
        for pick, part in zip(picks, parts, strict=True):
            values[..., pick] = part
        return values

    def _evaluate_spread(self, prep: CUDAPrepared, prior, beta_i: np.ndarray, beta_r: np.ndarray, mode: str,
                         chunk: int, scratch: dict) -> np.ndarray:
        """:meth:`evaluate` spread over this device and the workers, by candidates or by frames.

        A round of several groups of :data:`WARP` candidates is dealt over the
        devices in whole groups (:meth:`_evaluate_candidates_spread`), and so
        is the float64 re-score, in narrower groups: ``narrow_lanes`` shared
        out (4 lanes each on two devices), every device running the whole
        pass, unfolded.

        What is left (a round of one group; one re-scored candidate) is split
        by frames where the observations cut the pass into balanced pieces
        (:func:`segment_pieces`; the benchmark schedule {T/2, T} halves it).
        Every observation is a full snapshot and the fitting pass restarts
        from it (:func:`battus.kernels.fit_cuda.batch_score_reset`), so the
        pieces are independent: this device runs the first, from the prior,
        each worker a later one, from its first frame's observation, answering
        one row per frame it scores. The rows are added on the host in frame
        order, as the one-device pass adds them on the device, so every value
        is the same bit for bit. Otherwise it stays on this device.

        Candidates before frames, because a later piece costs far less than
        the first: after a reset to an observed I or R a vertex is absorbed
        and skips its gathers. Orkut-sized SIR refinement round on an H100:
        49 candidates in float32 by frames 0-20 / 20-40 219 / 96 ms, by
        candidates 32 / 17 (each the whole pass) 166 / 166 ms; the re-score
        of 8 by frames 115 / 32 ms, by candidates 4 + 4 in 4 lanes 102 / 102 ms.
        """
        n_cand = beta_i.shape[0]
        if not self._spreads(prep):
            return self.evaluate(prep, prior, beta_i, beta_r, mode, chunk, scratch)
        devices = 1 + len(self._workers)
        if mode == "narrow64":
            lanes = 1 << (max(1, self.narrow_lanes // devices).bit_length() - 1)  # a power of two, as WARP
            if n_cand > lanes:
                return self._evaluate_candidates_spread(prep, prior, beta_i, beta_r, mode, chunk, scratch,
                                                        lanes=lanes)
        elif n_cand > WARP:
            return self._evaluate_candidates_spread(prep, prior, beta_i, beta_r, mode, chunk, scratch)
        pieces = self._segment(prep, devices)
        if len(pieces) == 1:
            return self.evaluate(prep, prior, beta_i, beta_r, mode, chunk, scratch)
        everyone = np.arange(n_cand)
        parts = self._on_devices(prep, prior, beta_i, beta_r, mode, chunk, scratch, [everyone] * len(pieces),
                                 pieces)
        total = parts[0]
        for rows in parts[1:]:
            total = add_in_frame_order(total, rows)
        return total

    def _evaluate_pruned(self, prep: CUDAPrepared, prior, beta_i: np.ndarray, beta_r: np.ndarray, chunk: int,
                         scratch: dict, pieces: list[tuple[int, int]], norm: float) -> np.ndarray:
        """A float32 round's values (Eq. 4 / ``norm``) for :meth:`best_candidate`'s re-score: the
        exact value of every candidate that can be among the best :data:`POLISH`, -inf for the
        others, which cannot.

        The pass is cut at an observed frame into pieces A and B
        (:func:`segment_pieces`); B restarts from the snapshot, so a
        candidate's value is A's sum plus B's rows, added in frame order as
        one pass adds them (the same bits). Every candidate runs A; B runs in
        passes of ``chunk``, best A first. A row of B sums n logarithms of
        marginals that are at most 1 up to float32 rounding (each step
        rounds the mass f_S + f_I + f_R by at most 2^-24 of itself), so B adds
        at most ``slack`` per row, a bound 16 times that rounding; once
        ``POLISH`` totals are known, a candidate whose A plus the slack falls
        below the ``POLISH``-th best total cannot reach the re-score (ties
        excluded: the comparison is on the values divided by ``norm``, as
        the arg-sort sees them), and neither can any after it in A's order.
        With fitting workers, each piece's candidates are dealt over the devices
        (:meth:`_evaluate_candidates_spread`). On the benchmark schedule B runs
        for 64 (LiveJournal-sized) and 93 (Orkut-sized) of a SIR grid's 576.
        """
        (a_start, a_stop), (b_start, b_stop) = pieces
        n_cand = beta_i.shape[0]
        head = self._evaluate_candidates_spread(prep, prior, beta_i, beta_r, "float32", chunk, scratch,
                                                (a_start, a_stop))
        rows_b = self._scored_rows(prep, (b_start, b_stop))
        slack = prep.n * 1e-6 * (b_stop - b_start + 3)
        order = np.argsort(-head, kind="stable")
        bound = head.copy()
        for _ in range(rows_b):
            bound = bound + slack
        values = np.full(n_cand, -np.inf)
        # a batch of B is one pass of ``chunk``, also with workers. A pass per device (two H100s) ran
        # the 93 candidates Orkut-sized B needs in 95 ms rather than 54 + 56, but LiveJournal-sized,
        # where B needs 64 (one pass of 32 per device), it ran 64 per device in 161 ms
        per_pass = max(WARP, -(-chunk // WARP) * WARP)
        threshold = -np.inf
        done = 0
        while done < n_cand:
            batch = order[done:done + per_pass]
            batch = batch[bound[batch] / norm >= threshold]  # a prefix: bound falls along A's order
            if batch.size == 0:
                break
            rows = self._evaluate_candidates_spread(prep, prior, beta_i[batch], beta_r[batch], "float32", chunk,
                                                    scratch, (b_start, b_stop))
            values[batch] = add_in_frame_order(head[batch], rows) / norm
            done += batch.size
            if done >= KF.POLISH:
                threshold = np.sort(values)[-KF.POLISH]
        return values

    def best_candidate(self, prep: CUDAPrepared, prior, beta_i: np.ndarray, beta_r: np.ndarray, norm: float,
                       chunk: int, scratch: dict) -> tuple[int, float]:
        """Arg-max of Eq. 4 / ``norm`` over the candidates, the first on ties.

        ``mixed`` precision evaluates every candidate with float32 state, then
        re-scores the best :data:`POLISH` in float64 and takes the arg-max of
        those (ties to the lower candidate index), so near-ties resolve as in
        the float64 CPU backend; a round of at most POLISH candidates is
        evaluated in float64 at once. Float64 passes of at most POLISH
        candidates use groups of ``narrow_lanes`` (8) candidates rather than 32
        (64-byte instead of 256-byte gathered rows); float32 passes run group
        pairs that share their index reads (``fit_pairs``). Neither changes any
        candidate's value (tests/test_cuda_backend.py checks bit equality), nor
        does spreading a round over several ``devices``. A float32 round of
        several passes cut at an observed frame runs its second piece only
        for the candidates that can still be among the best POLISH
        (``prune``, :meth:`_evaluate_pruned`), so the re-scored set is the same.
        """
        beta_i = np.ascontiguousarray(beta_i, dtype=np.float64)
        beta_r = np.ascontiguousarray(beta_r, dtype=np.float64)
        n_cand = beta_i.shape[0]
        polish = self.fit_precision == "mixed" and n_cand > KF.POLISH
        if polish:
            mode = "float32"
        elif self.fit_precision == "mixed":  # at most POLISH candidates: float64 groups of `narrow`
            mode = "narrow64"
        else:
            mode = "float64"
        pieces = self._segment(prep, 2)
        if polish and self.prune and len(pieces) == 2 and n_cand > max(chunk, WARP):
            values = self._evaluate_pruned(prep, prior, beta_i, beta_r, chunk, scratch, pieces, norm)
        else:
            values = self._evaluate_spread(prep, prior, beta_i, beta_r, mode, chunk, scratch) / norm
        top = np.argsort(-values, kind="stable")[:min(KF.POLISH, n_cand)]
        if polish:
            values_top = self._evaluate_spread(prep, prior, beta_i[top], beta_r[top], "narrow64", chunk,
                                               scratch) / norm
        else:
            values_top = values[top]
        best = min(range(top.shape[0]), key=lambda j: (-values_top[j], top[j]))
        return int(top[best]), float(values_top[best])

    # -- causal repair and simulation

    def causal_repair(self, prep: CUDAPrepared, gamma, t_inf, t_rec, T: int) -> tuple:
        return causal_cuda.causal_repair_device(prep, gamma, t_inf, t_rec, T)

    def simulate(self, graph: Graph, states: np.ndarray, beta_i: float, beta_r: float, seed: int,
                 same_step_recovery: bool) -> np.ndarray:
        return simulate_cuda.simulate(graph.indptr, graph.indices, states, beta_i, beta_r, seed, same_step_recovery)


def add_in_frame_order(total: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """``total`` plus each row of a piece's per-frame sums in turn: the order in which one pass adds
    its scored frames (``ll[c] +=`` on the device), so every value is the same bit for bit."""
    for row in rows:
        total = total + row
    return total


def segment_pieces(obs_index: np.ndarray, parts: int) -> list[tuple[int, int]]:
    """The fitting pass (frames 0 to the last observed one) cut at observed frames into at most
    ``parts`` pieces ``(start, stop)`` whose longest is as short as possible.

    Returns ``[(0, last)]`` (one piece: no spread by frames) unless cutting
    makes the longest piece at most 60% of the pass, since a split by
    candidates of a round of several groups balances about as well.
    """
    observed = [int(t) for t in np.nonzero(np.asarray(obs_index) >= 0)[0]]
    last = observed[-1] if observed else 0
    cuts = [t for t in observed if 0 < t < last]
    if parts < 2 or not cuts:
        return [(0, last)]
    points = [0, *cuts, last]
    # longest[k][j]: the shortest possible longest piece covering points[0..j] with k pieces
    inf = float("inf")
    longest = [[inf] * len(points) for _ in range(parts + 1)]
    choice = [[0] * len(points) for _ in range(parts + 1)]
    longest[0][0] = 0
    for k in range(1, parts + 1):
        for j in range(1, len(points)):
            for i in range(j):
                value = max(longest[k - 1][i], points[j] - points[i])
                if value < longest[k][j]:
                    longest[k][j], choice[k][j] = value, i
    k = min(range(1, parts + 1), key=lambda k: (longest[k][-1], k))
    if longest[k][-1] > 0.6 * last:
        return [(0, last)]
    pieces, j = [], len(points) - 1
    while k:
        i = choice[k][j]
        pieces.append((points[i], points[j]))
        j, k = i, k - 1
    return pieces[::-1]


def fold_pieces(obs_index: np.ndarray, lanes: int) -> list[tuple[int, int]]:
    """The two halves of the fitting pass, which a group of ``lanes`` float64 candidates can run
    side by side in ``2 * lanes`` lanes (:meth:`CUDABackend._evaluate_folded`), or ``[]``.

    Frame 0 must be unobserved (the first half starts from the prior), the
    middle frame observed (the second starts from its snapshot), both halves
    must see the same observed frames relative to their start, and two copies
    must fit a warp. The benchmark schedule {T/2, T} gives [(0, T/2), (T/2, T)].
    (Where four equal pieces would qualify, so do the two halves.)
    """
    obs = np.asarray(obs_index)
    observed = np.nonzero(obs >= 0)[0]
    if observed.size < 2 or obs[0] >= 0 or WARP % (2 * lanes):
        return []
    last = int(observed[-1])
    half = last // 2
    if last % 2 or obs[half] < 0 or not np.array_equal(obs[1:half + 1] >= 0, obs[half + 1:last + 1] >= 0):
        return []
    return [(0, half), (half, last)]


def deal_candidates(n_cand: int, lanes: int, parts: int) -> list[np.ndarray]:
    """The indices of ``n_cand`` candidates dealt to ``parts`` devices in whole groups of ``lanes``,
    group g to device g mod ``parts`` (an empty array where there are fewer groups than parts).

    Dealt rather than cut into contiguous slices because a group's cost
    follows its rates: a SIR grid's low-beta_i half costs more (fewer
    absorbed vertices), so contiguous halves of the Orkut-sized grid's first
    piece took 2,003 and 1,807 ms on one H100.
    """
    groups = np.arange(n_cand) // lanes
    return [np.flatnonzero(groups % parts == k) for k in range(parts)]
