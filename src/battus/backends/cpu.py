"""The Numba CPU backend (float64 state); kernels in :mod:`battus.kernels` ``*_cpu``."""

from __future__ import annotations

import platform
import time

import numpy as np

from ..graph import Graph
from ..kernels import causal_cpu, fit_cpu, infer_cpu, simulate_cpu
from ..problem import Problem, segments, settled_frame
from .base import Prepared, needs_warm_up


class CPUBackend:
    """Numba CPU backend, float64 state, host arrays throughout."""

    name = "cpu"
    max_causal_frames = causal_cpu.MAX_T

    def __init__(self) -> None:
        import numba

        self.device = f"{platform.processor() or platform.machine()} x{numba.get_num_threads()} threads"
        self._warmed: set[tuple[bool, bool, bool]] = set()  # the (causal, fit, posteriors) warm_up has run with

    def prepare(self, problem: Problem, fit: bool = True) -> Prepared:  # fitting needs nothing more here
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
            settled_frame=settled_frame(obs.times, obs.states, problem.T),
        )

    def synchronize(self) -> None:
        return None

    def start_interval(self) -> float:
        return time.perf_counter()

    def stop_interval(self, start: float) -> float:
        return time.perf_counter() - start

    def warm_up(self, exercise, causal: bool = False, fit: bool = True, posteriors: bool = True,
                ready=None) -> None:
        """Load every kernel (compiled or from Numba's cache) outside the timed interval; a problem
        may be prepared beside it from the start (:meth:`prepare` runs no kernel)."""
        if ready is not None:
            ready()
        if needs_warm_up(self._warmed, causal, fit, posteriors):
            exercise(self, causal, fit, posteriors)
            self._warmed.add((causal, fit, posteriors))

    def loglik_batch(self, prep: Prepared, prior, beta_i: np.ndarray, beta_r: np.ndarray) -> np.ndarray:
        return fit_cpu.segmented_loglik(
            prep.indptr, prep.indices, np.asarray(prior, dtype=np.float64),
            np.ascontiguousarray(beta_i, dtype=np.float64), np.ascontiguousarray(beta_r, dtype=np.float64),
            prep.T, prep.obs_index, prep.obs_states,
        )

    def best_candidate(self, prep: Prepared, prior, beta_i: np.ndarray, beta_r: np.ndarray, norm: float,
                       chunk: int, scratch: dict) -> tuple[int, float]:
        values = np.empty(beta_i.shape[0])
        for start in range(0, beta_i.shape[0], chunk):
            stop = start + chunk
            values[start:stop] = self.loglik_batch(prep, prior, beta_i[start:stop], beta_r[start:stop])
        values /= norm
        best = int(np.argmax(values))
        return best, float(values[best])

    def pressures(self, prep: Prepared, prior, beta_i: float, beta_r: float, reset: bool) -> np.ndarray:
        rho = np.empty((prep.T + 1, prep.n))
        infer_cpu.mean_field_pressures(
            prep.indptr, prep.indices, np.asarray(prior, dtype=np.float64), float(beta_i),
            float(beta_r), prep.T, prep.obs_index, prep.obs_states, bool(reset), prep.settled_frame, rho,
        )
        return rho

    def posteriors(self, prep: Prepared, rho, prior, beta_r: float, backward: bool) -> np.ndarray:
        gamma = np.empty((3, prep.T + 1, prep.n))
        infer_cpu.forward_backward(
            rho, float(beta_r), np.asarray(prior, dtype=np.float64), prep.seg_left, prep.seg_right,
            prep.obs_index, prep.obs_states, bool(backward), gamma,
        )
        return gamma

    def hitting_times(self, prep: Prepared, gamma, decoder: str, tau: float, with_recovery: bool,
                      projection: bool) -> tuple[np.ndarray, np.ndarray]:
        t_inf = np.empty(prep.n, dtype=np.int64)
        t_rec = np.empty(prep.n, dtype=np.int64)
        if decoder == "threshold":
            infer_cpu.threshold_hitting_times(gamma, float(tau), bool(with_recovery), t_inf, t_rec)
        else:
            infer_cpu.map_hitting_times(gamma, bool(with_recovery), t_inf, t_rec)
        return self._projected(prep, t_inf, t_rec, projection)

    def posterior_hitting_times(self, prep: Prepared, rho, prior, beta_r: float, backward: bool, decoder: str,
                                tau: float, with_recovery: bool, projection: bool) -> tuple[np.ndarray, np.ndarray]:
        t_inf = np.empty(prep.n, dtype=np.int64)
        t_rec = np.empty(prep.n, dtype=np.int64)
        infer_cpu.forward_backward_hitting_times(
            rho, float(beta_r), np.asarray(prior, dtype=np.float64), prep.seg_left, prep.seg_right,
            prep.obs_index, prep.obs_states, bool(backward), decoder != "threshold", float(tau), bool(with_recovery),
            t_inf, t_rec,
        )
        return self._projected(prep, t_inf, t_rec, projection)

    @staticmethod
    def _projected(prep: Prepared, t_inf: np.ndarray, t_rec: np.ndarray, projection: bool) -> tuple:
        if projection:
            infer_cpu.project_hitting_times(prep.obs_times, prep.obs_states, t_inf, t_rec)
        return t_inf, t_rec

    def causal_repair(self, prep: Prepared, gamma, t_inf, t_rec, T: int) -> tuple:
        return causal_cpu.causal_repair_host(prep, gamma, t_inf, t_rec, T)

    def simulate(self, graph: Graph, states: np.ndarray, beta_i: float, beta_r: float, seed: int,
                 same_step_recovery: bool) -> np.ndarray:
        return simulate_cpu.simulate(graph.indptr, graph.indices, states, beta_i, beta_r, seed, same_step_recovery)

    def to_host(self, array) -> np.ndarray:
        return np.asarray(array)

    def close(self) -> None:
        """Nothing runs beside this process."""
