"""Naive references of every kernel, in one place: what the CPU and CUDA kernels are tested against.

Written for clarity, not speed: numpy vectorised over vertices with Python
loops over time and candidates (inference, decoding, fitting), and the
graph-causal decoder with Python lists and sets, one frame at a time. The
package never imports this module; the tests compare both backends' kernels
against it, and ``benchmarks/cpu.py`` measures the kernels' speed-up over it.
"""

from __future__ import annotations

import numpy as np

from battus.graph import Graph
from battus.kernels.causal_rules import UNANIMOUS_ROUNDS
from battus.problem import Problem, segments, settled_frame


def naive_pressure(graph: Graph, f_inf: np.ndarray, beta_i: float) -> np.ndarray:
    src, dst = graph.arcs()
    log_keep = np.log1p(-beta_i * f_inf[src])
    return np.exp(np.bincount(dst, weights=log_keep, minlength=graph.n))


def naive_mean_field_pressures(problem: Problem, beta_i: float, beta_r: float, reset: bool,
                               pin: bool = True) -> np.ndarray:
    """Every frame's pressure. With ``pin``, pressures nothing reads are neutral (1): with
    ``reset``, those of a vertex the last reset put in I or R, until the next observed frame;
    reset or not, every one after the first observed frame from which no snapshot has an S."""
    n, T = problem.n, problem.T
    obs = problem.observations
    obs_index = obs.index(T)
    settled = settled_frame(obs.times, obs.states, T)
    f = np.repeat(problem.prior[:, None], n, axis=1)
    rho = np.empty((T + 1, n))
    pinned = np.zeros(n, dtype=bool)
    for t in range(T + 1):
        rho[t] = naive_pressure(problem.graph, f[1], beta_i)
        rho[t, pinned] = 1.0
        if pin and t > settled:
            rho[t] = 1.0
        if reset and obs_index[t] >= 0:  # scored (and pressured) first, then reset
            f = np.eye(3)[problem.observations.states[obs_index[t]]].T
            pinned = (problem.observations.states[obs_index[t]] != 0) & pin
        if t < T:
            k = f[1] + f[0] * (1.0 - rho[t])
            f = np.stack([f[0] * rho[t], k * (1.0 - beta_r), f[2] + k * beta_r])
    return rho


def naive_transition(q: np.ndarray, beta_r: float) -> np.ndarray:
    """(n, 3, 3) row-stochastic matrices P[u, x, x'] for avoidance probabilities q."""
    P = np.zeros((q.shape[0], 3, 3))
    P[:, 0, 0] = q
    P[:, 0, 1] = (1.0 - q) * (1.0 - beta_r)
    P[:, 0, 2] = (1.0 - q) * beta_r
    P[:, 1, 1] = 1.0 - beta_r
    P[:, 1, 2] = beta_r
    P[:, 2, 2] = 1.0
    return P


def naive_forward_backward(problem: Problem, rho: np.ndarray, beta_r: float, backward: bool = True) -> np.ndarray:
    n, T = problem.n, problem.T
    obs = problem.observations
    obs_index = obs.index(T)
    gamma = np.empty((3, T + 1, n))
    left, right = segments(obs.times, T)
    for lo, hi in zip(left, right, strict=True):
        alpha = np.empty((hi - lo + 1, n, 3))
        delta = np.ones((hi - lo + 1, n, 3))
        alpha[0] = np.eye(3)[obs.states[obs_index[lo]]] if obs_index[lo] >= 0 else problem.prior
        for j in range(hi - lo):
            a = np.einsum("ux,uxy->uy", alpha[j], naive_transition(rho[lo + j + 1], beta_r))
            alpha[j + 1] = a / a.sum(axis=1, keepdims=True)
        if backward:
            if obs_index[hi] >= 0:
                delta[-1] = np.eye(3)[obs.states[obs_index[hi]]]
            for j in range(hi - lo - 1, -1, -1):
                d = np.einsum("uxy,uy->ux", naive_transition(rho[lo + j + 1], beta_r), delta[j + 1])
                delta[j] = d / d.sum(axis=1, keepdims=True)
        g = alpha * delta
        g /= g.sum(axis=2, keepdims=True)
        gamma[:, lo:hi + 1, :] = np.transpose(g, (2, 0, 1))
    return gamma


def naive_threshold(gamma: np.ndarray, tau: float, with_recovery: bool) -> tuple[np.ndarray, np.ndarray]:
    frames = gamma.shape[1]

    def first(mask):
        return np.where(mask.any(axis=0), np.argmax(mask, axis=0), frames).astype(np.int64)

    t_inf = first(1.0 - gamma[0] >= tau)
    t_rec = first(gamma[2] >= tau) if with_recovery else np.full(gamma.shape[2], frames, dtype=np.int64)
    return t_inf, t_rec


def naive_map(gamma: np.ndarray, with_recovery: bool) -> tuple[np.ndarray, np.ndarray]:
    g = gamma if with_recovery else gamma[:2]
    states = np.maximum.accumulate(np.argmax(g, axis=0), axis=0)
    frames = gamma.shape[1]

    def first(mask):
        return np.where(mask.any(axis=0), np.argmax(mask, axis=0), frames).astype(np.int64)

    return first(states >= 1), first(states >= 2)


def naive_project(problem: Problem, t_inf: np.ndarray, t_rec: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    t_inf, t_rec = t_inf.copy(), t_rec.copy()
    big = np.iinfo(np.int64).max
    lo_i = np.zeros_like(t_inf)
    lo_r = np.zeros_like(t_inf)
    hi_i = np.full_like(t_inf, big)
    hi_r = np.full_like(t_inf, big)
    for t, s in zip(problem.observations.times, problem.observations.states, strict=True):
        lo_i = np.where(s == 0, np.maximum(lo_i, t + 1), lo_i)
        lo_r = np.where(s <= 1, np.maximum(lo_r, t + 1), lo_r)
        hi_i = np.where(s >= 1, np.minimum(hi_i, t), hi_i)
        hi_r = np.where(s == 2, np.minimum(hi_r, t), hi_r)
    t_inf = np.minimum(np.maximum(t_inf, lo_i), hi_i)
    t_rec = np.maximum(np.minimum(np.maximum(t_rec, lo_r), hi_r), t_inf)
    return t_inf, t_rec


def naive_segmented_loglik(problem: Problem, beta_i: np.ndarray, beta_r: np.ndarray) -> np.ndarray:
    """Eq. 4 (unnormalised) for each candidate, one candidate at a time."""
    T = problem.T
    obs = problem.observations
    obs_index = obs.index(T)
    out = np.zeros(beta_i.shape[0])
    last = int(obs.times.max())
    for c in range(beta_i.shape[0]):
        f = np.repeat(problem.prior[:, None], problem.n, axis=1)
        for t in range(last + 1):
            if obs_index[t] >= 0:
                y = obs.states[obs_index[t]]
                p = f[y, np.arange(problem.n)]
                out[c] += np.sum(np.log(np.maximum(p, 1e-300)))
                f = np.eye(3)[y].T
            if t == last:
                break
            rho = naive_pressure(problem.graph, f[1], beta_i[c])
            k = f[1] + f[0] * (1.0 - rho)
            f = np.stack([f[0] * rho, k * (1.0 - beta_r[c]), f[2] + k * beta_r[c]])
    return out


def naive_reconstruct(problem: Problem, beta_i: float, beta_r: float, *, reset: bool = False,
                      backward: bool = True, decoder: str = "threshold", tau: float = 0.65,
                      projection: bool = True) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Fixed-rate pipeline; returns (gamma, t_inf, t_rec)."""
    sir = problem.model == "sir"
    if not sir:
        beta_r = 0.0
    rho = naive_mean_field_pressures(problem, beta_i, beta_r, reset)
    gamma = naive_forward_backward(problem, rho, beta_r, backward)
    t_inf, t_rec = naive_threshold(gamma, tau, sir) if decoder == "threshold" else naive_map(gamma, sir)
    if projection:
        t_inf, t_rec = naive_project(problem, t_inf, t_rec)
    return gamma, t_inf, t_rec


# ----------------------------------------------------------------------------
# graph-causal decoding (Battus-C): the same decoder written with Python sets and dicts


def naive_window(obs_times, obs_states, n, T):
    floor = [0] * n
    ceiling = [T + 1] * n
    for k, t in enumerate(obs_times):
        for v in range(n):
            s = int(obs_states[k, v])
            if s == 0:
                floor[v] = max(floor[v], int(t) + 1)
            elif s == 2:
                ceiling[v] = min(ceiling[v], int(t))
    return floor, ceiling


def naive_in_neighbours(graph, u):
    return [int(v) for v in graph.indices[graph.indptr[u]:graph.indptr[u + 1]]]


def naive_infected(ti, tr, v, f):
    return ti[v] <= f < tr[v]


def naive_repair(graph, gamma, ti, tr, obs_times, obs_states, T, unanimous_rounds=UNANIMOUS_ROUNDS):
    """Frame rounds of battus.kernels.causal_cpu written out directly (slow, obvious)."""
    n = graph.n
    ti = [int(x) for x in ti]
    tr = [int(x) for x in tr]
    floor, ceiling = naive_window(obs_times, obs_states, n, T)

    def can(v, f):
        return floor[v] <= f < ceiling[v]

    def support_cost(v, f):
        c = 0.0
        for t in range(ti[v] - 1, f - 1, -1):  # S -> I, summed backwards from the onset
            c += float(gamma[0, t, v]) - 0.5
        for t in range(tr[v], f + 1):  # R -> I
            c += float(gamma[2, t, v]) - 0.5
        return c

    for a in range(T, 0, -1):
        f = a - 1
        viol = [u for u in range(n) if ti[u] == a
                and not any(naive_infected(ti, tr, v, f) for v in naive_in_neighbours(graph, u))]
        cands = {u: sorted({v for v in naive_in_neighbours(graph, u) if v != u and can(v, f)}) for u in viol}
        own = {}
        for u in viol:
            b = a - 1
            while b >= floor[u]:
                if b == 0 or any(naive_infected(ti, tr, v, b - 1) for v in naive_in_neighbours(graph, u)):
                    break
                b -= 1
            if b >= floor[u]:
                c = 0.0
                for t in range(b, a):
                    c += float(gamma[0, t, u]) - 0.5
                own[u] = (b, c)
        uncovered = {u for u in viol if cands[u]}
        rounds = 0
        while uncovered:
            unanimous = rounds < unanimous_rounds
            rounds += 1
            served = {}
            for u in uncovered:
                for v in cands[u]:
                    served[v] = served.get(v, 0) + 1
            pick = {}
            for u in uncovered:
                options = []
                for v in cands[u]:
                    c = support_cost(v, f)
                    options.append((c / served[v] if c >= 0 else c * served[v], 0, v))
                if u in own:
                    options.append((own[u][1], 1, u))
                pick[u] = min(options)
            selected = set()
            for v in served:
                users = [u for u in uncovered if v in cands[u]]
                picked = [pick[u][1] == 0 and pick[u][2] == v for u in users]
                if all(picked) or (any(picked) and not unanimous):
                    selected.add(v)
            for u in list(uncovered):
                if pick[u][1] == 1:
                    ti[u] = min(ti[u], own[u][0])
                    uncovered.discard(u)
                elif any(v in selected for v in cands[u]):
                    uncovered.discard(u)
            for v in selected:
                ti[v] = min(ti[v], f)
                tr[v] = max(tr[v], a)
    return np.array(ti, dtype=np.int64), np.array(tr, dtype=np.int64)


def naive_certify(graph, states, obs_times, obs_states):
    T = states.shape[0] - 1
    floor, ceiling = naive_window(obs_times, obs_states, graph.n, T)
    violations = forced = 0
    for u in range(graph.n):
        infected = np.nonzero(states[:, u] != 0)[0]
        if infected.size == 0 or infected[0] == 0:
            continue
        a = int(infected[0])
        nbrs = naive_in_neighbours(graph, u)
        if any(states[a - 1, v] == 1 for v in nbrs):
            continue
        violations += 1
        if not any(v != u and floor[v] <= a - 1 < ceiling[v] for v in nbrs):
            forced += 1
    return violations, forced


# ----------------------------------------------------------------------------
# simulation: the synchronous SI/SIR step with Python loops over vertices and arcs


def naive_simulate(graph: Graph, model: str, T: int, n0: int, beta_i: float, beta_r: float, seed: int,
                   same_step_recovery: bool = False) -> np.ndarray:
    """The process of battus.simulate, drawing the same counter-based uniforms (battus.kernels.rng)."""
    from battus.kernels.rng import STREAM_RECOVERY, STREAM_TRANSMISSION, uniform_py
    from battus.simulate import initial_infections

    if model == "si":
        beta_r = 0.0
    states = np.zeros((T + 1, graph.n), dtype=np.uint8)
    states[0, initial_infections(graph.n, n0, seed)] = 1
    with np.errstate(over="ignore"):  # the draw's 64-bit arithmetic wraps by design
        for t in range(T):
            for u in range(graph.n):
                s = states[t, u]
                arcs = range(graph.indptr[u], graph.indptr[u + 1])
                infected = s == 1 or (s == 0 and any(
                    states[t, graph.indices[e]] == 1 and uniform_py(seed, STREAM_TRANSMISSION, t, e) < beta_i
                    for e in arcs))
                recovers = infected and (s == 1 or same_step_recovery) and \
                    uniform_py(seed, STREAM_RECOVERY, t, u) < beta_r
                states[t + 1, u] = 2 if (s == 2 or recovers) else (1 if infected else 0)
    return states


def naive_ditto_nrmse(truth: np.ndarray, pred: np.ndarray, model: str) -> float:
    """NRMSE as DITTO's evaluation code computes it (q-rz/KDD23-DITTO, inc/test.py, test_nrmse),
    restated vertex by vertex: the final frame is pinned to the truth, hitting times are the first
    frame in each state (T + 1 when never), and the I and R errors are averaged only for SIR."""
    T = truth.shape[0] - 1
    pred = np.vstack([pred[:T], truth[T:]])

    def hitting(states, level):
        return [next((t for t in range(T + 1) if states[t, u] == level), T + 1) for u in range(states.shape[1])]

    def mse(a, b):
        return sum((x - y) ** 2 for x, y in zip(a, b, strict=True)) / len(a)

    error = mse(hitting(truth, 1), hitting(pred, 1))
    if model == "sir":
        error = (error + mse(hitting(truth, 2), hitting(pred, 2))) / 2
    return error**0.5 / (T + 1)


def naive_upstream_distance(graph: Graph, targets: np.ndarray, limit: int) -> np.ndarray:
    """Fewest arcs from each vertex to a target, one breadth-first search per vertex along its out-arcs."""
    from collections import deque

    src, dst = graph.arcs()
    out = [[] for _ in range(graph.n)]
    for u, v in zip(src.tolist(), dst.tolist(), strict=True):
        out[u].append(v)
    dist = np.full(graph.n, limit + 1, dtype=np.int64)
    for start in range(graph.n):
        seen, queue = {start: 0}, deque([start])
        while queue:
            u = queue.popleft()
            if targets[u]:
                dist[start] = min(seen[u], limit + 1)
                break
            for v in out[u]:
                if v not in seen:
                    seen[v] = seen[u] + 1
                    queue.append(v)
    return dist


def naive_chung_lu(n: int, m: int, gamma: float, directed: bool, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """``battus.synth.chung_lu``'s graph as (indptr, indices), drawn the obvious way: the same
    draws from the same stream, ``np.unique`` for duplicates, a full permutation for the surplus,
    Python sets for both arcs of an undirected edge."""
    rng = np.random.default_rng(seed)
    perm_in = np.argsort(rng.random(n))
    perm_out = np.argsort(rng.random(n)) if directed else perm_in
    a = 1.0 / (gamma - 1.0)

    def endpoints(count):
        x = (1.0 + rng.random(count) * ((n + 1.0) ** (1.0 - a) - 1.0)) ** (1.0 / (1.0 - a))
        return np.clip(x.astype(np.int64) - 1, 0, n - 1)

    target = m if directed else m // 2
    keys = np.zeros(0, dtype=np.int64)
    while keys.size < target:
        draw = int((target - keys.size) * 1.05) + 16
        dst = perm_in[endpoints(draw)]
        src = perm_out[endpoints(draw)]
        keep = src != dst
        src, dst = src[keep], dst[keep]
        if not directed:
            src, dst = np.minimum(src, dst), np.maximum(src, dst)
        keys = np.unique(np.concatenate([keys, dst * n + src]))
    if keys.size > target:
        drop = np.argsort(rng.random(keys.size))[: keys.size - target]
        keys = np.delete(keys, drop)
    arcs = {(int(k // n), int(k % n)) for k in keys}
    if not directed:
        arcs |= {(s, d) for d, s in arcs}
    ordered = sorted(arcs)
    indptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount([d for d, _ in ordered], minlength=n), out=indptr[1:])
    return indptr, np.array([s for _, s in ordered], dtype=np.int32)


def naive_macro_f1(truth: np.ndarray, pred: np.ndarray) -> float:
    """Macro-F1 over the classes present in truth or prediction (zero division -> 0)."""
    truth, pred = np.asarray(truth).ravel(), np.asarray(pred).ravel()
    scores = []
    for c in np.union1d(np.unique(truth), np.unique(pred)):
        tp = np.count_nonzero((truth == c) & (pred == c))
        fp = np.count_nonzero((truth != c) & (pred == c))
        fn = np.count_nonzero((truth == c) & (pred != c))
        denom = 2 * tp + fp + fn
        scores.append(2 * tp / denom if denom else 0.0)
    return float(np.mean(scores)) if scores else 0.0


def naive_nrmse(truth: np.ndarray, pred: np.ndarray, model: str, frames: np.ndarray, convention: str) -> float:
    """``battus.score.nrmse``: hitting times by argmax over the selected frames."""
    T = truth.shape[0] - 1

    def hit(states, level):
        sub = states[frames] == level
        return np.where(sub.any(axis=0), frames[np.argmax(sub, axis=0)], T + 1).astype(np.float64)

    mse_i = np.mean((hit(truth, 1) - hit(pred, 1)) ** 2)
    if model != "sir":
        return float(np.sqrt(mse_i / (2.0 if convention == "paper" else 1.0)) / (T + 1))
    mse_r = np.mean((hit(truth, 2) - hit(pred, 2)) ** 2)
    return float(np.sqrt((mse_i + mse_r) / 2.0) / (T + 1))


def naive_frame_scores(truth: np.ndarray, pred: np.ndarray, model: str, frames: np.ndarray,
                       final_from_truth: bool) -> dict:
    """``battus.score.hermes_score`` (all frames, final frame from the truth) and
    ``unobserved_score`` (the unobserved frames as they are)."""
    if final_from_truth:
        pred = pred.copy()
        pred[-1] = truth[-1]
    return {"f1": naive_macro_f1(truth[frames].T, pred[frames].T),
            "nrmse": naive_nrmse(truth, pred, model, frames, "paper"),
            "nrmse_ditto": naive_nrmse(truth, pred, model, frames, "ditto")}


def naive_causal_violations(graph: Graph, states: np.ndarray) -> tuple[int, int]:
    """(violations, events) of Eq. 8, one vertex at a time."""
    T1 = states.shape[0]
    violations = events = 0
    for v in range(graph.n):
        onset = next((t for t in range(T1) if states[t, v] != 0), T1)
        if onset in (0, T1):
            continue
        events += 1
        sources = graph.indices[graph.indptr[v]:graph.indptr[v + 1]]
        violations += not np.any(states[onset - 1, sources] == 1)
    return violations, events
