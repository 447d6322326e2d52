"""Large chunked HDF5 arrays written and read with their chunks filtered on every core.

HDF5 runs a dataset's filters (shuffle, deflate, Fletcher-32) one chunk after another on the
calling thread, so writing a large prediction spent seconds compressing on one core while the
others idled, and reading a large history as long checking and inflating it. Here each chunk goes
through the same filter pipeline in a thread pool (zlib and the checksum release the GIL) and is
stored with ``write_direct_chunk``: the dataset, its filters and its chunk shape are what
``create_dataset(..., compression="gzip", shuffle=True, fletcher32=True)`` declares, so any HDF5
reader decompresses and verifies it as before. :func:`read_chunked` is the way back for the two
layouts this package writes (that one, and Fletcher-32 alone); any other layout, and any chunk that
does not check out, is left to HDF5 itself.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import zlib
from concurrent.futures import ThreadPoolExecutor

import h5py
import numpy as np

from .memory import usable_cores

# gzip level of every compressed array written: level 1 compresses decoded states about 17-fold and
# hitting times about 10-fold, against 22- and 11-fold at level 4, in half the time (a 4.8 M-vertex,
# 41-frame prediction on two cores: 1.2 s and 56 MB against 2.2 s and 49 MB). Writing the prediction
# is part of every reconstruction a user waits for; the 15% more disk is not.
GZIP_LEVEL = 1


def fletcher32(data: bytes | memoryview | np.ndarray) -> int:
    """HDF5's Fletcher-32 checksum of a byte string (what H5_checksum_fletcher32 computes).

    HDF5 sums the 16-bit big-endian words ``w_i`` (``i < L``; an odd last byte is a word of its
    own, shifted up) as ``sum1 = sum(w_i)`` and ``sum2 = sum((L - i) * w_i)``, folding both into 16
    bits every 360 words; a fold keeps a sum's value modulo 65535 and never turns a positive sum
    into 0, so each half of the checksum is 0 for a zero sum and otherwise the one value of
    1..65535 equal to the sum modulo 65535. Here the sums are taken exactly, in numpy, with the
    words laid out in rows of :data:`_ROW` (each row's sum and each column's sum, weighted): no
    compiler to start (a reading process that starts Numba only for this waited a third of a
    second), and faster than the word-by-word loop.
    """
    body = memoryview(data).cast("B")
    words = np.frombuffer(body, dtype=">u2", count=len(body) // 2)
    sum1 = sum2 = 0
    for start in range(0, words.shape[0], _SEGMENT):  # bounded, so that no uint64 sum overflows
        part = words[start:start + _SEGMENT]
        part_sum1, part_sum2 = _weighted_sums(part)
        # word start + k weighs L - start - k = (L - start - len(part)) + (len(part) - k)
        sum1 += part_sum1
        sum2 += (words.shape[0] - start - part.shape[0]) * part_sum1 + part_sum2
    if len(body) % 2:
        sum1 += body[-1] << 8
        sum2 += sum1
    return (_fold(sum2) << 16) | _fold(sum1)


_ROW = 2048
_SEGMENT = 1 << 22  # words: every uint64 sum of a segment stays below 2**60
_COLUMN_WEIGHTS = np.arange(_ROW, dtype=np.uint64)


def _weighted_sums(words: np.ndarray) -> tuple[int, int]:
    """``sum(w_k)`` and ``sum((len(words) - k) * w_k)`` over ``words``, exactly."""
    n = words.shape[0]
    rows = n // _ROW
    body = words[:rows * _ROW].reshape(rows, _ROW)
    # word r * _ROW + c weighs n - r * _ROW - c: by rows, then less each column's share
    row_sums = body.sum(axis=1, dtype=np.uint64)
    row_weights = np.uint64(n) - np.arange(rows, dtype=np.uint64) * np.uint64(_ROW)
    total = int(row_sums.sum())
    weighted = int((row_weights * row_sums).sum()) - int((_COLUMN_WEIGHTS * body.sum(axis=0, dtype=np.uint64)).sum())
    tail = words[rows * _ROW:].astype(np.uint64)
    total += int(tail.sum())
    weighted += int((np.arange(tail.shape[0], 0, -1, dtype=np.uint64) * tail).sum())
    return total, weighted


def _fold(total: int) -> int:
    return 0 if total == 0 else (total - 1) % 65535 + 1


def encode_chunk(block: np.ndarray, level: int) -> bytes:
    """One full chunk through shuffle, deflate and Fletcher-32, as HDF5's filters store it."""
    raw = np.ascontiguousarray(block).view(np.uint8)
    size = block.dtype.itemsize
    shuffled = raw.reshape(-1, size).T.tobytes() if size > 1 else raw.tobytes()
    packed = zlib.compress(shuffled, level)
    checksum = fletcher32(packed)
    return packed + checksum.to_bytes(4, "little")


CHUNK_BYTES = 1 << 20


def chunk_shape(shape: tuple[int, ...], itemsize: int, target: int = CHUNK_BYTES) -> tuple[int, ...]:
    """Chunks of about ``target`` bytes, whole along the last axes first: a frame of a history
    (a row of ``(T + 1, n)`` states) is read from few chunks, and a large array is a few hundred
    chunks, not thousands (each chunk costs a call into HDF5 under the interpreter lock)."""
    chunk = []
    room = max(1, target // itemsize)  # elements still to place
    for size in reversed(shape):
        take = max(1, min(size, room))
        chunk.append(take)
        room = max(1, room // take)
    return tuple(reversed(chunk))


def write_compressed(group: h5py.Group, name: str, data: np.ndarray, level: int = GZIP_LEVEL) -> h5py.Dataset:
    """``data`` as a chunked dataset (:func:`chunk_shape`) with shuffle, gzip ``level`` and
    Fletcher-32, chunks compressed in parallel. Edge chunks are padded with zeros to the full
    chunk, as HDF5 pads them."""
    data = np.ascontiguousarray(data)
    dset = group.create_dataset(name, shape=data.shape, dtype=data.dtype,
                                chunks=chunk_shape(data.shape, data.dtype.itemsize),
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

    with ThreadPoolExecutor(usable_cores()) as pool:
        for corner, payload in zip(corners, pool.map(encode, corners), strict=True):
            dset.id.write_direct_chunk(corner, payload)
    return dset


def _filters(dset: h5py.Dataset) -> tuple[int, ...]:
    plist = dset.id.get_create_plist()
    return tuple(plist.get_filter(i)[0] for i in range(plist.get_nfilters()))


_CHECKED = (h5py.h5z.FILTER_FLETCHER32,)
_COMPRESSED = (h5py.h5z.FILTER_SHUFFLE, h5py.h5z.FILTER_DEFLATE, h5py.h5z.FILTER_FLETCHER32)


def _deflate_bound(size: int) -> int:
    """The most bytes deflate can store ``size`` bytes in (zlib's compressBound)."""
    return size + (size >> 12) + (size >> 14) + (size >> 25) + 13


def decode_chunk(payload: bytes, compressed: bool, chunk_bytes: int, itemsize: int) -> np.ndarray | None:
    """A stored chunk's bytes (``chunk_bytes`` of them, in element order) after checking its
    Fletcher-32 and, ``compressed``, inflating and unshuffling it; None when any check fails."""
    body = memoryview(payload)[:-4]
    if len(payload) < 4 or fletcher32(body) != int.from_bytes(payload[-4:], "little"):
        return None
    if not compressed:
        return np.frombuffer(body, dtype=np.uint8) if len(body) == chunk_bytes else None
    inflate = zlib.decompressobj()
    try:
        raw = inflate.decompress(body, chunk_bytes)  # never more than the chunk holds
    except zlib.error:
        return None
    if len(raw) != chunk_bytes or not inflate.eof or inflate.unconsumed_tail:
        return None
    raw = np.frombuffer(raw, dtype=np.uint8)
    return raw.reshape(itemsize, -1).T.reshape(-1) if itemsize > 1 else raw


def read_chunked(dset: h5py.Dataset) -> np.ndarray | None:
    """The values of a chunked dataset laid out as :func:`write_compressed` writes it (or with
    Fletcher-32 alone), every chunk checked and inflated in a thread pool; None for any other
    layout, a chunk missing, stored larger than its filters allow or failing a check: HDF5 then
    reads the dataset itself (and reports a damaged chunk as it always has).

    Nothing the file says is trusted: the chunk index must name each chunk of the declared shape
    once, with every filter applied, and a stored chunk is read only when its size is one its
    filters can produce.
    """
    chunk, shape, dtype = dset.chunks, tuple(dset.shape), dset.dtype
    if chunk is None or dtype.kind not in "biuf" or not dtype.isnative or 0 in shape or len(chunk) != len(shape):
        return None
    filters = _filters(dset)
    if filters not in (_CHECKED, _COMPRESSED):
        return None
    compressed = filters == _COMPRESSED
    chunk_bytes = int(np.prod(chunk)) * dtype.itemsize
    largest = _deflate_bound(chunk_bytes) + 4 if compressed else chunk_bytes + 4
    corners = list(itertools.product(*(range(0, n, c) for n, c in zip(shape, chunk, strict=True))))
    if dset.id.get_num_chunks() != len(corners):
        return None
    stored = {}
    for corner in corners:
        info = dset.id.get_chunk_info_by_coord(corner)
        if info.byte_offset is None or info.filter_mask != 0 or not 4 < info.size <= largest:
            return None
        stored[corner] = (info.byte_offset, info.size)
    with contextlib.ExitStack() as stack:
        return _decode_all(dset, corners, _chunk_reader(dset, stored, stack), compressed, chunk_bytes, largest)


def _decode_all(dset: h5py.Dataset, corners: list, fetch, compressed: bool, chunk_bytes: int,
                largest: int) -> np.ndarray | None:
    chunk, shape, dtype = dset.chunks, tuple(dset.shape), dset.dtype
    out = np.empty(shape, dtype=dtype)

    def decode(corner: tuple[int, ...]) -> bool:
        payload = fetch(corner)
        if payload is None or len(payload) > largest:
            return False
        raw = decode_chunk(payload, compressed, chunk_bytes, dtype.itemsize)
        if raw is None:
            return False
        block = raw.view(dtype).reshape(chunk)
        inside = tuple(slice(o, min(o + c, n)) for o, c, n in zip(corner, chunk, shape, strict=True))
        out[inside] = block[tuple(slice(0, s.stop - s.start) for s in inside)]
        return True

    with ThreadPoolExecutor(min(usable_cores(), len(corners))) as pool:
        if not all(pool.map(decode, corners)):
            return None
    return out


def _chunk_reader(dset: h5py.Dataset, stored: dict, stack: contextlib.ExitStack):
    """How to fetch a chunk's stored bytes: ``os.pread`` at the offset HDF5's chunk index gives,
    on every thread at once (HDF5 reads one chunk at a time, under one lock), when the file is a
    plain one (no user block, the default driver), every chunk lies inside it and the first chunk
    reads the same both ways; else through HDF5 (``read_direct_chunk``). The bytes are checked
    either way (Fletcher-32, then the size of what they inflate to)."""
    def through_hdf5(corner: tuple[int, ...]) -> bytes | None:
        mask, payload = dset.id.read_direct_chunk(corner)
        return payload if mask == 0 else None

    fh = dset.file
    if fh.driver != "sec2" or fh.userblock_size != 0:
        return through_hdf5
    try:
        raw = stack.enter_context(open(fh.filename, "rb"))  # noqa: SIM115 - closed by the caller's stack
        size = os.fstat(raw.fileno()).st_size
    except OSError:
        return through_hdf5
    if any(offset < 0 or offset + length > size for offset, length in stored.values()):
        return through_hdf5
    fd = raw.fileno()

    def direct(corner: tuple[int, ...]) -> bytes:
        offset, length = stored[corner]
        return os.pread(fd, length, offset)

    first = next(iter(stored))
    return direct if direct(first) == through_hdf5(first) else through_hdf5
