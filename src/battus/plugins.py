"""Plug-in methods: any command that turns a history file into a prediction file.

A plug-in is an argument list (no shell) with placeholders: ``{history}`` the
history it reads, ``{out}`` the prediction file it writes, ``{threads}`` the
threads it may use, ``{seed}`` a seed, ``{python}`` the Python interpreter
running Battus (whose environment has numpy and h5py), ``{workflow}`` the
folder of the workflow running it (the working folder outside a workflow). :func:`run_method` runs it and treats
what it writes as untrusted input:

* the plug-in never sees the truth: it reads a copy of the history holding
  the graph, model, T, n0 and the observations only;
* its prediction is read like any input (``battus.io.read_prediction``) and
  must have one state per vertex and frame; a missing or malformed file, or a
  non-zero exit, is one line naming the method;
* the prediction is then rewritten in the documented format with full
  provenance: the method, its command, the plug-in's own parameters and
  timing when it records them (else the command's wall time, which includes
  its start-up), and the input's sha256.

See docs/methods.md for the contract and a worked example.
"""

from __future__ import annotations

import math
import os
import queue
import shlex
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from .decode import hitting_times
from .errors import InputError, printable

if TYPE_CHECKING:  # the workflow's plan reads PLACEHOLDERS without loading Numba
    from .problem import Problem, Reconstruction

PLACEHOLDERS = ("history", "out", "threads", "seed", "python", "workflow")
# how long a plug-in may run unless told otherwise (`battus run-method --time-limit`, a plug-in's
# `time_limit` in a workflow config): a day, so that a hung plug-in does not hold a job for ever
DEFAULT_TIME_LIMIT = 86_400.0
# the folder of the Snakemake workflow running the plug-in (set by workflow_scripts/battus_cli.py; the working folder
# otherwise): a config names a plug-in kept in the repository as {workflow}/path, and the params, which
# hold the unexpanded command, stay the same wherever the workflow is unpacked
WORKFLOW_ENV = "BATTUS_WORKFLOW"
PLACEHOLDER_LIST = ", ".join("{" + p + "}" for p in PLACEHOLDERS)


def expand(argv: list[str], values: dict[str, str]) -> list[str]:
    """The command with its placeholders filled in (an unknown placeholder is an error)."""
    expanded = []
    for arg in argv:
        try:
            expanded.append(arg.format(**values))
        except (KeyError, IndexError, ValueError) as exc:
            raise InputError("--command", "command",
                             f"bad placeholder in {arg!r} ({exc}); use {PLACEHOLDER_LIST}"
                             ) from None
    return expanded


def run_method(name: str, argv: list[str], problem: Problem, threads: int = 1, seed: int = 0,
               progress=None, time_limit: float = DEFAULT_TIME_LIMIT) -> Reconstruction:
    """Run plug-in ``name`` (``argv``, with placeholders) on ``problem`` and return its validated prediction.

    A plug-in still running after ``time_limit`` seconds is stopped (with everything it started) and
    is an :class:`InputError`; what a plug-in leaves running when it exits is stopped too. Its
    output is shown with control characters escaped: streamed with ``progress``, else only if it
    fails.
    """
    from .io import read_prediction, write_history

    if not argv:
        raise InputError(f"method {name}", "command", "empty command")
    with tempfile.TemporaryDirectory(prefix="battus-method-") as work:
        observed_only = Path(work) / "history.h5"
        write_history(observed_only, replace(problem, truth=None))  # a plug-in never sees the truth
        out = Path(work) / "prediction.h5"
        command = expand(argv, {"history": str(observed_only), "out": str(out), "threads": str(threads),
                                "seed": str(seed), "python": sys.executable,
                                "workflow": os.environ.get(WORKFLOW_ENV) or os.getcwd()})
        env = {**os.environ, "OMP_NUM_THREADS": str(threads), "NUMBA_NUM_THREADS": str(threads),
               "BATTUS_METHOD_THREADS": str(threads)}
        if progress:
            progress(f"method {name}: {shlex.join(command)}")
        started = time.perf_counter()
        messages: list[str] = []
        try:
            # its own session: stopping Battus (Ctrl-C, SIGTERM, an error, the time limit) stops the
            # plug-in and everything it started, and the temporary copy of the history goes with them
            proc = subprocess.Popen(command, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                    stderr=subprocess.STDOUT, start_new_session=True)
        except OSError as exc:
            raise InputError(f"method {name}", "command", f"cannot run {command[0]!r}: {exc.strerror or exc}"
                             ) from None
        try:
            status = _follow(proc, name, time_limit, progress, messages)
        finally:
            _stop(proc)
        wall = time.perf_counter() - started
        if status != 0:
            print("".join(messages[-50:]), end="", file=sys.stderr)
            raise InputError(f"method {name}", "command", f"exited with status {status} (its last messages are above)")
        if not out.is_file():
            raise InputError(f"method {name}", "{out}", "the command wrote no prediction file")
        try:
            record = read_prediction(out, model=problem.model)
        except InputError as exc:  # name the method, not the temporary file
            raise InputError(f"method {name}: prediction", exc.field, exc.message) from None
    return _reconstruction(name, argv, record, problem, wall)


def _follow(proc: subprocess.Popen, name: str, time_limit: float, progress, messages: list[str]) -> int:
    """Relay the plug-in's output (printable, line by line) until it exits or ``time_limit`` passes."""
    lines: queue.Queue = queue.Queue()

    def read() -> None:
        for raw in proc.stdout:
            lines.put(printable(raw.decode("utf-8", errors="replace").rstrip("\r\n"), keep="\t") + "\n")
        lines.put(None)

    threading.Thread(target=read, daemon=True).start()
    deadline = time.monotonic() + time_limit
    while True:
        try:
            line = lines.get(timeout=max(0.0, min(1.0, deadline - time.monotonic())))
        except queue.Empty:
            if proc.poll() is not None:
                # it exited, but what it left running still holds its output open: end those, so the
                # output closes now instead of when the time limit passes
                _stop(proc)
                continue
            if time.monotonic() >= deadline:
                _stop(proc)
                print("".join(messages[-50:]), end="", file=sys.stderr)
                raise InputError(f"method {name}", "time limit",
                                 f"still running after {time_limit:g} s; stopped (its last messages are above)"
                                 ) from None
            continue
        if line is None:
            return proc.wait()
        if progress:  # streamed with progress on, shown only on failure with it off
            print(line, end="", file=sys.stderr, flush=True)
        else:
            messages.append(line)


def _stop(proc: subprocess.Popen, grace: float = 5.0) -> None:
    """End the plug-in's session: the plug-in if it still runs, and whatever it started that still
    runs, even once the plug-in itself has exited (a daemon it left behind). SIGTERM first, SIGKILL
    after ``grace`` seconds. A process that left the session (``setsid``) is out of reach."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(proc.pid, sig)
        except OSError:  # ProcessLookupError: nothing of the session is left
            break
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline:
            proc.poll()  # reaps the plug-in, whose zombie would keep the group alive
            try:
                os.killpg(proc.pid, 0)
            except OSError:
                break
            time.sleep(0.02)
        else:
            continue
        break
    proc.wait()


def _reconstruction(name: str, argv: list[str], record: dict, problem: Problem, wall: float) -> Reconstruction:
    from .problem import Reconstruction, check_posteriors

    states = record["states"]
    if states.shape != (problem.T + 1, problem.n):
        raise InputError(f"method {name}: prediction", "states",
                         f"shape {states.shape}, expected (T+1, n) = {(problem.T + 1, problem.n)}")
    posteriors = record["posteriors"]
    if posteriors is not None:
        check_posteriors(posteriors, problem.T, problem.n, f"method {name}: prediction")
        posteriors = posteriors.astype(np.float32)
    seconds = record["algorithm_seconds"]
    own_timing = math.isfinite(seconds) and seconds >= 0
    rates = [record[k] if math.isfinite(record[k]) else float("nan") for k in ("beta_i", "beta_r")]
    return Reconstruction(
        states=states, t_inf=hitting_times(states, 1), t_rec=hitting_times(states, 2),
        beta_i=rates[0], beta_r=rates[1],
        params={**record["params"], "method": name},
        backend=record.get("backend") or "external", device=record.get("device") or "unknown",
        algorithm_seconds=float(seconds) if own_timing else wall,
        posteriors=posteriors,
        extras={"plugin_command": shlex.join(argv), "plugin_timing": "own" if own_timing else "wall clock",
                "plugin_provenance": record["provenance"]},
    )
