"""What a backend is: the :class:`Backend` protocol that ``cpu`` and ``cuda`` both implement in full.

A backend receives the graph and observations once (:meth:`Backend.prepare`,
the upload, outside the timed interval) and then offers the primitives the
stage drivers chain: :mod:`battus.fit` asks for the best of a batch of rate
candidates, :mod:`battus.pipeline` for mean-field pressures and forward-backward
posteriors, :mod:`battus.decode` for hitting times and the causal repair,
:mod:`battus.simulate` for a simulated history. Intermediate arrays stay in
the backend's own memory (device arrays on CUDA); only hitting times, and
posteriors when asked, come back to the host through :meth:`Backend.to_host`.
The drivers never ask which backend they hold.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from ..graph import Graph
from ..problem import Problem


@dataclass
class Prepared:
    """Arrays of one problem as held by a backend (host arrays on the CPU, device arrays on CUDA)."""

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
    # pressures after this frame are neutral, not computed (problem.settled_frame)
    settled_frame: int


class Backend(Protocol):
    """The primitives every backend implements; array layouts are in :mod:`battus.kernels`."""

    name: str
    device: str
    # causal repair packs hitting times into narrow fields: the most frames it supports
    max_causal_frames: int

    def warm_up(self, exercise: Callable[[Backend, bool, bool, bool], None], causal: bool = False,
                fit: bool = True, posteriors: bool = True, ready: Callable[[], None] | None = None) -> None:
        """Compile (or load from Numba's cache) every kernel a reconstruction will use, the causal
        repair's too when ``causal`` and the fit's when ``fit``, so that the timed interval holds no
        compilation (and a run that does not fit does not pay for loading the fit's kernels).
        ``posteriors``: also those that form and decode every posterior, kept (``--posteriors``).
        ``exercise(backend, causal, fit, posteriors)`` runs those kernels on a tiny problem
        (:func:`battus.warmup.run_every_kernel`, which the caller hands in). ``ready()`` is called
        as soon as :meth:`prepare` may run in another thread beside the rest of this warm-up, with
        the same result as after it."""

    def prepare(self, problem: Problem, fit: bool = True) -> Prepared:
        """Hold graph and observations in the backend's memory, with what fitting rates needs when
        ``fit`` (:func:`battus.fit.fit_rates` on a problem prepared without it is an error). May be
        called from another thread than the one that made the backend, and beside a warm-up
        that has called its ``ready``."""

    def synchronize(self) -> None:
        """Wait until all queued work is done."""

    def start_interval(self) -> Any:
        """Open the timed algorithm interval."""

    def stop_interval(self, start: Any) -> float:
        """Seconds since :meth:`start_interval`, once the queued work is done."""

    def loglik_batch(self, prep: Prepared, prior, beta_i: np.ndarray, beta_r: np.ndarray) -> np.ndarray:
        """Unnormalised Eq. 4 of each candidate (beta_i[c], beta_r[c]), on the host."""

    def best_candidate(self, prep: Prepared, prior, beta_i: np.ndarray, beta_r: np.ndarray, norm: float,
                       chunk: int, scratch: dict) -> tuple[int, float]:
        """(index, objective) of the candidate that maximises Eq. 4 / ``norm``, the first on ties.

        ``chunk`` bounds the candidates evaluated in one pass; ``scratch`` is the
        caller's: buffers kept there are reused by later rounds of one search.
        """

    def pressures(self, prep: Prepared, prior, beta_i: float, beta_r: float, reset: bool) -> Any:
        """Mean-field pressures of every frame (Eq. 3)."""

    def posteriors(self, prep: Prepared, rho, prior, beta_r: float, backward: bool) -> Any:
        """Forward-backward posteriors (3, T+1, n) over frozen pressures."""

    def hitting_times(self, prep: Prepared, gamma, decoder: str, tau: float, with_recovery: bool,
                      projection: bool) -> tuple[Any, Any]:
        """Threshold or MAP decoding to hitting times (T+1 = never), projected onto the observations."""

    def posterior_hitting_times(self, prep: Prepared, rho, prior, beta_r: float, backward: bool, decoder: str,
                                tau: float, with_recovery: bool, projection: bool) -> tuple[Any, Any]:
        """:meth:`hitting_times` of :meth:`posteriors`, the same values, for a run that keeps no
        posteriors: the backend need not hold all of them at once."""

    def causal_repair(self, prep: Prepared, gamma, t_inf, t_rec, T: int) -> tuple[Any, Any, dict]:
        """Graph-causal repair of decoded hitting times: (t_inf, t_rec, counts); inputs unchanged."""

    def simulate(self, graph: Graph, states: np.ndarray, beta_i: float, beta_r: float, seed: int,
                 same_step_recovery: bool) -> np.ndarray:
        """The (T+1, n) uint8 history grown from row 0 of ``states`` (:mod:`battus.simulate`)."""

    def to_host(self, array) -> np.ndarray:
        """A backend array as a host numpy array."""

    def close(self) -> None:
        """Stop whatever the backend runs beside this process (the CUDA backend's fitting workers)."""


def needs_warm_up(warmed: set[tuple[bool, bool, bool]], causal: bool, fit: bool, posteriors: bool) -> bool:
    """Whether no earlier warm-up (a set of its ``(causal, fit, posteriors)``) covered these kernels."""
    return not any((c or not causal) and (f or not fit) and (p or not posteriors) for c, f, p in warmed)
