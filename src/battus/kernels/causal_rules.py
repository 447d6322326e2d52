"""The graph-causal decoder (Battus-C, :mod:`battus.causal`): its algorithm and its per-vertex rules.

The per-vertex rules (who may be infected when, what a move costs, which of
two options wins) are plain Python functions, calling no other rule, compiled
twice: with ``numba.njit`` in :mod:`battus.kernels.causal_cpu` and with
``cuda.jit(device=True)`` in :mod:`battus.kernels.causal_cuda`, so both
backends apply literally the same arithmetic. A cell switched to I costs P(its decoded state) - 1/2; costs are
sums of such terms (each posterior widened to float64 first) and a key is
one division or multiplication of a cost, never a product followed by a sum,
so no fused multiply-add can make the GPU round differently from the CPU.

Frame rounds. For frame ``a`` (descending from T to 1) the violators are the
vertices whose onset is ``a`` with no in-neighbour infected at ``f = a - 1``.
Each violator ``u`` has options: a *support* move (an in-neighbour ``v`` that
the observations allow to be infected at ``f`` is made infected there: its
onset advanced to ``f`` and, in SIR, its recovery delayed to ``a`` when
needed) and a *self* move (``u``'s own onset advanced to the latest earlier
frame at which it has support, or to 0 as a seed; offered only to violators
that some in-neighbour could support). A support move by ``v``
serves every violator adjacent to ``v``, so its key is
``cost(v) / #uncovered violators adjacent to v`` (``cost(v) * #`` for a gain,
cost < 0); a self move's key is its cost. In every round each uncovered violator picks its best option (ties
broken by kind, then vertex id); a support move is applied when it is the pick
of *every* uncovered violator it serves (a parallel emulation of the greedy
weighted cover: the global best option always qualifies), a self move when its
violator picks it. After ``UNANIMOUS_ROUNDS`` such rounds one last round
applies every remaining violator's own pick, so a frame takes at most
``UNANIMOUS_ROUNDS + 1`` rounds. The outcome does not depend on the order in
which violators are visited: the CUDA kernels visit them in parallel and
produce the same hitting times, and the CPU kernels count serving supporters
with atomic adds (:mod:`battus.kernels.atomics`) and list them in an order
set by thread timing, without changing a bit of the result.

Every move only lengthens infectious intervals, so supports established at
later frames are never lost, and a support move only creates onsets at
``f``, which the next frame handles. Violators without any admissible
support are left; they are forced by the observations (certified by
:func:`violation_census`).
"""

from __future__ import annotations

import numpy as np

# Rounds per frame in which a support move must be the pick of every violator it serves; after
# them every remaining violator's own pick is applied. On the canonical suite unanimity to the end
# gains .0003 F1 but needs ~10 rounds on the dense frames of large graphs (each round revisits
# every uncovered violator); one or two unanimous rounds then one of own picks give the same mean
# (.8711/.1023), none .8704/.1027. One keeps the decoder under half of Battus-Z's work.
UNANIMOUS_ROUNDS = 1
KIND_SUPPORT = 0
KIND_SELF = 1
KIND_NONE = -1


def observation_window_py(obs_times, obs_states, T, v):
    """(onset floor, recovery ceiling) of ``v``: 1 + the last frame observed S (0 if none) and the first
    frame observed R (T + 1 if none); ``v`` may be infected exactly at the frames in between."""
    lo = 0
    hi = T + 1
    for k in range(obs_times.shape[0]):
        s = obs_states[k, v]
        if s == 0:
            lo = obs_times[k] + 1
        elif s == 2 and hi == T + 1:
            hi = obs_times[k]
    return lo, hi


def within_py(lo, hi, f):
    """Whether frame ``f`` lies in [lo, hi): a neighbour with hitting times (lo, hi) is infected at f
    (it supports an onset at f + 1), or a vertex with window (lo, hi) may be infected at f."""
    return lo <= f and f < hi


def support_frame_py(onset, recovery, a):
    """The latest frame b < a at which a neighbour with hitting times (onset, recovery) supports an onset
    (it is infected at b - 1: its last infected frame not after a - 2, plus one), or -1."""
    last = min(recovery - 1, a - 2)
    return last + 1 if onset <= last else -1


def self_frame_py(latest_support, onset_floor):
    """A violator's self move: the latest supported frame its window allows (``latest_support`` the
    maximum of support_frame over its in-neighbours), else 0 (a seed) when nothing was observed S
    before, else -1 (no self move)."""
    if latest_support >= 1 and latest_support >= onset_floor:
        return latest_support
    if onset_floor == 0:
        return 0
    return -1


def support_cost_py(gamma, onset, recovery, v, f):
    """Expected cells lost by making ``v`` (hitting times ``onset``, ``recovery``) infected at ``f``:
    S->I before its onset, R->I after its recovery.

    A cell decoded in state k and switched to I costs P(k) - 1/2, half the change in expected
    per-cell accuracy (P(k) - P(not k)); one posterior read per cell keeps the walk cheap.
    """
    cost = 0.0
    for t in range(onset - 1, f - 1, -1):  # backwards, so the sum for f - 1 extends the one for f
        cost += np.float64(gamma[0, t, v]) - 0.5
    for t in range(recovery, f + 1):
        cost += np.float64(gamma[2, t, v]) - 0.5
    return cost


def self_cost_py(gamma, u, b, a):
    """Expected cells lost by advancing ``u``'s onset from ``a`` to ``b`` (cell cost as in support_cost_py)."""
    cost = 0.0
    for t in range(b, a):
        cost += np.float64(gamma[0, t, u]) - 0.5
    return cost


def support_key_py(cost, served):
    """Key of a support move serving ``served`` violators: cost per violator, or, for a gain (cost < 0),
    the gain times the violators served, so serving more is better in both cases."""
    if cost >= 0.0:
        return cost / np.float64(served)
    return cost * np.float64(served)


def better_py(key_a, kind_a, id_a, key_b, kind_b, id_b):
    """Strict order of options: smaller key, then support before self, then smaller vertex id."""
    if key_a != key_b:
        return key_a < key_b
    if kind_a != kind_b:
        return kind_a < kind_b
    return id_a < id_b


def summary(before: tuple, after: tuple, stats: np.ndarray, moved: int) -> dict:
    """Prediction-file attributes of one causal decoding (plain ints, same on every backend)."""
    return {
        "causal_events": int(after[0]),
        "causal_violations_before": int(before[1]),
        "causal_violations": int(after[1]),
        "causal_violations_forced": int(after[2]),
        "causal_vertices_moved": int(moved),
        "causal_self_moves": int(stats[1]),
        "causal_rounds": int(stats[2]),
    }
