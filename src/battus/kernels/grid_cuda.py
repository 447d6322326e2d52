"""Device functions for a cooperative grid of :data:`THREADS`-thread blocks (every thread calls them):
a grid-wide prefix sum, warp-aggregated appends to a list, and the owner of a position in a list of
ranges. Used by the causal repair's one resident kernel (:mod:`battus.kernels.causal_cuda`)."""

from __future__ import annotations

from .cuda_common import SHUFFLE, cuda, simulated

# The simulator runs one Python thread per CUDA thread and a cooperative grid of one block.
THREADS = 32 if simulated() else 256


@cuda.jit(device=True)
def grid_scan(vals_a, vals_b, count, out_a, out_b, block_sums, sh, grid):
    """Two exclusive prefix sums at once (two grid barriers for both): out_x[i] = vals_x[0] + ... +
    vals_x[i-1] for i <= count, out_x[count] the total. One array is scanned by passing it twice.

    Each block scans its threads' segment sums in shared memory and publishes its total; after one
    barrier every block adds up the totals of the blocks before it by itself (the last block all of
    them, for the totals), in parallel. One thread walking every block's totals in turn, between two
    barriers, had made each scan a serial chain of ~2 x 500 dependent loads (integer sums: the same
    results either way).

    ``sh`` is the block's (2, THREADS) int64 shared array, allocated by the kernel (a shared array
    declared here would be defined once per calling function, which NVVM refuses to link);
    ``block_sums`` holds two entries per block."""
    tid = cuda.grid(1)
    size = cuda.gridsize(1)
    t = cuda.threadIdx.x
    blocks = cuda.gridDim.x
    b = cuda.blockIdx.x
    seg = (count + size - 1) // size
    lo = min(count, tid * seg)
    hi = min(count, lo + seg)
    own_a = 0
    own_b = 0
    for i in range(lo, hi):
        own_a += vals_a[i]
        own_b += vals_b[i]
    sh[0, t] = own_a
    sh[1, t] = own_b
    cuda.syncthreads()
    off = 1
    while off < THREADS:
        x_a = sh[0, t - off] if t >= off else 0
        x_b = sh[1, t - off] if t >= off else 0
        cuda.syncthreads()
        sh[0, t] += x_a
        sh[1, t] += x_b
        cuda.syncthreads()
        off *= 2
    upto_a = sh[0, t]  # this thread's inclusive prefix within its block
    upto_b = sh[1, t]
    if t == THREADS - 1:
        block_sums[b] = upto_a
        block_sums[blocks + b] = upto_b
    grid.sync()
    last = b == blocks - 1
    before_a = 0
    before_b = 0
    for k in range(t, blocks if last else b, THREADS):
        before_a += block_sums[k]
        before_b += block_sums[blocks + k]
    sh[0, t] = before_a  # every thread read its own prefix before the grid barrier
    sh[1, t] = before_b
    cuda.syncthreads()
    half = THREADS // 2
    while half > 0:
        if t < half:
            sh[0, t] += sh[0, t + half]
            sh[1, t] += sh[1, t + half]
        cuda.syncthreads()
        half //= 2
    base_a = sh[0, 0]
    base_b = sh[1, 0]
    if last:  # the sum ran over every block, its own included
        if t == 0:
            out_a[count] = base_a
            out_b[count] = base_b
        base_a -= block_sums[b]
        base_b -= block_sums[blocks + b]
    base_a += upto_a - own_a
    base_b += upto_b - own_b
    for i in range(lo, hi):
        out_a[i] = base_a
        out_b[i] = base_b
        base_a += vals_a[i]
        base_b += vals_b[i]
    grid.sync()


@cuda.jit(device=True)
def append_index(ctl, slot, want):
    """The next free index of the list counted by ``ctl[slot]`` for a lane that appends (``want``), -1
    for one that does not, with one atomic per warp instead of one per lane: the counter is a single
    address, on which single lanes' atomics serialize (tens of millions of appends on a
    LiveJournal-sized graph). Every lane that reaches the call must make it (the warp's active lanes vote together).
    Indices within a warp go by lane, which the list's readers do not see (lists are unordered)."""
    if not SHUFFLE:  # the simulator has no warp votes
        return cuda.atomic.add(ctl, slot, 1) if want else -1
    mask = cuda.activemask()
    ballot = cuda.ballot_sync(mask, want)
    if ballot == 0:
        return -1
    # Numba types the vote as int32, so lane 31 makes it negative; the bit arithmetic still holds: ballot - 1
    # only changes bits up to the lowest set one (the XOR keeps just those), and the lane mask below is
    # zero-extended, so its AND drops the sign extension
    leader = cuda.popc(ballot ^ (ballot - 1)) - 1  # the lowest appending lane
    base = 0
    if cuda.laneid == leader:
        base = cuda.atomic.add(ctl, slot, cuda.popc(ballot))
    base = cuda.shfl_sync(mask, base, leader)
    if not want:
        return -1
    return base + cuda.popc(ballot & cuda.lanemask_lt())


@cuda.jit(device=True)
def owner_of(ptr, count, pos):
    """The i < count with ptr[i] <= pos < ptr[i + 1] (ptr ascending, items may be empty)."""
    lo = 0
    hi = count - 1
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if ptr[mid] <= pos:
            lo = mid
        else:
            hi = mid - 1
    return lo
