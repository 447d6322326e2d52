"""Backends behind one interface (:class:`battus.backends.base.Backend`): ``cpu`` (Numba) and ``cuda``
(Numba-CUDA, imported only when asked for)."""

from __future__ import annotations

import os

from ..errors import InputError
from .base import Backend, Prepared
from .cpu import CPUBackend

__all__ = ["Backend", "CPUBackend", "Prepared", "cuda_available", "get_backend"]


def cuda_available() -> bool:
    if os.environ.get("NUMBA_ENABLE_CUDASIM") == "1":
        return True
    try:
        from numba import cuda

        return bool(cuda.is_available())
    except Exception:
        return False


def get_backend(name: str = "auto") -> Backend:
    """``cpu``, ``cuda`` or ``auto`` (CUDA when a real device is present)."""
    if name not in ("auto", "cpu", "cuda"):
        raise InputError("--backend", "backend", f"unknown backend {name!r} (auto, cpu or cuda)")
    if name == "auto":
        name = "cuda" if (cuda_available() and os.environ.get("NUMBA_ENABLE_CUDASIM") != "1") else "cpu"
    if name == "cpu":
        return CPUBackend()
    if not cuda_available():
        raise InputError("--backend", "backend", "cuda requested but no CUDA device is available")
    from .cuda import CUDABackend

    return CUDABackend()
