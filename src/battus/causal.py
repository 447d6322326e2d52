"""Graph-causally feasible decoding (Battus-C) and certification of what remains.

Battus-Z's decoded onsets are consistent with the observations but not with
the graph: an onset ``a > 0`` of vertex ``u`` may have no in-neighbour
infected at ``a - 1`` (a causal violation, Eq. 8). :func:`battus.decode.causal_decode` runs
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

from .graph import Graph
from .kernels import causal_cpu, score_cpu


def observation_window(obs_times: np.ndarray, obs_states: np.ndarray, n: int, T: int
                       ) -> tuple[np.ndarray, np.ndarray]:
    """Per vertex, the frames f at which it may be infected: onset_floor <= f < recovery_ceiling."""
    return causal_cpu.observation_window_arrays(obs_times, obs_states, n, T)


def certify_violations(graph: Graph, states: np.ndarray, obs_times: np.ndarray, obs_states: np.ndarray) -> dict:
    """Causal violations of ``states`` and how many are forced by the observations.

    A violation at onset ``a`` of ``u`` is *forced* when no in-neighbour of
    ``u`` can be infected at ``a - 1`` in any history that matches the
    observations; ``unforced`` ones could be repaired by a supporter.
    """
    T = states.shape[0] - 1
    t_inf, t_rec = score_cpu.hitting_frames(states)
    floor, ceiling = observation_window(obs_times, obs_states, graph.n, T)
    indptr = np.ascontiguousarray(graph.indptr, dtype=np.int64)
    indices = np.ascontiguousarray(graph.indices, dtype=np.int32)
    events, violations, forced = causal_cpu.violation_census(indptr, indices, t_inf, t_rec, floor, ceiling, T)
    return {"events": events, "violations": violations, "forced": forced, "unforced": violations - forced}
