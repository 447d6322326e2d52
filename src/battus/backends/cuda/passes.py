"""One device's fitting passes: Eq. 4 of a batch of rate candidates, on this process's device.

A pass runs candidates in groups of ``L`` lanes (the state's last dimension)
from the prior, or from an observed frame's snapshot for a *piece* of the pass
(:func:`piece_events`), through the frames with the kernels of
:mod:`battus.kernels.fit_cuda`. Group pairs share their index reads; the
last odd group runs alone. After a reset to a snapshot the steps are
*compact* (:func:`battus.backends.cuda.layout.compact_items`). Every
candidate's value is bit-identical whatever group, pair, width or piece holds
it, so :mod:`battus.backends.cuda.rounds` may deal candidates and pieces over
devices freely.
"""

from __future__ import annotations

import numpy as np

from ...kernels import fit_cuda
from ...kernels.cuda_common import WARP, blocks, cuda
from .layout import CUDAPrepared, compact_items
from .memory import DeviceMemory, fit_state_bytes
from .settings import CUDASettings

# evaluation modes: float32 state in groups of WARP candidates (a round), float64 in narrow groups (the re-score)
MODES = ("float32", "narrow64")


def piece_events(prep: CUDAPrepared, frames: tuple[int, int] | None) -> tuple[int, dict]:
    """(steps, events) of a pass, or of one piece ``frames = (start, stop)`` of it
    (:func:`battus.backends.cuda.rounds.segment_pieces`): from the prior when ``start`` is 0, else
    from the observation at ``start`` (reset to it, not scored: the piece before scores it), to the
    observed frame ``stop``. ``events`` maps a frame (counted from ``start``) to the snapshot every
    lane resets to there and whether it is scored.
    """
    obs_index = prep.host_obs_index
    observed = np.nonzero(obs_index >= 0)[0]
    start, stop = frames if frames is not None else (0, int(observed[-1]) if observed.size else -1)
    events = {t - start: (int(obs_index[t]), t > start or start == 0)
              for t in range(start, stop + 1) if obs_index[t] >= 0}
    return stop - start, events


def scored_rows(prep: CUDAPrepared, frames: tuple[int, int] | None) -> int | None:
    """What an evaluation over ``frames`` answers: one value per candidate (None) for a whole pass
    or a piece from frame 0, else one row per frame the piece scores, to be added in frame order."""
    if frames is None or frames[0] == 0:
        return None
    start, stop = frames
    return int(np.count_nonzero(prep.host_obs_index[start + 1:stop + 1] >= 0))


class FitPasses:
    """The fitting passes of one device: sizes their state (checked against the free memory
    before it is allocated) and launches their kernels, ``threads`` threads a block."""

    def __init__(self, memory: DeviceMemory, settings: CUDASettings, threads: int) -> None:
        self.memory = memory
        # read at every step; warm-up swaps in settings that force each group-pair kernel in turn
        self.settings = settings
        self.threads = threads

    def evaluate(self, prep: CUDAPrepared, prior, beta_i: np.ndarray, beta_r: np.ndarray, mode: str, chunk: int,
                 scratch: dict, frames: tuple[int, int] | None = None, lanes: int | None = None) -> np.ndarray:
        """Unnormalised Eq. 4 of each candidate on this device, on the host.

        ``mode``: ``float32`` state in groups of :data:`WARP` candidates, at
        most ``chunk`` (rounded up to whole groups) per pass; or ``narrow64``,
        float64 state in groups of ``lanes`` (default ``narrow_lanes``), all
        at once. ``frames``: one piece of the pass; a piece that does not
        start at frame 0 gives one row per frame it scores
        (:func:`scored_rows`). ``scratch``: the caller's, where the fitting
        state is kept for later rounds.
        """
        n_cand = np.shape(beta_i)[0]
        if mode == "narrow64":
            dtype = np.float64
            lanes = int(lanes or self.settings.narrow_lanes)
            if lanes < 1 or WARP % lanes:
                raise ValueError(f"lanes must divide {WARP}, got {lanes}")
            chunk = -(-n_cand // lanes) * lanes
        elif mode == "float32":
            dtype, lanes = np.float32, WARP
            chunk = max(WARP, -(-chunk // WARP) * WARP)
            chunk = min(chunk, -(-n_cand // WARP) * WARP)
        else:
            raise ValueError(f"unknown evaluation mode {mode!r} (one of {', '.join(MODES)})")
        beta_i = np.ascontiguousarray(beta_i, dtype=np.float64)
        beta_r = np.ascontiguousarray(beta_r, dtype=np.float64)
        rows = scored_rows(prep, frames)
        ll = cuda.to_device(np.zeros(n_cand if rows is None else (rows, n_cand)))
        state = self.state(prep, scratch, chunk // lanes, dtype, lanes)
        prior_d = cuda.to_device(np.asarray(prior, dtype=np.float64))
        gather = cuda.to_device(beta_i.astype(dtype))
        beta_r_d = cuda.to_device(beta_r)
        steps, events = piece_events(prep, frames)
        for c0 in range(0, n_cand, chunk):
            count = min(chunk, n_cand - c0)
            self._pass(prep, prior_d, gather, beta_r_d, c0, count, ll, state, steps, events)
        return ll.copy_to_host()

    def state(self, prep: CUDAPrepared, scratch: dict, groups: int, dtype, lanes: int) -> dict:
        """Fitting state of at least ``groups`` groups of ``lanes`` candidates, kept in ``scratch``."""
        key = (np.dtype(dtype).name, lanes)
        state = scratch.get(key)
        if state is None or state["f_s"].shape[0] < groups:
            if not prep.items:
                raise ValueError("fitting rates on a problem prepared without fitting (prepare(problem, fit=False))")
            n, memory = prep.n, self.memory
            memory.require(fit_state_bytes(n, groups, dtype, lanes, prep.items["n_slots"]),
                           f"fitting {groups * lanes} candidates at a time on {n:,} vertices")
            state = scratch[key] = {
                "f_s": memory.alloc((groups, n, lanes), dtype),
                "f_i": memory.alloc((groups, n, lanes), dtype),
                "f_r": memory.alloc((groups, n, lanes), dtype),
                # log1p(-beta fI) of every vertex, read by its neighbours: this step's and the next's
                "t_a": memory.alloc((groups, n, lanes), dtype),
                "t_b": memory.alloc((groups, n, lanes), dtype),
                "partial": memory.alloc((max(1, prep.items["n_slots"]), groups, lanes), np.float64),
                "block_ll": memory.alloc((fit_cuda.SCORE_BLOCKS, groups, lanes), np.float64),
            }
        return state

    def _pass(self, prep: CUDAPrepared, prior_d, beta_gather, beta_r, c0: int, count: int, ll, state: dict,
              steps: int, events: dict) -> None:
        """Add Eq. 4's unnormalised sum for candidates c0..c0+count-1 into ``ll``.

        The pass starts from the prior, takes ``steps`` steps and at each
        frame of ``events`` (:func:`piece_events`) resets every lane to that
        snapshot, first adding its score when the event is scored: into
        ``ll``, or with ``ll`` 2-D into its next row, one per scored frame.
        """
        n = prep.n
        lanes = state["f_s"].shape[2]
        groups = (count + lanes - 1) // lanes
        # leading-axis slices stay C-contiguous; the partials and block sums go whole (the kernels
        # index them by group): a pass over fewer groups than the state holds then launches the
        # kernels compiled for a full one instead of compiling them again for strided arrays
        f_s, f_i, f_r, t_a, t_b = (state[k][:groups] for k in ("f_s", "f_i", "f_r", "t_a", "t_b"))
        partial, block_ll = state["partial"], state["block_ll"]
        tpb = self.threads
        fit_cuda.batch_fill[(blocks(n * lanes, tpb), groups), (tpb, 1)](prior_d, beta_gather, c0, count,
                                                                          f_s, f_i, f_r, t_a)
        # group pairs share their index reads (batch_pressure_pair); the last odd group runs alone
        # (batch_pressure), since a pair of a group with itself reads every row twice
        pairs = groups // 2
        # rows per score block as at L = WARP, so every candidate's sum has the same order
        score_tpb = (tpb // WARP) * lanes
        scored = 0
        items = prep.items  # every vertex's work items, until a reset lets the steps go compact
        step = self._step_plan(items, lanes, f_s.dtype)
        read_a, read_b = t_a.view(step["read"]), t_b.view(step["read"])  # the term buffers as the pair step reads them
        for t in range(steps + 1):
            if t in events:
                snapshot, score = events[t]
                fit_cuda.batch_score_reset[(block_ll.shape[0], groups), score_tpb](
                    prep.obs_states, snapshot, prep.gather_id, f_s, f_i, f_r, t_a, t_b, beta_gather, c0, count,
                    block_ll)
                if score:
                    row = ll if ll.ndim == 1 else ll[scored]
                    fit_cuda.batch_accumulate[blocks(count, tpb), tpb](block_ll, row, c0, count)
                    scored += 1
                if t < steps:
                    items = compact_items(self.memory, prep, snapshot, self.settings.item_arcs)
                    step = self._step_plan(items, lanes, f_s.dtype)
                    read_a, read_b = t_a.view(step["read"]), t_b.view(step["read"])
            if t == steps:
                break
            self._step(prep, items, step, read_a, t_a, t_b, f_s, f_i, f_r, beta_gather, beta_r, c0, count,
                       partial, groups, pairs)
            t_a, t_b = t_b, t_a
            read_a, read_b = read_b, read_a

    def _step(self, prep: CUDAPrepared, items: dict, step: dict, read_a, t_a, t_b, f_s, f_i, f_r, beta_gather,
              beta_r, c0: int, count: int, partial, groups: int, pairs: int) -> None:
        """One step of every group: the gathers over ``items`` (pairs, then the lone group), the
        split vertices' sums, the held vertices' advance; terms from ``t_a`` (``read_a`` as the pair
        kernel reads them) into ``t_b``."""
        tpb = self.threads
        lanes = f_s.shape[2]
        g0 = 0
        if pairs and items["n_items"]:
            step["pair"][(step["pair_blocks"], pairs), tpb](
                prep.gather_indices, items["vertex"], items["start"], items["end"], items["slot"], read_a, t_b,
                f_s, f_i, f_r, beta_gather, beta_r, c0, count, partial)
            g0 = 2 * pairs
        if g0 < groups and items["n_items"]:
            fit_cuda.batch_pressure[(step["item_blocks"], groups - g0), tpb](
                prep.gather_indices, items["vertex"], items["start"], items["end"], items["slot"], t_a, t_b,
                f_s, f_i, f_r, beta_gather, beta_r, c0, count, partial, g0)
        if items["n_split"]:
            fit_cuda.batch_finish_split[(blocks(items["n_split"] * lanes, tpb), groups), (tpb, 1)](
                items["split_vertex"], items["split_ptr"], partial, t_b, f_s, f_i, f_r, beta_gather, beta_r,
                c0, count)
        if items.get("n_held"):
            fit_cuda.batch_advance_held[(blocks(items["n_held"] * lanes, tpb), groups), (tpb, 1)](
                items["held"], f_s, f_i, f_r, t_b, beta_gather, beta_r, c0, count)

    def _step_plan(self, items: dict, lanes: int, dtype) -> dict:
        """How a fitting step launches over ``items``: its group-pair kernel, grid and term view.

        On graphs of short work items a pair step takes two adjacent lanes per thread, reading the
        terms as complex pairs of lanes, so that a warp holds two items
        (:func:`battus.kernels.fit_cuda.batch_pressure_pair_two_lanes`)."""
        tpb = self.threads
        item_blocks = blocks(items["n_items"], tpb // lanes)
        if lanes % 2 == 0 and items["mean_arcs"] <= self.settings.two_lane_max_arcs:
            return {"pair": fit_cuda.batch_pressure_pair_two_lanes, "item_blocks": item_blocks,
                    "pair_blocks": blocks(items["n_items"], tpb // (lanes // 2)),
                    "read": np.complex128 if dtype == np.float64 else np.complex64}
        return {"pair": fit_cuda.batch_pressure_pair, "pair_blocks": item_blocks, "read": dtype,
                "item_blocks": item_blocks}
