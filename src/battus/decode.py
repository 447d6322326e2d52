"""Turning hitting times into state histories, and back."""

from __future__ import annotations

import numpy as np


def states_from_hitting_times(t_inf: np.ndarray, t_rec: np.ndarray, T: int) -> np.ndarray:
    """(T+1, n) uint8 history: S before t_inf, I until t_rec, R from t_rec."""
    t = np.arange(T + 1, dtype=np.int64)[:, None]
    return ((t >= t_inf[None, :]).astype(np.uint8) + (t >= t_rec[None, :]).astype(np.uint8))


def hitting_times(states: np.ndarray, level: int) -> np.ndarray:
    """First frame with state >= ``level`` (T+1 when never)."""
    reached = states >= level
    first = np.argmax(reached, axis=0)
    return np.where(reached.any(axis=0), first, states.shape[0]).astype(np.int64)
