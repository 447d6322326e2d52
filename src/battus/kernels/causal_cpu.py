"""Numba CPU kernels of the graph-causal decoder (Battus-C): the rules of
:mod:`battus.kernels.causal_rules` compiled with ``numba.njit``, the frame
rounds over ``prange``, and the violation census that certifies what is left.
The algorithm is described in :mod:`battus.kernels.causal_rules`.
"""

from __future__ import annotations

import types

import numba
import numpy as np
from numba import prange

from . import causal_rules
from .atomics import atomic_add
from .causal_rules import (
    KIND_NONE,
    KIND_SELF,
    KIND_SUPPORT,
    better_py,
    observation_window_py,
    self_frame_py,
    support_cost_py,
    support_frame_py,
    support_key_py,
    within_py,
)

observation_window_rule = numba.njit(cache=True)(observation_window_py)
within = numba.njit(cache=True)(within_py)
support_frame = numba.njit(cache=True)(support_frame_py)
self_frame = numba.njit(cache=True)(self_frame_py)
support_cost = numba.njit(cache=True)(support_cost_py)
# self_cost_py is inlined on the CPU (in _choose, with an early exit); the tests hold it against the
# CUDA kernels, which call the rule itself.
support_key = numba.njit(cache=True)(support_key_py)
better = numba.njit(cache=True)(better_py)

# Below this many items a frame-round step runs serially: a parallel region costs a thread wake-up
# (milliseconds on a loaded machine, where OpenMP workers are descheduled). 2,048 rather than 8,192
# took the decoder from ~130 to ~118 ms on the engine benchmark graph (2 threads, quiet machine).
PARALLEL_MIN = 2048


class _Dual:
    """A prange kernel compiled twice: ``parallel``, and ``serial`` (prange = range) for small inputs;
    :func:`_frames` picks one by the step's size against PARALLEL_MIN."""

    def __init__(self, fn) -> None:
        serial = types.FunctionType(fn.__code__, fn.__globals__, fn.__name__ + "_serial", fn.__defaults__,
                                    fn.__closure__)
        serial.__qualname__ = fn.__qualname__ + "_serial"  # its own on-disk cache entry
        self.parallel = numba.njit(parallel=True, cache=True)(fn)
        self.serial = numba.njit(cache=True)(serial)


def _dual(fn) -> _Dual:
    return _Dual(fn)


# ----------------------------------------------------------------------------
# observation windows and census


@numba.njit(parallel=True, cache=True)
def observation_window(obs_times, obs_states, T, onset_floor, recovery_ceiling):
    """onset_floor[v], recovery_ceiling[v] of every vertex (:func:`observation_window_py`)."""
    for v in prange(onset_floor.shape[0]):
        onset_floor[v], recovery_ceiling[v] = observation_window_rule(obs_times, obs_states, T, v)


# The neighbour searches (census, screening) read one int64 per in-neighbour holding its onset,
# recovery, onset floor and recovery ceiling, 16 bits each (8 bytes a vertex: the whole table of the
# engine benchmark graph fits a core's L2, where separate int64 arrays took 32 bytes a vertex).
PACK_MASK = 0xFFFF
MAX_T = PACK_MASK - 1


@numba.njit(cache=True)
def pack_hits(t_inf, t_rec):
    return t_inf | (t_rec << 16)


@numba.njit(parallel=True, cache=True)
def pack_states(t_inf, t_rec, onset_floor, recovery_ceiling, packed):
    for v in prange(t_inf.shape[0]):
        packed[v] = pack_hits(t_inf[v], t_rec[v]) | (onset_floor[v] << 32) | (recovery_ceiling[v] << 48)


@numba.njit(cache=True, inline="always")
def unpack(x):
    """(onset, recovery, onset floor, recovery ceiling) of a packed state."""
    return x & PACK_MASK, (x >> 16) & PACK_MASK, (x >> 32) & PACK_MASK, (x >> 48) & PACK_MASK


@numba.njit(cache=True)
def set_hits(packed, v, onset, recovery):
    """Set the hitting times of ``v`` in its packed state (its window stays)."""
    packed[v] = (packed[v] & ~np.int64(0xFFFFFFFF)) | pack_hits(onset, recovery)


@numba.njit(parallel=True, cache=True)
def unpack_hits(packed, t_inf, t_rec):
    for v in prange(packed.shape[0]):
        t_inf[v], t_rec[v], _, _ = unpack(packed[v])


@numba.njit(parallel=True, cache=True)
def _census_flags(indptr, indices, packed, T, flags):
    # flags[u]: 0 no event or supported, 1 violation with an admissible supporter, 2 forced violation
    n = packed.shape[0]
    for u in prange(n):
        a = packed[u] & PACK_MASK
        flags[u] = 0
        if a <= 0 or a > T:
            continue
        f = a - 1
        supported = False
        for e in range(indptr[u], indptr[u + 1]):
            onset, recovery, _, _ = unpack(packed[indices[e]])
            if within(onset, recovery, f):
                supported = True
                break
        if supported:
            continue
        flags[u] = 2
        for e in range(indptr[u], indptr[u + 1]):
            v = indices[e]
            _, _, lo, hi = unpack(packed[v])
            if v != u and within(lo, hi, f):
                flags[u] = 1
                break


def packed_states(t_inf, t_rec, onset_floor, recovery_ceiling, T) -> np.ndarray:
    """Every vertex's packed state (:func:`pack_states`), checking that T fits the 16-bit fields."""
    if T > MAX_T:
        raise ValueError(f"causal decoding supports T <= {MAX_T}, got T = {T}")
    packed = np.empty(t_inf.shape[0], dtype=np.int64)
    pack_states(np.ascontiguousarray(t_inf, dtype=np.int64), np.ascontiguousarray(t_rec, dtype=np.int64),
                np.ascontiguousarray(onset_floor, dtype=np.int64),
                np.ascontiguousarray(recovery_ceiling, dtype=np.int64), packed)
    return packed


def census_flags(indptr, indices, t_inf, t_rec, onset_floor, recovery_ceiling, T, packed=None) -> np.ndarray:
    """Per vertex: 0 no event or supported, 1 violation some in-neighbour could support, 2 forced violation.
    ``packed``: the states of these arrays from :func:`packed_states`, when the caller has them."""
    if packed is None:
        packed = packed_states(t_inf, t_rec, onset_floor, recovery_ceiling, T)
    flags = np.empty(t_inf.shape[0], dtype=np.uint8)
    _census_flags(indptr, indices, packed, T, flags)
    return flags


def census_counts(flags, t_inf, T) -> tuple[int, int, int]:
    """(events, violations, forced) from :func:`census_flags`."""
    events = int(np.count_nonzero((t_inf > 0) & (t_inf <= T)))
    return events, int(np.count_nonzero(flags)), int(np.count_nonzero(flags == 2))


def violation_census(indptr, indices, t_inf, t_rec, onset_floor, recovery_ceiling, T):
    """(events, violations, forced): onsets in 1..T, those without support, those no in-neighbour can support."""
    return census_counts(census_flags(indptr, indices, t_inf, t_rec, onset_floor, recovery_ceiling, T), t_inf, T)


# ----------------------------------------------------------------------------
# the frame rounds


@_dual
def _screen(indptr, indices, packed, pool, a, slot_ptr, slots, n_cand, self_b):
    # For each vertex of ``pool`` whose onset is a, one pass over its in-arcs: n_cand = number of
    # admissible supporters when it violates (-1 when it has support or its onset moved), written to
    # slots[slot_ptr[i]:], and its self option (the rules as the CUDA kernels apply them).
    f = a - 1
    for i in prange(pool.shape[0]):
        u = pool[i]
        n_cand[i] = -1
        own = packed[u]
        if (own & PACK_MASK) != a:
            continue
        supported = False
        best = -1
        k = 0
        base = slot_ptr[i]
        for e in range(indptr[u], indptr[u + 1]):
            v = indices[e]
            onset, recovery, lo, hi = unpack(packed[v])
            if within(onset, recovery, f):
                supported = True
                break
            best = max(best, support_frame(onset, recovery, a))
            if v != u and within(lo, hi, f):
                slots[base + k] = v
                k += 1
        if supported:
            continue
        n_cand[i] = k
        self_b[i] = self_frame(best, (own >> 32) & PACK_MASK)


@_dual
def _compact_candidates(slots, slot_ptr, kept, cand_ptr, cand):
    for j in prange(kept.shape[0]):
        base = slot_ptr[kept[j]]
        for k in range(cand_ptr[j + 1] - cand_ptr[j]):
            cand[cand_ptr[j] + k] = slots[base + k]


@numba.njit(cache=True)
def _onset_buckets(t_inf, T, member):
    # the vertices with member[u] grouped by onset 1..T (counting sort, ascending id inside a bucket)
    ptr = np.zeros(T + 2, dtype=np.int64)
    for u in range(t_inf.shape[0]):
        if member[u] and 1 <= t_inf[u] <= T:
            ptr[t_inf[u] + 1] += 1
    for a in range(1, T + 2):
        ptr[a] += ptr[a - 1]
    fill = ptr.copy()
    members = np.empty(ptr[T + 1], dtype=np.int64)
    for u in range(t_inf.shape[0]):
        if member[u] and 1 <= t_inf[u] <= T:
            members[fill[t_inf[u]]] = u
            fill[t_inf[u]] += 1
    return ptr, members


# served[v] holds a supporter's serving count (low half) and the picks it got (high half)
COUNT_MASK = 0xFFFFFFFF
PICK = 1 << 32
# Round-list slots a thread reserves at a time (one shared atomic per reservation, not per supporter).
LIST_CHUNK = 64


@_dual
def _count_served(cand_ptr, cand, covered, served, round_list, reserved, slot):
    # Every uncovered violator adds one to each of its supporters, atomically (a supporter may serve
    # violators of both threads); the first to arrive lists the supporter for the round, in slots its
    # thread reserved (slot[8 t] next, slot[8 t + 1] end: a cache line per thread). Unfilled reserved
    # slots are set to -1. The list's order depends on the threads' timing; nothing downstream does.
    # served[v]: the count in its low 32 bits, the picks of _choose above; zero outside a round
    # (_apply_supports clears the round's supporters).
    reserved[0] = 0
    for t in range(slot.shape[0] // 8):
        slot[8 * t] = 0
        slot[8 * t + 1] = 0
    for i in prange(covered.shape[0]):
        if covered[i]:
            continue
        t = 8 * numba.get_thread_id()
        for k in range(cand_ptr[i], cand_ptr[i + 1]):
            v = cand[k]
            if atomic_add(served, v, 1) == 0:
                if slot[t] == slot[t + 1]:
                    slot[t] = atomic_add(reserved, 0, LIST_CHUNK)
                    slot[t + 1] = slot[t] + LIST_CHUNK
                round_list[slot[t]] = v
                slot[t] += 1
    for t in range(slot.shape[0] // 8):
        for j in range(slot[8 * t], slot[8 * t + 1]):
            round_list[j] = -1
    return reserved[0]


@_dual
def _support_keys(gamma, packed, round_list, n_round, a, served, cost, cost_frame, key):
    # Key of every supporter of the round. Its cost is cached per frame; one cached for frame a + 1
    # of a vertex not moved since and not recovered by then (its R->I part is empty for both frames)
    # extends by the one cell at f = a - 1: bit for bit the sum support_cost would take afresh,
    # since that sum runs backwards from the onset.
    f = a - 1
    for j in prange(n_round):
        v = round_list[j]
        if v < 0:
            continue
        if cost_frame[v] != a:
            onset, recovery, _, _ = unpack(packed[v])  # from the packed copy (L2-resident)
            if cost_frame[v] == a + 1 and recovery > a and onset > a:
                cost[v] = cost[v] + (np.float64(gamma[0, f, v]) - 0.5)
            else:
                cost[v] = support_cost(gamma, onset, recovery, v, f)
            cost_frame[v] = a
        key[v] = support_key(cost[v], served[v] & COUNT_MASK)


@_dual
def _choose(gamma, viol, cand_ptr, cand, covered, key, self_b, self_key, a, choice_kind, choice_id, served):
    # Reads only state fixed during the round; a support pick adds one to v's picks (the high half of
    # served[v]) per entry of v in the violator's list, so that picks == count says every entry
    # serving v picked it (the unanimous selection): one atomic per violator, no stamp per candidate.
    for i in prange(viol.shape[0]):
        if covered[i]:
            continue
        u = viol[i]
        best_kind = KIND_NONE
        best_id = -1
        best_key = 0.0
        for k in range(cand_ptr[i], cand_ptr[i + 1]):
            v = cand[k]
            k_v = key[v]
            if best_kind == KIND_NONE or better(k_v, KIND_SUPPORT, v, best_key, best_kind, best_id):
                best_kind, best_id, best_key = KIND_SUPPORT, v, k_v
        # A violator no in-neighbour can support keeps its onset: it is forced by the observations,
        # and moving it to another supported frame (often back to a seed) costs more than it mends.
        if self_b[i] >= 0 and best_kind != KIND_NONE:
            # self_cost_py's sum, abandoned once even all remaining cells at their lowest (-1/2)
            # could not bring it down to the best support key (then the self move loses anyway)
            # (self_key[i] holds it once computed in full; NaN until then)
            own = self_key[i]
            hopeless = False
            if np.isnan(own):
                own = 0.0
                for t in range(self_b[i], a):
                    own += np.float64(gamma[0, t, u]) - 0.5
                    if own - 0.5 * (a - 1 - t) > best_key + 1e-9:
                        hopeless = True
                        break
                if not hopeless:
                    self_key[i] = own
            if not hopeless and better(own, KIND_SELF, u, best_key, best_kind, best_id):
                best_kind, best_id, best_key = KIND_SELF, u, own
        choice_kind[i] = best_kind
        choice_id[i] = best_id
        if best_kind == KIND_SUPPORT:
            for k in range(cand_ptr[i], cand_ptr[i + 1]):
                if cand[k] == best_id:
                    atomic_add(served, best_id, PICK)


@_dual
def _cover(viol, cand_ptr, cand, covered, choice_kind, self_b, served, unanimous, cost_frame, packed):
    # A violator is covered by its self move or by any supporter selected this round (picked by every
    # uncovered violator it serves). Each thread writes only its own violator's cells.
    active = 0
    self_moves = 0
    for i in prange(viol.shape[0]):
        if covered[i] or choice_kind[i] == KIND_NONE:
            continue
        if choice_kind[i] == KIND_SELF:
            u = viol[i]
            onset, recovery, _, _ = unpack(packed[u])
            set_hits(packed, u, min(onset, self_b[i]), recovery)
            cost_frame[u] = -1  # its support cost changed
            covered[i] = True
            self_moves += 1
            continue
        if not unanimous:  # its own pick is selected
            covered[i] = True
            continue
        hit = False
        for k in range(cand_ptr[i], cand_ptr[i + 1]):
            v = cand[k]
            x = served[v]
            if (x >> 32) == (x & COUNT_MASK):
                hit = True
                break
        covered[i] = hit
        if not hit:
            active += 1
    return active, self_moves


@_dual
def _apply_supports(round_list, n_round, served, unanimous, a, advanced, cost_frame, packed):
    # One thread per supporter of this round: the selected ones become infected at a - 1;
    # advanced[j] says whether supporter j's onset moved (to a - 1, where the next frame screens it).
    for j in prange(n_round):
        v = round_list[j]
        advanced[j] = False
        if v < 0:
            continue
        x = served[v]
        selected = (x >> 32) == (x & COUNT_MASK) if unanimous else (x >> 32) > 0
        served[v] = 0
        if selected:
            onset, recovery, _, _ = unpack(packed[v])
            advanced[j] = onset > a - 1
            set_hits(packed, v, min(onset, a - 1), max(recovery, a))
            cost_frame[v] = -1  # its support cost changed


# the kernels as the frame driver calls them (compiled functions, no Python dispatch per call)
_screen_p, _screen_s = _screen.parallel, _screen.serial
_compact_p, _compact_s = _compact_candidates.parallel, _compact_candidates.serial
_count_p, _count_s = _count_served.parallel, _count_served.serial
_keys_p, _keys_s = _support_keys.parallel, _support_keys.serial
_choose_p, _choose_s = _choose.parallel, _choose.serial
_cover_p, _cover_s = _cover.parallel, _cover.serial
_apply_p, _apply_s = _apply_supports.parallel, _apply_supports.serial


@numba.njit(cache=True)
def _frames(indptr, indices, gamma, packed, bucket_ptr, bucket, T, unanimous_rounds, per_vertex, round_list, slot,
            stats, left_frame):
    """Frames T..1: screen the pool, list the candidates, run the rounds (see :func:`causal_repair`).

    per_vertex (n, 4) int64, two vertices a cache line: 0 served count (low 32 bits) and picks (high
    32 bits), both 0 outside a round, 1 frame whose support cost is cached (-1: stale), 2 cost and 3
    key (as float64 bits). A support cost depends only on the supporter's own hitting times, which
    change only when it is applied or self-moved (its cache is then dropped), so each is computed
    once per frame, and from the previous frame's by one more cell when possible. round_list
    (n + LIST_CHUNK * threads,): supporters of the round (-1: no entry). left_frame[u]: the last
    frame at which u was left uncovered (no admissible supporter). Each step runs serially below
    PARALLEL_MIN items.
    """
    n = packed.shape[0]
    served = per_vertex[:, 0]
    cost_frame = per_vertex[:, 1]
    as_float = per_vertex.view(np.float64)
    cost = as_float[:, 2]
    key = as_float[:, 3]
    reserved = np.zeros(1, dtype=np.int64)
    advanced = np.empty(round_list.shape[0], dtype=np.bool_)
    arrived = np.empty(n, dtype=np.int64)  # supporters moved to the frame about to be screened
    next_arrived = np.empty(n, dtype=np.int64)
    n_arrived = 0
    for a in range(T, 0, -1):
        nb = bucket_ptr[a + 1] - bucket_ptr[a]
        size = nb + n_arrived
        if size == 0:
            continue
        # element by element: a slice assigned from an array makes Numba compile the message of a
        # shape mismatch (string formatting, about 3 s of this kernel's first compilation) that the
        # sizes here rule out
        pool = np.empty(size, dtype=np.int64)
        for k in range(nb):
            pool[k] = bucket[bucket_ptr[a] + k]
        for k in range(n_arrived):
            pool[nb + k] = arrived[k]
        n_arrived = 0
        slot_ptr = np.empty(size + 1, dtype=np.int64)
        slot_ptr[0] = 0
        for i in range(size):
            slot_ptr[i + 1] = slot_ptr[i] + indptr[pool[i] + 1] - indptr[pool[i]]
        slots = np.empty(slot_ptr[size], dtype=np.int64)
        n_cand = np.empty(size, dtype=np.int64)
        self_b = np.empty(size, dtype=np.int64)
        if size >= PARALLEL_MIN:
            _screen_p(indptr, indices, packed, pool, a, slot_ptr, slots, n_cand, self_b)
        else:
            _screen_s(indptr, indices, packed, pool, a, slot_ptr, slots, n_cand, self_b)
        kept = np.flatnonzero(n_cand >= 0)
        nv = kept.shape[0]
        if nv == 0:
            continue
        cand_ptr = np.empty(nv + 1, dtype=np.int64)
        cand_ptr[0] = 0
        for j in range(nv):
            cand_ptr[j + 1] = cand_ptr[j] + n_cand[kept[j]]
        cand = np.empty(cand_ptr[nv], dtype=np.int64)
        if nv >= PARALLEL_MIN:
            _compact_p(slots, slot_ptr, kept, cand_ptr, cand)
        else:
            _compact_s(slots, slot_ptr, kept, cand_ptr, cand)
        viol = pool[kept]
        viol_b = self_b[kept]
        big = nv >= PARALLEL_MIN
        covered = np.zeros(nv, dtype=np.bool_)
        choice_kind = np.empty(nv, dtype=np.int64)
        choice_id = np.empty(nv, dtype=np.int64)
        self_key = np.full(nv, np.nan)
        stats[0] += nv
        rounds = 0
        while True:
            stats[2] += 1
            unanimous = rounds < unanimous_rounds
            rounds += 1
            if big:
                n_round = _count_p(cand_ptr, cand, covered, served, round_list, reserved, slot)
            else:
                n_round = _count_s(cand_ptr, cand, covered, served, round_list, reserved, slot)
            if n_round >= PARALLEL_MIN:
                _keys_p(gamma, packed, round_list, n_round, a, served, cost, cost_frame, key)
            else:
                _keys_s(gamma, packed, round_list, n_round, a, served, cost, cost_frame, key)
            if big:
                _choose_p(gamma, viol, cand_ptr, cand, covered, key, viol_b, self_key, a, choice_kind, choice_id,
                          served)
                active, self_moves = _cover_p(viol, cand_ptr, cand, covered, choice_kind, viol_b, served, unanimous,
                                              cost_frame, packed)
            else:
                _choose_s(gamma, viol, cand_ptr, cand, covered, key, viol_b, self_key, a, choice_kind, choice_id,
                          served)
                active, self_moves = _cover_s(viol, cand_ptr, cand, covered, choice_kind, viol_b, served, unanimous,
                                              cost_frame, packed)
            if n_round >= PARALLEL_MIN:
                _apply_p(round_list, n_round, served, unanimous, a, advanced, cost_frame, packed)
            else:
                _apply_s(round_list, n_round, served, unanimous, a, advanced, cost_frame, packed)
            for j in range(n_round):
                if advanced[j]:
                    next_arrived[n_arrived] = round_list[j]
                    n_arrived += 1
            stats[1] += self_moves
            if active == 0:
                break
        # what is still uncovered had no admissible supporter (forced); it stays a violation unless a
        # lower frame later moves its onset
        for i in range(nv):
            if not covered[i]:
                left_frame[viol[i]] = a
        arrived, next_arrived = next_arrived, arrived
    # every final violation was left at its final onset (a vertex's final onset was screened, and
    # support only grows), all forced
    for u in range(n):
        if left_frame[u] >= 1 and (packed[u] & PACK_MASK) == left_frame[u]:
            stats[3] += 1


def causal_repair(indptr, indices, gamma, onset_floor, recovery_ceiling, t_inf, t_rec, T,
                  violating=None, packed=None) -> np.ndarray:
    """Run the frame rounds from T down to 1 in place on ``t_inf``/``t_rec``.

    Returns stats: [0] violators seen, [1] self moves, [2] rounds, [3] violations left (all forced).

    The vertices screened at frame a are those whose decoded onset was a plus the supporters moved
    to a by frame a + 1 (a self move lands on a supported frame and can never violate), the same
    set the CUDA kernels find by scanning every vertex. ``violating`` (the nonzero
    :func:`census_flags` of the input) narrows the first group to the input's violators: support
    only grows, so a vertex supported at its unchanged onset stays supported. Nearly every access is
    a random neighbour lookup, so the rounds keep every vertex's hitting times and window in its
    packed state (:func:`pack_states`, 8 bytes) and write the hitting times back at the end;
    ``packed`` (:func:`packed_states` of the same arrays) is used, and changed, when given.
    """
    n = t_inf.shape[0]
    if packed is None:
        packed = packed_states(t_inf, t_rec, onset_floor, recovery_ceiling, T)
    per_vertex = np.zeros((n, 4), dtype=np.int64)
    per_vertex[:, 1] = -1
    threads = numba.config.NUMBA_NUM_THREADS
    round_list = np.empty(n + LIST_CHUNK * threads, dtype=np.int64)
    slot = np.zeros(8 * threads, dtype=np.int64)
    stats = np.zeros(4, dtype=np.int64)
    left_frame = np.full(n, -1, dtype=np.int64)
    if violating is None:
        violating = np.ones(n, dtype=np.bool_)
    bucket_ptr, bucket = _onset_buckets(t_inf, T, violating)
    _frames(indptr, indices, np.asarray(gamma), packed, bucket_ptr, bucket, int(T), int(causal_rules.UNANIMOUS_ROUNDS),
            per_vertex, round_list, slot, stats, left_frame)
    unpack_hits(packed, t_inf, t_rec)
    return stats


def observation_window_arrays(obs_times, obs_states, n: int, T: int) -> tuple[np.ndarray, np.ndarray]:
    """(onset_floor, recovery_ceiling) of every vertex, see :func:`observation_window`."""
    onset_floor = np.empty(n, dtype=np.int64)
    recovery_ceiling = np.empty(n, dtype=np.int64)
    observation_window(np.ascontiguousarray(obs_times, dtype=np.int64),
                       np.ascontiguousarray(obs_states, dtype=np.uint8), int(T), onset_floor, recovery_ceiling)
    return onset_floor, recovery_ceiling


def causal_repair_host(prep, gamma, t_inf, t_rec, T: int) -> tuple:
    """CPU path of :func:`battus.decode.causal_decode`: (t_inf, t_rec, counts); the inputs stay unchanged."""
    original_inf = np.ascontiguousarray(t_inf, dtype=np.int64)
    original_rec = np.ascontiguousarray(t_rec, dtype=np.int64)
    t_inf, t_rec = original_inf.copy(), original_rec.copy()
    floor, ceiling = observation_window_arrays(prep.obs_times, prep.obs_states, prep.n, T)
    packed = packed_states(t_inf, t_rec, floor, ceiling, T)
    flags = census_flags(prep.indptr, prep.indices, t_inf, t_rec, floor, ceiling, T, packed=packed)
    before = census_counts(flags, t_inf, T)
    stats = causal_repair(prep.indptr, prep.indices, np.asarray(gamma), floor, ceiling, t_inf, t_rec, T,
                          violating=flags != 0, packed=packed)
    # the repair knows what it left (all forced); the scorer's certify_violations recounts it
    # independently, and the tests hold the two equal
    events = int(np.count_nonzero((t_inf > 0) & (t_inf <= T)))
    after = (events, int(stats[3]), int(stats[3]))
    moved = int(np.count_nonzero((t_inf != original_inf) | (t_rec != original_rec)))
    return t_inf, t_rec, causal_rules.summary(before, after, stats, moved)
