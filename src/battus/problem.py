"""In-memory problem and result types shared by every stage and backend."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .errors import InputError
from .graph import Graph

MODELS = ("si", "sir")
STATE_NAMES = ("S", "I", "R")


@dataclass
class Observations:
    """Observed frames: sorted ``times`` (K,) and ``states`` (K, n) uint8."""

    times: np.ndarray
    states: np.ndarray

    def index(self, T: int) -> np.ndarray:
        """obs_index[t] = row of ``states`` observed at frame t, else -1."""
        idx = np.full(T + 1, -1, dtype=np.int64)
        idx[self.times] = np.arange(self.times.shape[0], dtype=np.int64)
        return idx


@dataclass
class Problem:
    """A reconstruction problem: graph, model, horizon, prior and observations.

    ``truth`` (T+1, n) uint8 is optional; reconstruction never reads it.
    """

    graph: Graph
    model: str
    T: int
    n0: int
    observations: Observations
    truth: np.ndarray | None = None
    name: str = ""
    provenance: dict = field(default_factory=dict)

    @property
    def n(self) -> int:
        return self.graph.n

    @property
    def prior(self) -> np.ndarray:
        """Shared initial marginal f0 = (1 - n0/n, n0/n, 0)."""
        p_inf = self.n0 / self.n
        return np.array([1.0 - p_inf, p_inf, 0.0])

    def validate(self, source: str = "<problem>") -> Problem:
        check_problem(self, source)
        return self


def schedule_times(T: int, schedule: str | list[int] | tuple[int, ...] = "benchmark") -> np.ndarray:
    """Observed frames for a named schedule or an explicit list.

    ``benchmark`` = {floor(T/2), T} (the HERMES protocol); ``final`` = {T}
    (DITTO's single snapshot); ``all`` = every frame; ``every:k`` = multiples
    of k plus T; a list is taken as is.
    """
    if isinstance(schedule, str):
        if schedule == "benchmark":
            times = [T // 2, T]
        elif schedule == "final":
            times = [T]
        elif schedule == "all":
            times = list(range(T + 1))
        elif schedule.startswith("every:"):
            try:
                k = int(schedule.split(":", 1)[1])
            except ValueError:
                raise InputError("--schedule", "schedule", f"bad schedule {schedule!r}") from None
            if k < 1:
                raise InputError("--schedule", "schedule", "every:k needs k >= 1")
            times = list(range(k, T + 1, k)) + [T]
        else:
            try:
                times = [int(x) for x in schedule.split(",") if x.strip()]
            except ValueError:
                raise InputError(
                    "--schedule", "schedule",
                    f"unknown schedule {schedule!r} (benchmark, final, all, every:k or t1,t2,...)",
                ) from None
    else:
        times = [int(x) for x in schedule]
    try:
        arr = np.unique(np.asarray(times, dtype=np.int64))
    except OverflowError:
        raise InputError("--schedule", "schedule", "observed frame does not fit in 64 bits") from None
    if arr.size == 0:
        raise InputError("--schedule", "schedule", "no observed frame")
    if arr.min() < 0 or arr.max() > T:
        raise InputError("--schedule", "schedule", f"observed frame outside 0..{T}: {arr.tolist()}")
    return arr


def observe(truth: np.ndarray, times: np.ndarray) -> Observations:
    return Observations(times=np.asarray(times, dtype=np.int64), states=truth[times].astype(np.uint8))


def check_states(states: np.ndarray, source: str, field_name: str, model: str) -> None:
    if states.dtype.kind not in "ui":
        raise InputError(source, field_name, f"states must be integers, got {states.dtype}")
    top = 1 if model == "si" else 2
    if states.size and (states.min() < 0 or states.max() > top):
        raise InputError(source, field_name, f"states must lie in 0..{top} for model {model}")


def check_posteriors(posteriors: np.ndarray, T: int, n: int, source: str) -> None:
    """Posterior marginals of a prediction: shape (3, T+1, n), finite probabilities in [0, 1], each
    cell's three summing to 1 (to 1e-3, float32 rounding). Whatever writes or reads a prediction
    applies this one check."""
    expected = (3, T + 1, n)
    if posteriors.shape != expected:
        raise InputError(source, "posteriors", f"shape {posteriors.shape}, expected (3, T+1, n) = {expected}")
    if not np.isfinite(posteriors).all() or posteriors.min() < 0 or posteriors.max() > 1:
        raise InputError(source, "posteriors", "probabilities must be finite and lie in [0, 1]")
    worst = float(np.abs(posteriors.sum(axis=0, dtype=np.float64) - 1).max()) if posteriors.size else 0.0
    if worst > 1e-3:
        raise InputError(source, "posteriors", f"the probabilities of a cell must sum to 1 (off by {worst:.3g})")


def _check_initial_infections(n0: int, times: np.ndarray, states: np.ndarray, source: str, field_name: str) -> None:
    """What n0 implies: frame 0 holds exactly n0 infected and no recovered vertex; those n0 are never S
    again, so every frame holds at least n0 vertices that are not S; with n0 = 0 nothing is ever infected."""
    not_s = np.array([np.count_nonzero(frame) for frame in states], dtype=np.int64)  # whole rows: 10x faster
    if n0 == 0 and np.any(not_s):
        raise InputError(source, "n0", f"n0 = 0 but {field_name} holds infections; with no initial infection "
                                       "no vertex can ever be infected")
    if times.size and times[0] == 0:
        first = states[0]
        recovered, infected = int(np.count_nonzero(first == 2)), int(np.count_nonzero(first == 1))
        if recovered:
            raise InputError(source, field_name, f"{recovered} vertices are R at frame 0, before any step")
        if infected != n0:
            raise InputError(source, "n0", f"n0 = {n0} but {field_name} holds {infected} infected vertices at frame 0")
    short = np.flatnonzero(not_s < n0)
    if short.size:
        t, k = int(times[short[0]]), int(not_s[short[0]])
        raise InputError(source, "n0", f"n0 = {n0} but only {k} vertices are infected or recovered at frame {t} "
                                       f"({field_name}); the initially infected never become S again")


def check_csr(indptr: np.ndarray, indices: np.ndarray, source: str, prefix: str = "graph") -> None:
    """Refuse arrays that are not an in-neighbour CSR graph of ``indptr.size - 1`` vertices (one
    line naming ``source`` and ``prefix``/indptr or /indices): the one check of a graph's arrays,
    as a file is read and as a problem is built."""
    n = indptr.size - 1
    if indptr.ndim != 1 or n < 1:
        raise InputError(source, f"{prefix}/indptr", "needs n+1 >= 2 entries")
    if indptr[0] != 0 or np.any(indptr[1:] < indptr[:-1]) or indptr[-1] != indices.size:
        raise InputError(source, f"{prefix}/indptr",
                         f"not a CSR row pointer for {indices.size} arcs (starts at 0, never decreases, "
                         f"ends at the number of arcs)")
    if indices.size and (int(indices.min()) < 0 or int(indices.max()) >= n):
        raise InputError(source, f"{prefix}/indices", f"vertex index outside 0..{n - 1}")


def check_problem(problem: Problem, source: str, graph_checked: bool = False) -> None:
    """Refuse a problem that is not one (one line naming ``source`` and the field). ``graph_checked``:
    the graph's CSR arrays were checked as they were read (:func:`battus.io.read_history`), which
    over hundreds of millions of arcs need not be done twice."""
    g = problem.graph
    if problem.model not in MODELS:
        raise InputError(source, "model", f"unknown model {problem.model!r} (si or sir)")
    for key in ("T", "n0"):
        value = getattr(problem, key)
        if isinstance(value, bool) or not isinstance(value, int | np.integer):
            raise InputError(source, key, f"expected an integer, got {type(value).__name__}")
    if problem.T < 1:
        raise InputError(source, "T", f"T must be >= 1, got {problem.T}")
    if g.n < 1:
        raise InputError(source, "graph", "graph has no vertex")
    if not (0 <= problem.n0 <= g.n):
        raise InputError(source, "n0", f"n0 must lie in 0..{g.n}, got {problem.n0}")
    if not graph_checked:
        check_csr(g.indptr, g.indices, source)
    obs = problem.observations
    times = np.asarray(obs.times)
    if times.ndim != 1 or times.size == 0:
        raise InputError(source, "observations/times", "need at least one observed frame")
    if np.any(np.diff(times) <= 0):
        raise InputError(source, "observations/times", "times must be strictly increasing")
    if times.min() < 0 or times.max() > problem.T:
        raise InputError(source, "observations/times", f"observed frame outside 0..{problem.T}")
    if obs.states.shape != (times.size, g.n):
        raise InputError(
            source, "observations/states", f"expected shape ({times.size}, {g.n}), got {obs.states.shape}"
        )
    check_states(obs.states, source, "observations/states", problem.model)
    if np.any(obs.states[1:] < obs.states[:-1]):  # states are 0, 1, 2 by now
        raise InputError(source, "observations/states", "observed states go backwards in time")
    _check_initial_infections(problem.n0, times, obs.states, source, "observations/states")
    if problem.truth is not None:
        tr = problem.truth
        if tr.shape != (problem.T + 1, g.n):
            raise InputError(source, "truth", f"expected shape ({problem.T + 1}, {g.n}), got {tr.shape}")
        check_states(tr, source, "truth", problem.model)
        if np.any(tr[1:] < tr[:-1]):
            raise InputError(source, "truth", "true states are not monotone in time")
        _check_initial_infections(problem.n0, np.arange(problem.T + 1), tr, source, "truth")
        if not np.array_equal(tr[times], obs.states):
            raise InputError(source, "observations/states", "observed frames differ from the truth")


def segments(times: np.ndarray, T: int) -> tuple[np.ndarray, np.ndarray]:
    """Smoothing segments [left, right] between consecutive anchors."""
    bounds = [int(t) for t in times]
    if not bounds or bounds[0] > 0:
        bounds = [0] + bounds
    if bounds[-1] < T:
        bounds = bounds + [T]
    left = np.asarray(bounds[:-1], dtype=np.int64)
    right = np.asarray(bounds[1:], dtype=np.int64)
    if left.size == 0:  # only frame 0 and T == 0 cannot happen (T >= 1)
        left, right = np.array([0]), np.array([T])
    return left, right


def settled_frame(times: np.ndarray, states: np.ndarray, T: int) -> int:
    """The first observed frame from which no observation has a susceptible vertex (T if none).

    From there on every vertex's smoothing segment starts from an observed I
    or R, so its posteriors have no S mass and no pressure after this frame
    changes a posterior (up to a normaliser's rounding) or, through the
    marginals, any other pressure that does: both backends skip the
    mean-field after it and store the neutral pressure
    (:func:`battus.kernels.infer_cpu.mean_field_pressures`). An epidemic that
    has reached every vertex by a snapshot settles there.
    """
    settled = T
    for k in range(len(times) - 1, -1, -1):
        if np.any(np.asarray(states[k]) == 0):
            break
        settled = int(times[k])
    return settled


@dataclass
class Reconstruction:
    """A decoded history with everything needed to reproduce it."""

    states: np.ndarray  # (T+1, n) uint8
    t_inf: np.ndarray  # (n,) int64, T+1 = never
    t_rec: np.ndarray  # (n,) int64, T+1 = never
    beta_i: float
    beta_r: float
    params: dict
    backend: str
    device: str
    algorithm_seconds: float
    posteriors: np.ndarray | None = None  # (3, T+1, n) float
    fit_trace: list = field(default_factory=list)
    extras: dict = field(default_factory=dict)
