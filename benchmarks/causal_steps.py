"""Battus-C's repair kernel on the GPU, step by step: where its time goes between grid barriers.

The repair is one cooperative kernel (``battus.kernels.causal_cuda``) whose
steps are separated by grid-wide barriers, so a profiler sees one long kernel.
This script copies the package into a temporary folder, adds after every
``grid.sync()`` of that module a read of the GPU's global nanosecond timer by
thread 0 (the time since the previous barrier is the step that ended there),
runs Battus-Z then the repair on a stand-in preset (SIR, T = 40, as
``gpu_causal.py``), and prints each barrier's total over ``--repeat`` repairs,
labelled by the source line just before it. The checked-out code is left as it
is; the timed copy differs only by the timer reads, and the script prints the
repaired history's digest, which ``gpu_causal.py`` prints for the same history.

    PYTHONPATH=src python3 benchmarks/causal_steps.py --preset livejournal --repeat 5

Barriers inside ``grid_scan`` (``battus.kernels.grid_cuda``) are not timed on
their own: a scan counts towards the step after it.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

TIMER_CU = r'''extern "C" __device__ int read_globaltimer(long long *ret) {
    long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    *ret = t;
    return 0;
}
'''
SLOTS = 2048  # step totals at [line], counts at [1024 + line], the last reading at [SLOTS - 1]
assert SLOTS == 2048  # written out in TICK

TICK = '''
_TIMER = __import__("os").path.join(__import__("os").path.dirname(__file__), "globaltimer.cu")
read_globaltimer = cuda.declare_device("read_globaltimer", "int64()", link=[_TIMER])


@cuda.jit(device=True)
def _tick(prof, line):
    if cuda.grid(1) == 0:
        now = read_globaltimer()
        prof[line] += now - prof[2047]
        prof[1024 + line] += 1
        prof[2047] = now


@cuda.jit(device=True)
def _tick_start(prof):
    if cuda.grid(1) == 0:
        prof[2047] = read_globaltimer()

'''


def timed_copy(src: Path, dst: Path) -> list[str]:
    """``src`` (the package's parent) copied to ``dst`` with every barrier of the repair kernel timed;
    returns the original module's lines."""
    shutil.copytree(src / "battus", dst / "battus", ignore=shutil.ignore_patterns("__pycache__"))
    module = dst / "battus/kernels/causal_cuda.py"
    lines = module.read_text().split("\n")
    out = []
    for number, line in enumerate(lines, 1):
        # _screen's signature and its calls take the timer slots; grid_scan's do not (its barriers stay untimed)
        if "grid_scan(" not in line and line.rstrip().endswith(("sh, grid)", "sh, grid):")):
            line = line.replace("sh, grid)", "sh, grid, prof)")
        out.append(line)
        if line.strip() == "grid.sync()":
            out.append(line[:len(line) - len(line.lstrip())] + f"_tick(prof, {number})")
    text = "\n".join(out)
    body = "unanimous_rounds, light_arcs, census_only, ws32, ws64, wsf64, ws8, arc32, small):"
    if body not in text or "\ndef _pack(" not in text:
        raise SystemExit("causal_cuda.py no longer looks as this script expects: update timed_copy")
    text = text.replace(body, body[:-2] + ", prof):")
    start = "    grid = cuda.cg.this_grid()\n"
    if text.count(start) != 1:
        raise SystemExit("causal_cuda.py no longer looks as this script expects: update timed_copy")
    text = text.replace(start, start + "    _tick_start(prof)  # the first step's interval starts here\n")
    text = text.replace("\n@cuda.jit(device=True)\ndef _pack(", TICK + "\n@cuda.jit(device=True)\ndef _pack(", 1)
    module.write_text(text)
    (dst / "battus/kernels/globaltimer.cu").write_text(TIMER_CU)
    host = dst / "battus/backends/cuda/causal_repair.py"
    code = host.read_text()
    launch = "arc32,\n            small)"
    if launch not in code:
        raise SystemExit("causal_repair.py no longer looks as this script expects: update timed_copy")
    code = code.replace(launch, "arc32,\n            small, step_times())")
    code += ('\n\n_STEP_TIMES = []\n\n\ndef step_times():\n    """The kernel\'s timer slots, one device array '
             'for the process."""\n    if not _STEP_TIMES:\n        _STEP_TIMES.append(cuda.to_device(np.zeros('
             f'{SLOTS}, np.int64)))\n    return _STEP_TIMES[0]\n')
    host.write_text(code)
    return lines


RUN = r'''
import hashlib, json, sys
sys.path.insert(0, sys.argv[3])
import numpy as np
from gpu_scale import make_graph
from battus.backends import get_backend
from battus.backends.cuda import causal_repair
from battus.pipeline import method_options, reconstruct
from battus.problem import Problem, observe, schedule_times
from battus.simulate import simulate

preset, repeat = sys.argv[1], int(sys.argv[2])
backend = get_backend("cuda")
graph, _, _ = make_graph(preset, 0)
truth = simulate(graph, "sir", 40, 100, 0.1, 0.1, seed=1, backend="cuda")
problem = Problem(graph, "sir", 40, 100, observe(truth, schedule_times(40)), truth, preset)
options = method_options("battus-z", causal=True)
recon = reconstruct(problem, options, backend=backend)  # compiles and warms up
slots = causal_repair.step_times()
slots.copy_to_device(np.zeros(slots.shape[0], np.int64))
seconds = [reconstruct(problem, options, backend=backend).algorithm_seconds for _ in range(repeat)]
digest = hashlib.sha256(np.ascontiguousarray(recon.states).tobytes()).hexdigest()
print(json.dumps({"device": backend.device, "slots": slots.copy_to_host().tolist(), "seconds": seconds,
                  "sha256": digest}))
'''


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--preset", default="livejournal")
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args(argv)
    import battus

    src = Path(battus.__file__).resolve().parent.parent
    here = Path(__file__).resolve().parent
    with tempfile.TemporaryDirectory(prefix="battus-causal-steps-") as tmp:
        lines = timed_copy(src, Path(tmp))
        env = dict(os.environ, PYTHONPATH=os.pathsep.join([tmp, str(here)]))
        # a cache of its own: the timed kernels must not replace the untimed ones in the user's cache
        env["NUMBA_CACHE_DIR"] = str(Path(tmp) / "numba-cache")
        done = subprocess.run([sys.executable, "-c", RUN, args.preset, str(args.repeat), str(here)], env=env,
                              capture_output=True, text=True)
    if done.returncode:
        sys.stderr.write(done.stderr[-4000:])
        return done.returncode
    result = json.loads(done.stdout.strip().splitlines()[-1])
    slots = result["slots"]
    print(f"{args.preset} on {result['device']}: repaired history sha256 {result['sha256'][:16]}; "
          f"Battus-C algorithm {1e3 * sorted(result['seconds'])[len(result['seconds']) // 2]:.1f} ms (median)")
    print("\n| barrier at line | steps per repair | ms per repair | the line before it |\n|---:|---:|---:|---|")
    total = 0.0
    for line in range(1, SLOTS - 1024 - 1):  # the last slot holds the last reading
        count = slots[1024 + line]
        if not count:
            continue
        ms = slots[line] / 1e6 / args.repeat
        total += ms
        print(f"| {line} | {count // args.repeat} | {ms:.3f} | `{lines[line - 2].strip()[:70]}` |")
    print(f"\nsum {total:.2f} ms per repair")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
