"""What a user waits for: `battus reconstruct` as a fresh process, beside the algorithm inside it and
the floor of reading the input and uploading it.

For a synthetic stand-in of a SNAP graph (``battus.synth`` preset) it writes, once, an SIR history
(T = 40, 100 initially infected, rates .1/.1, observed at {20, 40}) under ``--work``, then for each
method runs, each in a fresh process (Numba's cache directory as set by the caller):

- ``battus reconstruct`` itself, ``--repeat`` times: wall time, and the algorithm time it reports;
- once more with ``--score`` (what a workflow job runs: the prediction scored in the same process);
- once with a timeline: each stage's start and end, thread by thread, on one clock (``TIMELINE``);
- the same steps timed one by one (import, read, choose + warm up + upload, algorithm, the input's sha256, write);
- the floor: reading the history's graph and observations and copying them to the device.

    NUMBA_CACHE_DIR=/tmp/nb PYTHONPATH=src python benchmarks/end_to_end.py --preset orkut --backend cuda
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

STEPS = r"""
import json, sys, time
t0 = time.perf_counter()
from battus.io import read_history, sha256_file, write_prediction
from battus.options import method_options
from battus.pipeline import reconstruct
t1 = time.perf_counter()
problem = read_history(sys.argv[1], truth="skip")
t2 = time.perf_counter()
recon = reconstruct(problem, method_options(sys.argv[2]), backend=sys.argv[3])
t3 = time.perf_counter()
digest = sha256_file(sys.argv[1])  # the command takes it in a thread while it reads the history
t4 = time.perf_counter()
write_prediction(sys.argv[4], recon, problem, sys.argv[1], input_sha256=digest)
t5 = time.perf_counter()
print(json.dumps({"import_s": t1 - t0, "read_s": t2 - t1, "warm_up_and_upload_s": recon.extras["warmup_seconds"],
                  "algorithm_s": recon.algorithm_seconds, "reconstruct_call_s": t3 - t2, "input_sha256_s": t4 - t3,
                  "write_s": t5 - t4}))
"""

TIMELINE = r"""
# `battus reconstruct` as the CLI runs it (threads, lazy imports and all), each stage's start and end on
# one clock: a stage's function is wrapped when its module is first imported, by whichever thread
import importlib.abc, importlib.util, json, sys, threading, time
launched = float(sys.argv[1])
marks = [("interpreter start", "MainThread", 0.0, time.time() - launched)]
STAGES = {
    "battus.files": [("sha256_file", "input sha256")],
    "battus.cuda_driver": [("start_driver", "CUDA driver + context")],
    "battus.backends.cuda.backend": [("upload", "upload + layout")],
    "battus.backends.cuda.layout": [("gather_order", "layout: gather order"), ("build_bins", "layout: degree bins"),
                                    ("build_items", "layout: fitting work items")],
    "battus.io": [("read_history", "read history")],
    "battus.backends": [("start_backend", "choose backend + warm up"), ("get_backend", "choose backend")],
    "battus.pipeline": [("open_backend", "backend ready and problem prepared"),
                        ("_run_once", "algorithm (with host sync)"),
                        ("states_from_hitting_times", "download + states"), ("reconstruct", "reconstruct call")],
    "battus.commands": [("_write_and_score", "write")],
}
def timed(module, name, label):
    inner = getattr(module, name)
    def wrapper(*args, **kwargs):
        began = time.time() - launched
        try:
            return inner(*args, **kwargs)
        finally:
            marks.append((label, threading.current_thread().name, began, time.time() - launched))
    setattr(module, name, wrapper)
class Stages(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name not in STAGES:
            return None
        sys.meta_path.remove(self)
        try:
            spec = importlib.util.find_spec(name)
        finally:
            sys.meta_path.insert(0, self)
        run = spec.loader.exec_module
        def exec_module(module):
            run(module)
            began = time.time() - launched
            marks.append((f"import {name}", threading.current_thread().name, began, began))
            for function, label in STAGES[name]:
                timed(module, function, label)
        spec.loader.exec_module = exec_module
        return spec
sys.meta_path.insert(0, Stages())
import battus.cli
code = battus.cli.main(sys.argv[2:])
print(json.dumps(marks + [("exit", "MainThread", time.time() - launched, None)]), file=sys.stderr)
battus.cli.exit_now(code)  # as the `battus` command ends
"""

FLOOR = r"""
import json, sys, time
from battus.io import read_history
t0 = time.perf_counter()
problem = read_history(sys.argv[1], truth="skip")
t1 = time.perf_counter()
out = {"read_s": t1 - t0}
if sys.argv[2] == "cuda":
    from numba import cuda
    cuda.to_device(problem.graph.indptr[:2]); cuda.synchronize()  # the context, outside the copy
    t2 = time.perf_counter()
    for a in (problem.graph.indptr, problem.graph.indices, problem.observations.states):
        cuda.to_device(a)
    cuda.synchronize()
    out["upload_s"] = time.perf_counter() - t2
print(json.dumps(out))
"""


def make_history(preset: str, path: Path, backend: str) -> None:
    import numpy as np

    from battus.io import provenance, write_history
    from battus.problem import Problem, observe
    from battus.simulate import simulate
    from battus.synth import scale_graph

    xp = np
    if backend == "cuda":
        import cupy as xp  # noqa: F811 - the stand-in graph builds faster on the device
    graph = scale_graph(preset, seed=2026, xp=xp)
    truth = simulate(graph, "sir", 40, 100, 0.1, 0.1, seed=1, backend=backend)
    problem = Problem(graph, "sir", 40, 100, observe(truth, np.array([20, 40])), truth, name=f"synthetic-{preset}")
    write_history(path, problem, provenance(stage="benchmarks/end_to_end.py", preset=preset))


def fresh(code_or_argv, env) -> tuple[float, str]:
    started = time.perf_counter()
    argv = [sys.executable, "-c", code_or_argv[0], *code_or_argv[1:]] if isinstance(code_or_argv, tuple) \
        else code_or_argv
    done = subprocess.run(argv, capture_output=True, text=True, env=env)
    if done.returncode:
        raise SystemExit(f"{' '.join(map(str, argv[:4]))}... exited with {done.returncode}:\n{done.stderr[-3000:]}")
    return time.perf_counter() - started, done.stdout + done.stderr


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--preset", default="orkut")
    ap.add_argument("--backend", default="cuda", choices=["cpu", "cuda"])
    ap.add_argument("--methods", nargs="+", default=["battus-z", "battus"])
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--work", type=Path, default=Path("build/end_to_end"))
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)
    args.work.mkdir(parents=True, exist_ok=True)
    history = args.work / f"{args.preset}-sir.h5"
    if not history.exists():
        started = time.perf_counter()
        make_history(args.preset, history, args.backend)
        print(f"history {history} ({history.stat().st_size / 1e6:.0f} MB) in {time.perf_counter() - started:.1f} s",
              flush=True)
    env = dict(os.environ)
    result = {"preset": args.preset, "backend": args.backend, "history_bytes": history.stat().st_size}
    _, text = fresh((FLOOR, str(history), args.backend), env)
    result["floor"] = json.loads(text.strip().splitlines()[-1])
    print(f"floor: {result['floor']}", flush=True)
    for method in args.methods:
        out = args.work / f"{args.preset}-{method}.h5"
        runs = []
        for _ in range(args.repeat):
            out.unlink(missing_ok=True)
            wall, text = fresh([sys.executable, "-m", "battus.cli", "reconstruct", str(history), "--method", method,
                                "--backend", args.backend, "--out", str(out)], env)
            reported = re.search(r"done in ([0-9.]+) ms", text)
            runs.append({"wall_s": wall, "algorithm_s": float(reported.group(1)) / 1e3 if reported else None})
        out.unlink(missing_ok=True)
        scores = args.work / f"{args.preset}-{method}.json"
        job_wall, _ = fresh([sys.executable, "-m", "battus.cli", "reconstruct", str(history), "--method", method,
                             "--backend", args.backend, "--out", str(out), "--score", str(scores)], env)
        out.unlink(missing_ok=True)
        scores.unlink(missing_ok=True)
        out.unlink(missing_ok=True)
        launched = time.time()
        wall, text = fresh((TIMELINE, repr(launched), "reconstruct", str(history), "--method", method,
                            "--backend", args.backend, "--out", str(out)), env)
        marks = json.loads([line for line in text.splitlines() if line.startswith("[[")][-1])
        print(f"{method}: timeline of one command ({wall:.2f} s wall)", flush=True)
        for label, thread, start, end in sorted(marks, key=lambda mark: mark[2]):
            until = f"{end:6.3f}" if end is not None else f"{wall:6.3f} (process gone)"
            print(f"  {start:6.3f} - {until} s  {label} [{thread}]", flush=True)
        out.unlink(missing_ok=True)
        wall, text = fresh((STEPS, str(history), method, args.backend, str(out)), env)
        steps = {**json.loads(text.strip().splitlines()[-1]), "wall_s": wall}
        result[method] = {"cli": runs, "with_score_wall_s": job_wall, "steps": steps, "timeline": marks}
        print(f"{method}: cli " + ", ".join(f"{r['wall_s']:.2f} s wall ({r['algorithm_s']} s algorithm)" for r in runs)
              + f"; with --score {job_wall:.2f} s; steps " + ", ".join(f"{k} {v:.3f}" for k, v in steps.items()),
              flush=True)
    if args.json:
        args.json.write_text(json.dumps(result, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
