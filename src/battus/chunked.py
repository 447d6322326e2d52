"""A large compressed HDF5 array written with its chunks compressed on every core.

HDF5 runs a dataset's filters (shuffle, deflate, Fletcher-32) one chunk after another on the
calling thread, so writing a large prediction spent seconds compressing on one core while the
others idled. Here each chunk goes through the same filter pipeline in a thread pool (zlib and the
checksum release the GIL) and is stored with ``write_direct_chunk``: the dataset, its filters and
its chunk shape are what ``create_dataset(..., compression="gzip", shuffle=True, fletcher32=True)``
declares, so any HDF5 reader decompresses and verifies it as before.
"""

from __future__ import annotations

import itertools
import os
import zlib
from concurrent.futures import ThreadPoolExecutor

import h5py
import numba
import numpy as np


@numba.njit(cache=True, nogil=True)
def fletcher32(data: np.ndarray) -> int:
    """HDF5's Fletcher-32 checksum of a byte array (H5_checksum_fletcher32, step for step)."""
    length = data.size // 2
    sum1 = np.uint32(0)
    sum2 = np.uint32(0)
    i = 0
    while length > 0:
        block = min(length, 360)
        length -= block
        for _ in range(block):
            sum1 += np.uint32((np.uint32(data[i]) << 8) | np.uint32(data[i + 1]))
            i += 2
            sum2 += sum1
        sum1 = (sum1 & np.uint32(0xFFFF)) + (sum1 >> np.uint32(16))
        sum2 = (sum2 & np.uint32(0xFFFF)) + (sum2 >> np.uint32(16))
    if data.size % 2:
        sum1 += np.uint32(data[i]) << np.uint32(8)
        sum2 += sum1
        sum1 = (sum1 & np.uint32(0xFFFF)) + (sum1 >> np.uint32(16))
        sum2 = (sum2 & np.uint32(0xFFFF)) + (sum2 >> np.uint32(16))
    sum1 = (sum1 & np.uint32(0xFFFF)) + (sum1 >> np.uint32(16))
    sum2 = (sum2 & np.uint32(0xFFFF)) + (sum2 >> np.uint32(16))
    return int((sum2 << np.uint32(16)) | sum1)


def encode_chunk(block: np.ndarray, level: int) -> bytes:
    """One full chunk through shuffle, deflate and Fletcher-32, as HDF5's filters store it."""
    raw = np.ascontiguousarray(block).view(np.uint8)
    size = block.dtype.itemsize
    shuffled = raw.reshape(-1, size).T.tobytes() if size > 1 else raw.tobytes()
    packed = zlib.compress(shuffled, level)
    checksum = fletcher32(np.frombuffer(packed, dtype=np.uint8))
    return packed + checksum.to_bytes(4, "little")


def _workers() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return max(1, os.cpu_count() or 1)


def write_compressed(group: h5py.Group, name: str, data: np.ndarray, level: int = 4) -> h5py.Dataset:
    """``data`` as a chunked dataset with shuffle, gzip ``level`` and Fletcher-32, chunks compressed
    in parallel. Edge chunks are padded with zeros to the full chunk, as HDF5 pads them."""
    data = np.ascontiguousarray(data)
    dset = group.create_dataset(name, shape=data.shape, dtype=data.dtype, chunks=True,
                                compression="gzip", compression_opts=level, shuffle=True,
                                fletcher32=True)
    chunk = dset.chunks
    corners = list(itertools.product(*(range(0, n, c) for n, c in zip(data.shape, chunk, strict=True))))

    def encode(corner: tuple[int, ...]) -> bytes:
        part = data[tuple(slice(o, o + c) for o, c in zip(corner, chunk, strict=True))]
        if part.shape != chunk:
            full = np.zeros(chunk, dtype=data.dtype)
            full[tuple(slice(0, s) for s in part.shape)] = part
            part = full
        return encode_chunk(part, level)

    with ThreadPoolExecutor(_workers()) as pool:
        for corner, payload in zip(corners, pool.map(encode, corners), strict=True):
            dset.id.write_direct_chunk(corner, payload)
    return dset
