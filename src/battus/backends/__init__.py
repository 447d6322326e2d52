"""Backends behind one interface: ``cpu`` (Numba) and ``cuda`` (Numba-CUDA).

A backend receives the graph and observations once (:meth:`prepare`, the
upload, outside the timed interval) and then offers the primitives the
drivers chain: batched likelihood for fitting, mean-field pressures,
forward-backward posteriors and decoding to hitting times. Intermediate arrays
stay in the backend's own memory (device arrays on CUDA); only hitting times,
and posteriors when asked, come back to the host.
"""

from __future__ import annotations

import os
import platform
import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from .errors import InputError
from .kernels import cpu as K
from .problem import Problem, segments


@dataclass
class Prepared:
    """Arrays of one problem as held by a backend."""

    n: int
    T: int
    indptr: Any
    indices: Any
    obs_times: Any
    obs_states: Any
    obs_index: Any
    seg_left: Any
    seg_right: Any
    host_obs_times: np.ndarray
    host_obs_index: np.ndarray


class CPUBackend:
    """Numba CPU backend, float64 state."""

    name = "cpu"

    def __init__(self) -> None:
        import numba

        self.device = f"{platform.processor() or platform.machine()} x{numba.get_num_threads()} threads"
        self._warm = False

    def prepare(self, problem: Problem) -> Prepared:
        obs = problem.observations
        left, right = segments(obs.times, problem.T)
        obs_index = obs.index(problem.T)
        return Prepared(
            n=problem.n,
            T=problem.T,
            indptr=np.ascontiguousarray(problem.graph.indptr, dtype=np.int64),
            indices=np.ascontiguousarray(problem.graph.indices, dtype=np.int32),
            obs_times=np.ascontiguousarray(obs.times, dtype=np.int64),
            obs_states=np.ascontiguousarray(obs.states, dtype=np.uint8),
            obs_index=obs_index,
            seg_left=left,
            seg_right=right,
            host_obs_times=np.asarray(obs.times, dtype=np.int64),
            host_obs_index=obs_index,
        )

    def synchronize(self) -> None:
        return None

    def start_interval(self) -> float:
        return time.perf_counter()

    def stop_interval(self, start: float) -> float:
        return time.perf_counter() - start

    def warm_up(self) -> None:
        """Load every kernel (compiled or from Numba's cache) outside the timed interval."""
        if self._warm:
            return
        from .graph import from_arcs
        from .problem import Observations, Problem

        graph = from_arcs(np.array([0, 1]), np.array([1, 2]), directed=True, n=3)
        obs = Observations(times=np.array([1, 2]), states=np.array([[1, 1, 0], [2, 1, 1]], dtype=np.uint8))
        tiny = Problem(graph=graph, model="sir", T=2, n0=1, observations=obs)
        prep = self.prepare(tiny)
        self.loglik_batch(prep, tiny.prior, np.array([0.1, 0.2]), np.array([0.1, 0.1]))
        for reset in (False, True):
            rho = self.pressures(prep, tiny.prior, 0.1, 0.1, reset)
        gamma = self.posteriors(prep, rho, tiny.prior, 0.1, True)
        for decoder in ("threshold", "map"):
            self.hitting_times(prep, gamma, decoder, 0.65, True, True)
        self._warm = True

    def loglik_batch(self, prep: Prepared, prior, beta_i: np.ndarray, beta_r: np.ndarray) -> np.ndarray:
        return K.segmented_loglik(
            prep.indptr, prep.indices, np.asarray(prior, dtype=np.float64),
            np.ascontiguousarray(beta_i, dtype=np.float64), np.ascontiguousarray(beta_r, dtype=np.float64),
            prep.T, prep.obs_index, prep.obs_states,
        )

    def pressures(self, prep: Prepared, prior, beta_i: float, beta_r: float, reset: bool) -> np.ndarray:
        rho = np.empty((prep.T + 1, prep.n))
        K.mean_field_pressures(
            prep.indptr, prep.indices, np.asarray(prior, dtype=np.float64), float(beta_i),
            float(beta_r), prep.T, prep.obs_index, prep.obs_states, bool(reset), rho,
        )
        return rho

    def posteriors(self, prep: Prepared, rho, prior, beta_r: float, backward: bool) -> np.ndarray:
        gamma = np.empty((3, prep.T + 1, prep.n))
        K.forward_backward(
            rho, float(beta_r), np.asarray(prior, dtype=np.float64), prep.seg_left, prep.seg_right,
            prep.obs_index, prep.obs_states, bool(backward), gamma,
        )
        return gamma

    def hitting_times(self, prep: Prepared, gamma, decoder: str, tau: float, with_recovery: bool,
                      projection: bool) -> tuple[np.ndarray, np.ndarray]:
        t_inf = np.empty(prep.n, dtype=np.int64)
        t_rec = np.empty(prep.n, dtype=np.int64)
        if decoder == "threshold":
            K.threshold_hitting_times(gamma, float(tau), bool(with_recovery), t_inf, t_rec)
        else:
            K.map_hitting_times(gamma, bool(with_recovery), t_inf, t_rec)
        if projection:
            K.project_hitting_times(prep.obs_times, prep.obs_states, t_inf, t_rec)
        return t_inf, t_rec

    def to_host(self, array) -> np.ndarray:
        return np.asarray(array)


def cuda_available() -> bool:
    if os.environ.get("NUMBA_ENABLE_CUDASIM") == "1":
        return True
    try:
        from numba import cuda

        return bool(cuda.is_available())
    except Exception:
        return False


def get_backend(name: str = "auto"):
    """``cpu``, ``cuda`` or ``auto`` (CUDA when a device is present)."""
    if name not in ("auto", "cpu", "cuda"):
        raise InputError("--backend", "backend", f"unknown backend {name!r} (auto, cpu or cuda)")
    if name == "auto":
        name = "cuda" if (cuda_available() and os.environ.get("NUMBA_ENABLE_CUDASIM") != "1") else "cpu"
    if name == "cpu":
        return CPUBackend()
    if not cuda_available():
        raise InputError("--backend", "backend", "cuda requested but no CUDA device is available")
    from .kernels.cuda import CUDABackend

    return CUDABackend()
