"""A fitting worker process: one CUDA device, driven over its stdin and stdout by
:class:`battus.backends.cuda.worker_pipe.DeviceWorker` in the fitting process.

Run as ``python -m battus.backends.cuda.worker_main --device D`` by the driving
process; never by hand. It answers requests in order until its stdin closes:
``start`` (build the backend from the settings dict), ``warm_up``, ``prepare``
(a problem, under a key), ``evaluate`` (a slice of a fitting round of a
prepared problem) and ``free`` (drop a problem; no answer).
"""

from __future__ import annotations

import argparse
import sys
from typing import BinaryIO

from ...errors import InputError
from ...warmup import warm_up
from .backend import CUDABackend
from .settings import CUDASettings
from .worker_pipe import WorkerError, problem_from_message, receive, send


def serve(device: int, inbox: BinaryIO, outbox: BinaryIO) -> None:
    """Answer requests until the pipe closes."""
    from numba import cuda

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
                backend = CUDABackend(CUDASettings.from_dict(header["settings"]))
                current = -1 if backend.simulated else int(cuda.get_current_device().id)
                send(outbox, {"device": backend.device, "ordinal": current})
            elif op == "warm_up":
                warm_up(backend, causal=False, fit=True)
                send(outbox, {})
            elif op == "prepare":
                problems[header["key"]] = (backend.prepare(problem_from_message(header, arrays)), {})
                send(outbox, {})
            elif op == "evaluate":
                prep, scratch = problems[header["key"]]
                frames = header.get("frames")
                values = backend.passes.evaluate(
                    prep, arrays["prior"], arrays["beta_i"], arrays["beta_r"], header["mode"], int(header["chunk"]),
                    scratch, None if frames is None else (int(frames[0]), int(frames[1])),
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
