"""Warm-up: every kernel of a reconstruction compiled (or loaded from Numba's cache) on a tiny
problem, before the timed interval. The pipeline hands :func:`run_every_kernel` to the backend's
``warm_up``, which decides whether it has already run and on which devices."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from .backends.base import Backend
from .fit import FitSettings, fit_rates
from .graph import from_arcs
from .problem import Observations, Problem


def warm_up(backend: Backend, causal: bool = False, fit: bool = True, posteriors: bool = True,
            ready: Callable[[], None] | None = None) -> None:
    """Compile every kernel ``backend`` will run for a reconstruction (with the causal repair's
    when ``causal``, the fit's when ``fit``, and those that form and decode every posterior,
    kept, when ``posteriors``); ``ready``: as :meth:`battus.backends.base.Backend.warm_up` calls it."""
    backend.warm_up(run_every_kernel, causal=causal, fit=fit, posteriors=posteriors, ready=ready)


def tiny_problem() -> Problem:
    """A 3-vertex SIR problem on a directed cycle, for warm-up. It settles at frame 2 of 3
    (:func:`battus.problem.settled_frame`), so the pressures' neutral tail is reached too."""
    graph = from_arcs(np.array([0, 1, 2]), np.array([1, 2, 0]), directed=True, n=3)
    obs = Observations(times=np.array([1, 2]), states=np.array([[1, 1, 0], [2, 1, 1]], dtype=np.uint8))
    return Problem(graph=graph, model="sir", T=3, n0=1, observations=obs)


def run_every_kernel(backend: Backend, causal: bool, fit: bool = True, posteriors: bool = True) -> None:
    """Take ``backend`` through every stage on :func:`tiny_problem`: each kernel compiles (or loads
    from Numba's cache) for the array types of a real run. Numba compiles a kernel whole, so one
    pass reaches every branch; the fit has more candidates than the CUDA backend re-scores in
    float64, so both of its precisions compile, and 81 of them, so that its float32 passes run
    whole group pairs and a lone group (a pass of 64 candidates, then one of 17). The decode that
    keeps no posterior runs for both decoders; the one that keeps them all (``posteriors``, and the
    causal repair, which reads them) only when asked for: on the CPU they are other kernels, whose
    first compilation takes seconds."""
    tiny = tiny_problem()
    prep = backend.prepare(tiny, fit)
    if fit:
        fit_rates(backend, prep, tiny, FitSettings(grid_points=9, refine_points=2, refine_rounds=1))
    for reset in (False, True):
        rho = backend.pressures(prep, tiny.prior, 0.1, 0.1, reset)
    for decoder in ("threshold", "map"):
        backend.posterior_hitting_times(prep, rho, tiny.prior, 0.1, True, decoder, 0.65, True, True)
    if posteriors or causal:
        gamma = backend.posteriors(prep, rho, tiny.prior, 0.1, True)
        for decoder in ("threshold", "map"):
            t_inf, t_rec = backend.hitting_times(prep, gamma, decoder, 0.65, True, True)
        if causal:
            backend.causal_repair(prep, gamma, t_inf, t_rec, tiny.T)
    backend.synchronize()
