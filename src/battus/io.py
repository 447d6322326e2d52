"""HDF5 files that carry histories between stages (layout in ``docs/format.md``).

Every write goes to a temporary file in the target folder and is renamed into
place only when complete, so an interrupted job never leaves a partial file.
"""

from __future__ import annotations

import contextlib
import json
import platform
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path

import h5py
import numpy as np

from . import __version__
from .errors import InputError
from .files import atomic_path, require_file, sha256_file
from .graph import Graph
from .hdf5_probe import probe
from .memory import available_bytes, format_bytes
from .problem import Observations, Problem, Reconstruction, check_csr, check_posteriors, check_problem

HISTORY_FORMAT = "battus-history"
PREDICTION_FORMAT = "battus-prediction"
GRAPH_FORMAT = "battus-graph"
FORMAT_VERSION = 1
_BIG = 1 << 16  # arrays with more elements than this are chunked, with checksums
_RAW_CHUNK = 1 << 20  # elements of an uncompressed chunk (4-8 MB: few chunks, each checksummed)


@contextlib.contextmanager
def _new_hdf5(path: str | Path) -> Iterator[h5py.File]:
    """An HDF5 file written atomically; a failed write (disk full, quota) is one line, nothing left."""
    with atomic_path(path) as tmp:
        try:
            with h5py.File(tmp, "w") as fh:
                yield fh
        except OSError as exc:
            raise InputError(path, "--out", f"writing failed ({exc})") from None


def provenance(**fields) -> dict:
    """Common provenance record: package version, host, time, plus caller fields."""
    record = {
        "package": "battus",
        "package_version": __version__,
        "python": platform.python_version(),
        "numpy": np.__version__,
        "host": platform.node(),
        "created": datetime.now(UTC).isoformat(timespec="seconds"),
    }
    record.update(fields)
    return record


def _put(group: h5py.Group, name: str, data: np.ndarray, compress: bool = True) -> None:
    """One array: a large one chunked with checksums, gzip-compressed unless ``compress`` is off.

    Graph arrays are stored uncompressed: vertex ids compress poorly (about a third smaller) and
    decompressing them, one core, was most of the time a reconstruction of a large graph spent
    reading its input; states compress about eightfold and stay compressed, their chunks
    compressed on every core (:mod:`battus.chunked`).
    """
    data = np.ascontiguousarray(data)
    if data.size <= _BIG:
        group.create_dataset(name, data=data)
    elif compress:
        from .chunked import write_compressed

        write_compressed(group, name, data)
    else:
        chunks = (min(data.shape[0], _RAW_CHUNK),) + data.shape[1:] if data.ndim == 1 else True
        group.create_dataset(name, data=data, chunks=chunks, fletcher32=True)


def _write_graph(group: h5py.Group, graph: Graph) -> None:
    _put(group, "indptr", graph.indptr.astype(np.int64), compress=False)
    _put(group, "indices", graph.indices.astype(np.int32), compress=False)
    _put(group, "node_ids", graph.node_ids.astype(np.int64), compress=False)
    group.attrs["directed"] = bool(graph.directed)
    group.attrs["name"] = graph.name
    group.attrs["n"] = graph.n
    group.attrs["m"] = graph.m
    group.attrs["meta"] = json.dumps(graph.meta, default=str)


def open_hdf5(path: str | Path) -> h5py.File:
    """Open any HDF5 file for reading; a missing, damaged or unreadable one is an InputError."""
    path = require_file(path, "an HDF5 file")
    probe(path)
    try:
        return h5py.File(path, "r")
    except (OSError, ValueError) as exc:
        raise InputError(path, "file", f"not a readable HDF5 file ({exc})") from None


# Anything h5py raises while walking a damaged or hostile file (dangling links,
# unsupported types, corrupt B-trees) is bad input, not a bug of ours.
H5_ERRORS = (OSError, KeyError, RuntimeError, TypeError, ValueError, AttributeError)


def unreadable(source, field: str, exc: Exception) -> InputError:
    if isinstance(exc, InputError):
        return exc
    return InputError(source, field, f"unreadable ({type(exc).__name__}: {exc})")


def _raw_attr(obj, name: str, source, label: str):
    """An attribute's raw value, ``None`` when absent."""
    try:
        if name not in obj.attrs:
            return None
        return obj.attrs[name]
    except H5_ERRORS as exc:
        raise unreadable(source, label, exc) from None


def _as_scalar(value):
    if isinstance(value, np.ndarray):
        if value.ndim != 0:
            return None
        value = value.item()
    if isinstance(value, np.generic):
        value = value.item()
    return value


def _text_attr(obj, name: str, source, label: str | None = None, default: str | None = None) -> str | None:
    """A text attribute (str or UTF-8 bytes); ``default`` when absent."""
    label = label or f"@{name}"
    raw = _raw_attr(obj, name, source, label)
    if raw is None:
        return default
    value = _as_scalar(raw)
    if isinstance(value, bytes):
        try:
            return value.decode("utf-8")
        except UnicodeDecodeError:
            raise InputError(source, label, "not valid UTF-8 text") from None
    if not isinstance(value, str):
        raise InputError(source, label, f"expected text, got {_describe(raw)}")
    return value


def _int_attr(obj, name: str, source, label: str | None = None) -> int:
    """A required integer attribute (a bool or a float is refused, not truncated)."""
    label = label or f"@{name}"
    raw = _raw_attr(obj, name, source, label)
    if raw is None:
        raise InputError(source, label, "missing attribute")
    value = _as_scalar(raw)
    if isinstance(value, bool) or not isinstance(value, int):
        raise InputError(source, label, f"expected an integer, got {_describe(raw)}")
    return value


def _bool_attr(obj, name: str, source, default: bool) -> bool:
    label = f"@{name}"
    raw = _raw_attr(obj, name, source, label)
    if raw is None:
        return default
    value = _as_scalar(raw)
    if isinstance(value, bool) or (isinstance(value, int) and value in (0, 1)):
        return bool(value)
    raise InputError(source, label, f"expected true or false, got {_describe(raw)}")


def _float_attr(obj, name: str, source) -> float:
    raw = _raw_attr(obj, name, source, f"@{name}")
    if raw is None:
        return float("nan")
    value = _as_scalar(raw)
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InputError(source, f"@{name}", f"expected a number, got {_describe(raw)}")
    return float(value)


def _json_attr(obj, name: str, source, label: str | None = None) -> dict:
    """A JSON-object attribute (``{}`` when absent)."""
    label = label or f"@{name}"
    text = _text_attr(obj, name, source, label, default="{}")
    try:
        value = json.loads(text)
    except (json.JSONDecodeError, RecursionError):
        raise InputError(source, label, "not valid JSON") from None
    if not isinstance(value, dict):
        raise InputError(source, label, f"expected a JSON object, got {type(value).__name__}")
    return value


def _describe(value) -> str:
    if isinstance(value, np.ndarray):
        return f"{value.dtype} array of shape {value.shape}"
    return type(value).__name__


def describe_attr(obj, name: str) -> str:
    """An attribute as text for ``battus info``, whatever its type ('<unreadable>' when h5py cannot)."""
    try:
        value = _as_scalar(obj.attrs[name])
    except H5_ERRORS:
        return "<unreadable>"
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    return str(value)


def _dataset(fh: h5py.File, name: str) -> h5py.Dataset | None:
    """The dataset at ``name`` through hard links only; ``None`` when absent.

    Soft and external links, virtual datasets and external raw storage are
    refused: they would read another file, or nothing, in place of this one.
    """
    node = fh
    parts = name.split("/")
    for depth, part in enumerate(parts):
        where = "/".join(parts[: depth + 1])
        try:
            link = node.get(part, getlink=True)
        except H5_ERRORS as exc:
            raise unreadable(fh.filename, where, exc) from None
        if link is None:
            return None
        if not isinstance(link, h5py.HardLink):
            raise InputError(fh.filename, where, f"is a {type(link).__name__}, not stored in this file")
        try:
            node = node[part]
        except H5_ERRORS as exc:
            raise unreadable(fh.filename, where, exc) from None
        last = depth == len(parts) - 1
        if not last and not isinstance(node, h5py.Group):
            raise InputError(fh.filename, where, "expected a group")
        if last and not isinstance(node, h5py.Dataset):
            raise InputError(fh.filename, where, "expected a dataset, found a group")
    try:
        outside = node.is_virtual or node.external is not None
    except H5_ERRORS as exc:
        raise unreadable(fh.filename, name, exc) from None
    if outside:
        raise InputError(fh.filename, name, "data stored outside this file (virtual or external dataset)")
    return node


_KIND_NAMES = {"uib": "integers", "f": "floating-point numbers", "uibf": "numbers"}


def _read(fh: h5py.File, name: str, *, kinds: str = "uib", ndim: int | None = None, dtype=None,
          optional: bool = False):
    """Read one dataset after checking its type, rank and size; ``dtype`` narrows range-checked."""
    ds = _dataset(fh, name)
    if ds is None:
        if optional:
            return None
        raise InputError(fh.filename, name, "missing")
    try:
        found, shape = ds.dtype, tuple(int(x) for x in ds.shape)
    except H5_ERRORS as exc:
        raise unreadable(fh.filename, name, exc) from None
    if found.kind not in kinds:
        raise InputError(fh.filename, name, f"expected {_KIND_NAMES.get(kinds, kinds)}, got {found}")
    if ndim is not None and len(shape) != ndim:
        raise InputError(fh.filename, name, f"expected a {ndim}-D array, got shape {shape}")
    size = int(np.prod(shape, dtype=object))
    needed = size * found.itemsize
    if needed > available_bytes():
        raise InputError(fh.filename, name, f"declares shape {shape}, which needs {format_bytes(needed)}")
    try:
        data = _read_large(ds) if size > _BIG else None
        if data is None:
            data = np.asarray(ds[()])
    except H5_ERRORS as exc:  # truncated file, checksum mismatch, unsupported filter
        raise unreadable(fh.filename, name, exc) from None
    if dtype is not None:
        data = _narrow(data, np.dtype(dtype), fh.filename, name)
    return data


def _read_large(ds: h5py.Dataset) -> np.ndarray | None:
    """A large array as this package writes it, its chunks checked and inflated on every core
    (:func:`battus.chunked.read_chunked`); None for HDF5 to read any other."""
    from .chunked import read_chunked

    try:
        return read_chunked(ds)
    except H5_ERRORS:  # a chunk index h5py cannot walk: HDF5's own read then says what is wrong
        return None


def _narrow(data: np.ndarray, dtype: np.dtype, source, name: str) -> np.ndarray:
    """Cast integers to ``dtype`` only when every value fits (no silent wrap-around)."""
    if data.size and data.dtype != dtype:
        info = np.iinfo(dtype)
        lo, hi = int(data.min()), int(data.max())
        if lo < info.min or hi > info.max:
            bad = lo if lo < info.min else hi
            raise InputError(source, name, f"value {bad} does not fit in {dtype.name}")
    return data.astype(dtype, copy=False)


def _read_graph(fh: h5py.File, prefix: str = "graph") -> Graph:
    source = fh.filename
    indptr = _read(fh, f"{prefix}/indptr", ndim=1, dtype=np.int64)
    indices = _read(fh, f"{prefix}/indices", ndim=1)
    n = indptr.size - 1
    if n >= 2**31:
        raise InputError(source, f"{prefix}/indptr", "more than 2**31-1 vertices are not supported")
    check_csr(indptr, indices, source, prefix)
    indices = _narrow(indices, np.dtype(np.int32), source, f"{prefix}/indices")
    node_ids = _read(fh, f"{prefix}/node_ids", ndim=1, dtype=np.int64, optional=True)
    if node_ids is None:
        node_ids = np.arange(n, dtype=np.int64)
    if node_ids.shape != (n,):
        raise InputError(source, f"{prefix}/node_ids", f"expected {n} ids (one a vertex), got {node_ids.shape[0]}")
    group = fh[prefix]
    directed = _bool_attr(group, "directed", source, default=True)
    name = _text_attr(group, "name", source, f"{prefix}@name", default="")
    meta = _json_attr(group, "meta", source, f"{prefix}@meta")
    return Graph(indptr=indptr, indices=indices, node_ids=node_ids, directed=directed, name=name, meta=meta)


def _open(path: str | Path, kinds: tuple[str, ...]) -> h5py.File:
    fh = open_hdf5(path)
    try:
        found = _text_attr(fh, "format", path)
    except InputError:
        fh.close()
        raise
    if found not in kinds:
        fh.close()
        raise InputError(path, "@format", f"expected a {' or '.join(kinds)} file, found {found!r}")
    return fh


def write_graph(path: str | Path, graph: Graph, prov: dict | None = None) -> None:
    with _new_hdf5(path) as fh:
        fh.attrs["format"] = GRAPH_FORMAT
        fh.attrs["format_version"] = FORMAT_VERSION
        _write_graph(fh.create_group("graph"), graph)
        fh.attrs["provenance"] = json.dumps(prov or provenance())


def read_graph(path: str | Path) -> Graph:
    """Read the graph of a graph or history file."""
    with _open(path, (GRAPH_FORMAT, HISTORY_FORMAT)) as fh:
        try:
            return _read_graph(fh)
        except H5_ERRORS as exc:
            raise unreadable(path, "graph", exc) from None


def write_history(path: str | Path, problem: Problem, prov: dict | None = None) -> None:
    """Write a history file: graph, model, T, n0, observations, optional truth, provenance."""
    check_problem(problem, str(path))
    with _new_hdf5(path) as fh:
        fh.attrs["format"] = HISTORY_FORMAT
        fh.attrs["format_version"] = FORMAT_VERSION
        fh.attrs["model"] = problem.model
        fh.attrs["T"] = int(problem.T)
        fh.attrs["n0"] = int(problem.n0)
        fh.attrs["name"] = problem.name
        _write_graph(fh.create_group("graph"), problem.graph)
        obs = fh.create_group("observations")
        _put(obs, "times", problem.observations.times.astype(np.int64))
        _put(obs, "states", problem.observations.states.astype(np.uint8))
        if problem.truth is not None:
            _put(fh, "truth", problem.truth.astype(np.uint8))
        fh.attrs["provenance"] = json.dumps({**problem.provenance, **(prov or {})} or provenance())


def read_history(path: str | Path, truth: str = "optional") -> Problem:
    """Read and validate a history file. ``truth``: ``"required"`` (scoring), ``"optional"``, or
    ``"skip"`` (a reconstruction, which never reads it: neither its time nor its memory is spent)."""
    if truth not in ("required", "optional", "skip"):
        raise ValueError(f"truth must be 'required', 'optional' or 'skip', got {truth!r}")
    with _open(path, (HISTORY_FORMAT,)) as fh:
        try:
            model = _text_attr(fh, "model", path)
            if model is None:
                raise InputError(path, "@model", "missing attribute")
            T = _int_attr(fh, "T", path)
            n0 = _int_attr(fh, "n0", path)
            graph = _read_graph(fh)
            times = _read(fh, "observations/times", ndim=1, dtype=np.int64)
            states = _read(fh, "observations/states", ndim=2)
            truth_states = None if truth == "skip" else _read(fh, "truth", ndim=2, optional=True)
            if truth == "required" and truth_states is None:
                raise InputError(path, "truth", "scoring needs the true history, which this file lacks")
            prov = _json_attr(fh, "provenance", path)
            name = _text_attr(fh, "name", path, default=Path(path).stem)
        except H5_ERRORS as exc:
            raise unreadable(path, "file", exc) from None
    problem = Problem(
        graph=graph, model=model, T=T, n0=n0,
        observations=Observations(times=times, states=states),
        truth=truth_states, name=name, provenance=prov,
    )
    check_problem(problem, str(path), graph_checked=True)  # _read_graph checked the CSR arrays
    problem.observations.states = problem.observations.states.astype(np.uint8, copy=False)
    if problem.truth is not None:
        problem.truth = problem.truth.astype(np.uint8, copy=False)
    return problem


def write_prediction(path: str | Path, recon: Reconstruction, problem: Problem, input_path: str | Path | None,
                     extra: dict | None = None, input_sha256: str | Callable[[], str] | None = None) -> dict:
    """Write a prediction: decoded states, hitting times, optional posteriors, full provenance.

    ``input_sha256``: the input's digest, or a function giving it (a hash taken in a thread), asked
    for only once the arrays are written; without it the input is hashed here.

    Returns the record :func:`read_prediction` reads back from the file (the same arrays, the
    attributes as they come back), so the process that wrote a prediction can score it without
    reading it again.
    """
    if recon.posteriors is not None:  # the one check every reader applies (problem.check_posteriors)
        check_posteriors(recon.posteriors, problem.T, problem.n, str(path))
    # no copies of arrays already of the stored type (a large history's states are 100s of MB)
    states = recon.states.astype(np.uint8, copy=False)
    posteriors = None if recon.posteriors is None else recon.posteriors.astype(np.float32, copy=False)
    with _new_hdf5(path) as fh:
        _put(fh, "states", states)
        hit = fh.create_group("hitting_times")
        _put(hit, "infection", recon.t_inf.astype(np.int64, copy=False))
        _put(hit, "recovery", recon.t_rec.astype(np.int64, copy=False))
        if posteriors is not None:
            _put(fh, "posteriors", posteriors)
        # the attributes last: the input's hash may still be being taken while the arrays are written
        attrs = _prediction_attrs(recon, problem, input_path, extra, input_sha256)
        for key, value in attrs.items():
            fh.attrs[key] = value
    return _prediction_record(states, posteriors, json.loads(attrs["params"]), json.loads(attrs["provenance"]),
                              {key: _as_scalar(value) for key, value in attrs.items()})


def _prediction_attrs(recon: Reconstruction, problem: Problem, input_path: str | Path | None, extra: dict | None,
                      input_sha256: str | Callable[[], str] | None) -> dict:
    try:
        if callable(input_sha256):
            input_sha256 = input_sha256()
        elif input_sha256 is None and input_path:
            input_sha256 = sha256_file(input_path)
    except OSError as exc:  # here, not as the output's "writing failed": the input could not be read again
        raise InputError(input_path, "file", f"reading it for its sha256 failed ({exc})") from None
    prov = provenance(
        method=recon.params.get("method"),
        params=recon.params,
        beta_i=recon.beta_i,
        beta_r=recon.beta_r,
        backend=recon.backend,
        device=recon.device,
        algorithm_seconds=recon.algorithm_seconds,
        input=str(input_path) if input_path else None,
        input_sha256=input_sha256 if input_path else None,
        fit_trace=recon.fit_trace,
        **(extra or {}),
    )
    attrs = {
        "format": PREDICTION_FORMAT,
        "format_version": FORMAT_VERSION,
        "model": problem.model,
        "T": int(problem.T),
        "name": problem.name,
        "method": str(recon.params.get("method")),
        "backend": recon.backend,
        "device": recon.device,
        "algorithm_seconds": float(recon.algorithm_seconds),
        "beta_i": recon.beta_i,
        "beta_r": recon.beta_r,
        "package_version": __version__,
        "params": json.dumps(recon.params),
        "provenance": json.dumps(prov),
    }
    for key, value in recon.extras.items():
        attrs[key] = value if np.isscalar(value) else json.dumps(value)
    return attrs


_PREDICTION_NUMBERS = ("algorithm_seconds", "beta_i", "beta_r")
_PREDICTION_TEXTS = ("method", "backend", "device", "model", "name", "package_version")


def _prediction_record(states: np.ndarray, posteriors: np.ndarray | None, params: dict, prov: dict,
                       attrs: dict) -> dict:
    """What :func:`read_prediction` returns, from a prediction's arrays, its decoded ``params`` and
    ``provenance``, and its other attributes as checked Python values (text as ``str``, numbers as
    ``int``/``float``/``bool``, NaN for a missing number, None for missing text)."""
    record = {"states": states, "posteriors": posteriors, "params": params, "provenance": prov}
    for key in _PREDICTION_NUMBERS:
        record[key] = float(attrs.get(key, float("nan")))
    for key in _PREDICTION_TEXTS:
        record[key] = attrs.get(key)
    for key, value in attrs.items():  # a method's own scalar results (Battus-C's feasibility, counts)
        if key not in record and key not in ("format", "format_version", "T") and isinstance(
                value, bool | int | float | str):
            record[key] = value
    return record


def read_prediction(path: str | Path, model: str | None = None) -> dict:
    """Read a prediction file: ``states`` plus its attributes (``params``, ``provenance`` decoded).

    Predictions may come from any method and need not be monotone, but every
    state code must be 0 (S), 1 (I) or 2 (R), and only 0 or 1 when ``model``
    is ``'si'``.
    """
    from .problem import check_states

    with _open(path, (PREDICTION_FORMAT,)) as fh:
        try:
            states = _read(fh, "states", ndim=2)
            check_states(states, str(path), "states", model or "sir")
            posteriors = _read(fh, "posteriors", kinds="f", ndim=3, optional=True)
            params, prov = _json_attr(fh, "params", path), _json_attr(fh, "provenance", path)
            checked = {key: _float_attr(fh, key, path) for key in _PREDICTION_NUMBERS}
            checked.update((key, _text_attr(fh, key, path)) for key in _PREDICTION_TEXTS)
            others = {key: _as_scalar(_raw_attr(fh, key, path, f"@{key}")) for key in fh.attrs.keys()
                      if key not in checked and key not in ("params", "provenance", "format", "format_version", "T")}
        except H5_ERRORS as exc:
            raise unreadable(path, "file", exc) from None
    return _prediction_record(states.astype(np.uint8), posteriors, params, prov, {**others, **checked})
