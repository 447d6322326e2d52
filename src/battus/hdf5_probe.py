"""The HDF5 library is not hardened against hostile files: before :mod:`battus.io` opens one, a
forked child reads it first (:func:`probe`)."""

from __future__ import annotations

import contextlib
import os
import select
import signal
import time
from pathlib import Path

import h5py

from .errors import InputError

# The HDF5 C library is not hardened against hostile files: one flipped byte in a datatype
# message can crash the process (SIGSEGV) or make it loop. Before the file is opened here, a
# forked child walks its whole structure (every link, attribute and datatype, and the data of
# every dataset up to _PROBE_FULL_BYTES; first and last element of larger ones) with a deadline;
# a child killed by a signal or past the deadline is a damaged file, reported in one line.
_PROBE_SECONDS = 60.0
_PROBE_FULL_BYTES = 64 << 20
_PROBE_MAX_OBJECTS = 100_000


def _probe_walk(path: Path) -> None:
    """Touch everything a reader may touch (runs in the forked child; exceptions do not matter)."""
    seen = 0
    visited = set()  # object identities: a group hard-linked into itself (a valid file) is walked once
    with h5py.File(path, "r") as fh:
        pending = [fh]
        while pending and seen < _PROBE_MAX_OBJECTS:
            obj = pending.pop()
            seen += 1
            if obj.id in visited:
                continue
            visited.add(obj.id)
            for key in obj.attrs.keys():
                obj.attrs[key]
            if isinstance(obj, h5py.Dataset):
                if obj.is_virtual or obj.external is not None or obj.size == 0:
                    continue
                if obj.size * obj.dtype.itemsize <= _PROBE_FULL_BYTES:
                    obj[()]
                else:
                    obj[(0,) * obj.ndim]
                    obj[tuple(s - 1 for s in obj.shape)]
                continue
            for name in obj:  # a group: follow hard links only, depth bounded by the object budget
                if isinstance(obj.get(name, getlink=True), h5py.HardLink):
                    pending.append(obj[name])


def probe(path: Path) -> None:
    """Walk ``path`` in a forked child first: a file that crashes or stalls the HDF5 library is an
    :class:`InputError` here, never a crash of this process."""
    if not hasattr(os, "fork"):  # no fork on this platform: read directly
        return
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child's coverage is not collected
        try:
            quiet = os.open(os.devnull, os.O_WRONLY)
            os.dup2(quiet, 1)
            os.dup2(quiet, 2)
            _probe_walk(path)
        except BaseException:  # a Python-level error is the parent's to report, field by field
            pass
        finally:
            os._exit(0)
    try:
        status = wait_for(pid, _PROBE_SECONDS)
    except BaseException:  # Ctrl-C or SIGTERM while the child reads: it goes too
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        raise
    if status is None:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        raise InputError(path, "file", f"damaged HDF5 structure (reading it did not end within "
                                       f"{_PROBE_SECONDS:.0f} s)")
    if os.WIFSIGNALED(status):
        name = signal.Signals(os.WTERMSIG(status)).name
        raise InputError(path, "file", f"damaged HDF5 structure (the HDF5 library crashed reading it: {name})")


def wait_for(pid: int, seconds: float) -> int | None:
    """The wait status of child ``pid`` once it ends, or None if it is still running after
    ``seconds`` (then it is not reaped). Woken by the child's end itself where the platform has
    process file descriptors (Linux), else by polling."""
    if hasattr(os, "pidfd_open"):
        with contextlib.suppress(OSError):
            fd = os.pidfd_open(pid)
            try:
                ready, _, _ = select.select([fd], [], [], seconds)
            finally:
                os.close(fd)
            return os.waitpid(pid, 0)[1] if ready else None
    deadline = time.monotonic() + seconds
    pause = 0.001
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return status
        if time.monotonic() > deadline:
            return None
        time.sleep(pause)
        pause = min(pause * 2, 0.05)
