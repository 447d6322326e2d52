"""Fitting rounds: the best candidate of a round, its float32 values pruned after the first piece
of the pass, and a round spread over the fitting workers' devices.

Every candidate's value is the one a single pass on one device gives, bit for
bit, however the round is cut: by candidates (whole groups dealt over the
devices, :func:`deal_candidates`) or by frames (pieces of the pass between
observed frames, each from its first frame's snapshot, their per-frame sums
added on the host in frame order, :func:`segment_pieces`,
:func:`add_in_frame_order`). So the search, the rates and the history are
one device's too.
"""

from __future__ import annotations

import numpy as np

from ...kernels.cuda_common import WARP
from ...kernels.fit_cuda import POLISH
from .layout import CUDAPrepared
from .passes import FitPasses, scored_rows
from .worker_pipe import WorkerPool, evaluate_request


class FitRounds:
    """The rounds of a fit: on this device (``passes``) and, once ``pool`` spreads, on its
    workers' devices too."""

    def __init__(self, passes: FitPasses, pool: WorkerPool) -> None:
        self.passes = passes
        self.pool = pool

    def best_candidate(self, prep: CUDAPrepared, prior, beta_i: np.ndarray, beta_r: np.ndarray, norm: float,
                       chunk: int, scratch: dict) -> tuple[int, float]:
        """Arg-max of Eq. 4 / ``norm`` over the candidates, the first on ties.

        A round of more than :data:`POLISH` candidates is evaluated with
        float32 state, then its best POLISH are re-scored in float64, and the
        arg-max is taken over those (ties to the lower candidate index), so
        near-ties resolve as in the float64 CPU backend; a round of at most
        POLISH candidates is evaluated in float64 at once. Float64 passes use
        groups of ``narrow_lanes`` candidates. A float32 round of several
        passes, cut at an observed frame, runs its second piece only for the
        candidates that can still be among the best POLISH
        (:meth:`evaluate_pruned`), so the re-scored set is the same.
        """
        beta_i = np.ascontiguousarray(beta_i, dtype=np.float64)
        beta_r = np.ascontiguousarray(beta_r, dtype=np.float64)
        n_cand = beta_i.shape[0]
        polish = n_cand > POLISH
        pieces = self.segment(prep, 2)
        if polish and len(pieces) == 2 and n_cand > max(chunk, WARP):
            values = self.evaluate_pruned(prep, prior, beta_i, beta_r, chunk, scratch, pieces, norm)
        else:
            mode = "float32" if polish else "narrow64"
            values = self.evaluate_spread(prep, prior, beta_i, beta_r, mode, chunk, scratch) / norm
        top = np.argsort(-values, kind="stable")[:min(POLISH, n_cand)]
        if polish:
            values_top = self.evaluate_spread(prep, prior, beta_i[top], beta_r[top], "narrow64", chunk,
                                              scratch) / norm
        else:
            values_top = values[top]
        best = min(range(top.shape[0]), key=lambda j: (-values_top[j], top[j]))
        return int(top[best]), float(values_top[best])

    def segment(self, prep: CUDAPrepared, parts: int) -> list[tuple[int, int]]:
        """:func:`segment_pieces` of the problem's observed frames, once per problem and ``parts``."""
        if parts not in prep.pieces:
            prep.pieces[parts] = segment_pieces(prep.host_obs_index, parts)
        return prep.pieces[parts]

    def evaluate_pruned(self, prep: CUDAPrepared, prior, beta_i: np.ndarray, beta_r: np.ndarray, chunk: int,
                        scratch: dict, pieces: list[tuple[int, int]], norm: float) -> np.ndarray:
        """A float32 round's values (Eq. 4 / ``norm``) for :meth:`best_candidate`'s re-score: the
        exact value of every candidate that can be among the best :data:`POLISH`, -inf for the
        others, which cannot.

        The pass is cut at an observed frame into pieces A and B
        (:func:`segment_pieces`); B restarts from the snapshot, so a
        candidate's value is A's sum plus B's rows, added in frame order as
        one pass adds them (the same bits). Every candidate runs A; B runs in
        passes of ``chunk``, best A first. A row of B sums n logarithms of
        marginals that are at most 1 up to float32 rounding (each step
        rounds the mass f_S + f_I + f_R by at most 2^-24 of itself), so B adds
        at most ``slack`` per row, a bound 16 times that rounding; once
        ``POLISH`` totals are known, a candidate whose A plus the slack falls
        below the ``POLISH``-th best total cannot reach the re-score (ties
        excluded: the comparison is on the values divided by ``norm``, as
        the arg-sort sees them), and neither can any after it in A's order.
        With fitting workers, each piece's candidates are dealt over the
        devices (:meth:`evaluate_candidates_spread`).
        """
        (a_start, a_stop), (b_start, b_stop) = pieces
        n_cand = beta_i.shape[0]
        head = self.evaluate_candidates_spread(prep, prior, beta_i, beta_r, "float32", chunk, scratch,
                                               (a_start, a_stop))
        rows_b = scored_rows(prep, (b_start, b_stop))
        slack = prep.n * 1e-6 * (b_stop - b_start + 3)
        order = np.argsort(-head, kind="stable")
        bound = head.copy()
        for _ in range(rows_b):
            bound = bound + slack
        values = np.full(n_cand, -np.inf)
        # a batch of B is one pass of ``chunk``, also with workers: B's candidates are few, and a pass
        # per device of fewer than a group each would leave their lanes idle
        per_pass = max(WARP, -(-chunk // WARP) * WARP)
        threshold = -np.inf
        done = 0
        while done < n_cand:
            batch = order[done:done + per_pass]
            batch = batch[bound[batch] / norm >= threshold]  # a prefix: bound falls along A's order
            if batch.size == 0:
                break
            rows = self.evaluate_candidates_spread(prep, prior, beta_i[batch], beta_r[batch], "float32", chunk,
                                                   scratch, (b_start, b_stop))
            values[batch] = add_in_frame_order(head[batch], rows) / norm
            done += batch.size
            if done >= POLISH:
                threshold = np.sort(values)[-POLISH]
        return values

    def evaluate_spread(self, prep: CUDAPrepared, prior, beta_i: np.ndarray, beta_r: np.ndarray, mode: str,
                        chunk: int, scratch: dict) -> np.ndarray:
        """:meth:`FitPasses.evaluate` spread over this device and the workers, by candidates or by
        frames.

        A round of several groups of :data:`WARP` candidates is dealt over the
        devices in whole groups (:meth:`evaluate_candidates_spread`), and so
        is the float64 re-score, in narrower groups: ``narrow_lanes`` shared
        out (4 lanes each on two devices), every device running the whole
        pass.

        What is left (a round of one group; one re-scored candidate) is split
        by frames where the observations cut the pass into balanced pieces
        (:func:`segment_pieces`; the benchmark schedule {T/2, T} halves it).
        Every observation is a full snapshot and the fitting pass restarts
        from it (:func:`battus.kernels.fit_cuda.batch_score_reset`), so the
        pieces are independent: this device runs the first, from the prior,
        each worker a later one, from its first frame's observation, answering
        one row per frame it scores. The rows are added on the host in frame
        order, as the one-device pass adds them on the device, so every value
        is the same bit for bit. Otherwise it stays on this device.

        Candidates before frames, because a later piece costs far less than
        the first: after a reset to an observed I or R a vertex is absorbed
        and skips its gathers, so pieces of equal length are not of equal
        cost, while whole groups are.
        """
        n_cand = beta_i.shape[0]
        if not self.pool.holds(prep):
            return self.passes.evaluate(prep, prior, beta_i, beta_r, mode, chunk, scratch)
        devices = 1 + len(self.pool.workers)
        if mode == "narrow64":
            lanes = 1 << (max(1, self.passes.settings.narrow_lanes // devices).bit_length() - 1)  # a power of two
            if n_cand > lanes:
                return self.evaluate_candidates_spread(prep, prior, beta_i, beta_r, mode, chunk, scratch,
                                                       lanes=lanes)
        elif n_cand > WARP:
            return self.evaluate_candidates_spread(prep, prior, beta_i, beta_r, mode, chunk, scratch)
        pieces = self.segment(prep, devices)
        if len(pieces) == 1:
            return self.passes.evaluate(prep, prior, beta_i, beta_r, mode, chunk, scratch)
        everyone = np.arange(n_cand)
        parts = self._on_devices(prep, prior, beta_i, beta_r, mode, chunk, scratch, [everyone] * len(pieces),
                                 pieces)
        total = parts[0]
        for rows in parts[1:]:
            total = add_in_frame_order(total, rows)
        return total

    def evaluate_candidates_spread(self, prep: CUDAPrepared, prior, beta_i: np.ndarray, beta_r: np.ndarray,
                                   mode: str, chunk: int, scratch: dict, frames: tuple[int, int] | None = None,
                                   lanes: int | None = None) -> np.ndarray:
        """:meth:`FitPasses.evaluate` over the pass or one piece of it, the candidates' groups (of
        :data:`WARP`, or of ``lanes`` in ``narrow64``) dealt over this device and the workers
        (:func:`deal_candidates`; one device, or one group: here alone); each answer put back in
        its candidates' places."""
        n_cand = beta_i.shape[0]
        unit = lanes or WARP
        if not self.pool.holds(prep) or n_cand <= unit:
            return self.passes.evaluate(prep, prior, beta_i, beta_r, mode, chunk, scratch, frames, lanes)
        picks = [pick for pick in deal_candidates(n_cand, unit, 1 + len(self.pool.workers)) if pick.size]
        parts = self._on_devices(prep, prior, beta_i, beta_r, mode, chunk, scratch, picks, [frames] * len(picks),
                                 lanes)
        rows = scored_rows(prep, frames)
        values = np.empty(n_cand if rows is None else (rows, n_cand))
        for pick, part in zip(picks, parts, strict=True):
            values[..., pick] = part
        return values

    def _on_devices(self, prep: CUDAPrepared, prior, beta_i: np.ndarray, beta_r: np.ndarray, mode: str,
                    chunk: int, scratch: dict, picks: list[np.ndarray], frames: list[tuple[int, int] | None],
                    lanes: int | None = None) -> list[np.ndarray]:
        """:meth:`FitPasses.evaluate` of candidates ``picks[k]`` (indices) over piece ``frames[k]`` on
        device k (this one first, then each worker; every pick non-empty), all at once; the answers
        in device order."""
        self.pool.flush_freed()
        prior = np.asarray(prior, dtype=np.float64)
        asked = []
        for worker, pick, piece in zip(self.pool.workers, picks[1:], frames[1:], strict=False):
            worker.request(evaluate_request(prep.worker_key, mode, chunk, piece, lanes),
                           {"prior": prior, "beta_i": beta_i[pick], "beta_r": beta_r[pick]})
            asked.append((worker, pick.size, piece))
        parts = []
        try:
            parts.append(self.passes.evaluate(prep, prior, beta_i[picks[0]], beta_r[picks[0]], mode, chunk, scratch,
                                              frames[0], lanes))
        finally:  # every answer is read, so that the pipes stay in step even when this device failed
            for worker, count, piece in asked:
                values = worker.reply()["arrays"].get("values")
                rows = scored_rows(prep, piece)
                shape = (count,) if rows is None else (rows, count)
                if values is None or values.dtype != np.float64 or values.shape != shape:
                    raise RuntimeError(f"CUDA device {worker.device} answered {count} candidates wrongly")
                parts.append(values)
        return parts


def add_in_frame_order(total: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """``total`` plus each row of a piece's per-frame sums in turn: the order in which one pass adds
    its scored frames (``ll[c] +=`` on the device), so every value is the same bit for bit."""
    for row in rows:
        total = total + row
    return total


def segment_pieces(obs_index: np.ndarray, parts: int) -> list[tuple[int, int]]:
    """The fitting pass (frames 0 to the last observed one) cut at observed frames into at most
    ``parts`` pieces ``(start, stop)`` whose longest is as short as possible.

    Returns ``[(0, last)]`` (one piece: no spread by frames) unless cutting
    makes the longest piece at most 60% of the pass, since a split by
    candidates of a round of several groups balances about as well.
    """
    observed = [int(t) for t in np.nonzero(np.asarray(obs_index) >= 0)[0]]
    last = observed[-1] if observed else 0
    cuts = [t for t in observed if 0 < t < last]
    if parts < 2 or not cuts:
        return [(0, last)]
    points = [0, *cuts, last]
    # longest[k][j]: the shortest possible longest piece covering points[0..j] with k pieces
    inf = float("inf")
    longest = [[inf] * len(points) for _ in range(parts + 1)]
    choice = [[0] * len(points) for _ in range(parts + 1)]
    longest[0][0] = 0
    for k in range(1, parts + 1):
        for j in range(1, len(points)):
            for i in range(j):
                value = max(longest[k - 1][i], points[j] - points[i])
                if value < longest[k][j]:
                    longest[k][j], choice[k][j] = value, i
    k = min(range(1, parts + 1), key=lambda k: (longest[k][-1], k))
    if longest[k][-1] > 0.6 * last:
        return [(0, last)]
    pieces, j = [], len(points) - 1
    while k:
        i = choice[k][j]
        pieces.append((points[i], points[j]))
        j, k = i, k - 1
    return pieces[::-1]


def deal_candidates(n_cand: int, lanes: int, parts: int) -> list[np.ndarray]:
    """The indices of ``n_cand`` candidates dealt to ``parts`` devices in whole groups of ``lanes``,
    group g to device g mod ``parts`` (an empty array where there are fewer groups than parts).

    Dealt rather than cut into contiguous slices because a group's cost
    follows its rates: a SIR grid's low-beta_i half costs more (fewer
    absorbed vertices), so contiguous halves would not balance.
    """
    groups = np.arange(n_cand) // lanes
    return [np.flatnonzero(groups % parts == k) for k in range(parts)]
