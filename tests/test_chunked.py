"""Chunks compressed in parallel (battus.chunked) are what HDF5's own filter pipeline stores."""

import itertools
import zlib

import h5py
import numpy as np
import pytest

from battus import chunked
from battus.chunked import GZIP_LEVEL, chunk_shape, fletcher32, write_compressed

ARRAYS = {
    "states": lambda rng: rng.integers(0, 3, (41, 300_001)).astype(np.uint8),  # a chunk a frame
    "times": lambda rng: rng.integers(-1, 41, 1_234_567).astype(np.int64),
    "posteriors": lambda rng: rng.random((5, 3, 70_001)).astype(np.float32),
}


@pytest.mark.parametrize("kind", sorted(ARRAYS))
def test_chunks_match_hdf5_filters(tmp_path, kind):
    data = ARRAYS[kind](np.random.default_rng(7))
    with h5py.File(tmp_path / "ours.h5", "w") as fh:
        write_compressed(fh, "x", data)
    with h5py.File(tmp_path / "hdf5.h5", "w") as fh:
        fh.create_dataset("x", data=data, chunks=chunk_shape(data.shape, data.dtype.itemsize), compression="gzip",
                          compression_opts=GZIP_LEVEL, shuffle=True, fletcher32=True)
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


def test_chunk_shape_fills_the_last_axes_first():
    assert chunk_shape((41, 3_072_441), 1) == (1, 1 << 20)  # a frame in three chunks, the last padded
    assert chunk_shape((3_072_441,), 8) == (1 << 17,)
    assert chunk_shape((10_000, 100), 1) == (10_000, 100)  # many short frames share a chunk
    assert chunk_shape((100_000, 100), 1) == (10_485, 100)
    assert chunk_shape((5, 3, 70_001), 4) == (1, 3, 70_001)
    assert chunk_shape((7,), 8) == (7,)


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


def hdf5_fletcher32(data: bytes) -> int:
    """H5_checksum_fletcher32 (HDF5's H5checksum.c) step for step: 32-bit sums, folded every 360 words."""
    mask = 0xFFFFFFFF
    sum1 = sum2 = 0
    i, length = 0, len(data) // 2
    while length:
        block = min(length, 360)
        length -= block
        for _ in range(block):
            sum1 = (sum1 + ((data[i] << 8) | data[i + 1])) & mask
            sum2 = (sum2 + sum1) & mask
            i += 2
        sum1 = (sum1 & 0xFFFF) + (sum1 >> 16)
        sum2 = (sum2 & 0xFFFF) + (sum2 >> 16)
    if len(data) % 2:
        sum1 = (sum1 + (data[i] << 8)) & mask
        sum2 = (sum2 + sum1) & mask
        sum1 = (sum1 & 0xFFFF) + (sum1 >> 16)
        sum2 = (sum2 & 0xFFFF) + (sum2 >> 16)
    sum1 = (sum1 & 0xFFFF) + (sum1 >> 16)
    sum2 = (sum2 & 0xFFFF) + (sum2 >> 16)
    return (sum2 << 16) | sum1


@pytest.mark.parametrize("fill", ["random", "zeros", "ones"])
@pytest.mark.parametrize("size", [0, 1, 2, 3, 719, 720, 721, 4095, 4096, 4097, 5000, 12_289])
def test_fletcher32_is_hdf5s(monkeypatch, size, fill):
    # rows of 16 words and segments of 64 here, so that short inputs cross both (and a tail after them)
    monkeypatch.setattr(chunked, "_ROW", 16)
    monkeypatch.setattr(chunked, "_COLUMN_WEIGHTS", np.arange(16, dtype=np.uint64))
    monkeypatch.setattr(chunked, "_SEGMENT", 64)
    data = {"random": np.random.default_rng(size).integers(0, 256, size).astype(np.uint8),
            "zeros": np.zeros(size, np.uint8), "ones": np.full(size, 255, np.uint8)}[fill]
    assert fletcher32(data.tobytes()) == fletcher32(data) == hdf5_fletcher32(data.tobytes())


def test_fletcher32_of_a_large_input_is_hdf5s():
    data = np.random.default_rng(3).integers(0, 256, (1 << 20) + 3).astype(np.uint8).tobytes()
    assert fletcher32(data) == hdf5_fletcher32(data)


@pytest.mark.parametrize("kind", sorted(ARRAYS))
def test_read_chunked_gives_what_hdf5_reads(tmp_path, kind):
    """Every chunk checked and inflated in parallel: the same values as HDF5's own read, for the
    compressed layout and for Fletcher-32 alone (how graph arrays are stored), edge chunks included."""
    from battus.chunked import read_chunked

    data = ARRAYS[kind](np.random.default_rng(8))
    with h5py.File(tmp_path / "x.h5", "w") as fh:
        write_compressed(fh, "packed", data)
        fh.create_dataset("checked", data=data, chunks=True, fletcher32=True)
    with h5py.File(tmp_path / "x.h5") as fh:
        for name in ("packed", "checked"):
            got = read_chunked(fh[name])
            assert got is not None and got.dtype == data.dtype, name
            np.testing.assert_array_equal(got, data)


def test_read_chunked_leaves_other_layouts_and_bad_chunks_to_hdf5(tmp_path):
    from battus.chunked import read_chunked

    data = np.arange(300_000, dtype=np.int64)
    path = tmp_path / "x.h5"
    with h5py.File(path, "w") as fh:
        fh.create_dataset("gzip_only", data=data, chunks=(50_000,), compression="gzip")
        fh.create_dataset("contiguous", data=data)
        fh.create_dataset("big_endian", data=data.astype(">i8"), chunks=(50_000,), fletcher32=True)
        part = fh.create_dataset("unwritten", shape=data.shape, dtype=data.dtype, chunks=(50_000,), fletcher32=True)
        part[:100] = 1  # one chunk stored, five left to the fill value
        for name, flip in (("bad_checksum", -1), ("bad_body", 10)):
            dset = write_compressed(fh, name, data)
            payload = bytearray(dset.id.read_direct_chunk((0,))[1])
            payload[flip] ^= 0xFF
            dset.id.write_direct_chunk((0,), bytes(payload))
    with h5py.File(path) as fh:
        for name in ("gzip_only", "contiguous", "big_endian", "unwritten", "bad_checksum", "bad_body"):
            assert read_chunked(fh[name]) is None, name
        with pytest.raises(OSError):  # HDF5 then refuses the damaged chunk itself
            fh["bad_body"][...]


def test_chunks_are_read_beside_hdf5_only_from_a_plain_file(tmp_path, monkeypatch):
    """A plain file's chunks are read with os.pread at the offsets of the chunk index, on every
    thread; a file with a user block, one held in memory, or one whose first chunk does not read
    the same both ways is read through HDF5. The values are the same in every case."""
    import os

    from battus import chunked

    data = ARRAYS["times"](np.random.default_rng(9))
    calls = []

    def counted(fd, length, offset):
        calls.append(offset)
        return real_pread(fd, length, offset)

    real_pread = os.pread
    monkeypatch.setattr(chunked.os, "pread", counted)
    files = {"plain": {}, "user block": {"userblock_size": 512},
             "in memory": {"driver": "core", "backing_store": False}}
    for label, kwargs in files.items():
        calls.clear()
        with h5py.File(tmp_path / f"{label}.h5", "w", **kwargs) as fh:
            dset = write_compressed(fh, "x", data)
            n_chunks = dset.id.get_num_chunks()
            got = chunked.read_chunked(dset)
        np.testing.assert_array_equal(got, data)
        assert len(calls) == (n_chunks + 1 if label == "plain" else 0), label  # + the first chunk's check

    def skewed(fd, length, offset):  # reads past where the index says: the first chunk's check fails
        calls.append(offset)
        return real_pread(fd, length, offset + 1)

    monkeypatch.setattr(chunked.os, "pread", skewed)
    calls.clear()
    with h5py.File(tmp_path / "plain.h5") as fh:
        np.testing.assert_array_equal(chunked.read_chunked(fh["x"]), data)
    assert len(calls) == 1


def _large_history(path, seed: int, n: int, T: int):
    """A SIR history whose graph and truth are large enough to be stored in chunks; its graph and
    truth."""
    from battus.graph import from_arcs
    from battus.io import write_history
    from battus.problem import Problem, observe
    from battus.simulate import simulate

    rng = np.random.default_rng(seed)
    graph = from_arcs(rng.integers(0, n, 4 * n), rng.integers(0, n, 4 * n), directed=False, n=n)
    truth = simulate(graph, "sir", T, n // 750, 0.3, 0.2, seed=seed - 1)
    write_history(path, Problem(graph, "sir", T, n // 750, observe(truth, np.array([T // 2, T])), truth, name="h"))
    return graph, truth


def test_a_damaged_chunk_of_a_history_is_one_line(tmp_path):
    from battus.errors import InputError
    from battus.io import read_history

    path = tmp_path / "h.h5"
    _, truth = _large_history(path, seed=3, n=40_000, T=6)
    assert np.array_equal(read_history(path).truth, truth)
    with h5py.File(path, "r+") as fh:
        dset = fh["graph/indices"]
        assert dset.fletcher32 and dset.compression is None
        payload = bytearray(dset.id.read_direct_chunk((0,))[1])
        payload[100] ^= 0x01
        dset.id.write_direct_chunk((0,), bytes(payload))
    with pytest.raises(InputError, match="graph/indices"):
        read_history(path)


def test_a_chunk_index_h5py_cannot_walk_is_left_to_hdf5(tmp_path, monkeypatch):
    """An h5py without the chunk-index calls (or one that fails on them): HDF5 reads the file."""
    import battus.chunked
    from battus.io import read_history

    path = tmp_path / "h.h5"
    graph, truth = _large_history(path, seed=4, n=30_000, T=5)

    def missing(dset):
        raise AttributeError("'DatasetID' object has no attribute 'get_chunk_info_by_coord'")

    monkeypatch.setattr(battus.chunked, "read_chunked", missing)
    got = read_history(path)
    assert np.array_equal(got.truth, truth) and np.array_equal(got.graph.indices, graph.indices)
