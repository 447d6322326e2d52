"""Chunks compressed in parallel (battus.chunked) are what HDF5's own filter pipeline stores."""

import itertools
import zlib

import h5py
import numpy as np
import pytest

from battus.chunked import fletcher32, write_compressed

ARRAYS = {
    "states": lambda rng: rng.integers(0, 3, (41, 300_001)).astype(np.uint8),  # edge chunks in both axes
    "times": lambda rng: rng.integers(-1, 41, 1_234_567).astype(np.int64),
    "posteriors": lambda rng: rng.random((5, 3, 70_001)).astype(np.float32),
}


@pytest.mark.parametrize("kind", sorted(ARRAYS))
def test_chunks_match_hdf5_filters(tmp_path, kind):
    data = ARRAYS[kind](np.random.default_rng(7))
    with h5py.File(tmp_path / "ours.h5", "w") as fh:
        write_compressed(fh, "x", data)
    with h5py.File(tmp_path / "hdf5.h5", "w") as fh:
        fh.create_dataset("x", data=data, chunks=True, compression="gzip", compression_opts=4, shuffle=True,
                          fletcher32=True)
    with h5py.File(tmp_path / "ours.h5") as ours, h5py.File(tmp_path / "hdf5.h5") as ref:
        a, b = ours["x"], ref["x"]
        assert (a.chunks, a.compression, a.compression_opts, a.shuffle, a.fletcher32) == (
            b.chunks, b.compression, b.compression_opts, b.shuffle, b.fletcher32)
        np.testing.assert_array_equal(a[...], data)  # HDF5 verifies each chunk's checksum on the way
        corners = list(itertools.product(*(range(0, n, c) for n, c in zip(data.shape, a.chunks, strict=True))))
        assert len(corners) > 1
        for corner in corners:
            mine, theirs = a.id.read_direct_chunk(corner)[1], b.id.read_direct_chunk(corner)[1]
            # the same filtered bytes, whichever zlib each side links (compare inflated), and the
            # same checksum over HDF5's own deflate output
            assert zlib.decompress(mine[:-4]) == zlib.decompress(theirs[:-4])
            assert fletcher32(np.frombuffer(theirs[:-4], np.uint8)).to_bytes(4, "little") == theirs[-4:]


def test_damaged_chunk_is_refused_on_read(tmp_path):
    data = np.arange(200_000, dtype=np.int64)
    path = tmp_path / "x.h5"
    with h5py.File(path, "w") as fh:
        dset = write_compressed(fh, "x", data)
        payload = bytearray(dset.id.read_direct_chunk((0,))[1])
        payload[-1] ^= 0xFF
        dset.id.write_direct_chunk((0,), bytes(payload))
    with h5py.File(path) as fh, pytest.raises(OSError):
        fh["x"][...]


@pytest.mark.parametrize("size", [0, 1, 2, 3, 719, 720, 721, 5000])
def test_fletcher32_odd_lengths_and_blocks(size):
    # against a plain reading of the definition: 16-bit big-endian words, sums mod 65535 folded
    data = np.random.default_rng(size).integers(0, 256, size).astype(np.uint8)
    words = [(int(data[i]) << 8) | int(data[i + 1]) for i in range(0, size - 1, 2)]
    if size % 2:
        words.append(int(data[-1]) << 8)
    s1 = s2 = 0
    for w in words:
        s1 = (s1 + w) % 65535
        s2 = (s2 + s1) % 65535
    got = fletcher32(data)
    assert (got & 0xFFFF) % 65535 == s1 and (got >> 16) % 65535 == s2
