"""Graph-causally feasible decoding (Battus-C) and certification of what remains.

Battus-Z's decoded onsets are consistent with the observations but not with
the graph: an onset ``a > 0`` of vertex ``u`` may have no in-neighbour
infected at ``a - 1`` (a causal violation, Eq. 8). :func:`causal_decode` runs
after threshold or MAP decoding and projection and repairs violations frame by
frame, from T down to 1, by a weighted cover: in each frame the violators are
supported by in-neighbours made infected one frame earlier (one supporter may
serve several violators; cost = expected cells lost under the posteriors,
divided by the violators served) or, when cheaper, by advancing the
violator's own onset to the latest frame where it has support. Moves only
lengthen infectious intervals and never contradict an observation or the
order S -> I -> R (see :mod:`battus.kernels.causal_cpu` for the rounds and
why the result is order-free and identical on CPU and CUDA).

A violation survives only when no in-neighbour can be infected at ``a - 1``
without contradicting an observation (observed S at or after ``a - 1``, or
observed R at or before it). :func:`certify_violations` counts, for any
history, the violations and how many of them are forced in that sense; the
scorer reports both, and the prediction file carries ``feasible``.
"""

from __future__ import annotations

import numpy as np

from .decode import hitting_times
from .errors import InputError
from .graph import Graph
from .kernels import causal_cpu as KC
from .problem import Problem


def observation_window(obs_times: np.ndarray, obs_states: np.ndarray, n: int, T: int
                       ) -> tuple[np.ndarray, np.ndarray]:
    """Per vertex, the frames f at which it may be infected: onset_floor <= f < recovery_ceiling."""
    return KC.observation_window_arrays(obs_times, obs_states, n, T)


def certify_violations(graph: Graph, states: np.ndarray, obs_times: np.ndarray, obs_states: np.ndarray) -> dict:
    """Causal violations of ``states`` and how many are forced by the observations.

    A violation at onset ``a`` of ``u`` is *forced* when no in-neighbour of
    ``u`` can be infected at ``a - 1`` in any history that matches the
    observations; ``unforced`` ones could be repaired by a supporter.
    """
    T = states.shape[0] - 1
    t_inf = hitting_times(states, 1)
    t_rec = hitting_times(states, 2)
    floor, ceiling = observation_window(obs_times, obs_states, graph.n, T)
    indptr = np.ascontiguousarray(graph.indptr, dtype=np.int64)
    indices = np.ascontiguousarray(graph.indices, dtype=np.int32)
    events, violations, forced = KC.violation_census(indptr, indices, t_inf, t_rec, floor, ceiling, T)
    return {"events": events, "violations": violations, "forced": forced, "unforced": violations - forced}


def causal_decode(backend, prep, problem: Problem, gamma, t_inf, t_rec) -> tuple:
    """Repair the decoded hitting times into a graph-causal history; returns (t_inf, t_rec, extras).

    ``gamma`` (3, T+1, n) are the backend's posteriors; ``t_inf``/``t_rec``
    the decoded, projected hitting times (T+1 = never), in the backend's own
    memory, and the repaired times come back in the same memory. ``extras``
    (stored as prediction-file attributes) says whether the result is
    feasible and counts violations before and after and the forced ones.
    """
    T = int(problem.T)
    on_gpu = getattr(backend, "name", "cpu") == "cuda"
    if on_gpu:
        from .kernels.causal_cuda import MAX_T
    else:
        MAX_T = KC.MAX_T
    if T > MAX_T:  # hitting times are packed into 16-bit (CPU) or 15-bit (CUDA) fields
        raise InputError("--causal", "T", f"causal decoding supports at most {MAX_T} frames on the "
                                          f"{'cuda' if on_gpu else 'cpu'} backend, this history has T = {T}")
    if on_gpu:
        from .kernels import causal_cuda as KD

        t_inf, t_rec, counts = KD.causal_repair_device(prep, gamma, t_inf, t_rec, T)
    else:
        original_inf = np.ascontiguousarray(t_inf, dtype=np.int64)
        original_rec = np.ascontiguousarray(t_rec, dtype=np.int64)
        t_inf, t_rec = original_inf.copy(), original_rec.copy()
        floor, ceiling = KC.observation_window_arrays(prep.obs_times, prep.obs_states, prep.n, T)
        indptr, indices = prep.indptr, prep.indices
        packed = KC.packed_states(t_inf, t_rec, floor, ceiling, T)
        flags = KC.census_flags(indptr, indices, t_inf, t_rec, floor, ceiling, T, packed=packed)
        before = KC.census_counts(flags, t_inf, T)
        stats = KC.causal_repair(indptr, indices, np.asarray(gamma), floor, ceiling, t_inf, t_rec, T,
                                 violating=flags != 0, packed=packed)
        # the repair knows what it left (all forced); the scorer's certify_violations recounts it
        # independently, and the tests hold the two equal
        events = int(np.count_nonzero((t_inf > 0) & (t_inf <= T)))
        after = (events, int(stats[3]), int(stats[3]))
        moved = int(np.count_nonzero((t_inf != original_inf) | (t_rec != original_rec)))
        counts = KC.summary(before, after, stats, moved)
    extras = {"feasible": bool(counts["causal_violations"] == 0), **counts}
    return t_inf, t_rec, extras
