"""The decoding stage: posteriors -> hitting times (threshold or MAP, projection) -> causal repair.

:func:`decode` is what :func:`battus.pipeline.reconstruct` calls after the
forward-backward pass. The per-vertex decoders are the plain rules of
:mod:`battus.kernels.vertex_rules`, run by the backend (:meth:`Backend.hitting_times`);
the graph-causal repair of Battus-C (:func:`causal_decode`, kernels in
:mod:`battus.kernels.causal_cpu` and ``causal_cuda``) follows when asked.
The two format conversions at the end turn hitting times into state
histories and back.
"""

from __future__ import annotations

import numpy as np

from .errors import InputError


def decode(backend, prep, problem, gamma, decoder: str, tau: float, projection: bool, causal: bool
           ) -> tuple:
    """(t_inf, t_rec, extras) in the backend's memory; ``extras`` holds the causal counts when ``causal``."""
    t_inf, t_rec = backend.hitting_times(prep, gamma, decoder, tau, problem.model == "sir", projection)
    if not causal:
        return t_inf, t_rec, {}
    return causal_decode(backend, prep, problem, gamma, t_inf, t_rec)


def causal_decode(backend, prep, problem, gamma, t_inf, t_rec) -> tuple:
    """Repair the decoded hitting times into a graph-causal history; returns (t_inf, t_rec, extras).

    ``gamma`` (3, T+1, n) are the backend's posteriors; ``t_inf``/``t_rec``
    the decoded, projected hitting times (T+1 = never), in the backend's own
    memory, and the repaired times come back in the same memory. ``extras``
    (stored as prediction-file attributes) says whether the result is
    feasible and counts violations before and after and the forced ones
    (see :mod:`battus.causal`).
    """
    T = int(problem.T)
    if T > backend.max_causal_frames:  # hitting times are packed into narrow fields
        raise InputError("--causal", "T", f"causal decoding supports at most {backend.max_causal_frames} frames "
                                          f"on the {backend.name} backend, this history has T = {T}")
    t_inf, t_rec, counts = backend.causal_repair(prep, gamma, t_inf, t_rec, T)
    return t_inf, t_rec, {"feasible": bool(counts["causal_violations"] == 0), **counts}


def states_from_hitting_times(t_inf: np.ndarray, t_rec: np.ndarray, T: int) -> np.ndarray:
    """(T+1, n) uint8 history: S before t_inf, I until t_rec, R from t_rec."""
    t = np.arange(T + 1, dtype=np.int64)[:, None]
    return ((t >= t_inf[None, :]).astype(np.uint8) + (t >= t_rec[None, :]).astype(np.uint8))


def hitting_times(states: np.ndarray, level: int) -> np.ndarray:
    """First frame with state >= ``level`` (T+1 when never)."""
    reached = states >= level
    first = np.argmax(reached, axis=0)
    return np.where(reached.any(axis=0), first, states.shape[0]).astype(np.int64)
