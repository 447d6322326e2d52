"""The Numba-CUDA backend: every stage on the device, data resident between stages.

Same primitives and semantics as :class:`battus.backends.cpu.CPUBackend`; only
the decoded hitting times (and posteriors, when asked) come back to the host.
This module holds the interface and the inference launches; the upload is
:mod:`.layout`'s, the memory accounting :mod:`.memory`'s, the fit
:mod:`.passes`' (one device) and :mod:`.rounds`' (a round, over the devices),
the fitting workers :mod:`.worker_pipe`'s.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Sequence
from dataclasses import replace

import numpy as np

from ...graph import Graph
from ...kernels import causal_cuda, infer_cuda, simulate_cuda
from ...kernels.cuda_common import BLOCK, WARP, blocks, cuda, simulated
from ...problem import Problem
from ..base import needs_warm_up
from .causal_repair import causal_repair_device
from .layout import CUDAPrepared, upload
from .memory import DeviceMemory
from .passes import FitPasses
from .rounds import FitRounds
from .settings import CUDASettings
from .worker_pipe import WorkerPool


class DevicePressures:
    """Log-pressures ``L[t, u] = log rho[t, u]`` (float32, device); ``to_host`` gives rho."""

    def __init__(self, log_rho) -> None:
        self.log_rho = log_rho

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self.log_rho.shape)


class CUDABackend:
    """Numba-CUDA backend: float32 device state, float64 accumulators.

    ``settings``: the tuning numbers (:class:`CUDASettings`, the defaults when
    None). ``devices``: CUDA device ordinals; the first runs everything here,
    and a fit spreads its rounds over the others too, one worker process each
    (started by a fit's :meth:`warm_up`), with the results of one device.
    """

    name = "cuda"
    max_causal_frames = causal_cuda.MAX_T

    def __init__(self, settings: CUDASettings | None = None, devices: Sequence[int] | None = None) -> None:
        self.settings = settings if settings is not None else CUDASettings()
        self.devices = tuple(int(d) for d in devices) if devices else ()
        if any(d < 0 for d in self.devices):
            raise ValueError(f"devices must be CUDA device ordinals >= 0, got {list(self.devices)}")
        self.simulated = simulated()
        if self.devices and not self.simulated:
            cuda.select_device(self.devices[0])
        # The simulator runs every thread as a Python thread: small blocks keep tests fast.
        self.threads = WARP if self.simulated else BLOCK
        self.ordinal = None  # the CUDA device this process runs on
        if self.simulated:
            self.device = "CUDA simulator"
        else:
            dev = cuda.get_current_device()
            self.ordinal = dev.id
            name = dev.name.decode() if isinstance(dev.name, bytes) else str(dev.name)
            self.device = f"{name} (cc {dev.compute_capability[0]}.{dev.compute_capability[1]})"
        if len(self.devices) > 1:
            self.device += f"; fit over CUDA devices {', '.join(map(str, self.devices))}"
        self.memory = DeviceMemory(self.device, self.simulated)
        self.passes = FitPasses(self.memory, self.settings, self.threads)
        self.pool = WorkerPool()
        self.rounds = FitRounds(self.passes, self.pool)
        self._warmed: set[tuple[bool, bool, bool]] = set()  # the (causal, fit, posteriors) warm_up has run with
        # held by a warm-up, which may be starting the fitting workers: a problem prepared beside it
        # in another thread waits for it before deciding whether the workers hold a copy
        self._warming = threading.RLock()

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

    def warm_up(self, exercise, causal: bool = False, fit: bool = True, posteriors: bool = True,
                ready=None) -> None:
        """Compile every kernel on a tiny problem, outside the timed interval.

        With several ``devices`` a warm-up for a fit also starts one worker
        process per extra device (each compiles while this one does); problems
        prepared after that are held by every worker, and their fitting rounds
        are spread over all devices. ``ready()`` is called once the workers are
        started: a problem prepared in another thread from then on is uploaded
        beside this warm-up and handed to the workers after it.
        """
        with self._warming:
            starting = fit and len(self.devices) > 1 and not self.pool.workers
            if starting:
                self.pool.start(list(self.devices[1:]), self.settings)
            if ready is not None:
                ready()
            self._warm_up(exercise, causal, fit, posteriors, starting)

    def _warm_up(self, exercise, causal: bool, fit: bool, posteriors: bool, starting: bool) -> None:
        try:
            # the simulator compiles nothing
            if needs_warm_up(self._warmed, causal, fit, posteriors) and not self.simulated:
                spread, self.pool.spread = self.pool.spread, False  # warm up this device alone
                try:
                    # a fit's group-pair step has two kernels, picked by the graph's work items
                    # (two_lane_max_arcs): the tiny problem takes each in turn
                    for forced in ((0.0, math.inf) if fit else (self.settings.two_lane_max_arcs,)):
                        self.passes.settings = replace(self.settings, two_lane_max_arcs=forced)
                        exercise(self, causal, fit, posteriors)
                finally:
                    self.pool.spread = spread
                    self.passes.settings = self.settings
                self._warmed.add((causal, fit, posteriors))
        finally:
            if starting:
                self.pool.started()

    def close(self) -> None:
        """Stop the fitting workers (also done when the backend is garbage-collected or at exit)."""
        self.pool.close()

    def prepare(self, problem: Problem, fit: bool = True) -> CUDAPrepared:
        """Upload graph and observations and build the degree bins, and for a ``fit`` the work items
        (outside the timed interval), after checking that they fit; with fitting workers, each
        prepares a copy too."""
        self._bind()
        prep = upload(self.memory, problem, self.settings, self.threads, fit)
        if fit:
            with self._warming:  # a warm-up in another thread decides on the workers first
                if self.pool.spread:
                    self.pool.prepare(prep, problem)
        return prep

    def _bind(self) -> None:
        """Make this backend's device the current one of the calling thread: a CUDA context is
        current per thread, and a backend made and warmed up in one thread is given its problem
        in another (where Numba would otherwise take device 0)."""
        if self.simulated:
            return
        from numba.cuda.cudadrv.driver import driver

        with driver.get_active_context() as active:
            if active and active.devnum == self.ordinal:
                return
        cuda.select_device(self.ordinal)

    def to_host(self, array) -> np.ndarray:
        if isinstance(array, DevicePressures):
            return np.exp(array.log_rho.copy_to_host().astype(np.float64))
        if isinstance(array, np.ndarray):
            return array
        return array.copy_to_host()

    # -- mean-field pressures

    def pressure_step(self, prep: CUDAPrepared, f_i, beta32, log_rho_t, pinned) -> None:
        """One frame's log-pressures; ``pinned`` is the snapshot of the last reset (its I and R
        vertices take L = 0 without gathering), or None."""
        tpb = self.threads
        pinning = pinned is not None
        pinned = pinned if pinning else prep.obs_states[0]  # a typed placeholder, never read
        b = prep.bins
        grid = b["n_thread_blocks"] + b["n_warp_blocks"] + b["n_hub_chunks"]
        if grid:
            infer_cuda.pressure_binned[grid, tpb](
                prep.indptr, prep.gather_indices, f_i, beta32, log_rho_t, b["thread_verts"],
                b["warp_verts"], b["hub_start"], b["hub_end"], b["hub_vertex"], b["partial"],
                b["n_thread_blocks"], b["n_warp_blocks"], pinned, pinning,
            )
        if b["n_hubs"]:
            infer_cuda.finish_hubs[blocks(b["n_hubs"], tpb), tpb](b["hub_verts"], b["hub_ptr"], b["partial"],
                                                                  log_rho_t)

    def pressures(self, prep: CUDAPrepared, prior, beta_i: float, beta_r: float,
                  reset: bool) -> DevicePressures:
        """Mean-field recursion (Eq. 3) keeping every frame's log-pressure on the device.

        The update is a launch of its own: fused into the pull kernels, its
        float64 arithmetic raised their register use on every step, also the
        steps without it. With ``reset``, the vertices the last reset put in I
        or R are pinned: L = 0, not gathered, as on the CPU
        (:func:`battus.kernels.infer_cpu.mean_field_pressures`); after the
        settled frame every frame is L = 0 and the recursion stops.
        """
        n, T = prep.n, prep.T
        tpb = self.threads
        grid = blocks(n, tpb)
        prior = np.asarray(prior, dtype=np.float64)
        log_rho = self.memory.alloc((T + 1, n), np.float32)
        f_s = self.memory.alloc(n, np.float32)
        f_i = self.memory.alloc(n, np.float32)
        obs_index = prep.host_obs_index
        infer_cuda.fill_state[grid, tpb](np.float32(prior[0]), np.float32(prior[1]), f_s, f_i)
        beta32 = np.float32(beta_i)
        pinned = None
        for t in range(T + 1):
            if t > prep.settled_frame:  # every vertex pinned from here on: neutral, nothing to propagate
                rest = log_rho[t:]
                infer_cuda.zero_rows[blocks(rest.size, tpb), tpb](rest.reshape(rest.size))
                break
            if t == 0:  # the pressure of frame 0 always comes from the uniform prior
                infer_cuda.uniform_pressure[grid, tpb](prep.indptr, beta32, np.float32(prior[1]), log_rho[0])
            else:
                self.pressure_step(prep, f_i, beta32, log_rho[t], pinned)
            if t < T:
                do_reset = bool(reset and obs_index[t] >= 0)
                row = prep.obs_states[obs_index[t]] if do_reset else prep.obs_states[0]
                infer_cuda.mean_field_update[grid, tpb](log_rho[t], float(beta_r), f_s, f_i, prep.gather_id, row,
                                                        do_reset)
                if do_reset:
                    pinned = row
        return DevicePressures(log_rho)

    # -- forward-backward and decoding

    def posteriors(self, prep: CUDAPrepared, rho: DevicePressures, prior, beta_r: float, backward: bool):
        gamma = self.memory.alloc((3, prep.T + 1, prep.n), np.float32)
        prior_d = cuda.to_device(np.asarray(prior, dtype=np.float64))
        infer_cuda.forward_backward[blocks(prep.n, self.threads), self.threads](
            rho.log_rho, float(beta_r), prior_d, prep.seg_left, prep.seg_right, prep.obs_index,
            prep.obs_states, bool(backward), gamma,
        )
        return gamma

    def hitting_times(self, prep: CUDAPrepared, gamma, decoder: str, tau: float, with_recovery: bool,
                      projection: bool):
        t_inf = self.memory.alloc(prep.n, np.int64)
        t_rec = self.memory.alloc(prep.n, np.int64)
        grid, tpb = blocks(prep.n, self.threads), self.threads
        if decoder == "threshold":
            infer_cuda.threshold_hitting_times[grid, tpb](gamma, float(tau), bool(with_recovery), t_inf, t_rec)
        else:
            infer_cuda.map_hitting_times[grid, tpb](gamma, bool(with_recovery), t_inf, t_rec)
        if projection:
            infer_cuda.project_hitting_times[grid, tpb](prep.obs_times, prep.obs_states, t_inf, t_rec)
        return t_inf, t_rec

    def posterior_hitting_times(self, prep: CUDAPrepared, rho: DevicePressures, prior, beta_r: float,
                                backward: bool, decoder: str, tau: float, with_recovery: bool, projection: bool):
        """posteriors, then hitting_times: the device holds the posteriors in float32, and its
        forward-backward, a thread per vertex, has no block of vertices to decode in a small buffer."""
        gamma = self.posteriors(prep, rho, prior, beta_r, backward)
        return self.hitting_times(prep, gamma, decoder, tau, with_recovery, projection)

    # -- fitting

    def loglik_batch(self, prep: CUDAPrepared, prior, beta_i: np.ndarray, beta_r: np.ndarray) -> np.ndarray:
        """Unnormalised Eq. 4 of each candidate (float32 state, float64 sums), all in one pass on
        this device: a fitting round's values before the float64 re-score."""
        n_cand = np.shape(beta_i)[0]
        return self.passes.evaluate(prep, prior, beta_i, beta_r, "float32", n_cand, {})

    def best_candidate(self, prep: CUDAPrepared, prior, beta_i: np.ndarray, beta_r: np.ndarray, norm: float,
                       chunk: int, scratch: dict) -> tuple[int, float]:
        """Arg-max of Eq. 4 / ``norm`` over the candidates, the first on ties
        (:meth:`battus.backends.cuda.rounds.FitRounds.best_candidate`)."""
        return self.rounds.best_candidate(prep, prior, beta_i, beta_r, norm, chunk, scratch)

    # -- causal repair and simulation

    def causal_repair(self, prep: CUDAPrepared, gamma, t_inf, t_rec, T: int) -> tuple:
        return causal_repair_device(prep, gamma, t_inf, t_rec, T)

    def simulate(self, graph: Graph, states: np.ndarray, beta_i: float, beta_r: float, seed: int,
                 same_step_recovery: bool) -> np.ndarray:
        return simulate_cuda.simulate(graph.indptr, graph.indices, states, beta_i, beta_r, seed, same_step_recovery)
