"""Reconstruction driver: fit (optional) -> mean-field pressures -> forward-backward -> decode.

Each stage runs on the chosen backend (:mod:`battus.backends`); the fit
search lives in :mod:`battus.fit`, decoding and the causal repair in
:mod:`battus.decode`.

Battus and Battus-Z are presets of one :class:`Options`; every ablation of
the paper is a field, not a copy of the pipeline.
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Sequence

import numpy as np

from .backends import Backend, get_backend
from .decode import decode, states_from_hitting_times
from .errors import InputError
from .fit import fit_rates
from .options import DECODERS, DEFAULT_RATES, METHODS, FitSettings, Options, method_options
from .problem import Problem, Reconstruction
from .warmup import warm_up

# the presets and options live in the numba-free battus.options; re-exported for library users
__all__ = ["DECODERS", "DEFAULT_RATES", "METHODS", "FitSettings", "Options", "method_options", "reconstruct"]


def reconstruct(problem: Problem, options: Options, backend: Backend | str = "cpu", keep_posteriors: bool = False,
                progress=None, repeats: int = 1, repeat_seconds: float = math.inf,
                devices: Sequence[int] | None = None) -> Reconstruction:
    """Reconstruct the full history of ``problem`` from its observations alone.

    ``algorithm_seconds`` excludes compilation (a warm-up on a tiny problem
    first, recorded as ``extras["warmup_seconds"]``) and the upload. With
    ``repeats > 1`` the algorithm runs again, up to ``repeats`` times in all,
    while the runs so far have taken less than ``repeat_seconds``, and the
    median interval is recorded (every run in ``extras["algorithm_seconds_runs"]``):
    the first run after warm-up still pays for cold caches and thread start-up.
    The reconstruction is deterministic, so every run gives the same history.

    ``devices`` (with ``backend`` given by name): the CUDA devices of the CUDA
    backend (:func:`battus.backends.get_backend`); several spread the rate fit
    over those GPUs, with the same result as one. With ``auto``, a graph too
    large for the GPU falls back to the CPU whatever ``devices`` asked for.
    A backend given by name is made here and closed (its fitting workers
    stopped) before returning.
    """
    options.validate()
    if repeats < 1:
        raise ValueError("repeats must be at least 1")
    auto = backend == "auto"
    if not isinstance(backend, str):
        if devices is not None:
            raise ValueError("devices go with a backend given by name; a Backend object has its own")
        return _reconstruct(problem, options, backend, keep_posteriors, progress, repeats, repeat_seconds)
    backend = get_backend(backend, devices=devices)
    try:
        return _reconstruct(problem, options, backend, keep_posteriors, progress, repeats, repeat_seconds,
                            auto=auto, devices=devices)
    finally:
        backend.close()


def _reconstruct(problem: Problem, options: Options, backend: Backend, keep_posteriors: bool, progress,
                 repeats: int, repeat_seconds: float, auto: bool = False,
                 devices: Sequence[int] | None = None) -> Reconstruction:
    say = progress or (lambda msg: None)
    # compilation stays outside the algorithm interval and is recorded on its own
    warm_started = time.perf_counter()
    try:
        warm_up(backend, causal=options.causal, fit=options.fit)
        prep = backend.prepare(problem)
    except InputError as exc:
        if not (auto and exc.field == "device memory"):
            raise
        # `auto` means the GPU when it can: a graph too large for its free memory runs on the CPU
        # (with one thread pool, whatever --devices asked for)
        unused = f"; --devices {','.join(map(str, devices))} unused" if devices and len(devices) > 1 else ""
        say(f"{exc.message}; reconstructing on the CPU instead (--backend auto{unused})")
        backend.close()
        backend = get_backend("cpu")
        warm_up(backend, causal=options.causal, fit=options.fit)
        prep = backend.prepare(problem)
    warmup_seconds = time.perf_counter() - warm_started
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
    prior = problem.prior
    rho = backend.pressures(prep, prior, beta_i, beta_r, options.reset)
    if keep_posteriors or options.causal:
        gamma = backend.posteriors(prep, rho, prior, beta_r, options.backward)
        t_inf, t_rec, extras = decode(backend, prep, problem, gamma, options.decoder, options.tau,
                                      options.projection, options.causal)
    else:  # nothing else reads the posteriors: the backend may decode them as it forms them
        gamma, extras = None, {}
        t_inf, t_rec = backend.posterior_hitting_times(prep, rho, prior, beta_r, options.backward, options.decoder,
                                                       options.tau, problem.model == "sir", options.projection)
    elapsed = backend.stop_interval(started)
    return elapsed, (beta_i, beta_r, trace, gamma, t_inf, t_rec, extras)
