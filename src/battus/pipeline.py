"""Reconstruction driver: fit (optional) -> mean-field pressures -> forward-backward -> decode.

Each stage runs on the chosen backend (:mod:`battus.backends`); the fit
search lives in :mod:`battus.fit`, decoding and the causal repair in
:mod:`battus.decode`.

Battus and Battus-Z are presets of one :class:`Options`; every ablation of
the paper is a field, not a copy of the pipeline.
"""

from __future__ import annotations

import functools
import math
import statistics
import time
from collections.abc import Sequence

import numpy as np

from .backends import Backend, Prepared, Started, open_backend
from .decode import decode, states_from_hitting_times
from .fit import fit_rates
from .options import DECODERS, DEFAULT_RATES, METHODS, FitSettings, Options, method_options
from .problem import Problem, Reconstruction
from .warmup import warm_up

# the presets and options live in the numba-free battus.options; re-exported for library users
__all__ = ["DECODERS", "DEFAULT_RATES", "METHODS", "FitSettings", "Options", "method_options", "reconstruct"]


def warm_up_for(options: Options, keep_posteriors: bool = False):
    """The warm-up a reconstruction under ``options`` needs (the kernels it runs, compiled or
    loaded, and no others), as :func:`battus.backends.start_backend` takes it."""
    return functools.partial(warm_up, causal=options.causal, fit=options.fit, posteriors=keep_posteriors)


def reconstruct(problem: Problem, options: Options, backend: Backend | str = "cpu", keep_posteriors: bool = False,
                progress=None, repeats: int = 1, repeat_seconds: float = math.inf,
                devices: Sequence[int] | None = None, started: Started | None = None) -> Reconstruction:
    """Reconstruct the full history of ``problem`` from its observations alone.

    ``algorithm_seconds`` excludes compilation (a warm-up on a tiny problem
    first, recorded as ``extras["warmup_seconds"]``) and the upload. With
    ``repeats > 1`` the algorithm runs again, up to ``repeats`` times in all,
    while the runs so far have taken less than ``repeat_seconds``, and the
    median interval is recorded (every run in ``extras["algorithm_seconds_runs"]``):
    the first run after warm-up still pays for cold caches and thread start-up.
    The reconstruction is deterministic, so every run gives the same history.

    ``devices`` (with ``backend`` given by name): the CUDA devices of the CUDA
    backend; several spread the rate fit over those GPUs, with the same result
    as one. A backend given by name is chosen, warmed up and given the problem
    by :func:`battus.backends.open_backend` (with ``auto``, a graph too large
    for the GPU falls back to the CPU there) and closed (its fitting workers
    stopped) before returning. ``started`` (with ``backend`` given by name): that
    backend already being chosen and warmed up, :func:`battus.backends.start_backend`
    with :func:`warm_up_for` in another thread (the CLI starts it while it reads
    the problem), and the problem is uploaded beside the rest of that warm-up;
    ``warmup_seconds`` then records what remained of the warm-up, and the upload.
    """
    options.validate()
    if repeats < 1:
        raise ValueError("repeats must be at least 1")
    say = progress or (lambda msg: None)
    warm = warm_up_for(options, keep_posteriors)
    # compilation stays outside the algorithm interval and is recorded on its own
    warm_started = time.perf_counter()
    if isinstance(backend, str):
        backend, prep = open_backend(backend, devices, problem, warm, say, started, options.fit)
        owned = True
    else:
        if devices is not None or started is not None:
            raise ValueError("devices and started go with a backend given by name; a Backend object has its own")
        warm(backend)
        prep, owned = backend.prepare(problem, options.fit), False
    try:
        return _reconstruct(problem, options, backend, prep, time.perf_counter() - warm_started, say,
                            keep_posteriors, repeats, repeat_seconds)
    finally:
        if owned:
            backend.close()


def _reconstruct(problem: Problem, options: Options, backend: Backend, prep: Prepared, warmup_seconds: float,
                 say, keep_posteriors: bool, repeats: int, repeat_seconds: float) -> Reconstruction:
    backend.synchronize()
    runs: list[float] = []
    while True:
        result = None  # free the previous run's arrays before the next run allocates its own
        elapsed, result = _run_once(backend, prep, problem, options, say if not runs else None, keep_posteriors)
        runs.append(elapsed)
        if len(runs) >= repeats or sum(runs) >= repeat_seconds:
            break
    beta_i, beta_r, trace, gamma, t_inf, t_rec, extras = result
    t_inf = backend.to_host(t_inf)
    t_rec = backend.to_host(t_rec)
    # finite: decode() refused rates that leave any posterior undefined
    posteriors = backend.to_host(gamma).astype(np.float32) if keep_posteriors else None
    timing = {"warmup_seconds": warmup_seconds}
    if repeats > 1:
        timing["algorithm_seconds_runs"] = runs
    return Reconstruction(
        states=states_from_hitting_times(t_inf, t_rec, problem.T),
        t_inf=t_inf,
        t_rec=t_rec,
        beta_i=float(beta_i),
        beta_r=float(beta_r),
        params=options.as_dict(),
        backend=backend.name,
        device=backend.device,
        algorithm_seconds=statistics.median(runs),
        posteriors=posteriors,
        fit_trace=trace,
        extras={**extras, **timing},
    )


def _run_once(backend: Backend, prep, problem: Problem, options: Options, progress,
              keep_posteriors: bool = False) -> tuple[float, tuple]:
    """One timed pass of the algorithm (fit + inference + decode, after upload and warm-up):
    CUDA events on the GPU, the host clock on the CPU. The posteriors are returned (else None)
    when kept or needed by the causal repair."""
    say = progress or (lambda msg: None)
    started = backend.start_interval()
    trace: list = []
    if options.fit:
        say("fitting rates")
        beta_i, beta_r, trace = fit_rates(backend, prep, problem, options.fit_settings, progress=progress)
    else:
        beta_i, beta_r = options.beta_i, options.beta_r
    if problem.model != "sir":
        beta_r = 0.0
    say(f"inference at beta_i={beta_i:.6g}, beta_r={beta_r:.6g}")
    rho = backend.pressures(prep, problem.prior, beta_i, beta_r, options.reset)
    gamma, t_inf, t_rec, extras = decode(backend, prep, problem, rho, beta_i, beta_r, options, keep_posteriors)
    elapsed = backend.stop_interval(started)
    return elapsed, (beta_i, beta_r, trace, gamma, t_inf, t_rec, extras)
