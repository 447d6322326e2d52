"""Torch-free import of the DITTO/HERMES benchmark exports.

The canonical ``.pt`` files are zip archives holding a pickle of a
``torch_geometric.data.Data`` object. They come from the internet, so they are
read with a restricted unpickler that resolves only the handful of torch and
torch_geometric names such a file needs, each mapped to a harmless numpy
stand-in, and refuses every other global. Nothing in the file can run code.
"""

from __future__ import annotations

import io
import math
import pickle
import pickletools
import re
import zipfile
import zlib
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .errors import InputError
from .files import require_file
from .graph import Graph, from_arcs, is_symmetric
from .memory import available_bytes, format_bytes, history_bytes, require
from .problem import Problem, observe, schedule_times

# torch storage class name -> numpy dtype of its raw little-endian bytes
_STORAGE_DTYPES = {
    "LongStorage": np.dtype("<i8"),
    "IntStorage": np.dtype("<i4"),
    "ShortStorage": np.dtype("<i2"),
    "CharStorage": np.dtype("i1"),
    "ByteStorage": np.dtype("u1"),
    "BoolStorage": np.dtype("?"),
    "FloatStorage": np.dtype("<f4"),
    "DoubleStorage": np.dtype("<f8"),
    "HalfStorage": np.dtype("<f2"),
}


class _StorageType:
    def __init__(self, name: str) -> None:
        self.dtype = _STORAGE_DTYPES[name]


class _PlainRecord:
    """Stand-in for torch_geometric's Data and GlobalStorage: a bag of attributes."""

    def __setstate__(self, state: dict) -> None:
        if not isinstance(state, dict):
            raise pickle.UnpicklingError("unexpected state for a torch_geometric object")
        self.__dict__.update(state)


def _nonnegative_ints(values, what: str) -> tuple[int, ...]:
    if not isinstance(values, tuple | list):
        raise pickle.UnpicklingError(f"tensor {what} is not a tuple")
    out = []
    for value in values:
        if isinstance(value, bool) or not isinstance(value, int | np.integer):
            raise pickle.UnpicklingError(f"tensor {what} holds a non-integer")
        if value < 0:
            raise pickle.UnpicklingError(f"negative tensor {what} ({int(value)})")
        out.append(int(value))
    return tuple(out)


def _rebuild_tensor_v2(storage, offset, size, stride, requires_grad=False, hooks=None, *extra):
    """A tensor as a numpy copy, after checking its view lies wholly inside its storage.

    The file declares offset, sizes and strides; none is trusted: negative
    values, a view reaching past the storage's bytes, or more elements than
    memory can hold are refused before any numpy view exists.
    """
    if not isinstance(storage, np.ndarray):
        raise pickle.UnpicklingError("tensor without storage")
    (offset,) = _nonnegative_ints((offset,), "offset")
    size = _nonnegative_ints(size, "size")
    stride = _nonnegative_ints(stride, "stride")
    if len(size) != len(stride):
        raise pickle.UnpicklingError(f"tensor has {len(size)} sizes but {len(stride)} strides")
    count = math.prod(size)
    item = storage.dtype.itemsize
    if count * item > available_bytes():
        raise pickle.UnpicklingError(f"tensor of shape {size} needs {format_bytes(count * item)}")
    if count == 0:
        return np.zeros(size, dtype=storage.dtype)
    last = offset + sum((s - 1) * st for s, st in zip(size, stride, strict=True))
    if last >= storage.shape[0]:
        raise pickle.UnpicklingError("tensor view outside its storage")
    view = np.lib.stride_tricks.as_strided(
        storage[offset:], shape=size, strides=tuple(st * item for st in stride), writeable=False
    )
    return np.array(view)


_ALLOWED = {
    ("collections", "OrderedDict"): OrderedDict,
    ("torch._utils", "_rebuild_tensor_v2"): _rebuild_tensor_v2,
    ("torch_geometric.data.data", "Data"): _PlainRecord,
    ("torch_geometric.data.storage", "GlobalStorage"): _PlainRecord,
}


# torch.save writes pickle protocol 2; later opcodes (8-byte lengths, out-of-band buffers, frames)
# and the extension registry have no business in a .pt export and are refused before loading.
_EXTENSION_OPCODES = {"EXT1", "EXT2", "EXT4"}


def _check_opcodes(payload: bytes, source: str) -> None:
    """Walk the pickle's opcodes without executing them: protocol <= 2, lengths inside the payload.

    ``pickletools.genops`` reads each opcode's argument from the payload, so a
    length field larger than what remains fails here instead of making the
    unpickler allocate it.
    """
    try:
        for opcode, _arg, _pos in pickletools.genops(payload):
            if opcode.proto > 2 or opcode.name in _EXTENSION_OPCODES:
                raise InputError(source, "data.pkl", f"pickle opcode {opcode.name} is not allowed in a .pt export")
    except InputError:
        raise
    except Exception as exc:  # truncated, unknown opcode, a length past the end
        raise InputError(source, "data.pkl", f"unreadable pickle ({type(exc).__name__}: {exc})") from None


class _RestrictedUnpickler(pickle.Unpickler):
    def __init__(self, payload: bytes, archive: zipfile.ZipFile, prefix: str, source: str) -> None:
        super().__init__(io.BytesIO(payload))
        self._archive = archive
        self._prefix = prefix
        self._source = source

    def find_class(self, module: str, name: str):
        if module == "torch" and name in _STORAGE_DTYPES:
            return _StorageType(name)
        if (module, name) in _ALLOWED:
            return _ALLOWED[(module, name)]
        raise InputError(self._source, "pickle", f"refusing to load foreign class {module}.{name}")

    def persistent_load(self, pid):
        if not (isinstance(pid, tuple) and len(pid) >= 5 and pid[0] == "storage"):
            raise InputError(self._source, "pickle", "unsupported persistent id")
        storage_type, key, numel = pid[1], pid[2], pid[4]
        if not isinstance(storage_type, _StorageType) or not isinstance(key, str) or not key.isalnum():
            raise InputError(self._source, "pickle", "unsupported storage record")
        if isinstance(numel, bool) or not isinstance(numel, int) or numel < 0:
            raise InputError(self._source, f"data/{key}", f"bad element count {numel!r}")
        raw = _member(self._archive, f"{self._prefix}/data/{key}", self._source)
        if len(raw) % storage_type.dtype.itemsize:
            raise InputError(self._source, f"data/{key}", "storage size is not a whole number of elements")
        arr = np.frombuffer(raw, dtype=storage_type.dtype)
        if arr.shape[0] < numel:
            raise InputError(self._source, f"data/{key}", "storage shorter than declared")
        return arr[:numel]


def _member(archive: zipfile.ZipFile, name: str, source: str) -> bytes:
    """One archive member, after checking its declared size fits in memory (zip bombs)."""
    try:
        info = archive.getinfo(name)
    except KeyError:
        raise InputError(source, name, "missing from the archive") from None
    if info.file_size > available_bytes():
        raise InputError(source, name, f"declares {format_bytes(info.file_size)} uncompressed")
    try:
        return archive.read(info)
    except (zipfile.BadZipFile, OSError, EOFError, zlib.error, NotImplementedError, RuntimeError) as exc:
        raise InputError(source, name, f"unreadable archive member ({exc})") from None


def load_pt(path: str | Path) -> dict:
    """Read a torch_geometric ``Data`` export as a dict of numpy arrays and scalars."""
    path = require_file(path, "a .pt file")
    try:
        archive = zipfile.ZipFile(path)
    except (zipfile.BadZipFile, OSError, EOFError, ValueError, NotImplementedError) as exc:
        raise InputError(path, "file", f"not a torch zip archive ({exc})") from None
    with archive:
        pkls = [x for x in archive.namelist() if x.endswith("/data.pkl")]
        if len(pkls) != 1:
            raise InputError(path, "data.pkl", "archive must hold exactly one data.pkl")
        prefix = pkls[0][: -len("/data.pkl")]
        payload = _member(archive, pkls[0], str(path))
        _check_opcodes(payload, str(path))
        try:
            obj = _RestrictedUnpickler(payload, archive, prefix, str(path)).load()
        except InputError:
            raise
        except Exception as exc:  # malformed pickle of any kind
            raise InputError(path, "data.pkl", f"unreadable pickle ({type(exc).__name__}: {exc})") from None
    store = getattr(obj, "_store", None)
    mapping = getattr(store, "_mapping", None)
    if not isinstance(mapping, dict):
        raise InputError(path, "data.pkl", "not a torch_geometric Data object")
    return {k: (v.item() if isinstance(v, np.ndarray) and v.ndim == 0 else v) for k, v in mapping.items()}


@dataclass
class Canonical:
    """One canonical benchmark history: graph, model, T and the true states."""

    name: str
    graph: Graph
    model: str
    T: int
    truth: np.ndarray  # (T+1, n) uint8, time-major

    @property
    def n0(self) -> int:
        return int(np.count_nonzero(self.truth[0] != 0))

    def to_problem(self, schedule="benchmark") -> Problem:
        """The benchmark problem: observe ``schedule`` (default {floor(T/2), T}), keep the truth."""
        times = schedule_times(self.T, schedule)
        return Problem(
            graph=self.graph, model=self.model, T=self.T, n0=self.n0,
            observations=observe(self.truth, times), truth=self.truth, name=self.name,
        )


def _check_truth(truth: np.ndarray, source: str) -> np.ndarray:
    if truth.ndim != 2:
        raise InputError(source, "y", f"expected a 2-D state array, got shape {truth.shape}")
    if truth.size and (truth.min() < 0 or truth.max() > 2):
        raise InputError(source, "y", "states must be 0 (S), 1 (I) or 2 (R)")
    if np.any(np.diff(truth.astype(np.int8), axis=0) < 0):
        raise InputError(source, "y", "states are not monotone in time (S<I<R is irreversible)")
    return truth.astype(np.uint8)


def canonical_from_pt(path: str | Path, name: str | None = None) -> Canonical:
    """Import one DITTO/HERMES ``.pt`` export."""
    path = Path(path)
    data = load_pt(path)
    for key in ("edge_index", "y", "T"):
        if key not in data:
            raise InputError(path, key, "missing from the Data object")
    edge_index = data["edge_index"]
    y = data["y"]
    for key, value in (("edge_index", edge_index), ("y", y)):
        if not isinstance(value, np.ndarray) or value.dtype.kind not in "uib":
            raise InputError(path, key, f"expected an integer tensor, got {_kind(value)}")
    if y.ndim != 2:
        raise InputError(path, "y", f"expected a 2-D state array (vertices, T+1), got shape {y.shape}")
    T = _pt_int(data["T"], path, "T")
    n = _pt_int(data.get("num_nodes", y.shape[0]), path, "num_nodes")
    if T < 1:
        raise InputError(path, "T", f"T must be >= 1, got {T}")
    if n < 1:
        raise InputError(path, "num_nodes", f"the graph needs at least one vertex, got {n}")
    if edge_index.ndim != 2 or edge_index.shape[0] != 2:
        raise InputError(path, "edge_index", f"expected shape (2, arcs), got {edge_index.shape}")
    if y.shape[1] != T + 1:
        raise InputError(path, "T", f"T={T}, but y holds {y.shape[1]} frames (T+1 expected)")
    if y.shape[0] != n:
        raise InputError(path, "num_nodes", f"num_nodes={n}, but y has {y.shape[0]} rows (one a vertex)")
    truth = _check_truth(y.T.copy(), str(path))
    model = "sir" if ("tR" in data or truth.max() == 2) else "si"
    src, dst = edge_index[0], edge_index[1]
    graph = from_arcs(
        src, dst, directed=True, n=n, drop_self_loops=False, name=name or path.stem, source=str(path)
    )
    graph = Graph(graph.indptr, graph.indices, graph.node_ids, not is_symmetric(graph), graph.name)
    return Canonical(name=name or path.stem, graph=graph, model=model, T=T, truth=truth)


def _kind(value) -> str:
    if isinstance(value, np.ndarray):
        return f"{value.dtype} tensor"
    return type(value).__name__


def _pt_int(value, path: Path, key: str) -> int:
    """An integer scalar of the Data object (a Python int or a one-element integer tensor)."""
    if isinstance(value, np.ndarray) and value.size == 1 and value.dtype.kind in "ui":
        value = value.reshape(()).item()
    if isinstance(value, bool) or not isinstance(value, int | np.integer):
        raise InputError(path, key, f"expected an integer, got {_kind(value)}")
    return int(value)


_INTEGER = re.compile(r"[+-]?[0-9]+")


def _retweet_rows(path: Path) -> np.ndarray:
    """Rows ``from,to,unix_time`` as an (R, 3) int64 array, parsed strictly line by line.

    Not ``numpy.loadtxt``: it crashes the process (SIGSEGV) on some characters of the high
    Unicode planes. ASCII digits only (Python's ``int`` would accept other scripts' digits).
    """
    try:
        text = path.read_bytes().decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(path, "rows", f"not UTF-8 text (byte {exc.start})") from None
    except OSError as exc:
        raise InputError(path, "file", f"unreadable ({exc.strerror or exc})") from None
    values: list[int] = []
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        fields = [field.strip() for field in line.split(",")]
        if len(fields) != 3:
            raise InputError(path, "rows", f"line {number}: expected 3 columns from,to,unix_time, got {len(fields)}")
        for field in fields:
            if not _INTEGER.fullmatch(field) or not -(2**63) <= int(field) < 2**63:
                raise InputError(path, "rows", f"line {number}: {field[:40]!r} is not a 64-bit integer")
            values.append(int(field))
    return np.asarray(values, dtype=np.int64).reshape(-1, 3)


def pol_from_retweets(path: str | Path, T: int = 40) -> Canonical:
    """Rebuild Pol-SI from ``rt-pol.txt`` (rows ``from,to,unix_time``) as DITTO does.

    day = ceil((time - min_time + 1) / 86400); a vertex's infection day is the
    earliest day of any row naming it, except that a vertex never appearing as
    ``to`` is infected at day 0; undirected graph of all rows; largest
    connected component; infection day clipped to T + 1.
    """
    path = Path(path)
    if isinstance(T, bool) or not isinstance(T, int) or T < 1:
        raise InputError("--pol-T", "T", f"the horizon must be an integer >= 1, got {T!r}")
    require_file(path, "rt-pol.txt")
    rows = _retweet_rows(path)
    if rows.shape[0] == 0:
        raise InputError(path, "rows", "no rows (the file is empty or only comments)")
    require(history_bytes(rows.shape[0] * 2, T), "--pol-T", "T", f"T={T} frames of up to {2 * rows.shape[0]} vertices")
    src, dst, when = rows[:, 0], rows[:, 1], rows[:, 2]
    day = np.array([math.ceil((int(t) - int(when.min()) + 1) / 86400) for t in when], dtype=np.int64)
    ids, inv = np.unique(np.concatenate([src, dst]), return_inverse=True)
    n_all = ids.shape[0]
    s_idx, d_idx = inv[: src.shape[0]], inv[src.shape[0]:]
    first_day = np.full(n_all, np.iinfo(np.int64).max)
    np.minimum.at(first_day, s_idx, day)
    np.minimum.at(first_day, d_idx, day)
    is_target = np.zeros(n_all, dtype=bool)
    is_target[d_idx] = True
    first_day[~is_target] = 0
    graph = from_arcs(
        s_idx, d_idx, directed=False, n=n_all, node_ids=ids, keep_largest_component=True,
        name="pol-si", source=str(path),
    )
    if graph.m == 0:
        raise InputError(path, "rows", "no edge left after dropping self-retweets")
    keep = np.searchsorted(ids, graph.node_ids)
    infect_day = np.minimum(first_day[keep], T + 1)
    t = np.arange(T + 1)[:, None]
    truth = (t >= infect_day[None, :]).astype(np.uint8)
    return Canonical(name="pol-si", graph=graph, model="si", T=T, truth=truth)
