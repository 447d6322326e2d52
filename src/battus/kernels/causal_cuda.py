"""Numba-CUDA kernels of the graph-causal decoder (Battus-C), identical in output to the CPU kernels.

The whole repair is one cooperative kernel (:func:`_repair_body`): a grid that
stays resident, runs the input census, buckets the violators by onset and
then the frames from T down to 1, with a grid-wide barrier between steps.
A launch from Python through Numba costs about a tenth of a millisecond, so
a launch per step and round made the frame loop launch-bound; a grid barrier
costs a few microseconds. The kernel is compiled twice, uncapped for small
graphs (one block per SM: fewer blocks for each barrier to wait for) and
capped at :data:`REPAIR_REGISTERS` registers for large ones (several blocks
per SM, to hide memory latency); :mod:`battus.backends.cuda.causal_repair`
launches it.

Work inside a step is balanced by arcs, not vertices: a vertex looking for
support (an in-neighbour infected one frame earlier) first walks up to
``light_arcs`` of its in-arcs alone, and only the few that find none there
(hubs, mostly) are finished by the whole grid, one thread per remaining arc;
the rounds of a frame (serving counts, picks, stamps, covers) run one thread
per in-arc of the frame's violators, found by a binary search over their
arc offsets. On heavy-tailed graphs a thread per vertex walked a hub's
in-list serially while the grid idled.

The rules are the plain functions of :mod:`battus.kernels.causal_rules`
compiled as device functions. Where several threads write one cell the write
is a stamp (all the same value) or an atomic min/max/add whose result does
not depend on the order; a violator's best supporter is the atomic minimum
of the keys, then of the ids among equal keys (the CPU's order). Lists built
by atomic appends come out in arbitrary order, which the rounds do not see,
so the hitting times equal the CPU's bit for bit for the same posteriors.

The hot searches read hitting times and observation windows packed two to an
int32 (4 bytes per neighbour; on SNAP-sized graphs the packed arrays stay in
L2), which limits T to :data:`MAX_T`; the int64 arrays stay authoritative.

Device memory beyond the backend's arrays (n vertices, m arcs): one workspace
of about ``171 n + 8 m`` bytes (the candidate lists of a frame can reach every
arc; the observation windows are computed into it) and ``16 n`` for the repaired copy
of the hitting times (the input is kept to count moved vertices).
"""

from __future__ import annotations

import numba
import numpy as np

from . import causal_rules
from .cuda_common import cuda, kernel
from .grid_cuda import THREADS, append_index, grid_scan, owner_of

# The kernel's register cap on large graphs (battus.backends.cuda.causal_repair.LARGE_ARCS and up).
REPAIR_REGISTERS = 80

support_cost = cuda.jit(device=True)(causal_rules.support_cost_py)
self_cost = cuda.jit(device=True)(causal_rules.self_cost_py)
observation_window_rule = cuda.jit(device=True)(causal_rules.observation_window_py)
within = cuda.jit(device=True)(causal_rules.within_py)
support_frame = cuda.jit(device=True)(causal_rules.support_frame_py)
self_frame = cuda.jit(device=True)(causal_rules.self_frame_py)
support_key = cuda.jit(device=True)(causal_rules.support_key_py)
better = cuda.jit(device=True)(causal_rules.better_py)

KIND_SUPPORT = causal_rules.KIND_SUPPORT
KIND_SELF = causal_rules.KIND_SELF
KIND_NONE = causal_rules.KIND_NONE
NO_ID = np.iinfo(np.int32).max
# hitting times and observation windows are packed two to an int32 (see _pack): T + 1 < 2**15
PACK_BITS = 15
PACK_MASK = (1 << PACK_BITS) - 1
MAX_T = PACK_MASK - 1

# ctl slots (int64): counters used in alternate frames / rounds sit in pairs indexed by parity
C_HEAVY = 0  # 2 slots: items left to the arc-parallel search
C_VIOL = 2  # 2 slots: violators of the frame
C_ARRIVED = 4  # 2 slots: supporters moved to the next frame
C_ROUND = 6  # 2 slots: supporters of the round
C_ACTIVE = 8  # 2 slots: violators with an option still uncovered after the round
C_SELF = 10  # 2 slots: self moves of the round
C_BEFORE = 12  # 3 slots: input events, violations, forced
C_AFTER = 15  # 2 slots: output events, violations left
C_MOVED = 17  # vertices whose hitting times the repair changed (0 when repairing in place)
C_SIZE = 18
# stats (int64), as the CPU's: violators seen, self moves, rounds, violations left
S_SEEN, S_SELF, S_ROUNDS, S_LEFT = 0, 1, 2, 3
S_SIZE = 4
# rows of the workspace arrays (_run), one array per element type
W_WINDOW, W_HITS, W_HEAVY, W_BUCKET, W_VIOL, W_BEST_ID, W_COUNT = 0, 1, 2, 3, 4, 5, 6
W_PROPOSED, W_REJECTED, W_ROUND_LIST, W_ARRIVED = 7, 8, 9, 10  # arrived: two rows (alternate frames)
W_ROWS = 12  # int32, n
X_BEST, X_N_ADM, X_HEAVY_ARCS, X_HEAVY_PTR, X_VIOL_B, X_VIOL_ARCS = 0, 1, 2, 3, 4, 5
X_VIOL_PTR, X_VIOL_CAND, X_CAND_PTR, X_CAND_FILL, X_COST_FRAME, X_LEFT_FRAME = 6, 7, 8, 9, 10, 11
X_ROWS = 12  # int64, n + 1 (the prefix sums need n + 1)
F_SELF_KEY, F_BEST_KEY, F_COST = 0, 1, 2
F_ROWS = 3  # float64, n
B_STATE, B_COVERED, B_HIT = 0, 1, 2
B_ROWS = 3  # int8, n


@cuda.jit(device=True)
def _pack(lo, hi):
    """Two frames 0..T+1 in one int32: the hot searches read 4 bytes per neighbour (L2-resident on
    SNAP-sized graphs) instead of two int64 cells in separate arrays."""
    return np.int32(lo | (hi << PACK_BITS))


@cuda.jit(device=True)
def _unpack(packed):
    """The two frames of :func:`_pack`, low one first."""
    return packed & PACK_MASK, packed >> PACK_BITS


@cuda.jit(device=True)
def _within(packed, f):
    """The rule ``within`` on a packed (onset, recovery) or (onset floor, recovery ceiling)."""
    lo, hi = _unpack(packed)
    return within(lo, hi, f)


@cuda.jit(device=True)
def _item(i, a, bucket, bucket_ptr, arrived):
    """Vertex of pool item i: census (a = 0) every vertex; frame a its onset bucket, then the arrivals."""
    if a == 0:
        return i
    nb = bucket_ptr[a + 1] - bucket_ptr[a]
    if i < nb:
        return bucket[bucket_ptr[a] + i]
    return arrived[i - nb]


@cuda.jit(device=True)
def _screen(indptr, indices, window, hits, t_inf, T, a, pool_size, bucket, bucket_ptr,
            arrived, light_arcs, state, best, n_adm, heavy, heavy_arcs, ctl, heavy_slot, block_sums, heavy_ptr,
            sh, grid):
    """Per pool item: state 0 skipped or supported, 1 violator; best = latest frame b with support at b - 1
    (the maximum of support_frame), n_adm = admissible supporters. Census (a = 0): each vertex at its own onset.
    Ends on a grid barrier."""
    tid = cuda.grid(1)
    size = cuda.gridsize(1)
    for i in range(tid, pool_size, size):
        u = _item(i, a, bucket, bucket_ptr, arrived)
        ua = t_inf[u]
        state[i] = 0
        if (a == 0 and (ua <= 0 or ua > T)) or (a != 0 and ua != a):
            continue
        f = ua - 1
        top = -1
        k = 0
        start = indptr[u]
        stop = indptr[u + 1]
        end = min(stop, start + light_arcs)
        supported = False
        for e in range(start, end):
            v = indices[e]
            x = hits[v]
            if _within(x, f):
                supported = True
                break
            onset, recovery = _unpack(x)
            top = max(top, support_frame(onset, recovery, ua))
            if v != u and _within(window[v], f):
                k += 1
        if supported:
            continue
        state[i] = 1
        best[i] = top
        n_adm[i] = k
        j = append_index(ctl, heavy_slot, stop > end)
        if j >= 0:
            heavy[j] = i
    grid.sync()
    n_heavy = ctl[heavy_slot]
    if n_heavy == 0:
        return
    # Census: the rest in waves of growing length (4x each), so that an item that finds support early
    # drops out before the grid reads all of its arcs (a violator's arcs are all read: no support must be
    # certain). A frame's pool is mostly the census's violators, read in full anyway: one wave.
    offset = light_arcs
    chunk = 4 * light_arcs if a == 0 else indices.shape[0] + 1
    while True:
        for j in range(tid, n_heavy, size):
            i = heavy[j]
            u = _item(i, a, bucket, bucket_ptr, arrived)
            rest = indptr[u + 1] - indptr[u] - offset
            heavy_arcs[j] = min(rest, chunk) if state[i] == 1 and rest > 0 else 0
        grid.sync()
        grid_scan(heavy_arcs, heavy_arcs, n_heavy, heavy_ptr, heavy_ptr, block_sums, sh, grid)
        total = heavy_ptr[n_heavy]
        if total == 0:
            return
        for pos in range(tid, total, size):
            j = owner_of(heavy_ptr, n_heavy, pos)
            i = heavy[j]
            if state[i] == 0:
                continue  # support found (by another thread): best and n_adm are not needed
            u = _item(i, a, bucket, bucket_ptr, arrived)
            ua = t_inf[u]
            f = ua - 1
            v = indices[indptr[u] + offset + (pos - heavy_ptr[j])]
            x = hits[v]
            if _within(x, f):
                state[i] = 0  # every writer writes 0
            onset, recovery = _unpack(x)
            cuda.atomic.max(best, i, support_frame(onset, recovery, ua))
            if v != u and _within(window[v], f):
                cuda.atomic.add(n_adm, i, 1)
        grid.sync()
        if a != 0:
            return  # a frame reads its pool in one wave: nothing is left
        offset += chunk
        chunk *= 4


@cuda.jit(device=True)
def _choice(i, viol, viol_b, self_key, best_key, best_id):
    """(kind, vertex) of violator i's pick: its best supporter (least key, then id), or its self move
    when that is better (as the CPU's _choose), or none when it has no candidate."""
    if best_id[i] == NO_ID:
        return KIND_NONE, -1
    if viol_b[i] >= 0 and better(self_key[i], KIND_SELF, viol[i], best_key[i], KIND_SUPPORT, best_id[i]):
        return KIND_SELF, viol[i]
    return KIND_SUPPORT, best_id[i]


@cuda.jit(device=True)
def _arc(pos, viol_ptr, nv, viol, indptr, indices):
    """(violator index, violator, in-neighbour) of arc ``pos`` of the frame's violators."""
    i = owner_of(viol_ptr, nv, pos)
    u = viol[i]
    return i, u, indices[indptr[u] + (pos - viol_ptr[i])]


# ----------------------------------------------------------------------------
# the cooperative kernel


def _repair_body(indptr, indices, gamma, obs_times, obs_states, orig_inf, orig_rec, t_inf, t_rec, T,
                 unanimous_rounds, light_arcs, census_only, ws32, ws64, wsf64, ws8, arc32, small):
    grid = cuda.cg.this_grid()
    sh = cuda.shared.array((2, THREADS), numba.int64)
    tid = cuda.grid(1)
    size = cuda.gridsize(1)
    # the workspace comes as six arrays, one per element type (rows: see _run): Numba types and passes
    # each argument of a launch on the host, which for 50 arrays costs more than a small graph's repair
    window, hits, heavy, bucket, viol = ws32[W_WINDOW], ws32[W_HITS], ws32[W_HEAVY], ws32[W_BUCKET], ws32[W_VIOL]
    best_id, count = ws32[W_BEST_ID], ws32[W_COUNT]
    proposed, rejected, round_list = ws32[W_PROPOSED], ws32[W_REJECTED], ws32[W_ROUND_LIST]
    best, n_adm, heavy_arcs, heavy_ptr = ws64[X_BEST], ws64[X_N_ADM], ws64[X_HEAVY_ARCS], ws64[X_HEAVY_PTR]
    viol_b, viol_arcs, viol_ptr, viol_cand = ws64[X_VIOL_B], ws64[X_VIOL_ARCS], ws64[X_VIOL_PTR], ws64[X_VIOL_CAND]
    cand_ptr, cand_fill, cost_frame, left_frame = ws64[X_CAND_PTR], ws64[X_CAND_FILL], ws64[X_COST_FRAME], \
        ws64[X_LEFT_FRAME]
    self_key, best_key, cost = wsf64[F_SELF_KEY], wsf64[F_BEST_KEY], wsf64[F_COST]
    state, covered, hit = ws8[B_STATE], ws8[B_COVERED], ws8[B_HIT]
    cand_owner, cand_v = arc32[0], arc32[1]
    ctl = small[0:C_SIZE]
    stats = small[C_SIZE:C_SIZE + S_SIZE]
    bucket_ptr = small[C_SIZE + S_SIZE:C_SIZE + S_SIZE + T + 2]
    bucket_fill = small[C_SIZE + S_SIZE + T + 2:C_SIZE + S_SIZE + 2 * (T + 2)]
    block_sums = small[C_SIZE + S_SIZE + 2 * (T + 2):]
    n = t_inf.shape[0]
    # the kernel sets up its own state (each host-side copy or upload would cost a fraction of a millisecond)
    for u in range(tid, n, size):
        t_inf[u] = orig_inf[u]  # the same arrays when repairing in place
        t_rec[u] = orig_rec[u]
        lo, hi = observation_window_rule(obs_times, obs_states, T, u)
        window[u] = _pack(lo, hi)
        hits[u] = _pack(orig_inf[u], orig_rec[u])
    for k in range(tid, C_SIZE + S_SIZE, size):
        small[k] = 0  # ctl and stats
    for k in range(tid, bucket_fill.shape[0], size):
        bucket_fill[k] = 0
    grid.sync()

    # -- census of the input: flags, counts, onset buckets of the violators
    _screen(indptr, indices, window, hits, t_inf, T, 0, n, bucket, bucket_ptr, ws32[W_ARRIVED],
            light_arcs, state, best, n_adm, heavy, heavy_arcs, ctl, C_HEAVY, block_sums, heavy_ptr, sh, grid)
    for u in range(tid, n, size):
        count[u] = 0
        proposed[u] = 0
        rejected[u] = 0
        cost_frame[u] = -1
        left_frame[u] = -1
        if 1 <= t_inf[u] <= T:
            cuda.atomic.add(ctl, C_BEFORE, 1)
        if state[u] == 1:
            cuda.atomic.add(ctl, C_BEFORE + 1, 1)
            if n_adm[u] == 0:
                cuda.atomic.add(ctl, C_BEFORE + 2, 1)
            cuda.atomic.add(bucket_fill, t_inf[u], 1)
    grid.sync()
    if census_only:
        return
    if tid == 0:
        run = 0
        for a in range(T + 2):
            bucket_ptr[a] = run
            run += bucket_fill[a]
            bucket_fill[a] = bucket_ptr[a]
        ctl[C_HEAVY] = 0
    grid.sync()
    for u in range(tid, n, size):
        if state[u] == 1:
            bucket[cuda.atomic.add(bucket_fill, t_inf[u], 1)] = u
    grid.sync()

    # -- frames
    stamp = 0
    for a in range(T, 0, -1):
        # every read of last frame's counters is done before the slots of the next one are cleared
        grid.sync()
        p = a & 1
        q = 1 - p
        f = a - 1
        pool_size = bucket_ptr[a + 1] - bucket_ptr[a] + ctl[C_ARRIVED + p]
        if tid == 0:
            ctl[C_HEAVY + q] = 0
            ctl[C_VIOL + q] = 0
            ctl[C_ARRIVED + q] = 0
        if pool_size == 0:
            continue
        # arrived[] alternates halves: frame a reads half p, its supporters land in half q
        arr_in = ws32[W_ARRIVED + p]
        arr_out = ws32[W_ARRIVED + q]
        _screen(indptr, indices, window, hits, t_inf, T, a, pool_size, bucket, bucket_ptr,
                arr_in, light_arcs, state, best, n_adm, heavy, heavy_arcs, ctl, C_HEAVY + p, block_sums, heavy_ptr,
                sh, grid)
        for i in range(tid, pool_size, size):
            j = append_index(ctl, C_VIOL + p, state[i] == 1)
            if j < 0:
                continue
            u = _item(i, a, bucket, bucket_ptr, arr_in)
            b = self_frame(best[i], window[u] & PACK_MASK)  # the onset floor
            viol[j] = u
            viol_b[j] = b
            self_key[j] = self_cost(gamma, u, b, a) if b >= 0 else 0.0
            viol_arcs[j] = indptr[u + 1] - indptr[u]
            viol_cand[j] = n_adm[i]
            cand_fill[j] = 0
            covered[j] = 0
            hit[j] = 0
        grid.sync()
        nv = ctl[C_VIOL + p]
        if nv == 0:
            continue
        if tid == 0:
            stats[S_SEEN] += nv
        # candidates (admissible in-neighbours, owner and id) listed once per frame, so that the rounds
        # read them in order instead of searching arc owners and windows again
        grid_scan(viol_arcs, viol_cand, nv, viol_ptr, cand_ptr, block_sums, sh, grid)
        arcs = viol_ptr[nv]
        n_cand = cand_ptr[nv]
        for pos in range(tid, arcs, size):
            i, u, v = _arc(pos, viol_ptr, nv, viol, indptr, indices)
            if v != u and _within(window[v], f):
                slot = cand_ptr[i] + cuda.atomic.add(cand_fill, i, 1)
                cand_owner[slot] = i
                cand_v[slot] = v
        grid.sync()
        rounds = 0
        while True:
            stamp += 1
            r = stamp & 1
            unanimous = rounds < unanimous_rounds
            rounds += 1
            # serving counts; the supporters of the round are listed once each, and the one thread that
            # lists a supporter brings its support cost up to date (cached per frame, extended by one
            # cell across frames as on the CPU): a key is then formed where it is compared, from the
            # cost and the final count, with no pass over the supporters and no barrier of its own
            for i in range(tid, nv, size):
                best_key[i] = np.inf
                best_id[i] = NO_ID
            for pos in range(tid, n_cand, size):
                i = cand_owner[pos]
                v = cand_v[pos]
                first = False
                if not covered[i]:
                    first = cuda.atomic.add(count, v, 1) == 0
                j = append_index(ctl, C_ROUND + r, first)
                if first:
                    round_list[j] = v
                    if cost_frame[v] != a:
                        # v's hitting times from the packed copy (4 bytes, kept with every change of
                        # t_inf and t_rec) rather than two int64 cells of arrays larger than L2
                        onset, recovery = _unpack(hits[v])
                        if cost_frame[v] == a + 1 and recovery > a and onset > a:
                            cost[v] = cost[v] + (np.float64(gamma[0, f, v]) - 0.5)
                        else:
                            cost[v] = support_cost(gamma, onset, recovery, v, f)
                        cost_frame[v] = a
            grid.sync()
            n_round = ctl[C_ROUND + r]
            if tid == 0:  # the other parity's slots, read by every thread before the last barrier
                ctl[C_ROUND + 1 - r] = 0
                ctl[C_ACTIVE + 1 - r] = 0
                ctl[C_SELF + 1 - r] = 0
            # each violator's best supporter: least key, then least id
            for pos in range(tid, n_cand, size):
                i = cand_owner[pos]
                if covered[i]:
                    continue
                v = cand_v[pos]
                k = support_key(cost[v], count[v])
                # read first: under contention (hubs share one violator's slot) most threads skip the atomic
                if k < best_key[i]:
                    cuda.atomic.min(best_key, i, k)
            grid.sync()
            for pos in range(tid, n_cand, size):
                i = cand_owner[pos]
                if covered[i]:
                    continue
                v = cand_v[pos]
                if v < best_id[i] and support_key(cost[v], count[v]) == best_key[i]:
                    cuda.atomic.min(best_id, i, v)
            grid.sync()
            # each violator's pick against its self move (_choice), taken where it is needed rather than
            # stored by a pass of its own: proposals and rejections of the supporters
            for pos in range(tid, n_cand, size):
                i = cand_owner[pos]
                if covered[i]:
                    continue
                kind, pick = _choice(i, viol, viol_b, self_key, best_key, best_id)
                if kind == KIND_NONE:
                    continue
                v = cand_v[pos]
                if kind == KIND_SUPPORT and pick == v:
                    proposed[v] = stamp
                else:
                    rejected[v] = stamp
            grid.sync()
            # covered by any selected supporter (proposed by some violator, rejected by none); in the
            # last round every pick is selected
            if unanimous:
                for pos in range(tid, n_cand, size):
                    i = cand_owner[pos]
                    if covered[i]:
                        continue
                    v = cand_v[pos]
                    if proposed[v] == stamp and rejected[v] != stamp:
                        kind, pick = _choice(i, viol, viol_b, self_key, best_key, best_id)
                        if kind == KIND_SUPPORT:
                            hit[i] = 1
                grid.sync()
            for i in range(tid, nv, size):
                if covered[i]:
                    continue
                kind, pick = _choice(i, viol, viol_b, self_key, best_key, best_id)
                if kind == KIND_NONE:
                    continue
                if kind == KIND_SELF:
                    u = viol[i]
                    t_inf[u] = min(t_inf[u], viol_b[i])
                    hits[u] = _pack(t_inf[u], t_rec[u])
                    cost_frame[u] = -1  # its support cost changed
                    covered[i] = 1
                    cuda.atomic.add(ctl, C_SELF + r, 1)
                elif hit[i] or not unanimous:
                    covered[i] = 1
                else:
                    cuda.atomic.add(ctl, C_ACTIVE + r, 1)
            grid.sync()
            # the selected supporters become infected at f; those whose onset moved are screened next frame
            for j in range(tid, n_round, size):
                v = round_list[j]
                count[v] = 0
                selected = proposed[v] == stamp and (rejected[v] != stamp or not unanimous)
                k = append_index(ctl, C_ARRIVED + q, selected and t_inf[v] > f)
                if k >= 0:
                    t_inf[v] = f
                    arr_out[k] = v
                if selected:
                    t_rec[v] = max(t_rec[v], a)
                    hits[v] = _pack(t_inf[v], t_rec[v])
                    cost_frame[v] = -1
            grid.sync()
            if tid == 0:
                stats[S_SELF] += ctl[C_SELF + r]
                stats[S_ROUNDS] += 1
            if ctl[C_ACTIVE + r] == 0:
                break
        # what is still uncovered had no admissible supporter (forced)
        for i in range(tid, nv, size):
            if not covered[i]:
                left_frame[viol[i]] = a
        grid.sync()

    # -- what is left: events, and the left violators whose onset did not move since
    for u in range(tid, n, size):
        if 1 <= t_inf[u] <= T:
            cuda.atomic.add(ctl, C_AFTER, 1)
            if left_frame[u] == t_inf[u]:
                cuda.atomic.add(ctl, C_AFTER + 1, 1)
        if t_inf[u] != orig_inf[u] or t_rec[u] != orig_rec[u]:
            cuda.atomic.add(ctl, C_MOVED, 1)
    grid.sync()
    if tid == 0:
        stats[S_LEFT] = ctl[C_AFTER + 1]


# compiled twice (battus.backends.cuda.causal_repair picks one per graph): capped, for every resident block of
# a large graph, and uncapped, one block per SM
repair_capped = kernel(max_registers=REPAIR_REGISTERS)(_repair_body)
repair_per_sm = kernel()(_repair_body)
