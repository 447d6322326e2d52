"""The CUDA driver through its library alone (ctypes), without Numba: whether one loads, and
starting it early.

Apart from :mod:`battus.backends`, which imports Numba: ``battus reconstruct`` starts the driver
in a thread of its own while another imports Numba and Numba-CUDA (about half a second), and
Numba-CUDA then finds the device's context made instead of spending 0.2-0.3 s making it.
"""

from __future__ import annotations

import ctypes
import os
import sys

# Where Numba-CUDA looks for the driver when NUMBA_CUDA_DRIVER is unset (numba_cuda's
# cudadrv/driver.py, Linux): a machine where none of them loads has no GPU Numba could use.
DRIVER_NAMES = ("libcuda.so", "libcuda.so.1", "/usr/lib/libcuda.so", "/usr/lib/libcuda.so.1",
                "/usr/lib64/libcuda.so", "/usr/lib64/libcuda.so.1")


def driver_loadable() -> bool:
    """Whether a CUDA driver library loads: a few milliseconds, where importing Numba-CUDA to ask
    it took 0.4 s of every ``--backend auto`` run on a machine without a GPU."""
    if os.environ.get("NUMBA_CUDA_DRIVER") or not sys.platform.startswith("linux"):
        return True  # a driver Numba is told of, or another platform's names: let Numba look
    return _library() is not None


def start_driver(device: int = 0) -> None:
    """Initialise the CUDA driver and retain CUDA device ``device``'s primary context, the one
    Numba-CUDA makes current for that device (it retains it again, and finds it made). Does
    nothing under Numba's CUDA simulator; a failure of any kind (no driver, no such device) is
    left for Numba-CUDA to meet and report as it always does."""
    if os.environ.get("NUMBA_ENABLE_CUDASIM") == "1":
        return
    library = _library()
    if library is None:
        return
    try:
        ordinal, context = ctypes.c_int(), ctypes.c_void_p()
        if library.cuInit(0) == 0 and library.cuDeviceGet(ctypes.byref(ordinal), int(device)) == 0:
            library.cuDevicePrimaryCtxRetain(ctypes.byref(context), ordinal)
    except (AttributeError, OSError):  # not a CUDA driver after all
        return


def _library() -> ctypes.CDLL | None:
    """The driver library Numba-CUDA would load (NUMBA_CUDA_DRIVER's, or the first of
    :data:`DRIVER_NAMES` that loads), or None."""
    named = os.environ.get("NUMBA_CUDA_DRIVER")
    for name in (named,) if named else DRIVER_NAMES:
        try:
            return ctypes.CDLL(name)
        except OSError:
            continue
    return None
