"""The decoding stage: pressures -> posteriors -> hitting times (threshold or MAP, projection) ->
causal repair.

:func:`decode` is what :func:`battus.pipeline.reconstruct` calls once the
mean-field pressures are frozen. The per-vertex decoders are the plain rules of
:mod:`battus.kernels.vertex_rules`, run by the backend. When nothing else reads
the posteriors (they are not kept and there is no causal repair), the backend
decodes each vertex as its posteriors are formed
(:meth:`Backend.posterior_hitting_times`: the same values, without holding all
(3, T+1, n) of them); otherwise it forms them (:meth:`Backend.posteriors`) and
decodes them (:meth:`Backend.hitting_times`), and the graph-causal repair of
Battus-C (:func:`causal_decode`, kernels in :mod:`battus.kernels.causal_cpu`
and ``causal_cuda``) follows when asked. The two format conversions at the end
turn hitting times into state histories and back.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING

import numpy as np

from .errors import InputError
from .memory import usable_cores

if TYPE_CHECKING:
    from .backends.base import Backend, Prepared
    from .options import Options
    from .problem import Problem


def decode(backend: Backend, prep: Prepared, problem: Problem, rho, beta_i: float, beta_r: float,
           options: Options, keep_posteriors: bool) -> tuple:
    """(posteriors or None, t_inf, t_rec, extras), in the backend's memory, from the frozen pressures
    ``rho`` of the rates ``beta_i``, ``beta_r``; the posteriors come back when kept
    (``keep_posteriors``) and ``extras`` holds the causal counts when ``options.causal``. Rates under
    which the observations are impossible are an :class:`InputError` (:func:`refuse_undefined`)."""
    sir = problem.model == "sir"
    gamma = None
    if not (keep_posteriors or options.causal):
        t_inf, t_rec = backend.posterior_hitting_times(prep, rho, problem.prior, beta_r, options.backward,
                                                       options.decoder, options.tau, sir, options.projection)
    else:
        gamma = backend.posteriors(prep, rho, problem.prior, beta_r, options.backward)
        t_inf, t_rec = backend.hitting_times(prep, gamma, options.decoder, options.tau, sir, options.projection)
    # before the causal repair, which reads hitting times as frame numbers
    refuse_undefined(backend.to_host(t_inf), beta_i, beta_r, options.fit)
    if not options.causal:
        return gamma, t_inf, t_rec, {}
    return (gamma, *causal_decode(backend, prep, problem, gamma, t_inf, t_rec))


def refuse_undefined(t_inf: np.ndarray, beta_i: float, beta_r: float, fitted: bool) -> None:
    """Refuse decoded hitting times (on the host) holding :data:`~battus.kernels.vertex_rules.UNDEFINED`.

    A vertex decodes to it when its posteriors are not numbers, i.e. its observations have
    probability 0 under the rates (a normaliser of the forward-backward was 0): whatever the
    decoder would make of them is no answer, with or without ``--posteriors``, on every backend.
    """
    from .kernels.vertex_rules import UNDEFINED  # here: the kernels package loads Numba

    if t_inf.size and int(t_inf.min()) == UNDEFINED:
        where, what, fix = (("--rate-lower/--rate-upper", "fit bounds", "bounds") if fitted
                            else ("--beta-i/--beta-r", "rates", "rates"))
        raise InputError(where, what, f"the observations have probability 0 under beta_i={beta_i:.6g}, "
                                      f"beta_r={beta_r:.6g}{' (fitted)' if fitted else ''} (posteriors "
                                      f"undefined); use {fix} that allow what was observed")


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
    states = np.empty((T + 1, t_inf.shape[0]), dtype=np.uint8)

    def frame(t: int) -> None:  # a bool array viewed as uint8 is 0/1, without a copy
        np.add((t_inf <= t).view(np.uint8), (t_rec <= t).view(np.uint8), out=states[t])

    if states.size < 1 << 22:
        for t in range(T + 1):
            frame(t)
    else:  # numpy lets go of the interpreter lock inside each frame: the frames on every core
        with ThreadPoolExecutor(min(T + 1, usable_cores())) as pool:
            list(pool.map(frame, range(T + 1)))
    return states


def hitting_times(states: np.ndarray, level: int) -> np.ndarray:
    """First frame with state >= ``level`` (T+1 when never)."""
    reached = states >= level
    first = np.argmax(reached, axis=0)
    return np.where(reached.any(axis=0), first, states.shape[0]).astype(np.int64)
