"""Fitting on several GPUs: one worker process per extra device, driven by :class:`battus.backends.cuda.CUDABackend`.

Each worker owns one device (its own process and CUDA context; threads
launching into two contexts from one process were 2.3x slower than one GPU
and corrupted the heap, docs/benchmarks.md), holds its own copy of every
prepared problem and evaluates the slices of fitting rounds it is sent. A
candidate's value does not depend on which device, group or pass computes it
(tests/test_cuda_backend.py), so the spread search returns what one device
returns, bit for bit.

The pipe protocol carries only a JSON header and raw numeric arrays (dtype,
shape and byte count checked against the header): nothing is unpickled.
Run as ``python -m battus.backends.cuda_workers --device D`` by
:class:`DeviceWorker`; never by hand.
"""

from __future__ import annotations

import argparse
import json
import os
import struct
import subprocess
import sys
import weakref
from typing import BinaryIO

import numpy as np

from ..errors import InputError

# dtypes a message may carry; anything else in a header is a protocol error
_DTYPES = {"int32", "int64", "uint8", "float32", "float64"}
_HEADER = struct.Struct("<Q")
_MAX_HEADER = 1 << 20


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
# host side


def _package_root() -> str:
    import battus

    return os.path.dirname(os.path.dirname(os.path.abspath(battus.__file__)))


class DeviceWorker:
    """One worker process owning CUDA device ``device``; requests are answered in order."""

    def __init__(self, device: int, settings: dict) -> None:
        self.device = int(device)
        env = dict(os.environ)
        # the child imports battus from where this process did (scripts may extend sys.path)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (_package_root(), env.get("PYTHONPATH")) if p)
        self._proc = subprocess.Popen(
            [sys.executable, "-m", "battus.backends.cuda_workers", "--device", str(self.device)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env)
        self._finalizer = weakref.finalize(self, _shut_down, self._proc)
        self.request({"op": "start", "settings": settings})
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


# ----------------------------------------------------------------------------
# worker side


def _problem(header: dict, arrays: dict[str, np.ndarray]):
    from ..graph import Graph
    from ..problem import Observations, Problem

    n = arrays["indptr"].shape[0] - 1
    graph = Graph(indptr=arrays["indptr"], indices=arrays["indices"], node_ids=np.arange(n),
                  directed=bool(header["directed"]))
    obs = Observations(times=arrays["obs_times"], states=arrays["obs_states"])
    return Problem(graph=graph, model=header["model"], T=int(header["T"]), n0=int(header["n0"]),
                   observations=obs)


def problem_message(problem) -> tuple[dict, dict[str, np.ndarray]]:
    """What a worker needs of ``problem`` to prepare it (:func:`_problem` rebuilds it)."""
    header = {"model": problem.model, "T": int(problem.T), "n0": int(problem.n0),
              "directed": bool(problem.graph.directed)}
    arrays = {"indptr": np.asarray(problem.graph.indptr, dtype=np.int64),
              "indices": np.asarray(problem.graph.indices, dtype=np.int32),
              "obs_times": np.asarray(problem.observations.times, dtype=np.int64),
              "obs_states": np.asarray(problem.observations.states, dtype=np.uint8)}
    return header, arrays


def serve(device: int, inbox: BinaryIO, outbox: BinaryIO) -> None:
    """Answer requests until the pipe closes: start, warm_up, prepare, evaluate; and free (no answer)."""
    from numba import cuda

    from ..warmup import warm_up
    from .cuda import CUDABackend

    backend = None
    problems: dict[int, tuple] = {}  # key -> (prepared problem, its fitting scratch)
    while True:
        try:
            header, arrays = receive(inbox)
        except EOFError:
            return
        op = header["op"]
        try:
            if op == "start":
                cuda.select_device(device)
                backend = CUDABackend(**header["settings"])
                current = -1 if backend.simulated else int(cuda.get_current_device().id)
                send(outbox, {"device": backend.device, "ordinal": current})
            elif op == "warm_up":
                warm_up(backend, causal=False, fit=True)
                send(outbox, {})
            elif op == "prepare":
                problems[header["key"]] = (backend.prepare(_problem(header, arrays)), {})
                send(outbox, {})
            elif op == "evaluate":
                prep, scratch = problems[header["key"]]
                frames = header.get("frames")
                values = backend.evaluate(prep, arrays["prior"], arrays["beta_i"], arrays["beta_r"],
                                          header["mode"], int(header["chunk"]), scratch,
                                          None if frames is None else (int(frames[0]), int(frames[1])),
                                          int(header["lanes"]) if "lanes" in header else None)
                send(outbox, {}, {"values": values})
            elif op == "free":  # unanswered: sent from wherever the driver's next request is
                problems.pop(header["key"], None)
            else:
                raise WorkerError(f"unknown request {op!r}")
        except InputError as exc:
            send(outbox, {"error": str(exc), "input_error": [exc.source, exc.field, exc.message]})
        except Exception as exc:  # reported to the driving process, which raises it
            send(outbox, {"error": f"{type(exc).__name__}: {exc}"})


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", type=int, required=True)
    args = parser.parse_args(argv)
    inbox = sys.stdin.buffer
    outbox = sys.stdout.buffer
    sys.stdout = sys.stderr  # the protocol owns stdout; anything printed goes to stderr
    serve(args.device, inbox, outbox)


if __name__ == "__main__":
    main()
