"""Controls and baselines: the yardsticks every method of the benchmark is scored beside.

Each one maps a problem to a history, like a reconstruction method does:

``truth``
    The positive control: the true history itself. It must score F1 1 and
    NRMSE 0 under every scorer, so it checks the scorer and the data, not a
    method. It is the only one that reads the truth.
``random``
    The negative control: a random monotone history consistent with the
    observations. Each vertex's infection (recovery) time is drawn uniformly
    from the frames its observations allow. A method must beat it by far.
``observed-copy``
    The naive baseline: states copied from the observations. Each observed
    state is kept back to the frame after the previous observation, so a
    vertex changes state as early as its observations allow. A vertex seen
    S and then R, never I, is I for the one frame right after its last S
    observation and R from the next: the least change to the copy that
    makes it a history.
``graph-distance``
    The graph baseline, after classic source-detection back-propagation. A
    vertex that is infected at an observed frame ``b`` but was S at the
    observation before is dated by its distance, along the arcs, to the
    nearest vertex still S at ``b``: a vertex next to the uninfected region
    was infected last, at ``b``, and one ``d`` arcs away at ``b + 1 - d``,
    clipped to the frames its observations allow. Recoveries are dated the
    same way from the region not yet recovered, never before the frame after
    the infection.

Every history here is valid (:func:`battus.score.history_defects`): each
vertex's states run S, then I, then R, a recovered vertex was I for at least
one frame, and every observed frame agrees. Only a vertex observed S at ``t``
and R at ``t + 1`` cannot have been I between them (a simulation with
same-step recovery makes such histories); it goes from S to R, as observed.
The SIR windows (:func:`sir_windows`) put each infection before the
recovery; each method then draws or dates its times inside them.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

import numpy as np

from .errors import InputError

if TYPE_CHECKING:  # the workflow's plan reads the names below without loading Numba
    from .graph import Graph
    from .problem import Problem, Reconstruction

BASELINES = ("truth", "random", "observed-copy", "graph-distance")
CONTROLS = ("truth", "random")  # checks of the scorer and a floor, not methods to rank
BASELINE_LABELS = {
    "truth": "Truth (positive control)",
    "random": "Random (negative control)",
    "observed-copy": "Observed copy (naive baseline)",
    "graph-distance": "Graph distance (baseline)",
}


def windows(problem: Problem, level: int) -> tuple[np.ndarray, np.ndarray]:
    """Per vertex, the frames ``(lo, hi)`` in which it first reached ``level`` (1 = I, 2 = R).

    ``hi`` is the first observed frame at which the vertex is at ``level`` or
    beyond, ``lo`` the frame after the observation before it (0 when there is
    none). A vertex never observed at ``level`` gets ``lo = hi = T + 1`` (never).
    """
    obs = problem.observations
    T = problem.T
    reached = obs.states >= level  # (K, n)
    ever = reached.any(axis=0)
    first = np.argmax(reached, axis=0)  # row of the first observation at level
    hi = np.where(ever, obs.times[first], T + 1).astype(np.int64)
    before = np.where(first > 0, obs.times[np.maximum(first - 1, 0)] + 1, 0)
    lo = np.where(ever, before, T + 1).astype(np.int64)
    return lo, hi


def sir_windows(problem: Problem) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Per vertex, the windows ``(lo_i, hi_i, lo_r, hi_r)`` of its infection and recovery frames
    (:func:`windows`), the infection's shrunk so that at least one frame as I fits before the
    recovery: ``hi_i <= hi_r - 1``.

    A vertex first observed R at ``hi_r`` (never seen I) has ``hi_i = hi_r``; an infection there
    would make it go from S to R in one step, which an SIR history never does. Where the
    observations leave no frame for it (S observed at ``hi_r - 1``) the window is kept as is.
    """
    lo_i, hi_i = windows(problem, 1)
    lo_r, hi_r = windows(problem, 2)
    room = lo_i <= hi_r - 1
    return lo_i, np.where(room, np.minimum(hi_i, hi_r - 1), hi_i), lo_r, hi_r


def recovery_floor(t_inf: np.ndarray, lo_r: np.ndarray, hi_r: np.ndarray) -> np.ndarray:
    """The earliest recovery frame a vertex infected at ``t_inf`` may take: the frame after its
    infection (one frame as I at least) or ``lo_r``, whichever is later, never past ``hi_r``."""
    return np.minimum(np.maximum(lo_r, t_inf + 1), hi_r)


def upstream_distance(graph: Graph, targets: np.ndarray, limit: int) -> np.ndarray:
    """Fewest arcs from each vertex to the nearest vertex of ``targets`` (a boolean mask), following
    arcs in their direction; ``limit + 1`` when farther than ``limit`` or unreachable.

    A breadth-first search from the targets over the in-neighbour CSR: the
    in-neighbours of a vertex at distance d are at distance at most d + 1.
    """
    dist = np.full(graph.n, limit + 1, dtype=np.int64)
    frontier = np.flatnonzero(targets)
    dist[frontier] = 0
    indptr, indices = graph.indptr, graph.indices
    for depth in range(1, limit + 1):
        if frontier.size == 0:
            break
        starts, ends = indptr[frontier], indptr[frontier + 1]
        lengths = ends - starts
        total = int(lengths.sum())
        if total == 0:
            break
        # the positions of every in-arc of the frontier, range by range
        offsets = np.repeat(starts - np.cumsum(lengths) + lengths, lengths) + np.arange(total)
        neighbours = np.unique(indices[offsets])
        frontier = neighbours[dist[neighbours] > depth]
        dist[frontier] = depth
    return dist


def _distance_times(problem: Problem, level: int, lo: np.ndarray, hi: np.ndarray,
                    seen: np.ndarray | None = None) -> np.ndarray:
    """Hitting times of ``level`` dated by the distance to the region not yet at it (see module doc),
    clipped to ``[lo, hi]``; ``seen`` is the observed frame at which each vertex is first seen at
    ``level`` or beyond (``hi`` where not given: an infection window shrunk by :func:`sir_windows`
    ends before it)."""
    obs = problem.observations
    seen = hi if seen is None else seen
    times = hi.copy()
    for row, frame in enumerate(obs.times):
        dated = (seen == frame) & (lo < frame)  # reached level at this observation, not before it
        if not dated.any():
            continue
        behind = obs.states[row] < level  # the region not yet at level at this frame
        dist = upstream_distance(problem.graph, behind, problem.T + 1)
        times[dated] = frame + 1 - dist[dated]
    return np.clip(times, lo, hi)


def baseline(problem: Problem, method: str, seed: int = 0) -> Reconstruction:
    """One control's or baseline's history for ``problem`` (see the module doc for each ``method``)."""
    from .decode import hitting_times, states_from_hitting_times
    from .problem import Reconstruction

    if method not in BASELINES:
        raise InputError("--method", "method", f"unknown baseline {method!r}; choose from {', '.join(BASELINES)}")
    started = time.perf_counter()
    T = problem.T
    sir = problem.model == "sir"
    if method == "truth":
        if problem.truth is None:
            raise InputError(problem.name or "history", "truth", "the positive control needs the truth")
        t_inf, t_rec = hitting_times(problem.truth, 1), hitting_times(problem.truth, 2)
    else:
        if sir:
            lo_i, hi_i, lo_r, hi_r = sir_windows(problem)
        else:
            (lo_i, hi_i), never = windows(problem, 1), np.full(problem.n, T + 1, dtype=np.int64)
            lo_r, hi_r = never, never
        if method == "observed-copy":
            t_inf = lo_i
            t_rec = recovery_floor(t_inf, lo_r, hi_r)
        elif method == "random":
            rng = np.random.default_rng(seed)
            t_inf = lo_i + np.floor(rng.random(problem.n) * (hi_i - lo_i + 1)).astype(np.int64)
            lower = recovery_floor(t_inf, lo_r, hi_r)  # at least one frame as I before the recovery
            t_rec = lower + np.floor(rng.random(problem.n) * (hi_r - lower + 1)).astype(np.int64)
        else:  # graph-distance
            t_inf = _distance_times(problem, 1, lo_i, hi_i, seen=windows(problem, 1)[1])
            t_rec = _distance_times(problem, 2, recovery_floor(t_inf, lo_r, hi_r), hi_r) if sir else hi_r
    t_inf = np.minimum(t_inf, T + 1).astype(np.int64)
    t_rec = np.minimum(np.maximum(t_rec, t_inf), T + 1).astype(np.int64)
    states = states_from_hitting_times(t_inf, t_rec, T)
    elapsed = time.perf_counter() - started
    params = {"method": method} | ({"seed": int(seed)} if method == "random" else {})
    return Reconstruction(states=states, t_inf=t_inf, t_rec=t_rec, beta_i=float("nan"), beta_r=float("nan"),
                          params=params, backend="cpu", device="numpy", algorithm_seconds=elapsed)
