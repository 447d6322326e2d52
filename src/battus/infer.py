"""Reconstruction driver: fit (optional) -> mean-field pressures -> forward-backward -> decode.

Each stage runs on the chosen backend (:mod:`battus.backends`); the fit
search lives in :mod:`battus.fit`, decoding and the causal repair in
:mod:`battus.decode`.

Battus and Battus-Z are presets of one :class:`Options`; every ablation of
the paper is a field, not a copy of the pipeline.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, replace

import numpy as np

from .backends import Backend, get_backend
from .decode import decode, states_from_hitting_times
from .errors import InputError
from .fit import FitSettings, fit_rates
from .problem import Problem, Reconstruction

METHODS = ("battus", "battus-z")
DECODERS = ("threshold", "map")
DEFAULT_RATES = (0.1, 0.1)


@dataclass(frozen=True)
class Options:
    """Every knob of the reconstruction; :func:`method_options` gives the presets."""

    method: str = "battus-z"
    fit: bool = False
    beta_i: float = DEFAULT_RATES[0]
    beta_r: float = DEFAULT_RATES[1]
    reset: bool = False
    backward: bool = True
    decoder: str = "threshold"
    tau: float = 0.65
    projection: bool = True
    causal: bool = False  # graph-causal repair after decoding (Battus-C, battus.causal)
    fit_settings: FitSettings = FitSettings()

    def validate(self, source: str = "options") -> Options:
        if self.method not in METHODS:
            raise InputError(source, "method", f"unknown method {self.method!r} ({', '.join(METHODS)})")
        if self.decoder not in DECODERS:
            raise InputError(source, "decoder", f"unknown decoder {self.decoder!r} ({', '.join(DECODERS)})")
        if not (0.0 < self.tau <= 1.0) or not np.isfinite(self.tau):
            raise InputError(source, "tau", f"tau must lie in (0, 1], got {self.tau}")
        for key in ("beta_i", "beta_r"):
            value = getattr(self, key)
            if not (0.0 <= value <= 1.0) or not np.isfinite(value):
                raise InputError(source, key, f"rate must lie in [0, 1], got {value}")
        fs = self.fit_settings
        if not (0.0 <= fs.lower < fs.upper <= 1.0):
            raise InputError(source, "fit bounds", f"need 0 <= lower < upper <= 1, got [{fs.lower}, {fs.upper}]")
        if fs.grid_points < 2 or fs.refine_points < 2 or fs.refine_rounds < 0 or fs.chunk < 1:
            raise InputError(source, "fit grid", "grid and refinement need >= 2 points, rounds >= 0")
        return self

    def as_dict(self) -> dict:
        d = asdict(self)
        d.update({f"fit_{k}": v for k, v in d.pop("fit_settings").items()})
        return d


def method_options(method: str, **overrides) -> Options:
    """The paper's presets. Battus: fit, reset, FB, MAP. Battus-Z: fixed (.1, .1), threshold .65."""
    if method == "battus":
        base = Options(method="battus", fit=True, reset=True, decoder="map")
    elif method == "battus-z":
        base = Options(method="battus-z", fit=False, reset=False, decoder="threshold")
    else:
        raise InputError("--method", "method", f"unknown method {method!r} ({', '.join(METHODS)})")
    overrides = {k: v for k, v in overrides.items() if v is not None}
    return replace(base, **overrides).validate()


def reconstruct(problem: Problem, options: Options, backend: Backend | str = "cpu", keep_posteriors: bool = False,
                progress=None) -> Reconstruction:
    """Reconstruct the full history of ``problem`` from its observations alone."""
    options.validate()
    if isinstance(backend, str):
        backend = get_backend(backend)
    say = progress or (lambda msg: None)
    sir = problem.model == "sir"
    # compilation stays outside the algorithm interval and is recorded on its own
    warm_started = time.perf_counter()
    backend.warm_up(causal=options.causal)
    warmup_seconds = time.perf_counter() - warm_started
    prep = backend.prepare(problem)
    backend.synchronize()
    # the algorithm interval (fit + inference + decode, after upload and warm-up):
    # CUDA events on the GPU, the host clock on the CPU
    started = backend.start_interval()
    trace: list = []
    if options.fit:
        say("fitting rates")
        beta_i, beta_r, trace = fit_rates(backend, prep, problem, options.fit_settings, progress=say)
    else:
        beta_i, beta_r = options.beta_i, options.beta_r
    if not sir:
        beta_r = 0.0
    say(f"inference at beta_i={beta_i:.6g}, beta_r={beta_r:.6g}")
    prior = problem.prior
    rho = backend.pressures(prep, prior, beta_i, beta_r, options.reset)
    gamma = backend.posteriors(prep, rho, prior, beta_r, options.backward)
    t_inf, t_rec, extras = decode(backend, prep, problem, gamma, options.decoder, options.tau, options.projection,
                                  options.causal)
    elapsed = backend.stop_interval(started)
    t_inf = backend.to_host(t_inf)
    t_rec = backend.to_host(t_rec)
    posteriors = backend.to_host(gamma).astype(np.float32) if keep_posteriors else None
    return Reconstruction(
        states=states_from_hitting_times(t_inf, t_rec, problem.T),
        t_inf=t_inf,
        t_rec=t_rec,
        beta_i=float(beta_i),
        beta_r=float(beta_r),
        params=options.as_dict(),
        backend=backend.name,
        device=backend.device,
        algorithm_seconds=elapsed,
        posteriors=posteriors,
        fit_trace=trace,
        extras={**extras, "warmup_seconds": warmup_seconds},
    )
