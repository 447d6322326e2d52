"""Make numba-cuda 0.30.4 compile kernels under NumPy >= 2.5, and start without SciPy's BLAS.

The BLAS probe: the first kernel a process compiles or loads from Numba's cache imports numba-cuda's
array math, which runs ``import scipy.linalg.cython_blas`` to decide whether ``np.dot`` and its
kind may call a host BLAS. Where SciPy is installed that import takes 0.2-0.3 s of every CUDA
command, on the thread that loads the kernels. Device code cannot call a host BLAS: without one
numba-cuda compiles those functions as its own loop, the only form a kernel can run. So
:func:`import_array_math` imports that module with ``scipy.linalg.cython_blas`` hidden (unless it
is already imported, when the probe costs nothing), then shows it again: after that import (once,
when the first CUDA kernel module is imported) the process imports SciPy as before; only another
thread importing SciPy's BLAS during it would be refused. Battus's kernels call none of these functions.

The NumPy 2.5 fix:

numba-cuda's ``numba/cuda/np/arrayobj.py`` runs ``overload(np.row_stack)``
at import time whenever ``numpy_version >= (2, 0)``. NumPy 2.5 removed
``np.row_stack``, so that import raises ``AttributeError``; the module is
imported lazily by the CUDA target the first time anything is compiled, hence
``from numba import cuda`` works and the first ``@cuda.jit`` launch fails.
Upstream declined the fix and numba-cuda is in maintenance mode
(NVIDIA/numba-cuda#907, #916).

Routes considered:

* Pin ``numpy < 2.5``: fails the requirement that the project runs in an
  existing environment (the GPU image ships NumPy 2.5.2 and no registry), and
  would downgrade NumPy for every other package of the user.
* Leave a permanent ``np.row_stack = np.vstack`` alias: works, but changes
  NumPy's public namespace for the whole process (code probing for the removed
  name would silently find it) and registers a second overload on
  ``np.vstack``.
* Chosen: a *guarded, temporary* alias. Only when ``np.row_stack`` is missing,
  bind it to a private placeholder function, import numba-cuda's array module
  (which registers its overload on the placeholder, a function nobody calls),
  then remove the name again. NumPy's namespace is unchanged afterwards, no
  NumPy function gets a duplicate overload, and nothing happens on NumPy
  < 2.5 or under the CUDA simulator (which never compiles). It runs from
  :mod:`battus.kernels.cuda_common` before any kernel is defined, so users do
  nothing.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import sys
import threading
from collections.abc import Callable, Iterator

import numpy as np

_ARRAYOBJ = "numba.cuda.np.arrayobj"
_ARRAYMATH = "numba.cuda.np.arraymath"
_BLAS_PROBE = "scipy.linalg.cython_blas"
_lock = threading.Lock()


def _removed_row_stack(*args, **kwargs):  # pragma: no cover - never called
    raise AttributeError("numpy.row_stack was removed in NumPy 2.5; use numpy.vstack")


@contextlib.contextmanager
def _row_stack_placeholder() -> Iterator[None]:
    np.row_stack = _removed_row_stack
    try:
        yield
    finally:
        del np.row_stack


@contextlib.contextmanager
def _blas_hidden() -> Iterator[None]:
    sys.modules[_BLAS_PROBE] = None  # an import of it raises ImportError, as without SciPy
    try:
        yield
    finally:
        if sys.modules.get(_BLAS_PROBE, 0) is None:
            del sys.modules[_BLAS_PROBE]


def _import_once(module: str, workaround: Callable[[], contextlib.AbstractContextManager | None]) -> bool:
    """Import ``module`` of numba-cuda inside ``workaround()`` (asked under the lock; None: not
    needed). True when it was needed; idempotent, thread-safe, a no-op under the simulator."""
    if os.environ.get("NUMBA_ENABLE_CUDASIM") == "1":
        return False
    with _lock:
        if module in sys.modules:
            return False
        context = workaround()
        if context is None:
            importlib.import_module(module)
            return False
        with context:
            importlib.import_module(module)
        return True


def ensure_numpy_compat() -> bool:
    """Import numba-cuda's array module under a temporary ``np.row_stack``.

    Returns True when the workaround was needed (NumPy without ``row_stack``).
    Idempotent and thread-safe; a no-op under ``NUMBA_ENABLE_CUDASIM=1``.
    """
    return _import_once(_ARRAYOBJ, lambda: None if "row_stack" in np.__dict__ else _row_stack_placeholder())


def import_array_math() -> bool:
    """Import numba-cuda's array math with SciPy's BLAS module hidden from its probe (see above).

    Returns True when the module was hidden (SciPy's BLAS not yet imported). Idempotent and
    thread-safe; a no-op under ``NUMBA_ENABLE_CUDASIM=1``. Call after :func:`ensure_numpy_compat`
    (the array math imports the array module).
    """
    return _import_once(_ARRAYMATH, lambda: None if _BLAS_PROBE in sys.modules else _blas_hidden())
