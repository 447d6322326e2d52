"""Memory estimates checked before anything large is allocated.

A history of ``T + 1`` frames over ``n`` vertices is dense; a typo in ``T`` or
a hostile file can ask for terabytes. The commands estimate what a run needs
from the sizes alone and refuse, with the estimate, what cannot fit in this
machine's memory, instead of dying in the allocator.
"""

from __future__ import annotations

import functools
import os

from .errors import InputError

_UNITS = ("B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB")


def format_bytes(count: float) -> str:
    """``7.3 TiB``-style size."""
    value = float(count)
    for unit in _UNITS:
        if value < 1024 or unit == _UNITS[-1]:
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    raise AssertionError("unreachable")


def usable_cores() -> int:
    """The cores this process may run on (its affinity, as a batch scheduler sets it)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return max(1, os.cpu_count() or 1)


@functools.cache  # read once: every dataset read and tensor rebuild asks
def available_bytes() -> int:
    """Physical memory, or the cgroup limit when one is set and lower."""
    try:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        total = 1 << 62
    for limit_file in ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"):
        try:
            with open(limit_file) as fh:
                text = fh.read().strip()
        except OSError:
            continue
        if text.isdigit():
            total = min(total, int(text))
    return int(total)


def require(needed: int, source: str, field: str, what: str) -> None:
    """Refuse ``needed`` bytes when they exceed this machine's memory (one line naming ``field``)."""
    limit = available_bytes()
    if needed > limit:
        raise InputError(
            source, field, f"{what} needs {format_bytes(needed)}, more than this machine's {format_bytes(limit)}"
        )


def history_bytes(n: int, T: int) -> int:
    """One dense (T+1, n) uint8 state history."""
    return (int(T) + 1) * int(n)


def simulate_bytes(n: int, arcs: int, T: int) -> int:
    """The simulated truth, its observed copy and the per-step state buffers."""
    return 2 * history_bytes(n, T) + 8 * int(n) + 12 * int(arcs)


def reconstruct_bytes(n: int, arcs: int, T: int, *, keep_posteriors: bool = False, causal: bool = False,
                      fit_chunk: int = 0) -> int:
    """Pressures (1 float64 a cell), the decoded history, the graph, the posteriors (3 float64 a
    cell) where they are kept or the causal repair reads them (else they are decoded a block of
    vertices at a time), and the fit's per-candidate vertex state (``fit_chunk`` candidates at a
    time)."""
    cells = (int(T) + 1) * int(n)
    needed = cells * (8 + 1) + 12 * int(arcs) + 64 * int(n)
    if keep_posteriors or causal:
        needed += cells * 3 * 8
    if keep_posteriors:
        needed += cells * 3 * 4
    if fit_chunk:
        needed += int(fit_chunk) * int(n) * 3 * 8
    return needed
