"""The Numba-CUDA backend (:class:`CUDABackend`), imported only when asked for
(:func:`battus.backends.get_backend`).

One module a job: :mod:`.backend` the interface and the inference launches,
:mod:`.settings` the tuning numbers, :mod:`.memory` device-memory accounting
and refusal, :mod:`.layout` the upload, gather order, degree bins and work
items, :mod:`.passes` one device's fitting passes, :mod:`.rounds` a fitting
round (pruned, or spread over several devices), :mod:`.worker_pipe` the
fitting workers seen from the driving process and the protocol of their
pipes, :mod:`.worker_main` a worker process. Kernels:
:mod:`battus.kernels.infer_cuda`, :mod:`battus.kernels.fit_cuda`,
:mod:`battus.kernels.causal_cuda`, :mod:`battus.kernels.simulate_cuda`.
"""

from __future__ import annotations

from .backend import CUDABackend, DevicePressures
from .layout import CUDAPrepared
from .settings import CUDASettings

__all__ = ["CUDABackend", "CUDAPrepared", "CUDASettings", "DevicePressures"]
