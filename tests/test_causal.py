"""Battus-C (graph-causal decoding): kernels against a naive reference, forced and repairable
violations on hand-built graphs, CPU = CUDA (simulator), and the canonical-suite acceptance numbers."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest
from naive import naive_certify, naive_repair

from battus.backends import CPUBackend
from battus.causal import certify_violations
from battus.decode import causal_decode, states_from_hitting_times
from battus.graph import Graph, from_arcs
from battus.pipeline import method_options, reconstruct
from battus.problem import Observations, Problem, observe, schedule_times
from battus.score import causal_violations, event_weighted, hermes_score, score_all
from battus.simulate import simulate

# ----------------------------------------------------------------------------
# helpers


def random_problem(seed: int, model: str, directed: bool, n: int = 80, m: int = 320, T: int = 8):
    rng = np.random.default_rng(seed)
    graph = from_arcs(rng.integers(0, n, m), rng.integers(0, n, m), n=n, directed=directed)
    truth = simulate(graph, model, T, 3, 0.3, 0.2, seed=seed)
    return Problem(graph, model, T, 3, observe(truth, schedule_times(T)), truth, f"random-{seed}")


def decoded(problem: Problem, decoder: str = "threshold"):
    """Battus-Z posteriors and projected hitting times on the CPU backend."""
    backend = CPUBackend()
    prep = backend.prepare(problem)
    beta_r = 0.1 if problem.model == "sir" else 0.0
    rho = backend.pressures(prep, problem.prior, 0.1, beta_r, False)
    gamma = backend.posteriors(prep, rho, problem.prior, beta_r, True)
    t_inf, t_rec = backend.hitting_times(prep, gamma, decoder, 0.65, problem.model == "sir", True)
    return backend, prep, gamma, t_inf, t_rec


def hand_graph(arcs: list[tuple[int, int]], n: int) -> Graph:
    """In-CSR graph straight from (src, dst) arcs, self-loops kept (from_arcs drops them)."""
    dst = np.array([d for _, d in arcs], dtype=np.int64)
    src = np.array([s for s, _ in arcs], dtype=np.int32)
    order = np.argsort(dst, kind="stable")
    indptr = np.zeros(n + 1, dtype=np.int64)
    np.add.at(indptr, dst + 1, 1)
    return Graph(np.cumsum(indptr), src[order], np.arange(n), directed=True)


def hand_problem(graph: Graph, model: str, T: int, times: list[int], observed: list[list[int]]) -> Problem:
    obs = Observations(np.array(times, dtype=np.int64), np.array(observed, dtype=np.uint8))
    return Problem(graph, model, T, 1, obs)


def flat_gamma(T: int, n: int) -> np.ndarray:
    return np.full((3, T + 1, n), 1.0 / 3.0)


def check_history(problem: Problem, t_inf: np.ndarray, t_rec: np.ndarray) -> np.ndarray:
    """Decoded history from hitting times; asserts S -> I -> R order and observation consistency."""
    assert np.all(t_inf <= t_rec)
    states = states_from_hitting_times(t_inf, t_rec, problem.T)
    assert np.array_equal(states[problem.observations.times], problem.observations.states)
    return states


# ----------------------------------------------------------------------------
# kernels against the reference


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("model", ["si", "sir"])
def test_repair_matches_naive_reference(seed, model):
    problem = random_problem(seed, model, directed=bool(seed % 2))
    backend, prep, gamma, t_inf, t_rec = decoded(problem)
    ref_inf, ref_rec = naive_repair(problem.graph, gamma, t_inf, t_rec, problem.observations.times,
                                    problem.observations.states, problem.T)
    got_inf, got_rec, extras = causal_decode(backend, prep, problem, gamma, t_inf.copy(), t_rec.copy())
    assert np.array_equal(got_inf, ref_inf)
    assert np.array_equal(got_rec, ref_rec)
    states = check_history(problem, got_inf, got_rec)
    v, e = causal_violations(problem.graph, states)
    assert (v, e) == (extras["causal_violations"], extras["causal_events"])
    assert extras["causal_violations_forced"] == extras["causal_violations"]  # all that remain are forced
    assert extras["feasible"] == (v == 0)
    assert extras["causal_violations_before"] == causal_violations(
        problem.graph, states_from_hitting_times(t_inf, t_rec, problem.T))[0]


@pytest.mark.parametrize("unanimous_rounds", [0, 1, 50])
def test_round_schedule_matches_naive_reference(unanimous_rounds, monkeypatch):
    # a denser graph, so frames need several rounds and the last round of own picks matters
    from battus.kernels import causal_rules

    monkeypatch.setattr(causal_rules, "UNANIMOUS_ROUNDS", unanimous_rounds)
    problem = random_problem(7, "sir", directed=False, n=250, m=2500, T=10)
    backend, prep, gamma, t_inf, t_rec = decoded(problem)
    ref = naive_repair(problem.graph, gamma, t_inf, t_rec, problem.observations.times,
                       problem.observations.states, problem.T, unanimous_rounds)
    got_inf, got_rec, extras = causal_decode(backend, prep, problem, gamma, t_inf, t_rec)
    assert np.array_equal(got_inf, ref[0]) and np.array_equal(got_rec, ref[1])
    assert extras["causal_violations_before"] > 20 and extras["causal_vertices_moved"] > 10
    if unanimous_rounds == 50:
        assert extras["causal_rounds"] > extras["causal_violations_before"] // 1000 + problem.T  # several rounds


@pytest.mark.parametrize("seed", range(4))
def test_certification_matches_naive_reference(seed):
    problem = random_problem(seed, "sir" if seed % 2 else "si", directed=True)
    _, _, _, t_inf, t_rec = decoded(problem)
    for states in (problem.truth, states_from_hitting_times(t_inf, t_rec, problem.T)):
        cert = certify_violations(problem.graph, states, problem.observations.times, problem.observations.states)
        assert (cert["violations"], cert["forced"]) == naive_certify(
            problem.graph, states, problem.observations.times, problem.observations.states)
        assert cert["violations"] == causal_violations(problem.graph, states)[0]
        assert cert["unforced"] == cert["violations"] - cert["forced"]


def test_parallel_and_serial_kernels_agree(monkeypatch):
    from battus.kernels import causal_cpu

    problem = random_problem(5, "sir", directed=False, n=400, m=4000, T=10)
    backend, prep, gamma, t_inf, t_rec = decoded(problem)
    serial = causal_decode(backend, prep, problem, gamma, t_inf, t_rec)
    monkeypatch.setattr(causal_cpu, "PARALLEL_MIN", 1)
    parallel = causal_decode(backend, prep, problem, gamma, t_inf, t_rec)
    assert np.array_equal(serial[0], parallel[0]) and np.array_equal(serial[1], parallel[1])
    assert serial[2] == parallel[2] and serial[2]["causal_vertices_moved"] > 10


def test_repair_is_deterministic_and_leaves_inputs_alone():
    problem = random_problem(11, "sir", directed=False, n=300, m=1500, T=10)
    backend, prep, gamma, t_inf, t_rec = decoded(problem)
    keep = (t_inf.copy(), t_rec.copy())
    first = causal_decode(backend, prep, problem, gamma, t_inf, t_rec)
    second = causal_decode(backend, prep, problem, gamma, t_inf, t_rec)
    assert np.array_equal(t_inf, keep[0]) and np.array_equal(t_rec, keep[1])
    assert np.array_equal(first[0], second[0]) and np.array_equal(first[1], second[1])
    assert first[2] == second[2]


# ----------------------------------------------------------------------------
# forced and repairable violations on hand-built graphs (arc 0 -> 1: vertex 1's only in-neighbour is 0)


def test_forced_violation_si_is_kept_and_certified():
    # 0 is observed S at T: it can never be infected, so 1's onset (after its S at 2) cannot be supported.
    graph = hand_graph([(0, 1)], 2)
    problem = hand_problem(graph, "si", 4, [2, 4], [[0, 0], [0, 1]])
    backend = CPUBackend()
    t_inf, t_rec = np.array([5, 3]), np.array([5, 5])
    out_inf, out_rec, extras = causal_decode(backend, backend.prepare(problem), problem, flat_gamma(4, 2),
                                             t_inf, t_rec)
    assert out_inf.tolist() == [5, 3]
    assert extras["feasible"] is False
    assert extras["causal_violations"] == 1 and extras["causal_violations_forced"] == 1
    cert = certify_violations(graph, check_history(problem, out_inf, out_rec), problem.observations.times,
                              problem.observations.states)
    assert cert == {"events": 1, "violations": 1, "forced": 1, "unforced": 0}


def test_repairable_violation_si_is_repaired():
    # 0 is observed S at 2 and I at 4, decoded onset 4; 1 decoded onset 4 too (a violation), and 0 may be
    # infected at 3, so the decoder advances 0 to 3, and then 0 itself (supported by nobody, forced) stays.
    graph = hand_graph([(0, 1)], 2)
    problem = hand_problem(graph, "si", 4, [2, 4], [[0, 0], [1, 1]])
    backend = CPUBackend()
    before = states_from_hitting_times(np.array([4, 4]), np.array([5, 5]), 4)
    cert = certify_violations(graph, before, problem.observations.times, problem.observations.states)
    assert cert["violations"] == 2 and cert["unforced"] == 1  # 1 is repairable, 0 has no in-neighbour
    out_inf, out_rec, extras = causal_decode(backend, backend.prepare(problem), problem, flat_gamma(4, 2),
                                             np.array([4, 4]), np.array([5, 5]))
    assert out_inf.tolist() == [3, 4]
    assert extras["causal_violations_before"] == 2
    assert extras["causal_violations"] == 1 and extras["causal_violations_forced"] == 1
    states = check_history(problem, out_inf, out_rec)
    assert states[3, 0] == 1 and states[4, 1] == 1


def test_sir_forced_by_recovery_and_repaired_by_delaying_recovery():
    # 0 -> 1; 1 is observed S early and I at 4 with decoded onset 3, so it needs 0 infected at 2.
    graph = hand_graph([(0, 1)], 2)
    backend = CPUBackend()
    # 0 observed R at 2: it cannot be infected at 2 -> forced, nothing moves.
    forced = hand_problem(graph, "sir", 4, [2, 4], [[2, 0], [2, 1]])
    out = causal_decode(backend, backend.prepare(forced), forced, flat_gamma(4, 2),
                        np.array([0, 3]), np.array([1, 5]))
    assert out[0].tolist() == [0, 3] and out[1].tolist() == [1, 5]
    assert out[2]["causal_violations_forced"] == 1 and not out[2]["feasible"]
    # 0 observed I at 1 and R at 4, decoded recovered at 2: its recovery is delayed to 3, now feasible.
    free = hand_problem(graph, "sir", 4, [1, 4], [[1, 0], [2, 1]])
    out = causal_decode(backend, backend.prepare(free), free, flat_gamma(4, 2),
                        np.array([0, 3]), np.array([2, 5]))
    assert out[0].tolist() == [0, 3] and out[1].tolist() == [3, 5]
    assert out[2]["feasible"] and out[2]["causal_violations"] == 0
    check_history(free, out[0], out[1])


def test_self_loop_never_supports_its_own_vertex():
    # 1 has in-neighbours 1 (self-loop) and 0; 0 observed S throughout: forced, despite the self-loop.
    graph = hand_graph([(1, 1), (0, 1)], 2)
    problem = hand_problem(graph, "si", 4, [2, 4], [[0, 0], [0, 1]])
    backend = CPUBackend()
    out = causal_decode(backend, backend.prepare(problem), problem, flat_gamma(4, 2),
                        np.array([5, 3]), np.array([5, 5]))
    assert out[0].tolist() == [5, 3] and out[2]["causal_violations_forced"] == 1


def test_shared_supporter_serves_several_violators():
    # 0 -> 2, 0 -> 3, 1 -> 2, 4 -> 3: 2 and 3 (onset 3) both violate; 0 serves both, 1 and 4 one each.
    # Every cell costs the same (S likely), so 0 (cost / 2) wins and is the only vertex advanced.
    graph = hand_graph([(0, 2), (0, 3), (1, 2), (4, 3)], 5)
    problem = hand_problem(graph, "si", 4, [1, 4], [[0, 0, 0, 0, 0], [1, 1, 1, 1, 1]])
    backend = CPUBackend()
    gamma = np.zeros((3, 5, 5))
    gamma[0], gamma[1] = 0.8, 0.2
    t_inf = np.array([4, 4, 3, 3, 4])
    out_inf, _, extras = causal_decode(backend, backend.prepare(problem), problem, gamma, t_inf, np.full(5, 5))
    assert out_inf.tolist() == [2, 4, 3, 3, 4]
    assert extras["causal_vertices_moved"] == 1
    assert extras["causal_violations"] == extras["causal_violations_forced"] == 3  # 0, 1 and 4: no in-arcs


# ----------------------------------------------------------------------------
# CUDA kernels (simulator, in a subprocess so the environment variable takes effect before numba loads)

_CUDA_SCRIPT = r"""
import json, sys
import numpy as np
from numba import cuda
sys.path.insert(0, sys.argv[1])
from test_causal import random_problem, decoded
from battus.backends.cuda import causal_repair
from battus.kernels import causal_cpu, causal_rules
results = []
for seed, model, directed, rounds in [(0, "si", False, 2), (1, "sir", True, 2), (2, "sir", False, 0),
                                       (3, "sir", False, 50)]:
    causal_rules.UNANIMOUS_ROUNDS = rounds
    problem = random_problem(seed, model, directed, n=80, m=480)
    backend, prep, gamma, t_inf, t_rec = decoded(problem)
    floor, ceiling = causal_cpu.observation_window_arrays(prep.obs_times, prep.obs_states, prep.n, problem.T)
    d_times, d_states = cuda.to_device(prep.obs_times), cuda.to_device(prep.obs_states)
    for g in (gamma, gamma.astype(np.float32)):
        cpu_inf, cpu_rec = t_inf.copy(), t_rec.copy()
        cpu_stats = causal_cpu.causal_repair(prep.indptr, prep.indices, g, floor, ceiling, cpu_inf, cpu_rec, problem.T)
        d_inf, d_rec = cuda.to_device(t_inf.copy()), cuda.to_device(t_rec.copy())
        d_indptr, d_indices = cuda.to_device(prep.indptr), cuda.to_device(prep.indices)
        # light_arcs 2: most searches are finished arc by arc by the whole grid (the hub path)
        light_arcs = 2 if seed % 2 else causal_repair.LIGHT_ARCS
        gpu_stats = causal_repair.causal_repair_arrays(d_indptr, d_indices, cuda.to_device(g), d_times, d_states,
                                            d_inf, d_rec, problem.T, light_arcs=light_arcs)
        census = causal_repair.census_device(d_indptr, d_indices, d_inf, d_rec, d_times, d_states, problem.T,
                                  light_arcs=1 if seed % 2 else causal_repair.LIGHT_ARCS)
        results.append({
            "same": bool(np.array_equal(cpu_inf, d_inf.copy_to_host())
                         and np.array_equal(cpu_rec, d_rec.copy_to_host())),
            "stats": [cpu_stats.tolist(), gpu_stats.tolist()],
            "census": [list(causal_cpu.violation_census(prep.indptr, prep.indices, cpu_inf, cpu_rec, floor, ceiling,
                                                problem.T)), list(census)],
            "moved": int(np.count_nonzero(cpu_inf != t_inf)),
        })
# the whole pipeline on the CUDA backend (float32 posteriors) against the CPU decoder fed the same inputs
from battus.backends import CPUBackend
from battus.backends.cuda import CUDABackend
from battus.decode import causal_decode
problem = random_problem(3, "sir", False, n=60, m=240)
device = CUDABackend()
prep = device.prepare(problem)
rho = device.pressures(prep, problem.prior, 0.1, 0.1, False)
gamma = device.posteriors(prep, rho, problem.prior, 0.1, True)
t_inf, t_rec = device.hitting_times(prep, gamma, "threshold", 0.65, True, True)
d_inf, d_rec, d_extras = causal_decode(device, prep, problem, gamma, t_inf, t_rec)
host = CPUBackend()
c_inf, c_rec, c_extras = causal_decode(host, host.prepare(problem), problem, gamma.copy_to_host(),
                                       t_inf.copy_to_host(), t_rec.copy_to_host())
results.append({"same": bool(np.array_equal(d_inf.copy_to_host(), c_inf)
                             and np.array_equal(d_rec.copy_to_host(), c_rec) and d_extras == c_extras),
                "stats": [0, 0], "census": [0, 0], "moved": d_extras["causal_vertices_moved"]})
print(json.dumps(results))
"""


def test_cuda_kernels_equal_cpu_under_simulator(tmp_path):
    script = tmp_path / "cuda_causal.py"
    script.write_text(_CUDA_SCRIPT)
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="1")
    proc = subprocess.run([sys.executable, str(script), os.path.dirname(__file__)], env=env,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    results = json.loads(proc.stdout.strip().splitlines()[-1])
    assert len(results) == 9
    for r in results:
        assert r["same"], r
        assert r["stats"][0] == r["stats"][1]
        assert r["census"][0] == r["census"][1]
    assert sum(r["moved"] for r in results) > 0  # the comparison exercised real repairs


# ----------------------------------------------------------------------------
# canonical suite (the mirror must be present: load_canonical raises, the test fails)


@pytest.fixture(scope="module")
def canonical_causal(canonical):
    rows = {}
    for name, c in canonical.items():
        problem = c.to_problem()
        base = reconstruct(problem, method_options("battus-z"))
        rec = reconstruct(problem, method_options("battus-z", causal=True))
        rows[name] = (problem, base, rec)
    return rows


def test_canonical_acceptance(canonical_causal):
    f1, nrmse, cv = [], [], {"si": [], "sir": []}
    for name, (problem, base, rec) in canonical_causal.items():
        check_history(problem, rec.t_inf, rec.t_rec)
        s = hermes_score(problem.truth, rec.states, problem.model)
        f1.append(s["f1"])
        nrmse.append(s["nrmse"])
        cv[problem.model].append(causal_violations(problem.graph, rec.states))
        cert = certify_violations(problem.graph, rec.states, problem.observations.times,
                                  problem.observations.states)
        assert cert["unforced"] == 0, name  # every remaining violation is forced by the observations
        assert rec.extras["causal_violations"] == cert["violations"]
        assert rec.extras["causal_violations_forced"] == cert["forced"]
        assert rec.extras["feasible"] == (cert["violations"] == 0)
        assert rec.extras["causal_violations_before"] == causal_violations(problem.graph, base.states)[0]
        assert cert["violations"] <= rec.extras["causal_violations_before"]
    assert event_weighted(cv["si"]) <= 0.010
    assert event_weighted(cv["sir"]) <= 0.010
    assert np.mean(f1) >= 0.8706
    assert np.mean(nrmse) <= 0.1035


def test_canonical_scorer_reports_forced(canonical_causal):
    problem, _, rec = canonical_causal["farmers-si"]
    out = score_all(problem, rec.states)
    pred = out["causal"]["prediction"]
    assert pred["violations"] > 0 and pred["forced"] == pred["violations"]
    assert out["causal"]["truth"]["violations"] >= out["causal"]["truth"]["forced"]


def test_causal_with_map_decoder(canonical):
    problem = canonical["prost-sir"].to_problem()
    rec = reconstruct(problem, method_options("battus-z", decoder="map", causal=True))
    check_history(problem, rec.t_inf, rec.t_rec)
    cert = certify_violations(problem.graph, rec.states, problem.observations.times, problem.observations.states)
    assert cert["unforced"] == 0


def test_prediction_file_carries_feasible(tmp_path, canonical_causal):
    from battus.io import read_prediction, write_prediction

    problem, _, rec = canonical_causal["ba-si"]
    path = tmp_path / "pred.h5"
    write_prediction(path, rec, problem, None)
    attrs = read_prediction(path)
    assert bool(attrs["feasible"]) == rec.extras["feasible"]
    assert int(attrs["causal_violations_forced"]) == rec.extras["causal_violations_forced"]


def test_causal_decode_rejects_too_many_frames():
    from types import SimpleNamespace

    from battus.errors import InputError
    from battus.kernels.causal_cpu import MAX_T

    problem = SimpleNamespace(T=MAX_T + 1)
    with pytest.raises(InputError, match="at most 65534 frames"):
        causal_decode(CPUBackend(), None, problem, None, None, None)


_COMPILED_SCRIPT = r"""
import json, sys
sys.path.insert(0, sys.argv[1])
from numba.core.registry import CPUDispatcher
from test_causal import random_problem
from battus.backends import CPUBackend
from battus.pipeline import method_options, reconstruct
from battus.warmup import warm_up
from battus.kernels import causal_cpu, fit_cpu, infer_cpu

def compiled():
    # signatures of every CPU kernel of the reconstruction (a _Dual holds two)
    out = {}
    for module in (causal_cpu, fit_cpu, infer_cpu):
        for name, obj in vars(module).items():
            for label, kernel in ((name, obj), (name + ".parallel", getattr(obj, "parallel", None)),
                                  (name + ".serial", getattr(obj, "serial", None))):
                if isinstance(kernel, CPUDispatcher):
                    out[module.__name__ + "." + label] = len(kernel.signatures)
    return out

backend = CPUBackend()
warm_up(backend, causal=True)
warm = compiled()
r = reconstruct(random_problem(0, "sir", False), method_options(sys.argv[2], causal=True), backend=backend)
print(json.dumps([warm, compiled(), r.algorithm_seconds, r.extras["warmup_seconds"]]))
"""


@pytest.mark.skipif(os.environ.get("NUMBA_DISABLE_JIT") == "1", reason="kernels are plain Python")
@pytest.mark.parametrize("method", ["battus-z", "battus"])
def test_warm_up_compiles_every_kernel_the_run_uses(method):
    """In a fresh process, warm-up compiles (or loads from Numba's cache) every kernel a Battus-C run uses,
    the causal repair's included: the timed interval compiles nothing, and warm-up time is recorded apart."""
    proc = subprocess.run([sys.executable, "-c", _COMPILED_SCRIPT, os.path.dirname(__file__), method],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    warm, after, algorithm_seconds, warmup_seconds = json.loads(proc.stdout.strip().splitlines()[-1])
    assert after == warm  # no new signature: nothing compiled inside reconstruct's interval
    assert warm["battus.kernels.causal_cpu._frames"] >= 1 and warm["battus.kernels.fit_cpu.segmented_loglik"] >= 1
    assert warmup_seconds > 0.0 and algorithm_seconds > 0.0


_NARROW_SCRIPT = r"""
import json, sys
sys.path.insert(0, sys.argv[1])
from numba.core.registry import CPUDispatcher
from test_causal import random_problem
from battus.backends import CPUBackend
from battus.pipeline import method_options, reconstruct, warm_up_for
from battus.kernels import fit_cpu, infer_cpu

def compiled():
    return {m.__name__ + "." + name: len(obj.signatures) for m in (fit_cpu, infer_cpu)
            for name, obj in vars(m).items() if isinstance(obj, CPUDispatcher)}

backend = CPUBackend()
warm_up_for(method_options("battus"))(backend)  # what `battus reconstruct --method battus` warms up
warm = compiled()
for method in ("battus", "battus-z"):
    reconstruct(random_problem(0, "sir", False), method_options(method), backend=backend)
print(json.dumps([warm, compiled()]))
"""


@pytest.mark.skipif(os.environ.get("NUMBA_DISABLE_JIT") == "1", reason="kernels are plain Python")
def test_warm_up_compiles_only_what_a_run_without_posteriors_uses():
    """A run that keeps no posteriors decodes each vertex as its posteriors are formed: its warm-up
    compiles that decode for both decoders and leaves out the kernels that form and decode every
    posterior (seconds to compile on a cold cache); the timed runs compile nothing."""
    proc = subprocess.run([sys.executable, "-c", _NARROW_SCRIPT, os.path.dirname(__file__)],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    warm, after = json.loads(proc.stdout.strip().splitlines()[-1])
    assert after == warm
    assert warm["battus.kernels.infer_cpu.forward_backward_hitting_times"] >= 1
    for kernel in ("forward_backward", "threshold_hitting_times", "map_hitting_times"):
        assert warm["battus.kernels.infer_cpu." + kernel] == 0, kernel


def test_step_timing_copy_times_every_barrier(tmp_path):
    """benchmarks/causal_steps.py times a copy of the repair kernel: one timer read after each of
    the module's own grid barriers, the timer slots passed down to the screen, the launch given
    them, and the copy still valid Python (it refuses a kernel it no longer recognises)."""
    import ast
    import importlib.util
    import re
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    spec = importlib.util.spec_from_file_location("causal_steps", root / "benchmarks" / "causal_steps.py")
    steps = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(steps)
    original = steps.timed_copy(root / "src", tmp_path)
    kernel = (tmp_path / "battus/kernels/causal_cuda.py").read_text()
    host = (tmp_path / "battus/backends/cuda/causal_repair.py").read_text()
    ast.parse(kernel)
    ast.parse(host)
    barriers = [number for number, line in enumerate(original, 1) if line.strip() == "grid.sync()"]
    assert len(barriers) > 10
    assert [int(x) for x in re.findall(r"_tick\(prof, (\d+)\)", kernel)] == barriers
    assert kernel.count("_tick_start(prof)") == 2  # its definition and its one call
    assert kernel.count("sh, grid, prof)") == 3  # _screen's signature and its two calls
    assert "small, step_times())" in host
    assert (tmp_path / "battus/kernels/globaltimer.cu").exists()
