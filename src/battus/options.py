"""Every knob of a reconstruction, and the paper's presets: numba-free.

The CLI, the workflow (read when Snakemake parses the rules) and the library
all take their method presets, fit settings and validation from here, so
importing them compiles and loads nothing.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace

import numpy as np

from .errors import InputError


@dataclass(frozen=True)
class FitSettings:
    grid_points: int = 24
    refine_points: int = 7
    refine_rounds: int = 4
    lower: float = 1e-4
    upper: float = 0.5
    chunk: int = 64  # candidates per batched pass


DEFAULT_FIT = FitSettings()


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
    fit_settings: FitSettings = DEFAULT_FIT

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
