"""Probe: where the GPU causal decoder (Battus-C) spends its time, phase by phase.

The repair is one cooperative kernel (``causal_cuda._repair``) with grid-wide
barriers between its steps. This probe compiles a copy of it in which thread
0 reads ``%globaltimer`` after every barrier of the kernel body and adds the
time since the previous one to that barrier's slot (so a slot holds the time
of the step that *ends* at that barrier, including any ``_screen`` or
``_grid_scan`` called in it), then runs it through the package's own
``causal_repair_device`` on the Battus-Z posteriors of a preset. The copy's
hitting times must equal the committed kernel's. Also times the host side
(workspace allocation, copies) against the kernel alone.

    PYTHONPATH=src python3 benchmarks/probe_causal.py --presets web-google livejournal
"""

from __future__ import annotations

import argparse
import inspect
import statistics
import sys
import textwrap
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from battus.kernels import causal_cuda as KCC  # noqa: E402
from battus.kernels.cuda_common import cuda, simulated  # noqa: E402
from battus.kernels.cuda_common import kernel as jit_kernel  # noqa: E402

LAST = 0  # trace[0]: time of the previous mark; slots 1.. per barrier, counts after them


def _globaltimer():
    from llvmlite import ir
    from numba.core import types
    from numba.core.extending import intrinsic

    @intrinsic
    def globaltimer(typingctx):
        sig = types.int64()

        def codegen(context, builder, sig, args):
            asm = ir.InlineAsm(ir.FunctionType(ir.IntType(64), []), "mov.u64 $0, %globaltimer;", "=l",
                               side_effect=True)
            return builder.call(asm, [])

        return sig, codegen

    return globaltimer


if simulated():
    import time as _time

    @cuda.jit(device=True)
    def _now():
        return np.int64(_time.perf_counter_ns())
else:
    _gt = _globaltimer()

    @cuda.jit(device=True)
    def _now():
        return _gt()


@cuda.jit(device=True)
def _mark(trace, tid, slot, n_slots):
    if tid == 0:
        now = _now()
        trace[slot] += now - trace[LAST]
        trace[n_slots + slot] += 1
        trace[LAST] = now


def instrumented_repair():
    """(function, {slot: source line}): the body of _repair with a mark after each of its own barriers."""
    src = textwrap.dedent(inspect.getsource(KCC._repair_body))
    lines = src.splitlines()
    out, slots = [], {}
    first_line = KCC._repair_body.__code__.co_firstlineno
    for k, line in enumerate(lines):
        if line.startswith("@cuda.jit"):
            continue
        if line.startswith("def _repair_body("):
            line = line.replace("def _repair_body(", "def _repair_traced(trace, n_slots, ")
        out.append(line)
        if line.strip() == "tid = cuda.grid(1)":
            indent = line[: len(line) - len(line.lstrip())]
            out.append(f"{indent}if tid == 0:")
            out.append(f"{indent}    trace[0] = _now()")
        stripped = line.strip()
        indent = line[: len(line) - len(line.lstrip())]
        for k_extra, name in enumerate(("n_cand", "n_round", "arcs")):
            if stripped.startswith(f"{name} = "):  # sizes: summed over frames / rounds in 3 extra slots
                out.append(f"{indent}if tid == 0:")
                out.append(f"{indent}    trace[2 * n_slots + {k_extra}] += {name}")
        if line.strip() == "grid.sync()":
            slot = len(slots) + 1
            slots[slot] = first_line + k  # lines[0], the decorator, is first_line
            indent = line[: len(line) - len(line.lstrip())]
            out.append(f"{indent}_mark(trace, tid, {slot}, n_slots)")
    namespace = dict(vars(KCC))
    namespace.update(_mark=_mark, _now=_now)
    exec(compile("\n".join(out), "<_repair_traced>", "exec"), namespace)  # noqa: S102
    return namespace["_repair_traced"], slots


def pieces(prep, gamma, t_inf0, t_rec0, T: int, repeat: int) -> dict:
    """Host-timed pieces of ``causal_repair_device``, median of ``repeat`` calls: the package's own
    steps (workspace, launch) wrapped with a synchronising timer, the rest of the
    call (output arrays, downloads) as the remainder."""
    out: dict = {}

    def timed(name, fn):
        def wrapper(*args, **kwargs):
            cuda.synchronize()
            t0 = time.perf_counter()
            result = fn(*args, **kwargs)
            cuda.synchronize()
            out.setdefault(name, []).append(1e3 * (time.perf_counter() - t0))
            return result
        return wrapper

    originals = {name: getattr(KCC, name) for name in ("_Workspace", "_launch")}
    labels = {"_Workspace": "workspace (one allocation, views)",
              "_launch": "launch and kernel"}
    for name, fn in originals.items():
        setattr(KCC, name, timed(labels[name], fn))
    try:
        for _ in range(repeat):
            ti, tr = cuda.to_device(t_inf0), cuda.to_device(t_rec0)
            timed("whole call", KCC.causal_repair_device)(prep, gamma, ti, tr, T)
    finally:
        for name, fn in originals.items():
            setattr(KCC, name, fn)
    medians = {k: statistics.median(v) for k, v in out.items()}
    medians["rest (outputs, downloads)"] = medians["whole call"] - sum(
        medians[label] for label in labels.values())
    return medians


def main(argv=None) -> int:
    from gpu_scale import make_graph

    from battus.backends import get_backend
    from battus.pipeline import method_options, reconstruct
    from battus.problem import Problem, observe, schedule_times
    from battus.simulate import simulate

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--presets", nargs="+", default=["web-google", "livejournal"])
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    body, slots = instrumented_repair()
    # compiled and launched as the committed kernels are (causal_cuda._launch)
    traced = {False: cuda.jit(body), True: jit_kernel(max_registers=KCC.REPAIR_REGISTERS)(body)}
    n_slots = len(slots) + 1
    src_lines = Path(KCC.__file__).read_text().splitlines()
    backend = get_backend("cuda")
    for preset in args.presets:
        graph, _, _ = make_graph(preset, args.seed)
        truth = simulate(graph, "sir", 40, 100, 0.1, 0.1, seed=args.seed + 1, backend="cuda")
        problem = Problem(graph, "sir", 40, 100, observe(truth, schedule_times(40)), truth, preset)
        opts = method_options("battus-z")
        reconstruct(problem, opts, backend=backend)
        prep = backend.prepare(problem)
        rho = backend.pressures(prep, problem.prior, opts.beta_i, opts.beta_r, opts.reset)
        gamma = backend.posteriors(prep, rho, problem.prior, opts.beta_r, opts.backward)
        t_inf0, t_rec0 = backend.hitting_times(prep, gamma, opts.decoder, opts.tau, True, opts.projection)
        t_inf0, t_rec0 = backend.to_host(t_inf0), backend.to_host(t_rec0)
        T = problem.T

        def run_committed():
            return KCC.causal_repair_device(prep, gamma, cuda.to_device(t_inf0), cuda.to_device(t_rec0), T)  # noqa: B023

        ref = run_committed()
        ref_inf, ref_rec = ref[0].copy_to_host(), ref[1].copy_to_host()
        whole, kern_only = [], []
        for _ in range(args.repeat):
            ti, tr = cuda.to_device(t_inf0), cuda.to_device(t_rec0)
            cuda.synchronize()
            t0 = time.perf_counter()
            KCC.causal_repair_device(prep, gamma, ti, tr, T)
            cuda.synchronize()
            whole.append(time.perf_counter() - t0)
        # the kernel alone: time _launch through the committed path
        committed_launch = KCC._launch

        def timed_launch(launch_args):
            cuda.synchronize()
            s, e = cuda.event(), cuda.event()
            s.record()
            committed_launch(launch_args)  # noqa: B023
            e.record()
            e.synchronize()
            kern_only.append(s.elapsed_time(e) / 1e3)  # noqa: B023

        KCC._launch = timed_launch
        try:
            for _ in range(args.repeat):
                KCC.causal_repair_device(prep, gamma, cuda.to_device(t_inf0), cuda.to_device(t_rec0), T)
        finally:
            KCC._launch = committed_launch
        # traced copy
        traces = []

        def traced_launch(launch_args):
            trace = cuda.to_device(np.zeros(2 * n_slots + 3, dtype=np.int64))
            full = (trace, n_slots) + tuple(launch_args)
            large = KCC.is_large(launch_args[1])
            if simulated():
                traced[large][1, KCC.THREADS](*full)
            else:
                spec, resident = KCC._specialize(traced[large], full)
                spec[KCC.grid_blocks(large, resident), KCC.THREADS](*full)
            traces.append(trace.copy_to_host())  # noqa: B023

        KCC._launch = traced_launch
        try:
            for _ in range(args.repeat):
                out = KCC.causal_repair_device(prep, gamma, cuda.to_device(t_inf0), cuda.to_device(t_rec0), T)
        finally:
            KCC._launch = committed_launch
        for name, ms in pieces(prep, gamma, t_inf0, t_rec0, T, args.repeat).items():
            print(f"   piece {name:36s} {ms:8.3f} ms")
        same = (np.array_equal(out[0].copy_to_host(), ref_inf) and np.array_equal(out[1].copy_to_host(), ref_rec))
        tr = np.median(np.stack(traces), axis=0)
        total = tr[1:n_slots].sum()
        print(f"{preset}: n={graph.n:,} arcs={graph.m:,}  causal_repair_device {1e3 * statistics.median(whole):.2f} ms"
              f"  kernel {1e3 * statistics.median(kern_only):.2f} ms  traced kernel phases {total / 1e6:.2f} ms"
              f"  identical {same}  stats {ref[2]}", flush=True)
        print(f"   summed sizes: candidates {int(tr[2 * n_slots]):,} (over frames), supporters listed "
              f"{int(tr[2 * n_slots + 2 - 1]):,} (over rounds), violator arcs {int(tr[2 * n_slots + 2]):,}")
        for slot, line in slots.items():
            ns, hits = tr[slot], tr[n_slots + slot]
            if ns > 0.01 * total:
                ctx = src_lines[line - 2].strip()[:70]
                print(f"   line {line:4d}  {ns / 1e6:8.3f} ms  {100 * ns / total:5.1f}%  barriers {int(hits):6d}"
                      f"   before: {ctx}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
