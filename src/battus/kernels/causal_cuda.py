"""Numba-CUDA kernels of the graph-causal decoder (Battus-C), identical in output to the CPU kernels.

Frames are processed on the host in descending order; inside a frame every
step is one vertex-parallel (or violator-parallel) launch: flag and compact
the violators, compute their self options, then rounds of
count -> choose -> apply until no violator with an option is left uncovered.
The rules are the plain functions of :mod:`battus.kernels.causal_cpu`
compiled as device functions, and every write that several threads may make
to one cell is either the same value (stamps) or an atomic min/max/add whose
result does not depend on the order (onsets, recoveries, counters), so the
violator list being compacted in arbitrary order changes nothing: the hitting
times equal the CPU's bit for bit for the same posteriors.

Device memory beyond the backend's arrays (n vertices): ``38 n`` bytes of
per-violator and per-supporter scratch, ``16 n`` for the observation windows
and ``16 n`` for the repaired copy of the hitting times (the input is kept to
count moved vertices). Host synchronisations: one per frame (the violator
count) and one per round (whether violators with options remain), at most
``UNANIMOUS_ROUNDS + 1`` rounds per frame.
"""

from __future__ import annotations

import numpy as np

from .cuda_compat import ensure_numpy_compat

ensure_numpy_compat()  # before numba.cuda compiles anything

from numba import cuda  # noqa: E402

from . import causal_cpu as KC  # noqa: E402


def _simulated() -> bool:
    from numba.cuda import config

    return bool(getattr(config, "ENABLE_CUDASIM", False))


THREADS = 32 if _simulated() else 256  # the simulator runs one Python thread per CUDA thread

can_be_infected = cuda.jit(device=True)(KC.can_be_infected_py)
has_support = cuda.jit(device=True)(KC.has_support_py)
support_cost = cuda.jit(device=True)(KC.support_cost_py)
self_frame = cuda.jit(device=True)(KC.self_frame_py)
self_cost = cuda.jit(device=True)(KC.self_cost_py)
support_key = cuda.jit(device=True)(KC.support_key_py)
better = cuda.jit(device=True)(KC.better_py)

KIND_SUPPORT = KC.KIND_SUPPORT
KIND_SELF = KC.KIND_SELF
KIND_NONE = KC.KIND_NONE


@cuda.jit
def _observation_window(obs_times, obs_states, T, onset_floor, recovery_ceiling):
    v = cuda.grid(1)
    if v >= onset_floor.shape[0]:
        return
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


@cuda.jit
def _census(indptr, indices, t_inf, t_rec, onset_floor, recovery_ceiling, T, counters):
    # counters: [0] events, [1] violations, [2] forced violations
    u = cuda.grid(1)
    if u >= t_inf.shape[0]:
        return
    a = t_inf[u]
    if a <= 0 or a > T:
        return
    cuda.atomic.add(counters, 0, 1)
    if has_support(indptr, indices, t_inf, t_rec, u, a - 1):
        return
    cuda.atomic.add(counters, 1, 1)
    for e in range(indptr[u], indptr[u + 1]):
        v = indices[e]
        if v != u and can_be_infected(onset_floor, recovery_ceiling, v, a - 1):
            return
    cuda.atomic.add(counters, 2, 1)


@cuda.jit
def _count_moved(t_inf, t_rec, orig_inf, orig_rec, counters):
    u = cuda.grid(1)
    if u < t_inf.shape[0] and (t_inf[u] != orig_inf[u] or t_rec[u] != orig_rec[u]):
        cuda.atomic.add(counters, 0, 1)


@cuda.jit
def _flag_violators(indptr, indices, t_inf, t_rec, a, viol, n_viol):
    u = cuda.grid(1)
    if u >= t_inf.shape[0]:
        return
    if t_inf[u] == a and not has_support(indptr, indices, t_inf, t_rec, u, a - 1):
        viol[cuda.atomic.add(n_viol, 0, 1)] = u


@cuda.jit
def _self_options(indptr, indices, gamma, onset_floor, t_inf, t_rec, viol, nv, a, self_b, self_key, covered):
    i = cuda.grid(1)
    if i >= nv:
        return
    u = viol[i]
    b = self_frame(indptr, indices, onset_floor, t_inf, t_rec, u, a)
    self_b[i] = b
    self_key[i] = self_cost(gamma, u, b, a) if b >= 0 else 0.0
    covered[i] = 0


@cuda.jit
def _reset_counts(indptr, indices, viol, nv, covered, count):
    i = cuda.grid(1)
    if i >= nv or covered[i]:
        return
    u = viol[i]
    for e in range(indptr[u], indptr[u + 1]):
        count[indices[e]] = 0


@cuda.jit
def _count_served(indptr, indices, onset_floor, recovery_ceiling, viol, nv, covered, f, count):
    i = cuda.grid(1)
    if i >= nv or covered[i]:
        return
    u = viol[i]
    for e in range(indptr[u], indptr[u + 1]):
        v = indices[e]
        if v != u and can_be_infected(onset_floor, recovery_ceiling, v, f):
            cuda.atomic.add(count, v, 1)


@cuda.jit
def _choose(indptr, indices, gamma, onset_floor, recovery_ceiling, t_inf, t_rec, viol, nv, covered, count,
            self_b, self_key, f, choice_kind, choice_id, proposed, rejected, stamp):
    # Reads state fixed during the round; stamp writes by several threads carry the same value.
    i = cuda.grid(1)
    if i >= nv or covered[i]:
        return
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
            best_kind = KIND_SUPPORT
            best_id = v
            best_key = key
    if self_b[i] >= 0 and best_kind != KIND_NONE:
        if better(self_key[i], KIND_SELF, u, best_key, best_kind, best_id):
            best_kind = KIND_SELF
            best_id = u
            best_key = self_key[i]
    choice_kind[i] = best_kind
    choice_id[i] = best_id
    if best_kind == KIND_NONE:
        return
    for e in range(indptr[u], indptr[u + 1]):
        v = indices[e]
        if v == u or not can_be_infected(onset_floor, recovery_ceiling, v, f):
            continue
        if best_kind == KIND_SUPPORT and best_id == v:
            proposed[v] = stamp
        else:
            rejected[v] = stamp


@cuda.jit
def _apply(indptr, indices, viol, nv, covered, choice_kind, self_b, proposed, rejected, stamp, unanimous, a,
           t_inf, t_rec, counters):
    # counters: [0] violators still active after this round, [1] self moves
    i = cuda.grid(1)
    if i >= nv or covered[i] or choice_kind[i] == KIND_NONE:
        return
    u = viol[i]
    if choice_kind[i] == KIND_SELF:
        cuda.atomic.min(t_inf, u, self_b[i])
        covered[i] = 1
        cuda.atomic.add(counters, 1, 1)
        return
    f = a - 1
    for e in range(indptr[u], indptr[u + 1]):
        v = indices[e]
        if proposed[v] == stamp and (rejected[v] != stamp or not unanimous):
            covered[i] = 1
            cuda.atomic.min(t_inf, v, f)
            cuda.atomic.max(t_rec, v, a)
    if not covered[i]:
        cuda.atomic.add(counters, 0, 1)


def _grid(count: int) -> int:
    return max(1, (count + THREADS - 1) // THREADS)


def observation_window_device(obs_times, obs_states, n: int, T: int):
    """(onset_floor, recovery_ceiling) as device arrays."""
    floor = cuda.device_array(n, dtype=np.int64)
    ceiling = cuda.device_array(n, dtype=np.int64)
    _observation_window[_grid(n), THREADS](obs_times, obs_states, int(T), floor, ceiling)
    return floor, ceiling


def census_device(indptr, indices, t_inf, t_rec, floor, ceiling, T: int) -> tuple[int, int, int]:
    """(events, violations, forced) of device hitting times, as :func:`causal_cpu.violation_census`."""
    counters = cuda.to_device(np.zeros(3, dtype=np.int64))
    _census[_grid(t_inf.shape[0]), THREADS](indptr, indices, t_inf, t_rec, floor, ceiling, int(T), counters)
    c = counters.copy_to_host()
    return int(c[0]), int(c[1]), int(c[2])


def causal_repair_arrays(indptr, indices, gamma, floor, ceiling, t_inf, t_rec, T: int) -> np.ndarray:
    """Frame rounds on device arrays, in place on ``t_inf``/``t_rec``; returns the stats vector of the CPU
    (violators seen, self moves, rounds, violations left)."""
    n = t_inf.shape[0]
    count = cuda.device_array(n, dtype=np.int32)
    proposed = cuda.to_device(np.zeros(n, dtype=np.int32))
    rejected = cuda.to_device(np.zeros(n, dtype=np.int32))
    viol = cuda.device_array(n, dtype=np.int32)
    self_b = cuda.device_array(n, dtype=np.int64)
    self_key = cuda.device_array(n, dtype=np.float64)
    covered = cuda.device_array(n, dtype=np.uint8)
    choice_kind = cuda.device_array(n, dtype=np.int8)
    choice_id = cuda.device_array(n, dtype=np.int32)
    n_viol = cuda.device_array(1, dtype=np.int64)
    counters = cuda.device_array(2, dtype=np.int64)
    stats = np.zeros(4, dtype=np.int64)
    stamp = 0
    zero1 = np.zeros(1, dtype=np.int64)
    zero2 = np.zeros(2, dtype=np.int64)
    for a in range(T, 0, -1):
        f = a - 1
        n_viol.copy_to_device(zero1)
        _flag_violators[_grid(n), THREADS](indptr, indices, t_inf, t_rec, a, viol, n_viol)
        nv = int(n_viol.copy_to_host()[0])
        if nv == 0:
            continue
        stats[0] += nv
        grid = _grid(nv)
        _self_options[grid, THREADS](indptr, indices, gamma, floor, t_inf, t_rec, viol, nv, a, self_b, self_key,
                                     covered)
        rounds = 0
        while True:
            stamp += 1
            unanimous = rounds < KC.UNANIMOUS_ROUNDS
            rounds += 1
            _reset_counts[grid, THREADS](indptr, indices, viol, nv, covered, count)
            _count_served[grid, THREADS](indptr, indices, floor, ceiling, viol, nv, covered, f, count)
            _choose[grid, THREADS](indptr, indices, gamma, floor, ceiling, t_inf, t_rec, viol, nv, covered, count,
                                   self_b, self_key, f, choice_kind, choice_id, proposed, rejected, stamp)
            counters.copy_to_device(zero2)
            _apply[grid, THREADS](indptr, indices, viol, nv, covered, choice_kind, self_b, proposed, rejected,
                                  stamp, unanimous, a, t_inf, t_rec, counters)
            c = counters.copy_to_host()
            stats[1] += int(c[1])
            stats[2] += 1
            if c[0] == 0:
                break
    stats[3] = census_device(indptr, indices, t_inf, t_rec, floor, ceiling, T)[1]
    return stats


def causal_repair_device(prep, gamma, t_inf, t_rec, T: int) -> tuple:
    """CUDA path of :func:`battus.causal.causal_decode`: (t_inf, t_rec, counts), hitting times on the device."""
    n = prep.n
    floor, ceiling = observation_window_device(prep.obs_times, prep.obs_states, n, T)
    orig_inf, orig_rec = t_inf, t_rec
    t_inf = cuda.device_array(n, dtype=np.int64)
    t_rec = cuda.device_array(n, dtype=np.int64)
    t_inf.copy_to_device(orig_inf)
    t_rec.copy_to_device(orig_rec)
    before = census_device(prep.indptr, prep.indices, t_inf, t_rec, floor, ceiling, T)
    stats = causal_repair_arrays(prep.indptr, prep.indices, gamma, floor, ceiling, t_inf, t_rec, T)
    after = census_device(prep.indptr, prep.indices, t_inf, t_rec, floor, ceiling, T)
    moved = cuda.to_device(np.zeros(1, dtype=np.int64))
    _count_moved[_grid(n), THREADS](t_inf, t_rec, orig_inf, orig_rec, moved)
    return t_inf, t_rec, KC.summary(before, after, stats, int(moved.copy_to_host()[0]))
