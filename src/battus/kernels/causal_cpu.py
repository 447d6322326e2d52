"""Numba CPU kernels of the graph-causal decoder (Battus-C, :mod:`battus.causal`).

The per-vertex rules (who may be infected when, what a move costs, which of
two options wins) are plain Python functions, calling no other rule, compiled twice: with
``numba.njit`` here and with ``cuda.jit(device=True)`` in
:mod:`battus.kernels.causal_cuda`, so both backends apply literally the same
arithmetic. Costs are sums and differences of posteriors (each read widened
to float64 first) and one division, never a product followed by a sum, so no
fused multiply-add can make the GPU round differently from the CPU.

Frame rounds. For frame ``a`` (descending from T to 1) the violators are the
vertices whose onset is ``a`` with no in-neighbour infected at ``f = a - 1``.
Each violator ``u`` has options: a *support* move (an in-neighbour ``v`` that
the observations allow to be infected at ``f`` is made infected there: its
onset advanced to ``f`` and, in SIR, its recovery delayed to ``a`` when
needed) and a *self* move (``u``'s own onset advanced to the latest earlier
frame at which it has support, or to 0 as a seed; offered only to violators
that some in-neighbour could support). A support move by ``v``
serves every violator adjacent to ``v``, so its key is
``cost(v) / #uncovered violators adjacent to v``; a self move's key is its
cost. In every round each uncovered violator picks its best option (ties
broken by kind, then vertex id); a support move is applied when it is the pick
of *every* uncovered violator it serves, a self move when its violator picks
it. The global best option always qualifies, so each round covers at least
one violator, and the outcome does not depend on the order in which
violators are visited: the CUDA kernels visit them in parallel and produce the
same hitting times.

Every move only lengthens infectious intervals, so supports established at
later frames are never lost, and a support move only creates onsets at
``f``, which the next frame handles. Violators without any admissible
support are left; they are forced by the observations (certified by
:func:`violation_census`).
"""

from __future__ import annotations

import numba
import numpy as np
from numba import prange

KIND_SUPPORT = 0
KIND_SELF = 1
KIND_NONE = -1


# ----------------------------------------------------------------------------
# rules shared with the CUDA kernels (plain functions, compiled by each backend)


def can_be_infected_py(onset_floor, recovery_ceiling, v, f):
    """Whether some observation-consistent history has ``v`` infected at frame ``f``."""
    return onset_floor[v] <= f and f < recovery_ceiling[v]


def has_support_py(indptr, indices, t_inf, t_rec, u, f):
    """Whether an in-neighbour of ``u`` is infected at frame ``f``."""
    for e in range(indptr[u], indptr[u + 1]):
        v = indices[e]
        if t_inf[v] <= f and f < t_rec[v]:
            return True
    return False


def support_cost_py(gamma, t_inf, t_rec, v, f):
    """Expected cells lost by making ``v`` infected at ``f``: S->I before its onset, R->I after recovery.

    Each cell's cost is (P(current state) - P(other states)) under the
    posteriors, i.e. the change in expected per-cell accuracy.
    """
    cost = 0.0
    for t in range(f, t_inf[v]):
        cost += (np.float64(gamma[0, t, v]) - np.float64(gamma[1, t, v])) - np.float64(gamma[2, t, v])
    for t in range(t_rec[v], f + 1):
        cost += (np.float64(gamma[2, t, v]) - np.float64(gamma[1, t, v])) - np.float64(gamma[0, t, v])
    return cost


def self_frame_py(indptr, indices, onset_floor, t_inf, t_rec, u, a):
    """Latest frame b < a the observations allow as ``u``'s onset with support at b - 1 (0 = seed), else -1."""
    b = a - 1
    while b >= onset_floor[u]:
        if b == 0:
            return 0
        # support at b - 1 (the loop of has_support, inlined: these rules may not call each other,
        # each backend compiles them separately)
        for e in range(indptr[u], indptr[u + 1]):
            v = indices[e]
            if t_inf[v] <= b - 1 and b - 1 < t_rec[v]:
                return b
        b -= 1
    return -1


def self_cost_py(gamma, u, b, a):
    """Expected cells lost by advancing ``u``'s onset from ``a`` to ``b``."""
    cost = 0.0
    for t in range(b, a):
        cost += (np.float64(gamma[0, t, u]) - np.float64(gamma[1, t, u])) - np.float64(gamma[2, t, u])
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


can_be_infected = numba.njit(cache=True)(can_be_infected_py)
has_support = numba.njit(cache=True)(has_support_py)
support_cost = numba.njit(cache=True)(support_cost_py)
self_frame = numba.njit(cache=True)(self_frame_py)
self_cost = numba.njit(cache=True)(self_cost_py)
support_key = numba.njit(cache=True)(support_key_py)
better = numba.njit(cache=True)(better_py)


# ----------------------------------------------------------------------------
# observation windows and census


@numba.njit(parallel=True, cache=True)
def observation_window(obs_times, obs_states, T, onset_floor, recovery_ceiling):
    """onset_floor[v] = 1 + last frame observed S (0 if none); recovery_ceiling[v] = first frame observed R (T+1)."""
    n = onset_floor.shape[0]
    for v in prange(n):
        lo = 0
        hi = T + 1
        for k in range(obs_times.shape[0]):
            s = obs_states[k, v]
            if s == 0:
                lo = obs_times[k] + 1
            elif s == 2 and hi == T + 1:
                hi = obs_times[k]
        onset_floor[v] = lo
        recovery_ceiling[v] = hi


@numba.njit(parallel=True, cache=True)
def _census_flags(indptr, indices, t_inf, t_rec, onset_floor, recovery_ceiling, T, flags):
    # flags[u]: 0 no event or supported, 1 violation with an admissible supporter, 2 forced violation
    n = t_inf.shape[0]
    for u in prange(n):
        a = t_inf[u]
        flags[u] = 0
        if a <= 0 or a > T:
            continue
        if has_support(indptr, indices, t_inf, t_rec, u, a - 1):
            continue
        flags[u] = 2
        for e in range(indptr[u], indptr[u + 1]):
            v = indices[e]
            if v != u and can_be_infected(onset_floor, recovery_ceiling, v, a - 1):
                flags[u] = 1
                break


def violation_census(indptr, indices, t_inf, t_rec, onset_floor, recovery_ceiling, T):
    """(events, violations, forced): onsets in 1..T, those without support, those no in-neighbour can support."""
    flags = np.empty(t_inf.shape[0], dtype=np.uint8)
    _census_flags(indptr, indices, t_inf, t_rec, onset_floor, recovery_ceiling, T, flags)
    events = int(np.count_nonzero((t_inf > 0) & (t_inf <= T)))
    return events, int(np.count_nonzero(flags)), int(np.count_nonzero(flags == 2))


# ----------------------------------------------------------------------------
# the frame rounds


@numba.njit(parallel=True, cache=True)
def _flag_violators(indptr, indices, t_inf, t_rec, a, flags):
    for u in prange(t_inf.shape[0]):
        flags[u] = t_inf[u] == a and not has_support(indptr, indices, t_inf, t_rec, u, a - 1)


@numba.njit(parallel=True, cache=True)
def _self_options(indptr, indices, gamma, onset_floor, t_inf, t_rec, viol, a, self_b, self_key):
    for i in prange(viol.shape[0]):
        u = viol[i]
        b = self_frame(indptr, indices, onset_floor, t_inf, t_rec, u, a)
        self_b[i] = b
        self_key[i] = self_cost(gamma, u, b, a) if b >= 0 else 0.0


@numba.njit(parallel=True, cache=True)
def _choose(indptr, indices, gamma, onset_floor, recovery_ceiling, t_inf, t_rec, viol, covered, count,
            self_b, self_key, f, choice_kind, choice_id):
    # Reads only state fixed during the round; writes only this violator's slot.
    for i in prange(viol.shape[0]):
        if covered[i]:
            continue
        u = viol[i]
        best_kind = KIND_NONE
        best_id = -1
        best_key = 0.0
        for e in range(indptr[u], indptr[u + 1]):
            v = indices[e]
            if v == u or not can_be_infected(onset_floor, recovery_ceiling, v, f):
                continue
            key = support_key(support_cost(gamma, t_inf, t_rec, v, f), count[v])
            if best_kind == KIND_NONE or better(key, KIND_SUPPORT, v, best_key, best_kind, best_id):
                best_kind, best_id, best_key = KIND_SUPPORT, v, key
        # A violator no in-neighbour can support keeps its onset: it is forced by the observations,
        # and moving it to another supported frame (often back to a seed) costs more than it mends.
        if self_b[i] >= 0 and best_kind != KIND_NONE:
            if best_kind == KIND_NONE or better(self_key[i], KIND_SELF, u, best_key, best_kind, best_id):
                best_kind, best_id, best_key = KIND_SELF, u, self_key[i]
        choice_kind[i] = best_kind
        choice_id[i] = best_id


@numba.njit(cache=True)
def _frame_rounds(indptr, indices, gamma, onset_floor, recovery_ceiling, t_inf, t_rec, viol, a,
                  count, proposed, rejected, stamp, stats):
    """Cover the violators ``viol`` of frame ``a``; returns the last stamp used.

    stats: [0] violators seen, [1] self moves, [2] rounds.
    """
    f = a - 1
    nv = viol.shape[0]
    covered = np.zeros(nv, dtype=np.bool_)
    choice_kind = np.empty(nv, dtype=np.int64)
    choice_id = np.empty(nv, dtype=np.int64)
    self_b = np.empty(nv, dtype=np.int64)
    self_key = np.empty(nv, dtype=np.float64)
    _self_options(indptr, indices, gamma, onset_floor, t_inf, t_rec, viol, a, self_b, self_key)
    stats[0] += nv
    while True:
        for i in range(nv):
            if not covered[i]:
                u = viol[i]
                for e in range(indptr[u], indptr[u + 1]):
                    count[indices[e]] = 0
        for i in range(nv):
            if not covered[i]:
                u = viol[i]
                for e in range(indptr[u], indptr[u + 1]):
                    v = indices[e]
                    if v != u and can_be_infected(onset_floor, recovery_ceiling, v, f):
                        count[v] += 1
        _choose(indptr, indices, gamma, onset_floor, recovery_ceiling, t_inf, t_rec, viol, covered, count,
                self_b, self_key, f, choice_kind, choice_id)
        stamp += 1
        for i in range(nv):
            if covered[i] or choice_kind[i] == KIND_NONE:
                continue
            u = viol[i]
            for e in range(indptr[u], indptr[u + 1]):
                v = indices[e]
                if v == u or not can_be_infected(onset_floor, recovery_ceiling, v, f):
                    continue
                if choice_kind[i] == KIND_SUPPORT and choice_id[i] == v:
                    proposed[v] = stamp
                else:
                    rejected[v] = stamp
        active = 0
        for i in range(nv):
            if covered[i] or choice_kind[i] == KIND_NONE:
                continue
            u = viol[i]
            if choice_kind[i] == KIND_SELF:
                t_inf[u] = min(t_inf[u], self_b[i])
                covered[i] = True
                stats[1] += 1
                continue
            for e in range(indptr[u], indptr[u + 1]):
                v = indices[e]
                if proposed[v] == stamp and rejected[v] != stamp:
                    covered[i] = True
                    t_inf[v] = min(t_inf[v], f)
                    t_rec[v] = max(t_rec[v], a)
            if not covered[i]:
                active += 1
        stats[2] += 1
        if active == 0:
            return stamp


def causal_repair(indptr, indices, gamma, onset_floor, recovery_ceiling, t_inf, t_rec, T) -> np.ndarray:
    """Run the frame rounds from T down to 1 in place on ``t_inf``/``t_rec``; returns the stats vector."""
    n = t_inf.shape[0]
    count = np.zeros(n, dtype=np.int64)
    proposed = np.zeros(n, dtype=np.int64)
    rejected = np.zeros(n, dtype=np.int64)
    flags = np.empty(n, dtype=np.bool_)
    stats = np.zeros(3, dtype=np.int64)
    stamp = 0
    for a in range(T, 0, -1):
        _flag_violators(indptr, indices, t_inf, t_rec, a, flags)
        viol = np.flatnonzero(flags).astype(np.int64)
        if viol.size:
            stamp = _frame_rounds(indptr, indices, gamma, onset_floor, recovery_ceiling, t_inf, t_rec, viol, a,
                                  count, proposed, rejected, stamp, stats)
    return stats


def observation_window_arrays(obs_times, obs_states, n: int, T: int) -> tuple[np.ndarray, np.ndarray]:
    """(onset_floor, recovery_ceiling) of every vertex, see :func:`observation_window`."""
    onset_floor = np.empty(n, dtype=np.int64)
    recovery_ceiling = np.empty(n, dtype=np.int64)
    observation_window(np.ascontiguousarray(obs_times, dtype=np.int64),
                       np.ascontiguousarray(obs_states, dtype=np.uint8), int(T), onset_floor, recovery_ceiling)
    return onset_floor, recovery_ceiling


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
