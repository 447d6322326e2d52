"""The fitting workers, seen from the driving process: one process per extra device, and the
protocol on their pipes.

Each worker owns one device (its own process and CUDA context: two contexts
driven from threads of one process ran slower than one device and corrupted
the heap), holds its own copy of every prepared problem and evaluates the
slices of fitting rounds it is sent (:mod:`battus.backends.cuda.worker_main`
is its side). A candidate's value does not depend on which device, group or
pass computes it, so a spread search returns what one device returns, bit
for bit.

A message is a length-prefixed JSON header, then each array's raw bytes
(dtype, shape and byte count checked against the header): nothing is
unpickled.
"""

from __future__ import annotations

import itertools
import json
import os
import struct
import subprocess
import sys
import weakref
from concurrent.futures import ThreadPoolExecutor
from typing import BinaryIO

import numpy as np

from ...errors import InputError
from ...graph import Graph
from ...problem import Observations, Problem
from .settings import CUDASettings

# dtypes a message may carry; anything else in a header is a protocol error
_DTYPES = {"int32", "int64", "uint8", "float32", "float64"}
_HEADER = struct.Struct("<Q")
_MAX_HEADER = 1 << 20
WORKER_MODULE = "battus.backends.cuda.worker_main"


class WorkerError(RuntimeError):
    """A worker process failed or broke the protocol."""


# ----------------------------------------------------------------------------
# framing: a length-prefixed JSON header, then each array's raw bytes


def send(stream: BinaryIO, header: dict, arrays: dict[str, np.ndarray] | None = None) -> None:
    arrays = {k: np.ascontiguousarray(v) for k, v in (arrays or {}).items()}
    header = dict(header, arrays=[[k, v.dtype.name, list(v.shape)] for k, v in arrays.items()])
    blob = json.dumps(header).encode()
    stream.write(_HEADER.pack(len(blob)))
    stream.write(blob)
    for arr in arrays.values():
        if arr.nbytes:
            stream.write(memoryview(arr).cast("B"))
    stream.flush()


def _read_exact(stream: BinaryIO, buffer: memoryview) -> None:
    view = buffer
    while len(view):
        got = stream.readinto(view)
        if not got:
            raise EOFError("pipe closed mid-message")
        view = view[got:]


def receive(stream: BinaryIO) -> tuple[dict, dict[str, np.ndarray]]:
    """One message; EOFError when the other side has closed the pipe."""
    raw = stream.read(_HEADER.size)
    if len(raw) < _HEADER.size:
        raise EOFError("pipe closed")
    (length,) = _HEADER.unpack(raw)
    if length > _MAX_HEADER:
        raise WorkerError(f"message header of {length} bytes")
    blob = bytearray(length)
    _read_exact(stream, memoryview(blob))
    header = json.loads(blob)
    arrays = {}
    for name, dtype, shape in header.pop("arrays"):
        if dtype not in _DTYPES or not all(isinstance(s, int) and s >= 0 for s in shape):
            raise WorkerError(f"array {name!r}: dtype {dtype!r}, shape {shape!r}")
        arr = np.empty(tuple(shape), dtype=dtype)
        if arr.nbytes:
            _read_exact(stream, memoryview(arr).cast("B"))
        arrays[name] = arr
    return header, arrays


# ----------------------------------------------------------------------------
# the messages


def problem_message(problem: Problem) -> tuple[dict, dict[str, np.ndarray]]:
    """What a worker needs of ``problem`` to prepare it (:func:`problem_from_message` rebuilds it)."""
    header = {"model": problem.model, "T": int(problem.T), "n0": int(problem.n0),
              "directed": bool(problem.graph.directed)}
    arrays = {"indptr": np.asarray(problem.graph.indptr, dtype=np.int64),
              "indices": np.asarray(problem.graph.indices, dtype=np.int32),
              "obs_times": np.asarray(problem.observations.times, dtype=np.int64),
              "obs_states": np.asarray(problem.observations.states, dtype=np.uint8)}
    return header, arrays


def problem_from_message(header: dict, arrays: dict[str, np.ndarray]) -> Problem:
    n = arrays["indptr"].shape[0] - 1
    graph = Graph(indptr=arrays["indptr"], indices=arrays["indices"], node_ids=np.arange(n),
                  directed=bool(header["directed"]))
    obs = Observations(times=arrays["obs_times"], states=arrays["obs_states"])
    return Problem(graph=graph, model=header["model"], T=int(header["T"]), n0=int(header["n0"]),
                   observations=obs)


def evaluate_request(key: int, mode: str, chunk: int, frames: tuple[int, int] | None,
                     lanes: int | None) -> dict:
    """The header asking a worker for :meth:`battus.backends.cuda.passes.FitPasses.evaluate` of the
    problem it holds under ``key`` (the arrays: ``prior``, ``beta_i``, ``beta_r``)."""
    header = {"op": "evaluate", "key": int(key), "mode": mode, "chunk": int(chunk)}
    if frames is not None:
        header["frames"] = [int(frames[0]), int(frames[1])]
    if lanes is not None:
        header["lanes"] = int(lanes)
    return header


# ----------------------------------------------------------------------------
# the driving process's side


def _package_root() -> str:
    import battus

    return os.path.dirname(os.path.dirname(os.path.abspath(battus.__file__)))


class DeviceWorker:
    """One worker process owning CUDA device ``device``; requests are answered in order."""

    def __init__(self, device: int, settings: CUDASettings) -> None:
        self.device = int(device)
        env = dict(os.environ)
        # the child imports battus from where this process did (scripts may extend sys.path)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (_package_root(), env.get("PYTHONPATH")) if p)
        self._proc = subprocess.Popen([sys.executable, "-m", WORKER_MODULE, "--device", str(self.device)],
                                      stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env)
        self._finalizer = weakref.finalize(self, _shut_down, self._proc)
        self.request({"op": "start", "settings": settings.as_dict()})
        started = self.reply()
        self.name, self.ordinal = started["device"], started["ordinal"]

    def request(self, header: dict, arrays: dict[str, np.ndarray] | None = None) -> None:
        try:
            send(self._proc.stdin, header, arrays)
        except (BrokenPipeError, OSError) as exc:
            raise WorkerError(f"the worker on CUDA device {self.device} has stopped ({exc})") from None

    def reply(self) -> dict:
        """The next answer's header (arrays under ``"arrays"``); a worker's error is raised here."""
        try:
            header, arrays = receive(self._proc.stdout)
        except EOFError:
            code = self._proc.poll()
            raise WorkerError(f"the worker on CUDA device {self.device} has stopped (exit status {code})") from None
        if header.get("error"):
            if header.get("input_error"):
                source, field, message = header["input_error"]
                raise InputError(source, field, f"{message} (CUDA device {self.device})")
            raise WorkerError(f"CUDA device {self.device}: {header['error']}")
        header["arrays"] = arrays
        return header

    def close(self) -> None:
        self._finalizer()


def _shut_down(proc: subprocess.Popen) -> None:
    try:
        proc.stdin.close()  # end of input: the worker returns from its loop
    except OSError:
        pass
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
    proc.stdout.close()


class WorkerPool:
    """The fitting workers of one backend: started with a fit's warm-up, then holding a copy of
    every problem prepared after it (``spread``), each under its own key."""

    def __init__(self) -> None:
        self.workers: list[DeviceWorker] = []
        self.spread = False  # whether problems and fitting rounds go to the workers too
        self._keys = itertools.count()
        self.freed_keys: list[int] = []  # problems dropped here, to be dropped by the workers next

    def start(self, devices: list[int], settings: CUDASettings) -> None:
        """One worker per device, each told to warm up (the answers are read by :meth:`started`)."""
        self.workers = [DeviceWorker(d, settings) for d in devices]
        for worker in self.workers:
            worker.request({"op": "warm_up"})

    def started(self) -> None:
        """Wait for every worker's warm-up; from now on problems and rounds are spread."""
        for worker in self.workers:
            worker.reply()
        self.spread = True

    def holds(self, prep) -> bool:
        """Whether this problem's fitting rounds go to the workers too (prepared there)."""
        return self.spread and prep.worker_key is not None

    def prepare(self, prep, problem: Problem) -> None:
        """Every worker prepares its own copy of ``problem``, all at the same time; ``prep`` (this
        device's copy) gets the key they hold it under.

        A transfer blocks until its worker has read the whole problem, so each
        worker is sent it from a thread of its own (the pipes are independent
        and each is written by that one thread), and the answers are read once
        the transfers are done. Every worker whose transfer went through is
        answered for, so the pipes stay in step whatever failed; the first
        failure in device order is raised, and the workers that did prepare
        drop their copy with the next request.
        """
        key = next(self._keys)
        header, arrays = problem_message(problem)
        self.flush_freed()
        request = dict(header, op="prepare", key=key)
        with ThreadPoolExecutor(max_workers=len(self.workers), thread_name_prefix="battus-prepare") as pool:
            sent = [pool.submit(worker.request, request, arrays) for worker in self.workers]
        failure = None
        for worker, transfer in zip(self.workers, sent, strict=True):
            try:
                transfer.result()  # the transfer's own error (a stopped worker), if any: then no answer comes
                worker.reply()
            except Exception as exc:
                failure = failure or exc
        if failure is not None:
            self.freed_keys.append(key)
            raise failure
        prep.worker_key = key
        # the workers drop their copy once this one is gone; the message waits for the next request,
        # since a finalizer may run in the middle of another message
        weakref.finalize(prep, self.freed_keys.append, key)  # kept alive by the weakref module

    def flush_freed(self) -> None:
        """Tell every worker to drop the problems dropped here (unanswered requests)."""
        while self.freed_keys:
            key = self.freed_keys.pop()
            for worker in self.workers:
                worker.request({"op": "free", "key": key})

    def close(self) -> None:
        for worker in self.workers:
            worker.close()
        self.workers = []
        self.spread = False
