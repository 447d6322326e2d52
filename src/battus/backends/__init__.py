"""Backends behind one interface (:class:`battus.backends.base.Backend`): ``cpu`` (Numba) and ``cuda``
(Numba-CUDA, imported only when asked for)."""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from concurrent.futures import Future, wait
from typing import NamedTuple

from ..cuda_driver import driver_loadable
from ..errors import InputError
from ..problem import Problem
from .base import Backend, Prepared
from .cpu import CPUBackend

__all__ = ["Backend", "CPUBackend", "Prepared", "Started", "cuda_available", "get_backend", "open_backend",
           "start_backend"]


def cuda_available() -> bool:
    if os.environ.get("NUMBA_ENABLE_CUDASIM") == "1":
        return True
    if not driver_loadable():
        return False
    try:
        from numba import cuda

        return bool(cuda.is_available())
    except Exception:
        return False


def get_backend(name: str = "auto", devices: Sequence[int] | None = None) -> Backend:
    """``cpu``, ``cuda`` or ``auto`` (CUDA when a real device is present).

    ``devices``: CUDA device ordinals for the CUDA backend. None (or one ordinal)
    is one GPU, that ordinal or by default the current device; several spread
    fitted Battus's rate fit over those GPUs, with the same results as one
    (:class:`battus.backends.cuda.CUDABackend`). Several devices on the CPU backend
    (``cpu``, or ``auto`` without a GPU) are an :class:`InputError`; one is ignored there.
    """
    if name not in ("auto", "cpu", "cuda"):
        raise InputError("--backend", "backend", f"unknown backend {name!r} (auto, cpu or cuda)")
    devices = None if devices is None else [int(d) for d in devices]
    if devices is not None and any(d < 0 for d in devices):
        raise InputError("--devices", "devices", f"CUDA device ordinals are >= 0, got {_listed(devices)}")
    asked = name
    if name == "auto":
        name = "cuda" if (cuda_available() and os.environ.get("NUMBA_ENABLE_CUDASIM") != "1") else "cpu"
    if name == "cpu":
        if devices is not None and len(devices) > 1:
            why = "--backend cpu runs on the CPU" if asked == "cpu" else "--backend auto found no GPU"
            raise InputError("--devices", "devices",
                             f"{len(devices)} GPUs ({_listed(devices)}) asked for the fit, but {why}; "
                             "give --backend cuda on a machine with those GPUs, or leave --devices out")
        return CPUBackend()
    if not cuda_available():
        raise InputError("--backend", "backend", "cuda requested but no CUDA device is available")
    if devices and os.environ.get("NUMBA_ENABLE_CUDASIM") != "1":  # the simulator's one device serves any
        _require_devices(devices)
    from .cuda import CUDABackend

    return CUDABackend(devices=devices) if devices else CUDABackend()


class Started(NamedTuple):
    """A backend being chosen and warmed up in another thread by :func:`start_backend`: ``chosen``
    is given it (or the error that stopped it) as soon as a problem may be prepared beside the rest
    of its warm-up, ``warmed`` once the warm-up is done (the future of the call itself)."""

    chosen: Future
    warmed: Future


def start_backend(name: str, devices: Sequence[int] | None, warm_up: Callable[..., None],
                  chosen: Future | None = None) -> Backend:
    """:func:`get_backend`, warmed up (``warm_up(backend, ready=...)``): what :func:`open_backend`
    does before it gives the backend a problem, to run in a thread while the problem is still being
    read (:class:`Started`). ``chosen``: given the backend when the warm-up calls ``ready``, or the
    error that came first."""
    try:
        backend = get_backend(name, devices=devices)
    except BaseException as exc:
        _refuse(chosen, exc)
        raise

    def ready() -> None:
        if chosen is not None and not chosen.done():
            chosen.set_result(backend)

    try:
        warm_up(backend, ready=ready)
    except BaseException as exc:
        _refuse(chosen, exc)
        backend.close()
        raise
    ready()
    return backend


def _refuse(chosen: Future | None, exc: BaseException) -> None:
    if chosen is not None and not chosen.done():
        chosen.set_exception(exc)


def open_backend(name: str, devices: Sequence[int] | None, problem: Problem, warm_up: Callable[[Backend], None],
                 say: Callable[[str], None], started: Started | None = None,
                 fit: bool = True) -> tuple[Backend, Prepared]:
    """The backend a reconstruction runs on, warmed up (``warm_up(backend)``) and holding ``problem``
    (prepared for fitting rates when ``fit``).

    The one place a backend is chosen and fallen back from: :func:`get_backend`
    picks it; with ``auto``, a problem too large for the GPU's free memory
    runs on the CPU instead (one thread pool, whatever ``devices`` asked for),
    saying so through ``say``. A backend that fails is closed before the error
    goes on. ``started``: :func:`start_backend` for the same name, devices and
    warm-up, begun while ``problem`` was read; its backend (or its error) is
    taken as if it had been started here, and ``problem`` is prepared (uploaded,
    laid out) beside the rest of its warm-up.
    """
    backend = None
    try:
        if started is not None:
            backend = started.chosen.result()
            try:
                prep = backend.prepare(problem, fit)
            except BaseException:
                wait([started.warmed])  # the warm-up ends before the backend is closed
                raise
            started.warmed.result()
            return backend, prep
        backend = get_backend(name, devices=devices)
        warm_up(backend)
        return backend, backend.prepare(problem, fit)
    except InputError as exc:
        if backend is not None:
            backend.close()
        if not (name == "auto" and exc.field == "device memory"):
            raise
        unused = f"; --devices {_listed(devices)} unused" if devices and len(devices) > 1 else ""
        say(f"{exc.message}; reconstructing on the CPU instead (--backend auto{unused})")
    except BaseException:
        if backend is not None:
            backend.close()
        raise
    backend = get_backend("cpu")
    warm_up(backend)
    return backend, backend.prepare(problem, fit)


def _require_devices(devices: Sequence[int]) -> None:
    """A one-line :class:`InputError` for an ordinal this machine (or CUDA_VISIBLE_DEVICES) lacks."""
    from numba import cuda

    count = len(cuda.gpus)
    missing = [d for d in devices if d >= count]
    if missing:
        raise InputError("--devices", "devices",
                         f"no CUDA device {missing[0]}: {count} visible here, numbered 0 to {count - 1} "
                         "(CUDA_VISIBLE_DEVICES and SLURM renumber a job's GPUs from 0)")


def _listed(devices: Sequence[int]) -> str:
    return ",".join(map(str, devices))
