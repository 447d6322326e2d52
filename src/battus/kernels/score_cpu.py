"""Numba CPU kernels of the scorers (:mod:`battus.score`): integer counts only, so the scores
computed from them are the same floats whatever the thread count.

A history is a (T+1, n) array of states 0/1/2 (checked by the caller). Vertices are split into
blocks, one ``prange`` iteration each; a block walks the selected frames in order (rows of the
array, read contiguously) and keeps, per vertex, the first selected frame at state 1 and at
state 2 of the truth and of the prediction.
"""

from __future__ import annotations

import numba
import numpy as np
from numba import prange

_BLOCK = 8192  # vertices per prange iteration: four int64 hit-time rows of it stay in L1/L2

# columns of a block's row of counts: confusion[truth, pred] (9), then squared hit-time gaps
_SQ_I, _SQ_R, _COLUMNS = 9, 10, 11


@numba.njit(parallel=True, cache=True)
def _frame_counts(truth, pred, frames, final_from_truth, out):
    T1, n = truth.shape
    absent = T1  # T + 1: never reached among the frames
    last = T1 - 1
    blocks = out.shape[0]
    for b in prange(blocks):
        lo = b * _BLOCK
        hi = min(n, lo + _BLOCK)
        width = hi - lo
        hit_t1 = np.full(width, absent, dtype=np.int64)
        hit_p1 = np.full(width, absent, dtype=np.int64)
        hit_t2 = np.full(width, absent, dtype=np.int64)
        hit_p2 = np.full(width, absent, dtype=np.int64)
        counts = np.zeros(_COLUMNS, dtype=np.int64)
        for k in range(frames.shape[0]):
            t = frames[k]
            row_t = truth[t]
            row_p = truth[t] if (final_from_truth and t == last) else pred[t]
            for i in range(width):
                a = row_t[lo + i]
                p = row_p[lo + i]
                counts[a * 3 + p] += 1
                if a == 1 and hit_t1[i] == absent:
                    hit_t1[i] = t
                elif a == 2 and hit_t2[i] == absent:
                    hit_t2[i] = t
                if p == 1 and hit_p1[i] == absent:
                    hit_p1[i] = t
                elif p == 2 and hit_p2[i] == absent:
                    hit_p2[i] = t
        for i in range(width):
            d1 = hit_t1[i] - hit_p1[i]
            d2 = hit_t2[i] - hit_p2[i]
            counts[_SQ_I] += d1 * d1
            counts[_SQ_R] += d2 * d2
        out[b, :] = counts


def frame_counts(truth: np.ndarray, pred: np.ndarray, frames: np.ndarray, final_from_truth: bool
                 ) -> tuple[np.ndarray, int, int]:
    """Over ``frames`` (increasing): the 3x3 confusion counts ``[truth state, predicted state]``,
    and the summed squared gaps between truth's and prediction's first frame at state 1 and at
    state 2 (T + 1 where never). ``final_from_truth``: frame T of the prediction is the truth's."""
    truth = np.ascontiguousarray(truth, dtype=np.uint8)
    pred = np.ascontiguousarray(pred, dtype=np.uint8)
    if truth.shape != pred.shape or truth.ndim != 2:
        raise ValueError("truth and prediction must be (T+1, n) arrays of one shape")
    if truth.size and max(int(truth.max()), int(pred.max())) > 2:
        raise ValueError("states must be 0, 1 or 2")
    blocks = max(1, -(-truth.shape[1] // _BLOCK))
    out = np.zeros((blocks, _COLUMNS), dtype=np.int64)
    _frame_counts(truth, pred, np.ascontiguousarray(frames, dtype=np.int64), bool(final_from_truth), out)
    total = out.sum(axis=0)
    return total[:9].reshape(3, 3), int(total[_SQ_I]), int(total[_SQ_R])


@numba.njit(parallel=True, cache=True)
def _unsupported_onsets(indptr, indices, states, out):
    T1, n = states.shape
    blocks = out.shape[0]
    for b in prange(blocks):
        lo = b * _BLOCK
        hi = min(n, lo + _BLOCK)
        onset = np.full(hi - lo, T1, dtype=np.int64)
        for t in range(T1):  # rows in order: the first frame not S of every vertex of the block
            row = states[t]
            for i in range(hi - lo):
                if onset[i] == T1 and row[lo + i] != 0:
                    onset[i] = t
        violations = 0
        events = 0
        for i in range(hi - lo):
            a = onset[i]
            if a == 0 or a == T1:
                continue
            events += 1
            prev = states[a - 1]
            supported = False
            for j in range(indptr[lo + i], indptr[lo + i + 1]):
                if prev[indices[j]] == 1:
                    supported = True
                    break
            if not supported:
                violations += 1
        out[b, 0] = violations
        out[b, 1] = events


def unsupported_onsets(indptr: np.ndarray, indices: np.ndarray, states: np.ndarray) -> tuple[int, int]:
    """(violations, events): onsets ``a > 0`` (first frame not S) with no in-neighbour at state 1
    at ``a - 1``, and how many onsets ``a > 0`` there are."""
    states = np.ascontiguousarray(states, dtype=np.uint8)
    blocks = max(1, -(-states.shape[1] // _BLOCK))
    out = np.zeros((blocks, 2), dtype=np.int64)
    _unsupported_onsets(np.ascontiguousarray(indptr, dtype=np.int64), np.ascontiguousarray(indices, dtype=np.int32),
                        states, out)
    total = out.sum(axis=0)
    return int(total[0]), int(total[1])


@numba.njit(parallel=True, cache=True)
def _hitting_frames(states, t_inf, t_rec):
    T1, n = states.shape
    blocks = (n + _BLOCK - 1) // _BLOCK
    for b in prange(blocks):
        lo = b * _BLOCK
        hi = min(n, lo + _BLOCK)
        for i in range(lo, hi):
            t_inf[i] = T1
            t_rec[i] = T1
        for t in range(T1):
            row = states[t]
            for i in range(lo, hi):
                s = row[i]
                if s >= 1 and t_inf[i] == T1:
                    t_inf[i] = t
                if s >= 2 and t_rec[i] == T1:
                    t_rec[i] = t


def hitting_frames(states: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per vertex, the first frame at state >= 1 and at state >= 2 (T+1 when never), in one pass:
    :func:`battus.decode.hitting_times` of levels 1 and 2."""
    states = np.ascontiguousarray(states, dtype=np.uint8)
    t_inf = np.empty(states.shape[1], dtype=np.int64)
    t_rec = np.empty(states.shape[1], dtype=np.int64)
    _hitting_frames(states, t_inf, t_rec)
    return t_inf, t_rec
