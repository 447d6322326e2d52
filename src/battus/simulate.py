"""Synchronous discrete-time SI/SIR simulation.

Each step: every arc v -> u from an infected source to a susceptible target
transmits independently with probability beta_i; then every vertex infected
at the start of the step recovers with probability beta_r.

Whether a vertex infected during a step may also recover in that same step
(``same_step_recovery``) is a choice. The paper's inference kernel (Eq. 2)
allows it, but the histories the paper evaluates were generated without it:
the canonical DITTO/HERMES SIR exports contain no S -> R jump, and only
without it do resimulated BA/ER histories reproduce the paper's
rate-robustness table (BA-SIR Battus-Z NRMSE ~.10; with same-step recovery
~.16, because every jump is a vertex whose true I hitting time is "never").
The default is therefore ``False``; pass ``True`` for the Eq. 2 process. Exactly n0
initial infections are drawn uniformly without replacement. Draws are
counter-based (:mod:`battus.kernels.rng`): the arc draw of step t is keyed by
the arc's CSR position, the recovery draw by the vertex, so the result is
bit-identical for a seed on any thread count and on the GPU. The step is one
rule (:func:`battus.kernels.vertex_rules.sir_step_rule`) that each backend compiles.
"""

from __future__ import annotations

import numpy as np

from .backends import get_backend
from .errors import InputError
from .graph import Graph

DEFAULT_SEED = 123456789


def initial_infections(n: int, n0: int, seed: int) -> np.ndarray:
    """The n0 initially infected vertices, uniform without replacement."""
    return np.random.default_rng(seed).choice(n, size=n0, replace=False)


def check_simulation_args(graph: Graph, model: str, T: int, n0: int, beta_i: float, beta_r: float,
                          source: str = "simulate") -> None:
    if model not in ("si", "sir"):
        raise InputError(source, "model", f"unknown model {model!r} (si or sir)")
    if T < 1:
        raise InputError(source, "T", f"T must be >= 1, got {T}")
    if not (0 <= n0 <= graph.n):
        raise InputError(source, "n0", f"n0 must lie in 0..{graph.n}, got {n0}")
    for key, value in (("beta_i", beta_i), ("beta_r", beta_r)):
        if not (0.0 <= value <= 1.0):
            raise InputError(source, key, f"rate must lie in [0, 1], got {value}")


def simulate(graph: Graph, model: str, T: int, n0: int, beta_i: float, beta_r: float,
             seed: int = DEFAULT_SEED, backend: str = "cpu", same_step_recovery: bool = False) -> np.ndarray:
    """Return the (T+1, n) uint8 true history (0=S, 1=I, 2=R).

    ``backend`` is ``cpu``, ``cuda`` or ``auto``; both give bit-identical
    histories for a seed (counter-based draws).
    """
    check_simulation_args(graph, model, T, n0, beta_i, beta_r)
    if model == "si":
        beta_r = 0.0
    states = np.zeros((T + 1, graph.n), dtype=np.uint8)
    states[0, initial_infections(graph.n, n0, seed)] = 1
    return get_backend(backend).simulate(graph, states, float(beta_i), float(beta_r), seed, bool(same_step_recovery))
