"""HDF5 files that carry histories between stages (layout in ``docs/format.md``).

Every write goes to a temporary file in the target folder and is renamed into
place only when complete, so an interrupted job never leaves a partial file.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import platform
import tempfile
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import h5py
import numpy as np

from . import __version__
from .errors import InputError
from .graph import Graph
from .problem import Observations, Problem, Reconstruction, check_problem

HISTORY_FORMAT = "battus-history"
PREDICTION_FORMAT = "battus-prediction"
GRAPH_FORMAT = "battus-graph"
FORMAT_VERSION = 1
_BIG = 1 << 16  # arrays with more elements than this are chunked and compressed


@contextlib.contextmanager
def atomic_path(path: str | Path) -> Iterator[Path]:
    """Yield a temporary path beside ``path``; rename it over ``path`` on success."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    tmp_path = Path(tmp)
    try:
        yield tmp_path
        os.replace(tmp_path, path)
    finally:
        if tmp_path.exists():
            tmp_path.unlink()


def sha256_file(path: str | Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


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


def _put(group: h5py.Group, name: str, data: np.ndarray) -> None:
    data = np.ascontiguousarray(data)
    if data.size > _BIG:
        group.create_dataset(name, data=data, chunks=True, compression="gzip", compression_opts=4,
                             shuffle=True, fletcher32=True)
    else:
        group.create_dataset(name, data=data)


def _write_graph(group: h5py.Group, graph: Graph) -> None:
    _put(group, "indptr", graph.indptr.astype(np.int64))
    _put(group, "indices", graph.indices.astype(np.int32))
    _put(group, "node_ids", graph.node_ids.astype(np.int64))
    group.attrs["directed"] = bool(graph.directed)
    group.attrs["name"] = graph.name
    group.attrs["n"] = graph.n
    group.attrs["m"] = graph.m
    group.attrs["meta"] = json.dumps(graph.meta, default=str)


def open_hdf5(path: str | Path) -> h5py.File:
    """Open any HDF5 file for reading; a missing or unreadable one is an InputError."""
    path = Path(path)
    if not path.is_file():
        raise InputError(path, "file", "no such file")
    try:
        return h5py.File(path, "r")
    except OSError as exc:
        raise InputError(path, "file", f"not a readable HDF5 file ({exc})") from None


def _open(path: str | Path, kind: str) -> h5py.File:
    fh = open_hdf5(path)
    found = fh.attrs.get("format")
    if found != kind:
        fh.close()
        raise InputError(path, "format", f"expected a {kind} file, found {found!r}")
    return fh


def _read(fh: h5py.File, name: str, dtype=None, optional: bool = False):
    if name not in fh:
        if optional:
            return None
        raise InputError(fh.filename, name, "missing")
    try:
        data = fh[name][()]
    except OSError as exc:  # truncated file, checksum mismatch
        raise InputError(fh.filename, name, f"unreadable ({exc})") from None
    if dtype is not None:
        if np.asarray(data).dtype.kind not in "uib":
            raise InputError(fh.filename, name, f"expected integers, got {np.asarray(data).dtype}")
        data = np.asarray(data).astype(dtype)
    return data


def _attr(fh: h5py.File, name: str, kind=int):
    if name not in fh.attrs:
        raise InputError(fh.filename, f"@{name}", "missing attribute")
    value = fh.attrs[name]
    try:
        return kind(value.decode() if isinstance(value, bytes) else value)
    except (TypeError, ValueError):
        raise InputError(fh.filename, f"@{name}", f"bad value {value!r}") from None


def _read_graph(fh: h5py.File, prefix: str = "graph") -> Graph:
    indptr = _read(fh, f"{prefix}/indptr", np.int64)
    indices = _read(fh, f"{prefix}/indices", np.int32)
    node_ids = _read(fh, f"{prefix}/node_ids", np.int64, optional=True)
    if indptr.ndim != 1 or indptr.size < 2:
        raise InputError(fh.filename, f"{prefix}/indptr", "must be 1-D with n+1 >= 2 entries")
    if indices.ndim != 1:
        raise InputError(fh.filename, f"{prefix}/indices", "must be 1-D")
    n = indptr.size - 1
    if node_ids is None:
        node_ids = np.arange(n, dtype=np.int64)
    if node_ids.shape != (n,):
        raise InputError(fh.filename, f"{prefix}/node_ids", f"expected shape ({n},), got {node_ids.shape}")
    group = fh[prefix]
    directed = bool(group.attrs.get("directed", True))
    name = str(group.attrs.get("name", ""))
    try:
        meta = json.loads(group.attrs.get("meta", "{}"))
    except json.JSONDecodeError:
        raise InputError(fh.filename, f"{prefix}@meta", "not valid JSON") from None
    graph = Graph(indptr=indptr, indices=indices, node_ids=node_ids, directed=directed, name=name, meta=meta)
    if indptr[0] != 0 or np.any(np.diff(indptr) < 0) or indptr[-1] != indices.size:
        raise InputError(fh.filename, f"{prefix}/indptr", "not a valid CSR row pointer for indices")
    if indices.size and (indices.min() < 0 or indices.max() >= n):
        raise InputError(fh.filename, f"{prefix}/indices", "vertex index out of range")
    return graph


def write_graph(path: str | Path, graph: Graph, prov: dict | None = None) -> None:
    with atomic_path(path) as tmp, h5py.File(tmp, "w") as fh:
        fh.attrs["format"] = GRAPH_FORMAT
        fh.attrs["format_version"] = FORMAT_VERSION
        _write_graph(fh.create_group("graph"), graph)
        fh.attrs["provenance"] = json.dumps(prov or provenance())


def read_graph(path: str | Path) -> Graph:
    """Read the graph of a graph, history or prediction-free file."""
    with open_hdf5(path) as fh:
        if fh.attrs.get("format") not in (GRAPH_FORMAT, HISTORY_FORMAT):
            raise InputError(path, "format", f"expected a graph or history file, found {fh.attrs.get('format')!r}")
        return _read_graph(fh)


def write_history(path: str | Path, problem: Problem, prov: dict | None = None) -> None:
    """Write a history file: graph, model, T, n0, observations, optional truth, provenance."""
    check_problem(problem, str(path))
    with atomic_path(path) as tmp, h5py.File(tmp, "w") as fh:
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


def read_history(path: str | Path, require_truth: bool = False) -> Problem:
    """Read and validate a history file; ``require_truth`` for scoring."""
    with _open(path, HISTORY_FORMAT) as fh:
        model = _attr(fh, "model", str)
        T = _attr(fh, "T")
        n0 = _attr(fh, "n0")
        graph = _read_graph(fh)
        times = _read(fh, "observations/times", np.int64)
        states = _read(fh, "observations/states")
        truth = _read(fh, "truth", optional=True)
        if require_truth and truth is None:
            raise InputError(path, "truth", "scoring needs the true history, which this file lacks")
        if states.ndim != 2:
            raise InputError(path, "observations/states", f"expected (K, n), got shape {states.shape}")
        if times.ndim != 1:
            raise InputError(path, "observations/times", f"expected (K,), got shape {times.shape}")
        try:
            prov = json.loads(fh.attrs.get("provenance", "{}"))
        except json.JSONDecodeError:
            raise InputError(path, "@provenance", "not valid JSON") from None
        problem = Problem(
            graph=graph, model=model, T=T, n0=n0,
            observations=Observations(times=times, states=states),
            truth=truth, name=str(fh.attrs.get("name", Path(path).stem)), provenance=prov,
        )
    check_problem(problem, str(path))
    problem.observations.states = problem.observations.states.astype(np.uint8)
    if problem.truth is not None:
        problem.truth = problem.truth.astype(np.uint8)
    return problem


def write_prediction(path: str | Path, recon: Reconstruction, problem: Problem, input_path: str | Path | None,
                     extra: dict | None = None) -> None:
    """Write a prediction: decoded states, hitting times, optional posteriors, full provenance."""
    prov = provenance(
        method=recon.params.get("method"),
        params=recon.params,
        beta_i=recon.beta_i,
        beta_r=recon.beta_r,
        backend=recon.backend,
        device=recon.device,
        algorithm_seconds=recon.algorithm_seconds,
        input=str(input_path) if input_path else None,
        input_sha256=sha256_file(input_path) if input_path else None,
        fit_trace=recon.fit_trace,
        **(extra or {}),
    )
    with atomic_path(path) as tmp, h5py.File(tmp, "w") as fh:
        fh.attrs["format"] = PREDICTION_FORMAT
        fh.attrs["format_version"] = FORMAT_VERSION
        fh.attrs["model"] = problem.model
        fh.attrs["T"] = int(problem.T)
        fh.attrs["name"] = problem.name
        fh.attrs["method"] = str(recon.params.get("method"))
        fh.attrs["backend"] = recon.backend
        fh.attrs["device"] = recon.device
        fh.attrs["algorithm_seconds"] = float(recon.algorithm_seconds)
        fh.attrs["beta_i"] = recon.beta_i
        fh.attrs["beta_r"] = recon.beta_r
        fh.attrs["package_version"] = __version__
        fh.attrs["params"] = json.dumps(recon.params)
        fh.attrs["provenance"] = json.dumps(prov)
        for key, value in recon.extras.items():
            fh.attrs[key] = value if np.isscalar(value) else json.dumps(value)
        _put(fh, "states", recon.states.astype(np.uint8))
        hit = fh.create_group("hitting_times")
        _put(hit, "infection", recon.t_inf.astype(np.int64))
        _put(hit, "recovery", recon.t_rec.astype(np.int64))
        if recon.posteriors is not None:
            _put(fh, "posteriors", recon.posteriors.astype(np.float32))


def read_prediction(path: str | Path) -> dict:
    """Read a prediction file: ``states`` plus its attributes (``params`` decoded)."""
    with _open(path, PREDICTION_FORMAT) as fh:
        states = _read(fh, "states")
        if states.ndim != 2:
            raise InputError(path, "states", f"expected (T+1, n), got shape {states.shape}")
        attrs = {k: (v.decode() if isinstance(v, bytes) else v) for k, v in fh.attrs.items()}
        posteriors = _read(fh, "posteriors", optional=True)
    for key in ("params", "provenance"):
        if key in attrs:
            attrs[key] = json.loads(attrs[key])
    return {"states": states.astype(np.uint8), "posteriors": posteriors, **attrs}
