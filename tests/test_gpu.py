"""Real-GPU checks of the CUDA backend (``pytest -m gpu tests/test_gpu.py``).

* the canonical 12-dataset suite: CUDA and CPU decoded histories identical, or
  every differing vertex explained by a CPU posterior within 1e-5 of the
  decision boundary (threshold tau, or a MAP near-tie); same four-decimal scores;
* degree-binned pressures against the CPU's (and with every vertex in the
  thread bin) on a heavy-tailed graph with hubs; the fitting passes' values
  (float32 rounds, the float64 re-score) against the CPU's;
* the simulator bit-identical to the CPU one;
* with two devices, fitted Battus over GPUs 0 and 1 bit-identical to one GPU.

Set ``BATTUS_GPU_REPORT=path.json`` to write every comparison to a file.
"""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

from battus.backends import CPUBackend
from battus.pipeline import method_options, reconstruct
from battus.problem import Problem, observe, schedule_times
from battus.score import hermes_score
from battus.simulate import simulate
from battus.synth import chung_lu
from battus.warmup import warm_up

pytestmark = pytest.mark.gpu

BOUNDARY = 1e-5
REPORT: dict = {}


def _gpu_available() -> bool:
    if os.environ.get("NUMBA_ENABLE_CUDASIM") == "1":
        return False
    try:
        from numba import cuda

        return bool(cuda.is_available())
    except Exception:
        return False


if not _gpu_available():
    pytest.skip("needs a real CUDA device", allow_module_level=True)


@pytest.fixture(scope="module")
def gpu():
    from battus.backends.cuda import CUDABackend

    backend = CUDABackend()
    warm_up(backend)
    return backend


@pytest.fixture(scope="module", autouse=True)
def write_report():
    yield
    path = os.environ.get("BATTUS_GPU_REPORT")
    if path:
        with open(path, "w") as fh:
            json.dump(REPORT, fh, indent=1, default=float)


def _boundary_gap(gamma: np.ndarray, t: int, u: int, decoder: str, tau: float, level: int) -> float:
    """Distance of the CPU posterior at (t, u) from the decision that separates the two decodes."""
    g = gamma[:, t, u]
    if decoder == "threshold":
        return abs((1.0 - g[0]) - tau) if level == 1 else abs(g[2] - tau)
    top = np.sort(g)[::-1]
    return float(top[0] - top[1])


def explain_differences(cpu, gpu, decoder: str, tau: float) -> tuple[list, list]:
    """Vertices whose hitting times differ, split into (explained, unexplained)."""
    explained, unexplained = [], []
    for level, (a, b) in ((1, (cpu.t_inf, gpu.t_inf)), (2, (cpu.t_rec, gpu.t_rec))):
        for u in np.nonzero(a != b)[0]:
            t = int(min(a[u], b[u]))
            gap = _boundary_gap(cpu.posteriors, t, int(u), decoder, tau, level)
            row = {"vertex": int(u), "level": level, "cpu": int(a[u]), "gpu": int(b[u]), "gap": gap}
            (explained if gap <= BOUNDARY else unexplained).append(row)
    return explained, unexplained


@pytest.mark.parametrize("method", ["battus-z", "battus"])
def test_canonical_suite_matches_cpu(canonical, gpu, method):
    cpu_backend = CPUBackend()
    rows = {}
    failures = []
    for name, c in canonical.items():
        times = schedule_times(c.T)
        problem = Problem(c.graph, c.model, c.T, c.n0, observe(c.truth, times), c.truth, name)
        options = method_options(method)
        ref = reconstruct(problem, options, cpu_backend, keep_posteriors=True)
        got = reconstruct(problem, options, gpu, keep_posteriors=True)
        s_ref = hermes_score(c.truth, ref.states, c.model)
        s_got = hermes_score(c.truth, got.states, c.model)
        explained, unexplained = explain_differences(ref, got, options.decoder, options.tau)
        rows[name] = {
            "f1_cpu": round(s_ref["f1"], 4), "f1_gpu": round(s_got["f1"], 4),
            "nrmse_cpu": round(s_ref["nrmse"], 4), "nrmse_gpu": round(s_got["nrmse"], 4),
            "beta_cpu": [ref.beta_i, ref.beta_r], "beta_gpu": [got.beta_i, got.beta_r],
            "differing_cells": int((ref.states != got.states).sum()),
            "explained": explained, "unexplained": unexplained,
            "seconds_cpu": ref.algorithm_seconds, "seconds_gpu": got.algorithm_seconds,
        }
        if unexplained or (ref.beta_i, ref.beta_r) != (got.beta_i, got.beta_r):
            failures.append(name)
        if (rows[name]["f1_cpu"], rows[name]["nrmse_cpu"]) != (rows[name]["f1_gpu"], rows[name]["nrmse_gpu"]):
            failures.append(name + " (score)")
    REPORT[f"canonical/{method}"] = rows
    for name, r in rows.items():
        print(f"{method:9s} {name:12s} F1 {r['f1_gpu']:.4f}/{r['f1_cpu']:.4f} NRMSE "
              f"{r['nrmse_gpu']:.4f}/{r['nrmse_cpu']:.4f} diff cells {r['differing_cells']} "
              f"explained {len(r['explained'])} unexplained {len(r['unexplained'])}")
    assert not failures, failures


@pytest.fixture(scope="module")
def heavy_graph():
    # hubs above the 1024 in-degree threshold and many warp-bin vertices
    return chung_lu(60_000, 1_200_000, gamma_in=2.1, seed=5)


def test_binned_kernel_matches_the_cpu(heavy_graph, gpu):
    from battus.backends.cuda import CUDABackend, CUDASettings

    assert heavy_graph.in_degree().max() >= 2048
    truth = simulate(heavy_graph, "sir", 20, 50, 0.1, 0.1, seed=3, backend="cuda")
    problem = Problem(heavy_graph, "sir", 20, 50, observe(truth, schedule_times(20)), truth)
    # every vertex in the thread bin: one thread per vertex, whatever its degree
    thread = CUDABackend(CUDASettings(warp_min_degree=1 << 40, hub_min_degree=1 << 40))
    cpu = CPUBackend()
    for reset in (False, True):
        a = gpu.pressures(gpu.prepare(problem), problem.prior, 0.1, 0.1, reset).log_rho.copy_to_host()
        b = thread.pressures(thread.prepare(problem), problem.prior, 0.1, 0.1, reset).log_rho.copy_to_host()
        REPORT[f"binned_vs_thread/reset={reset}"] = float(np.max(np.abs(a - b) / np.maximum(np.abs(b), 1e-30)))
        np.testing.assert_allclose(a, b, rtol=2e-6, atol=1e-12)
        # the CPU keeps float64 products; the device keeps float32 log-pressures
        ref = cpu.pressures(cpu.prepare(problem), problem.prior, 0.1, 0.1, reset)
        live = ref > 1e-300
        with np.errstate(divide="ignore"):
            log_ref = np.log(ref[live])
        REPORT[f"log_pressure_vs_cpu/reset={reset}"] = float(
            np.max(np.abs(a[live] - log_ref) / np.maximum(np.abs(log_ref), 1e-30)))
        np.testing.assert_allclose(a[live], log_ref, rtol=2e-6, atol=1e-12)
        assert np.all(a[~live] < -600)
    beta_i = np.linspace(0.02, 0.4, 40)
    beta_r = np.linspace(0.3, 0.01, 40)
    ll_cpu = cpu.loglik_batch(cpu.prepare(problem), problem.prior, beta_i, beta_r)
    # the float64 re-score's passes (narrow groups), here for every candidate
    ll_64 = gpu.passes.evaluate(gpu.prepare(problem), problem.prior, beta_i, beta_r, "narrow64", 0, {})
    REPORT["loglik_batch_float64_max_rel"] = float(np.max(np.abs(ll_64 - ll_cpu) / np.abs(ll_cpu)))
    np.testing.assert_allclose(ll_64, ll_cpu, rtol=1e-9)
    # float32 state: close near the optimum (far candidates can underflow to the log floor)
    ll_32 = gpu.loglik_batch(gpu.prepare(problem), problem.prior, beta_i, beta_r)
    near = ll_cpu >= ll_cpu.max() * 1.5
    REPORT["loglik_batch_float32_max_rel_near_best"] = float(
        np.max(np.abs(ll_32[near] - ll_cpu[near]) / np.abs(ll_cpu[near])))
    np.testing.assert_allclose(ll_32[near], ll_cpu[near], rtol=1e-4)
    assert np.argmax(ll_32) == np.argmax(ll_cpu)


@pytest.mark.parametrize("method", ["battus-z", "battus"])
def test_heavy_graph_histories(heavy_graph, gpu, method):
    truth = simulate(heavy_graph, "sir", 20, 50, 0.1, 0.1, seed=4, backend="cuda")
    problem = Problem(heavy_graph, "sir", 20, 50, observe(truth, schedule_times(20)), truth)
    options = method_options(method)
    ref = reconstruct(problem, options, CPUBackend(), keep_posteriors=True)
    got = reconstruct(problem, options, gpu, keep_posteriors=True)
    explained, unexplained = explain_differences(ref, got, options.decoder, options.tau)
    REPORT[f"heavy/{method}"] = {"beta_cpu": [ref.beta_i, ref.beta_r], "beta_gpu": [got.beta_i, got.beta_r],
                                  "explained": explained, "unexplained": unexplained}
    assert (got.beta_i, got.beta_r) == (ref.beta_i, ref.beta_r)
    assert not unexplained


@pytest.mark.parametrize("model", ["si", "sir"])
def test_simulator_bit_identical(heavy_graph, model):
    cpu = simulate(heavy_graph, model, 15, 100, 0.05, 0.1, seed=9)
    gpu = simulate(heavy_graph, model, 15, 100, 0.05, 0.1, seed=9, backend="cuda")
    np.testing.assert_array_equal(cpu, gpu)


def _causal_against_cpu(problem, gpu) -> dict:
    """Battus-C on the device against the CPU kernels fed the same (device) posteriors and decoded times."""
    from numba import cuda

    from battus.backends.cuda import causal_repair
    from battus.decode import hitting_times
    from battus.kernels import causal_cpu

    got = reconstruct(problem, method_options("battus-z"), gpu, keep_posteriors=True)
    gamma = np.ascontiguousarray(got.posteriors)
    t_inf, t_rec = hitting_times(got.states, 1), hitting_times(got.states, 2)
    host = CPUBackend().prepare(problem)
    floor, ceiling = causal_cpu.observation_window_arrays(host.obs_times, host.obs_states, host.n, problem.T)
    cpu_inf, cpu_rec = t_inf.copy(), t_rec.copy()
    before = causal_cpu.violation_census(host.indptr, host.indices, t_inf, t_rec, floor, ceiling, problem.T)
    cpu_stats = causal_cpu.causal_repair(host.indptr, host.indices, gamma, floor, ceiling, cpu_inf, cpu_rec, problem.T)
    after = causal_cpu.violation_census(host.indptr, host.indices, cpu_inf, cpu_rec, floor, ceiling, problem.T)
    row = {"before": list(before), "after": list(after), "stats": cpu_stats.tolist(), "light": {}}
    d = {k: cuda.to_device(x) for k, x in (("indptr", host.indptr), ("indices", host.indices), ("gamma", gamma),
                                          ("times", host.obs_times), ("states", host.obs_states))}
    for light_arcs in (causal_repair.LIGHT_ARCS, 2):
        d_inf, d_rec = cuda.to_device(t_inf.copy()), cuda.to_device(t_rec.copy())
        stats, d_before, d_after = causal_repair.causal_repair_arrays(d["indptr"], d["indices"], d["gamma"],
                                                                      d["times"], d["states"], d_inf, d_rec, problem.T,
                                                                      light_arcs=light_arcs, census=True)
        row["light"][light_arcs] = {
            "same": bool(np.array_equal(d_inf.copy_to_host(), cpu_inf)
                         and np.array_equal(d_rec.copy_to_host(), cpu_rec)),
            "stats": stats.tolist(), "before": list(d_before), "after": list(d_after)}
    return row


def _assert_causal_row(row):
    for r in row["light"].values():
        assert r["same"], row
        assert r["stats"] == row["stats"] and r["before"] == row["before"] and r["after"] == row["after"], row


def test_causal_decoder_matches_cpu_canonical(canonical, gpu):
    rows = {}
    for name, c in canonical.items():
        problem = Problem(c.graph, c.model, c.T, c.n0, observe(c.truth, schedule_times(c.T)), c.truth, name)
        rows[name] = _causal_against_cpu(problem, gpu)
    REPORT["causal/canonical"] = rows
    assert sum(r["stats"][0] for r in rows.values()) > 0
    for row in rows.values():
        _assert_causal_row(row)


def test_causal_decoder_matches_cpu_heavy(heavy_graph, gpu):
    truth = simulate(heavy_graph, "sir", 20, 50, 0.1, 0.1, seed=4, backend="cuda")
    problem = Problem(heavy_graph, "sir", 20, 50, observe(truth, schedule_times(20)), truth)
    row = _causal_against_cpu(problem, gpu)
    REPORT["causal/heavy"] = row
    assert row["stats"][0] > 1000  # many violators, over many blocks
    _assert_causal_row(row)


def _gpu_count() -> int:
    from numba import cuda

    return len(cuda.gpus)


@pytest.mark.skipif(not _gpu_available() or _gpu_count() < 2, reason="needs two CUDA devices")
def test_fit_over_two_gpus_is_identical(canonical, heavy_graph, gpu):
    """Fitted Battus spread over GPUs 0 and 1 (``devices``): every canonical dataset's and a heavy
    graph's fitted rates, each fitting round's objective and decoded history equal one GPU's, bit
    for bit (the grid's pruned pieces, the refinement rounds and the re-score are all dealt)."""
    from battus.backends.cuda import CUDABackend

    two = CUDABackend(devices=(0, 1))
    try:
        warm_up(two, fit=True)
        assert len(two.pool.workers) == 1
        problems = [Problem(c.graph, c.model, c.T, c.n0, observe(c.truth, schedule_times(c.T)), c.truth, name)
                    for name, c in canonical.items()]
        truth = simulate(heavy_graph, "sir", 20, 50, 0.1, 0.1, seed=4, backend="cuda")
        problems.append(Problem(heavy_graph, "sir", 20, 50, observe(truth, schedule_times(20)), truth, "heavy"))
        for problem in problems:
            one_run = reconstruct(problem, method_options("battus"), gpu)
            two_run = reconstruct(problem, method_options("battus"), two)
            assert (two_run.beta_i, two_run.beta_r) == (one_run.beta_i, one_run.beta_r), problem.name
            assert two_run.fit_trace == one_run.fit_trace, problem.name  # every round's best and objective
            assert np.array_equal(two_run.t_inf, one_run.t_inf) and np.array_equal(two_run.t_rec, one_run.t_rec)
    finally:
        two.close()


_WARM_SCRIPT = r"""
import json
import numpy as np
from battus.backends.cuda import CUDABackend
from battus.pipeline import method_options, reconstruct
from battus.backends.cuda import causal_repair
from battus.kernels import infer_cuda
from battus.problem import Problem, observe
from battus.simulate import simulate
from battus.warmup import warm_up
from battus.synth import chung_lu

def compiled():
    kernels = {name: len(k.overloads) for name, k in vars(infer_cuda).items() if hasattr(k, "overloads")}
    # the causal repair's kernels are specialized per argument kinds, both sizes at once (causal_repair._launch)
    kernels["causal specialized"] = [len(pair) for pair in causal_repair._SPECIALIZED.values()]
    return kernels

backend = CUDABackend()
warm_up(backend, causal=True, fit=False)
warm = compiled()
graph = chung_lu(2_000, 40_000, seed=1)
truth = simulate(graph, "sir", 12, 200, 0.9, 0.05, seed=1)
assert np.all(truth[6] != 0)  # settles at frame 6: the neutral tail of the pressures runs
problem = Problem(graph, "sir", 12, 200, observe(truth, np.array([6, 12])), truth)
for reset in (False, True):
    reconstruct(problem, method_options("battus-z", reset=reset), backend=backend)
for large_arcs in (causal_repair.LARGE_ARCS, 1):  # then the kernel for large graphs, on this small one
    causal_repair.LARGE_ARCS = large_arcs
    reconstruct(problem, method_options("battus-z", causal=True), backend=backend)
print(json.dumps([warm, compiled()]))
"""


def test_warm_up_compiles_every_inference_kernel():
    """In a fresh process, warm-up compiles every inference kernel a run uses, the neutral tail
    of a settled history's pressures and the causal repair for large graphs included: the timed
    interval compiles nothing."""
    import subprocess
    import sys

    proc = subprocess.run([sys.executable, "-c", _WARM_SCRIPT], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    warm, after = json.loads(proc.stdout.strip().splitlines()[-1])
    assert after == warm
    assert warm["zero_rows"] >= 1 and warm["pressure_binned"] >= 1 and warm["causal specialized"] == [2]


_WARM_FIT_SCRIPT = r"""
import json
from battus.backends.cuda import CUDABackend
from battus.pipeline import method_options, reconstruct
from battus.kernels import fit_cuda
from battus.options import FitSettings
from battus.problem import Problem, observe, schedule_times
from battus.simulate import simulate
from battus.warmup import warm_up
from battus.synth import chung_lu

PAIRS = ("batch_pressure_pair", "batch_pressure_pair_two_lanes")
backend = CUDABackend()
warm_up(backend, fit=True)
warm = {name: len(getattr(fit_cuda, name).overloads) for name in PAIRS}
means = []
for n, m in ((400, 2_000), (2_000, 100_000)):  # 5 and about 50 arcs per work item: each pair step's kernel
    graph = chung_lu(n, m, seed=1)
    truth = simulate(graph, "sir", 10, 20, 0.1, 0.1, seed=2)
    problem = Problem(graph, "sir", 10, 20, observe(truth, schedule_times(10)), truth)
    means.append(backend.prepare(problem).items["mean_arcs"])
    reconstruct(problem, method_options("battus", fit_settings=FitSettings(grid_points=9, refine_points=3,
                                                                            refine_rounds=1)), backend=backend)
after = {name: len(getattr(fit_cuda, name).overloads) for name in PAIRS}
print(json.dumps([warm, after, means, backend.settings.two_lane_max_arcs]))
"""


def test_warm_up_compiles_both_group_pair_steps():
    """The fit's group-pair step runs one of two kernels, picked by the graph's mean arcs per work
    item; warm-up compiles both, so that neither compiles inside a timed fit."""
    import subprocess
    import sys

    proc = subprocess.run([sys.executable, "-c", _WARM_FIT_SCRIPT], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    warm, after, means, limit = json.loads(proc.stdout.strip().splitlines()[-1])
    assert means[0] <= limit < means[1]  # one graph on each side of the threshold
    assert all(count >= 1 for count in warm.values()) and after == warm


_STARTED_SCRIPT = r"""
import json, sys
from concurrent.futures import Future, ThreadPoolExecutor
from numba import cuda
from battus.backends import Started, open_backend, start_backend
from battus.pipeline import method_options, reconstruct, warm_up_for
from battus.problem import Problem, observe
from battus.simulate import simulate
from battus.synth import chung_lu

graph = chung_lu(60_000, 1_200_000, gamma_in=2.1, seed=5)
truth = simulate(graph, "sir", 20, 50, 0.1, 0.1, seed=4, backend="cpu")
problem = Problem(graph, "sir", 20, 50, observe(truth, [10, 20]), truth)
devices = [int(d) for d in sys.argv[1].split(",")]
out = {}
for method in ("battus-z", "battus"):
    options = method_options(method)
    with ThreadPoolExecutor(1) as pool:  # as the CLI: chosen and warmed up in a thread, given the problem in this one
        chosen = Future()
        warmed = pool.submit(start_backend, "cuda", devices, warm_up_for(options), chosen)
        if method == "battus":
            backend, prep = open_backend("cuda", devices, problem, warm_up_for(options), print,
                                         Started(chosen, warmed), fit=True)
            out["spread"] = backend.pool.holds(prep)
            del prep
            backend.close()
            chosen = Future()
            warmed = pool.submit(start_backend, "cuda", devices, warm_up_for(options), chosen)
        recon = reconstruct(problem, options, "cuda", devices=devices, started=Started(chosen, warmed))
    out[method] = [recon.beta_i, recon.beta_r, recon.t_inf.tolist(), recon.t_rec.tolist()]
out["device"] = cuda.get_current_device().id
print(json.dumps(out))
"""


@pytest.mark.parametrize("devices", ["last", "all"])
def test_a_backend_started_in_a_thread_serves_another_on_its_devices(heavy_graph, gpu, devices):
    """As `battus reconstruct` runs: the backend chosen and warmed up in a thread, the problem
    prepared in the main thread beside the rest of the warm-up. The main thread runs on the
    backend's device (the last GPU, not Numba's default 0), a fit over every GPU is spread to the
    workers, and the results are one in-process GPU's."""
    import subprocess
    import sys

    from numba import cuda

    count = len(cuda.gpus)
    if devices == "all" and count < 2:
        pytest.skip("needs two CUDA devices")
    ordinals = [count - 1] if devices == "last" else list(range(count))[::-1]
    proc = subprocess.run([sys.executable, "-c", _STARTED_SCRIPT, ",".join(map(str, ordinals))],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["device"] == ordinals[0]
    assert out["spread"] == (len(ordinals) > 1)
    truth = simulate(heavy_graph, "sir", 20, 50, 0.1, 0.1, seed=4, backend="cpu")
    problem = Problem(heavy_graph, "sir", 20, 50, observe(truth, [10, 20]), truth)
    for method in ("battus-z", "battus"):
        here = reconstruct(problem, method_options(method), gpu)
        assert out[method] == [here.beta_i, here.beta_r, here.t_inf.tolist(), here.t_rec.tolist()], method
