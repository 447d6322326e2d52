"""CUDA backend against the naive references (tests/naive.py) and the CPU backend, under the CUDA
simulator (no GPU needed).

Run with ``NUMBA_ENABLE_CUDASIM=1``; without it (and without a GPU) the module
is skipped. Graphs are tiny and the bin thresholds low, so every kernel path
(thread, warp and hub bins; split fitting work items; several candidate
groups) runs. On a real GPU the same tests run against the compiled kernels.
"""

from __future__ import annotations

import os
import sys

import naive
import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from battus.backends import CPUBackend, cuda_available
from battus.fit import FitSettings, candidate_grid
from battus.pipeline import method_options, reconstruct
from battus.problem import Problem, observe
from battus.simulate import simulate
from battus.synth import chung_lu
from battus.warmup import warm_up

pytestmark = [
    pytest.mark.skipif(not cuda_available(), reason="needs NUMBA_ENABLE_CUDASIM=1 or a CUDA device"),
    pytest.mark.filterwarnings("ignore:overflow encountered:RuntimeWarning"),  # uint64 wrap in cudasim
]

T = 6
SCHEDULES = {1: [T], 2: [T // 2, T], 4: [1, 2, 4, T]}
SMALL_FIT = FitSettings(grid_points=3, refine_points=3, refine_rounds=1)


@pytest.fixture(scope="module", autouse=True)
def fast_simulator_threads():
    """The simulator busy-waits on its threads: a short GIL switch interval makes it ~6x faster."""
    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-4)
    yield
    sys.setswitchinterval(old)


@pytest.fixture(scope="module")
def graph():
    return chung_lu(30, 180, gamma_in=2.1, seed=3)


def small_bins(**overrides):
    """Settings whose low thresholds send the hubs of a 30-vertex graph to the warp and hub bins
    and split its fitting work items (``overrides``: other settings)."""
    from battus.backends.cuda import CUDASettings

    return CUDASettings(**{"warp_min_degree": 4, "hub_min_degree": 9, "hub_chunk": 4, "item_arcs": 4, **overrides})


@pytest.fixture(scope="module")
def backend():
    from battus.backends.cuda import CUDABackend

    return CUDABackend(small_bins())


def _cpu_values(problem, beta_i, beta_r):
    cpu = CPUBackend()
    return cpu.loglik_batch(cpu.prepare(problem), problem.prior, beta_i, beta_r)


def _problem(graph, model: str, n_snapshots: int) -> Problem:
    truth = simulate(graph, model, T, 3, 0.35, 0.25, seed=11)
    times = np.asarray(SCHEDULES[n_snapshots])
    return Problem(graph, model, T, 3, observe(truth, times), truth).validate()


def test_bins_cover_every_path(graph, backend):
    deg = graph.in_degree()
    assert (deg < 4).any() and ((deg >= 4) & (deg < 9)).any() and (deg >= 9).any()
    assert deg.max() > 4  # some fitting work items are split


def test_a_problem_prepared_without_fitting_has_no_work_items(graph, backend):
    """Reconstructing at given rates needs no fitting work items: the pressures are those of a
    problem prepared for fitting, and fitting rates on it is refused, not wrong."""
    from battus.fit import fit_rates

    problem = _problem(graph, "sir", 2)
    bare, full = backend.prepare(problem, fit=False), backend.prepare(problem)
    assert not bare.items and full.items["n_items"] > 0
    np.testing.assert_array_equal(backend.to_host(backend.pressures(bare, problem.prior, 0.2, 0.1, True)),
                                  backend.to_host(backend.pressures(full, problem.prior, 0.2, 0.1, True)))
    with pytest.raises(ValueError, match="prepared without fitting"):
        fit_rates(backend, bare, problem, SMALL_FIT)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(0, 70_000) | st.integers(0, 40), max_size=300))
@example([65_535, 65_534, 65_536, 65_535, 0, 70_000, 65_536])  # around the 16-bit keys' top
def test_descending_order_is_the_stable_argsort(counts):
    """The gather order and the warp bin rank by count, largest first, ties by id: the linear-time
    ranking gives numpy's stable argsort of the negated counts, hubs of 2**16 and more included."""
    from battus.backends.cuda.layout import descending_order, gather_order

    counts = np.asarray(counts, dtype=np.int64)
    order = np.argsort(-counts, kind="stable")
    np.testing.assert_array_equal(descending_order(counts), order)
    gather_id = gather_order(counts)
    np.testing.assert_array_equal(gather_id[order], np.arange(counts.shape[0]))


@pytest.mark.parametrize("model", ["si", "sir"])
def test_simulator_identical(graph, model):
    cpu = simulate(graph, model, T, 3, 0.35, 0.25, seed=7)
    gpu = simulate(graph, model, T, 3, 0.35, 0.25, seed=7, backend="cuda")
    assert gpu.dtype == np.uint8
    np.testing.assert_array_equal(cpu, gpu)


@pytest.mark.parametrize("model", ["si", "sir"])
@pytest.mark.parametrize("method", ["battus-z", "battus"])
def test_histories_without_posteriors_identical(graph, backend, model, method):
    """A run that keeps no posteriors (CPU: decoded a block at a time, :meth:`posterior_hitting_times`)
    gives the history of one that keeps them, on both backends."""
    problem = _problem(graph, model, 2)
    overrides = {"fit_settings": SMALL_FIT} if method == "battus" else {}
    options = method_options(method, **overrides)
    kept = reconstruct(problem, options, CPUBackend(), keep_posteriors=True)
    for got in (reconstruct(problem, options, CPUBackend()), reconstruct(problem, options, backend)):
        assert got.posteriors is None
        np.testing.assert_array_equal(got.t_inf, kept.t_inf)
        np.testing.assert_array_equal(got.t_rec, kept.t_rec)


@pytest.mark.parametrize("n_snapshots", [1, 2, 4])
@pytest.mark.parametrize("model", ["si", "sir"])
@pytest.mark.parametrize("method", ["battus-z", "battus"])
def test_decoded_histories_identical(graph, backend, model, method, n_snapshots):
    problem = _problem(graph, model, n_snapshots)
    overrides = {"fit_settings": SMALL_FIT} if method == "battus" else {}
    options = method_options(method, **overrides)
    cpu = reconstruct(problem, options, CPUBackend(), keep_posteriors=True)
    gpu = reconstruct(problem, options, backend, keep_posteriors=True)
    assert gpu.backend == "cuda"
    assert (gpu.beta_i, gpu.beta_r) == (cpu.beta_i, cpu.beta_r)
    np.testing.assert_array_equal(gpu.t_inf, cpu.t_inf)
    np.testing.assert_array_equal(gpu.t_rec, cpu.t_rec)
    np.testing.assert_array_equal(gpu.states, cpu.states)
    np.testing.assert_allclose(gpu.posteriors, cpu.posteriors, atol=1e-5)
    if method == "battus":
        assert [r["beta_i"] for r in gpu.fit_trace] == [r["beta_i"] for r in cpu.fit_trace]
        assert [r["beta_r"] for r in gpu.fit_trace] == [r["beta_r"] for r in cpu.fit_trace]
        np.testing.assert_allclose([r["objective"] for r in gpu.fit_trace],
                                   [r["objective"] for r in cpu.fit_trace], rtol=1e-12)


@pytest.mark.parametrize("reset", [False, True])
def test_pressures_match_the_cpu_and_the_naive_reference(graph, backend, reset):
    """The degree-binned pressures against the CPU's and the naive reference's, also with every
    vertex in the thread bin (one thread per vertex, whatever its degree)."""
    from battus.backends.cuda import CUDABackend

    problem = _problem(graph, "sir", 2)
    cpu = CPUBackend()
    ref = cpu.pressures(cpu.prepare(problem), problem.prior, 0.2, 0.1, reset)
    binned = backend.to_host(backend.pressures(backend.prepare(problem), problem.prior, 0.2, 0.1, reset))
    thread = CUDABackend(small_bins(warp_min_degree=1 << 40, hub_min_degree=1 << 40))
    prep = thread.prepare(problem)
    assert prep.bins["n_warp_blocks"] == prep.bins["n_hub_chunks"] == 0
    plain = thread.to_host(thread.pressures(prep, problem.prior, 0.2, 0.1, reset))
    np.testing.assert_allclose(binned, ref, rtol=1e-6)
    np.testing.assert_allclose(binned, naive.naive_mean_field_pressures(problem, 0.2, 0.1, reset), rtol=1e-6)
    np.testing.assert_allclose(plain, ref, rtol=1e-6)


def test_loglik_batch_matches_cpu(graph, backend):
    problem = _problem(graph, "sir", 2)
    beta_i = np.linspace(0.01, 0.5, 11)
    beta_r = np.linspace(0.3, 0.02, 11)
    cpu = CPUBackend()
    ref = cpu.loglik_batch(cpu.prepare(problem), problem.prior, beta_i, beta_r)
    got = backend.loglik_batch(backend.prepare(problem), problem.prior, beta_i, beta_r)
    np.testing.assert_allclose(got, ref, rtol=1e-5)


def test_values_independent_of_group_width_and_kernel(graph):
    """A candidate's value is bit-identical whatever group width (lanes) holds it and whichever step
    kernel runs it: a lone group, group pairs with one lane per thread (batch_pressure_pair) or two
    (batch_pressure_pair_two_lanes), odd and even group counts; the spread re-score relies on it.
    The values themselves match the CPU backend's and the naive reference's."""
    from battus.backends.cuda import CUDABackend
    from battus.kernels import fit_cuda
    from battus.kernels.cuda_common import WARP

    problem = _problem(graph, "sir", 2)
    # a full group of WARP candidates and a partial one (11 under the simulator, 35 on a GPU)
    beta_i = np.linspace(0.01, 0.5, WARP + 3)
    beta_r = np.linspace(0.3, 0.02, WARP + 3)
    cpu = _cpu_values(problem, beta_i, beta_r)
    np.testing.assert_allclose(cpu, naive.naive_segmented_loglik(problem, beta_i, beta_r), rtol=1e-10)
    widths = sorted({1, fit_cuda.NARROW, WARP // 2, WARP})
    want = None
    for two_lane_max_arcs in (0.0, 32.0):  # group pairs with one lane per thread, then two
        be = CUDABackend(small_bins(two_lane_max_arcs=two_lane_max_arcs))
        prep = be.prepare(problem)
        assert (prep.items["mean_arcs"] <= two_lane_max_arcs) == (two_lane_max_arcs > 0)
        for lanes in widths:
            got = be.passes.evaluate(prep, problem.prior, beta_i, beta_r, "narrow64", 0, {}, lanes=lanes)
            want = got if want is None else want
            assert got.tobytes() == want.tobytes(), (two_lane_max_arcs, lanes)
        with pytest.raises(ValueError, match="lanes must divide"):
            be.passes.evaluate(prep, problem.prior, beta_i, beta_r, "narrow64", 0, {}, lanes=3)
        single = be.loglik_batch(prep, problem.prior, beta_i, beta_r)  # float32: a pair and a lone group
        np.testing.assert_allclose(single, cpu, rtol=1e-5)
        picks = [0, WARP - 1, WARP, beta_i.shape[0] - 1]  # each group's first and last lanes, each alone
        alone = np.concatenate([be.loglik_batch(prep, problem.prior, beta_i[c:c + 1], beta_r[c:c + 1])
                                for c in picks])
        assert alone.tobytes() == single[picks].tobytes()
    np.testing.assert_allclose(want, cpu, rtol=1e-9)


@pytest.mark.parametrize("n_snapshots, spread_by", [(1, "candidates"), (2, "frames")])
def test_fit_spread_over_two_devices_is_identical(graph, n_snapshots, spread_by, model="sir"):
    """Fitting rounds spread over a worker process (here on the same device): a round of several
    groups and the float64 re-score by candidates, the groups dealt; a round of one group and one
    re-scored candidate by frames where the pass halves at T/2 (two snapshots), else on one device.
    Every candidate's value, each round's best and the fitted rates equal one device's, bit for bit."""
    from battus.backends.cuda import CUDABackend
    from battus.backends.cuda.rounds import deal_candidates, segment_pieces
    from battus.fit import fit_rates
    from battus.kernels.cuda_common import WARP
    from battus.kernels.fit_cuda import POLISH

    problem = _problem(graph, model, n_snapshots)
    pieces = segment_pieces(problem.observations.index(problem.T), 2)
    assert len(pieces) == (2 if spread_by == "frames" else 1)
    settings = FitSettings(grid_points=6, refine_points=3, refine_rounds=1, chunk=16)  # 36 candidates: spread
    one = CUDABackend(small_bins())
    two = CUDABackend(small_bins(), devices=(0, 0))
    try:
        warm_up(two, fit=True)
        assert len(two.pool.workers) == 1 and "fit over CUDA devices 0, 0" in two.device
        prep_one, prep_two = one.prepare(problem), two.prepare(problem)
        assert prep_two.worker_key is not None
        count = 2 * WARP + 5  # 3 groups, spread 2 + 1 (the last one part-filled)
        beta_i = np.linspace(0.01, 0.5, count)
        beta_r = np.linspace(0.3, 0.02, count)
        for mode, n in (("float32", count), ("narrow64", count), ("float32", WARP), ("narrow64", POLISH),
                        ("narrow64", 1)):
            alone = one.passes.evaluate(prep_one, problem.prior, beta_i[:n], beta_r[:n], mode, 8, {})
            spread = two.rounds.evaluate_spread(prep_two, problem.prior, beta_i[:n], beta_r[:n], mode, 8, {})
            assert spread.tobytes() == alone.tobytes(), (mode, n)
        if spread_by == "frames":  # a round pruned after T/2, both pieces cut by candidates over the devices
            norm = float(problem.n * n_snapshots)
            alone = one.rounds.evaluate_pruned(prep_one, problem.prior, beta_i, beta_r, 8, {}, pieces, norm)
            spread = two.rounds.evaluate_pruned(prep_two, problem.prior, beta_i, beta_r, 8, {}, pieces, norm)
            assert np.isfinite(alone).any() and spread.tobytes() == alone.tobytes()
        assert fit_rates(two, prep_two, problem, settings) == fit_rates(one, prep_one, problem, settings)
        del prep_two  # its copy on the worker is dropped with the next request
        assert two.pool.freed_keys == [0]
        kept = two.prepare(problem)
        assert not two.pool.freed_keys and kept.worker_key == 1
        alone = one.passes.evaluate(prep_one, problem.prior, beta_i, beta_r, "float32", 8, {})
        spread = two.rounds.evaluate_spread(kept, problem.prior, beta_i, beta_r, "float32", 8, {})
        assert spread.tobytes() == alone.tobytes()
    finally:
        two.close()
    grid = deal_candidates(576, 32, 2)  # a SIR grid: 18 groups, 9 each, alternating
    assert [pick.size for pick in grid] == [288, 288]
    assert grid[0][31:34].tolist() == [31, 64, 65] and grid[1][:2].tolist() == [32, 33]
    assert [pick.tolist() for pick in deal_candidates(5, 8, 2)] == [[0, 1, 2, 3, 4], []]
    assert [pick.tolist() for pick in deal_candidates(7, 4, 2)] == [[0, 1, 2, 3], [4, 5, 6]]  # a re-score
    assert [pick.size for pick in deal_candidates(100, 64, 3)] == [64, 36, 0]


@pytest.mark.parametrize("model", ["si", "sir"])
def test_absorbed_vertices_skip_their_gathers_with_identical_values(graph, model):
    """A vertex reset to an observed I or R (f_S = 0) does not gather its neighbours' terms: in a
    lone group each lane looks at its own f_S, in a group pair a vertex gathers unless it is
    absorbed in both groups (in the two-lane kernel, in all four lanes). So each candidate's value
    alone (a lone group) equals its value in a batch of pairs bit for bit only if skipping leaves
    every value as gathering would; the values match the CPU backend's, and so do the fitted rates."""
    from battus.backends.cuda import CUDABackend
    from battus.fit import fit_rates

    truth = simulate(graph, model, T, 3, 0.35, 0.25, seed=11)
    problem = Problem(graph, model, T, 3, observe(truth, np.asarray([T // 2, T])), truth).validate()
    middle = problem.observations.states[0]
    assert 0 < np.count_nonzero(middle) < problem.n  # some vertices absorbed at the reset, some not
    count = 2 * 8 + 3  # float32 passes: a group pair and a lone, part-filled group
    beta_i = np.linspace(0.02, 0.6, count)
    beta_r = np.linspace(0.4, 0.05, count) if model == "sir" else np.zeros(count)
    cpu = _cpu_values(problem, beta_i, beta_r)
    for two_lane_max_arcs in (0.0, 32.0):  # group pairs with one lane per thread, then two
        be = CUDABackend(small_bins(two_lane_max_arcs=two_lane_max_arcs))
        prep = be.prepare(problem)
        for mode, rtol in (("float32", 1e-5), ("narrow64", 1e-9)):
            got = be.passes.evaluate(prep, problem.prior, beta_i, beta_r, mode, count, {})
            assert np.all(np.isfinite(got))
            np.testing.assert_allclose(got, cpu, rtol=rtol)
            picks = [0, 9, 17, count - 1]  # in a pair's first and second group, in the lone group; each alone
            alone = np.concatenate([be.passes.evaluate(prep, problem.prior, beta_i[c:c + 1], beta_r[c:c + 1], mode,
                                                       count, {}) for c in picks])
            assert alone.tobytes() == got[picks].tobytes(), (mode, two_lane_max_arcs)
    settings = FitSettings(grid_points=5, refine_points=3, refine_rounds=1)
    cpu_backend = CPUBackend()
    assert fit_rates(be, prep, problem, settings)[:2] == \
        fit_rates(cpu_backend, cpu_backend.prepare(problem), problem, settings)[:2]


@pytest.mark.parametrize("model", ["si", "sir"])
@pytest.mark.parametrize("schedule", ["half", "four", "all infected"])
def test_compact_steps_match_the_cpu_and_the_naive_reference(graph, model, schedule):
    """After a reset to a snapshot the steps launch only the work items of the vertices observed S
    there, and advance the ones observed I with L = 0 (compact steps). Every candidate's value of a
    whole pass matches the CPU backend's and the naive reference's (which step over every vertex),
    in float32 and float64, with split items, both pair kernels, a lone group, several snapshots and
    a snapshot where nothing is left to gather; a piece from a snapshot added to the piece before it
    in frame order is the whole pass's value bit for bit."""
    from battus.backends.cuda import CUDABackend
    from battus.backends.cuda.rounds import add_in_frame_order

    truth = simulate(graph, model, T, 3, 0.35, 0.25, seed=11)
    times = np.asarray([1, 2, 4, T] if schedule == "four" else [T // 2, T])
    problem = Problem(graph, model, T, 3, observe(truth, times), truth)
    if schedule == "all infected":  # every vertex I at T/2 (and I or R at T): compact steps gather nothing
        problem.observations.states[0][:] = 1
        problem.observations.states[1][:] = np.maximum(problem.observations.states[1], 1)
    count = 2 * 8 + 3  # float32 passes: a group pair and a lone, part-filled group
    beta_i = np.linspace(0.02, 0.6, count)
    beta_r = np.linspace(0.4, 0.05, count) if model == "sir" else np.zeros(count)
    cpu = _cpu_values(problem, beta_i, beta_r)
    np.testing.assert_allclose(cpu, naive.naive_segmented_loglik(problem, beta_i, beta_r), rtol=1e-10)
    head, tail = (0, int(times[0])), (int(times[0]), int(times[-1]))  # the pass cut at its first snapshot
    for two_lane_max_arcs in (0.0, 32.0):  # group pairs with one lane per thread, then two
        be = CUDABackend(small_bins(two_lane_max_arcs=two_lane_max_arcs))
        prep = be.prepare(problem)
        assert prep.items["n_split"] > 0  # split items run too
        for mode, rtol in (("float32", 1e-5), ("narrow64", 1e-9)):
            whole = be.passes.evaluate(prep, problem.prior, beta_i, beta_r, mode, count, {})
            np.testing.assert_allclose(whole, cpu, rtol=rtol)
            first = be.passes.evaluate(prep, problem.prior, beta_i, beta_r, mode, count, {}, head)
            rows = be.passes.evaluate(prep, problem.prior, beta_i, beta_r, mode, count, {}, tail)
            assert add_in_frame_order(first, rows).tobytes() == whole.tobytes(), (mode, two_lane_max_arcs)
        assert set(prep.compact) == set(range(len(times) - 1))
        observed_s = int(np.count_nonzero(problem.observations.states[0] == 0))
        assert prep.compact[0]["n_items"] < prep.items["n_items"]
        assert (prep.compact[0]["n_items"] == 0) == (observed_s == 0)


@pytest.mark.parametrize("model", ["si", "sir"])
def test_pruned_round_keeps_every_candidate_that_can_reach_the_rescore(graph, model):
    """A float32 round cut at T/2: every candidate it evaluates whole has the whole pass's value bit
    for bit, the others could not have been among the best POLISH, so the re-scored set is that of
    the whole round; the round's best and the fitted rates are the CPU backend's."""
    from battus.backends.cuda import CUDABackend
    from battus.backends.cuda.rounds import segment_pieces
    from battus.fit import fit_rates
    from battus.kernels.fit_cuda import POLISH

    problem = _problem(graph, model, 2)
    be = CUDABackend(small_bins())
    prep = be.prepare(problem)
    pieces = segment_pieces(prep.host_obs_index, 2)
    assert pieces == [(0, T // 2), (T // 2, T)]
    sir = model == "sir"
    beta_i, beta_r = candidate_grid(np.linspace(0.001, 0.999, 8), np.linspace(0.001, 0.999, 6) if sir else None)
    if not sir:
        beta_i, beta_r = np.linspace(0.001, 0.999, 40), np.zeros(40)
    norm = float(problem.n * 2)
    got = be.rounds.evaluate_pruned(prep, problem.prior, beta_i, beta_r, 8, {}, pieces, norm)
    want = be.passes.evaluate(prep, problem.prior, beta_i, beta_r, "float32", 8, {}) / norm  # the whole round
    kept = np.isfinite(got)
    assert 0 < np.count_nonzero(~kept) and got[kept].tobytes() == want[kept].tobytes()
    best = np.argsort(-want, kind="stable")[:POLISH]
    assert kept[best].all() and np.array_equal(np.argsort(-got, kind="stable")[:POLISH], best)
    assert want[~kept].max() < np.sort(want)[-POLISH]
    cpu = CPUBackend()
    cpu_prep = cpu.prepare(problem)
    index, objective = be.best_candidate(prep, problem.prior, beta_i, beta_r, norm, 8, {})
    cpu_index, cpu_objective = cpu.best_candidate(cpu_prep, problem.prior, beta_i, beta_r, norm, 8, {})
    assert index == cpu_index and objective == pytest.approx(cpu_objective, rel=1e-9)
    settings = FitSettings(grid_points=7, refine_points=3, refine_rounds=1, chunk=8)  # SIR: 49 in 7 passes
    assert fit_rates(be, prep, problem, settings)[:2] == fit_rates(cpu, cpu_prep, problem, settings)[:2]


def test_segment_pieces_cut_the_pass_at_observed_frames():
    from battus.backends.cuda.rounds import segment_pieces

    def index(times, horizon):
        obs = -np.ones(horizon + 1, dtype=np.int64)
        obs[list(times)] = np.arange(len(times))
        return obs

    assert segment_pieces(index([20, 40], 40), 2) == [(0, 20), (20, 40)]  # the benchmark schedule
    assert segment_pieces(index([0, 20, 40], 40), 2) == [(0, 20), (20, 40)]
    assert segment_pieces(index([20, 40], 40), 1) == [(0, 40)]
    assert segment_pieces(index([40], 40), 2) == [(0, 40)]  # DITTO's final frame only: nothing to cut
    assert segment_pieces(index([5, 40], 40), 2) == [(0, 40)]  # 35 of 40 steps in one piece: not worth it
    assert segment_pieces(index([1, 2, 4, 6], 6), 3) == [(0, 2), (2, 4), (4, 6)]
    assert segment_pieces(index([1, 2, 4, 6], 6), 2) == [(0, 6)]  # best cut leaves 4 of 6 steps
    assert segment_pieces(index([3, 6], 6), 3) == [(0, 3), (3, 6)]  # fewer pieces than devices
    assert segment_pieces(index([10, 20, 30, 40], 40), 4) == [(0, 10), (10, 20), (20, 30), (30, 40)]


def test_fit_worker_errors_are_one_line(graph, monkeypatch):
    """A worker that fails reports its error through the pipe; the fitting process raises it."""
    from battus.backends.cuda import CUDABackend
    from battus.backends.cuda.worker_pipe import WorkerError
    from battus.kernels.cuda_common import WARP

    two = CUDABackend(small_bins(), devices=(0, 0))
    try:
        warm_up(two, fit=True)
        prep = two.prepare(_problem(graph, "sir", 2))
        prep.worker_key = 12345  # a problem the worker never prepared
        many = np.full(4 * WARP + 1, 0.1)  # more than one group: the round is spread
        with pytest.raises(WorkerError, match="CUDA device 0: KeyError"):
            two.rounds.evaluate_spread(prep, np.array([0.9, 0.1, 0.0]), many, many, "float32", 64, {})
        two.pool.workers[0]._proc.kill()
        two.pool.workers[0]._proc.wait()
        with pytest.raises(WorkerError, match="has stopped"):
            two.rounds.evaluate_spread(prep, np.array([0.9, 0.1, 0.0]), many, many, "float32", 64, {})
    finally:
        two.close()


def test_every_worker_prepares_at_once(graph):
    """With three devices both workers are sent the problem at once (a thread each) and hold it: a
    round spread over the three (by frames, a round of one group: snapshots at 1, 2, 4, 6 cut the
    pass into three pieces of two steps; and by candidates, three groups) equals one device's, bit
    for bit. A worker that has stopped fails the prepare in one line, and the other worker's answer
    is still read, so its pipe stays in step."""
    from battus.backends.cuda import CUDABackend
    from battus.backends.cuda.worker_pipe import WorkerError
    from battus.kernels.cuda_common import WARP

    problem = _problem(graph, "sir", 4)
    one = CUDABackend(small_bins())
    three = CUDABackend(small_bins(), devices=(0, 0, 0))
    try:
        warm_up(three, fit=True)
        assert len(three.pool.workers) == 2
        prep = three.prepare(problem)
        assert prep.worker_key == 0
        count = 2 * WARP + 5
        beta_i = np.linspace(0.01, 0.5, count)
        beta_r = np.linspace(0.3, 0.02, count)
        prep_one = one.prepare(problem)
        alone = one.passes.evaluate(prep_one, problem.prior, beta_i, beta_r, "float32", 8, {})
        by_frames = three.rounds.evaluate_spread(prep, problem.prior, beta_i[:WARP], beta_r[:WARP], "float32", 8, {})
        assert by_frames.tobytes() == alone[:WARP].tobytes()
        assert three.rounds.evaluate_spread(prep, problem.prior, beta_i, beta_r, "float32", 8, {}).tobytes() \
            == alone.tobytes()  # 8 + 8 + 5 dealt over the three devices
        # a pruned round's piece, by candidates
        by_candidates = three.rounds.evaluate_candidates_spread(prep, problem.prior, beta_i, beta_r, "float32", 8,
                                                                {}, (0, T))
        assert by_candidates.tobytes() == alone.tobytes()
        three.pool.workers[1]._proc.kill()
        three.pool.workers[1]._proc.wait()
        with pytest.raises(WorkerError, match="the worker on CUDA device 0 has stopped") as err:
            three.prepare(problem)
        assert "\n" not in str(err.value)
        assert three.pool.freed_keys == [1]  # the worker that prepared it drops it with the next request
        three.pool.workers[0].request({"op": "warm_up"})
        assert three.pool.workers[0].reply() == {"arrays": {}}  # the answer to this request, not the prepare's
    finally:
        three.close()


def test_prepare_sends_to_every_worker_concurrently(graph):
    """Stand-in workers whose transfers each wait until all are in flight: sent one after another, the
    first would wait for ever (here 30 s). On failures the first in device order is raised, and every
    worker whose transfer went through is answered for."""
    import threading

    from battus.backends.cuda import CUDABackend
    from battus.backends.cuda.worker_pipe import WorkerError

    in_flight = threading.Barrier(3, timeout=30)

    class Worker:
        def __init__(self, device, fail=None):
            self.device, self.fail, self.answered = device, fail, 0

        def request(self, header, arrays=None):
            if header["op"] == "prepare":
                in_flight.wait()
            if self.fail == "transfer":
                raise WorkerError(f"the worker on CUDA device {self.device} has stopped (exit status -9)")

        def reply(self):
            self.answered += 1
            if self.fail == "reply":
                raise WorkerError(f"CUDA device {self.device}: KeyError: 7")
            return {"arrays": {}}

    problem = _problem(graph, "sir", 2)
    be = CUDABackend(small_bins())
    be.pool.workers, be.pool.spread = [Worker(1), Worker(2), Worker(3)], True
    prep = be.prepare(problem)
    assert prep.worker_key == 0 and [w.answered for w in be.pool.workers] == [1, 1, 1]
    be.pool.workers = [Worker(1), Worker(2, "reply"), Worker(3, "transfer")]
    with pytest.raises(WorkerError, match="^CUDA device 2: KeyError: 7$"):
        be.prepare(problem)
    assert [w.answered for w in be.pool.workers] == [1, 1, 0]
    assert be.pool.freed_keys == [1]  # dropped by the workers that did prepare it, with the next request


def test_device_memory_accounting(graph, backend):
    problem = _problem(graph, "sir", 2)
    backend.memory.reset_peak()
    reconstruct(problem, method_options("battus-z"), backend)
    n, m = graph.n, graph.m
    assert backend.memory.peak_bytes >= 4 * m + 16 * (T + 1) * n


@pytest.mark.parametrize("item_arcs", [1, 4, 64])
def test_work_items_take_no_more_than_their_estimate(graph, item_arcs):
    """The bytes build_items uploads, for every vertex and for a compact step's vertices, stay
    within work_items_bytes (the estimate prepare and compact_items check before uploading)."""
    from battus.backends.cuda import CUDABackend
    from battus.backends.cuda.layout import build_items
    from battus.backends.cuda.memory import work_items_bytes

    be = CUDABackend(small_bins(item_arcs=item_arcs))
    indptr = graph.indptr.astype(np.int64)
    gather_id = np.random.default_rng(5).permutation(graph.n).astype(np.int32)
    everyone = np.arange(graph.n, dtype=np.int64)
    for vertices in (everyone, everyone[::3], everyone[graph.in_degree() > 5], everyone[:0]):
        items = None  # the last case's arrays are released before this one is counted
        before = be.memory.live_bytes
        items = build_items(be.memory, indptr, gather_id, item_arcs, vertices)  # held: its arrays stay counted
        assert items["n_items"] >= vertices.shape[0]
        arcs = int((indptr[vertices + 1] - indptr[vertices]).sum())
        assert 0 < be.memory.live_bytes - before <= work_items_bytes(vertices.shape[0], arcs, item_arcs)


def test_graph_too_large_for_the_device_refused_up_front(graph, monkeypatch):
    """Device memory is checked before the upload: one line with the estimate, nothing allocated."""
    from battus.backends.cuda import CUDABackend
    from battus.backends.cuda.memory import inference_bytes
    from battus.errors import InputError

    problem = _problem(graph, "sir", 2)
    be = CUDABackend(small_bins())
    needed = inference_bytes(problem.n, graph.m, problem.T, 2, be.settings)
    assert needed >= 4 * graph.m + 16 * (problem.T + 1) * problem.n
    monkeypatch.setattr(be.memory, "free_bytes", lambda: needed - 1)
    with pytest.raises(InputError, match="needs about .* on the GPU, more than the") as err:
        be.prepare(problem)
    assert "\n" not in str(err.value)
    assert be.memory.peak_bytes == 0
    monkeypatch.setattr(be.memory, "free_bytes", lambda: needed)
    prep = be.prepare(problem)  # fits exactly; the fit's state is checked when allocated
    monkeypatch.setattr(be.memory, "free_bytes", lambda: 0)
    with pytest.raises(InputError, match="fitting .* candidates"):
        be.loglik_batch(prep, problem.prior, np.array([0.1]), np.array([0.1]))


def test_auto_backend_falls_back_to_the_cpu_when_the_gpu_is_too_small(graph, monkeypatch):
    """--backend auto means the GPU when it can: a graph over its free memory runs on the CPU, same history;
    an explicit --backend cuda still refuses it."""
    import battus.backends
    from battus.backends.cuda import CUDABackend
    from battus.errors import InputError

    problem = _problem(graph, "sir", 2)

    def tiny_gpu(name, devices=None):
        if name == "cpu":
            return CPUBackend()
        be = CUDABackend(small_bins())
        be.memory.free_bytes = lambda: 1024
        return be

    monkeypatch.setattr(battus.backends, "get_backend", tiny_gpu)
    said = []
    recon = reconstruct(problem, method_options("battus-z"), backend="auto", progress=said.append)
    assert recon.backend == "cpu" and any("on the CPU instead" in m for m in said)
    expected = reconstruct(problem, method_options("battus-z"), backend=CPUBackend())
    assert np.array_equal(recon.states, expected.states)
    with pytest.raises(InputError, match="device memory"):
        reconstruct(problem, method_options("battus-z"), backend="cuda")


def _fresh_python(code: str) -> str:
    """What ``code`` prints in a fresh interpreter outside the CUDA simulator (it must exit 0)."""
    import subprocess

    env = {k: v for k, v in os.environ.items() if k != "NUMBA_ENABLE_CUDASIM"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 0, out.stderr
    return out.stdout.strip()


def test_numpy_row_stack_workaround():
    """Simulate NumPy >= 2.5 in a fresh interpreter: the guard must let numba-cuda import."""
    code = (
        "import numpy as np\n"
        "np.__dict__.pop('row_stack', None)\n"
        "from battus.kernels.cuda_compat import ensure_numpy_compat\n"
        "needed = ensure_numpy_compat()\n"
        "import sys\n"
        "assert 'numba.cuda.np.arrayobj' in sys.modules\n"
        "assert 'row_stack' not in np.__dict__\n"
        "print(needed)\n"
    )
    assert _fresh_python(code) == "True"


@pytest.mark.parametrize("imported_before", [False, True])
def test_array_math_imported_without_scipy_blas(imported_before):
    """numba-cuda's array math is imported with SciPy's BLAS hidden from its probe (the probe's
    0.2-0.3 s import is not paid), and SciPy's BLAS imports as usual afterwards; once the process
    has imported it, nothing is hidden."""
    pytest.importorskip("scipy.linalg.cython_blas")
    code = (
        "import sys\n"
        + ("import scipy.linalg.cython_blas\n" if imported_before else "")
        + "from battus.kernels.cuda_compat import ensure_numpy_compat, import_array_math\n"
        "ensure_numpy_compat()\n"
        "hidden = import_array_math()\n"
        "array_math = sys.modules['numba.cuda.np.arraymath']\n"
        f"assert ('scipy.linalg' in sys.modules) is {imported_before}\n"
        f"assert array_math._HAVE_BLAS is {imported_before}\n"
        "assert import_array_math() is False\n"
        "import scipy.linalg.cython_blas\n"
        "print(hidden)\n"
    )
    assert _fresh_python(code) == str(not imported_before)


@pytest.mark.parametrize("model", ["si", "sir"])
@pytest.mark.parametrize("reset", [False, True])
def test_kernels_match_naive_reference(graph, backend, model, reset):
    """Each stage of the CUDA backend against the naive numpy reference (float32 state: tolerances)."""
    problem = _problem(graph, model, 2)
    beta_i, beta_r = 0.2, (0.1 if model == "sir" else 0.0)
    prep = backend.prepare(problem)
    rho = backend.pressures(prep, problem.prior, beta_i, beta_r, reset)
    rho_ref = naive.naive_mean_field_pressures(problem, beta_i, beta_r, reset)
    np.testing.assert_allclose(backend.to_host(rho), rho_ref, rtol=1e-5)
    for backward in (True, False):
        gamma = backend.posteriors(prep, rho, problem.prior, beta_r, backward)
        np.testing.assert_allclose(backend.to_host(gamma), naive.naive_forward_backward(problem, rho_ref, beta_r,
                                                                                        backward), atol=1e-5)
        for decoder in ("threshold", "map"):
            for projection in (True, False):
                t_inf, t_rec = backend.hitting_times(prep, gamma, decoder, 0.65, model == "sir", projection)
                _, want_inf, want_rec = naive.naive_reconstruct(problem, beta_i, beta_r, reset=reset,
                                                                backward=backward, decoder=decoder,
                                                                projection=projection)
                np.testing.assert_array_equal(backend.to_host(t_inf), want_inf)
                np.testing.assert_array_equal(backend.to_host(t_rec), want_rec)


def test_loglik_and_simulator_match_naive_reference(graph, backend):
    problem = _problem(graph, "sir", 4)
    beta_i = np.linspace(0.01, 0.5, 5)
    beta_r = np.linspace(0.3, 0.02, 5)
    got = backend.loglik_batch(backend.prepare(problem), problem.prior, beta_i, beta_r)
    np.testing.assert_allclose(got, naive.naive_segmented_loglik(problem, beta_i, beta_r), rtol=1e-5)
    for same_step_recovery in (False, True):
        want = naive.naive_simulate(graph, "sir", T, 3, 0.35, 0.25, seed=5, same_step_recovery=same_step_recovery)
        got = simulate(graph, "sir", T, 3, 0.35, 0.25, seed=5, backend="cuda", same_step_recovery=same_step_recovery)
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("kind", ["cpu", "cuda"])
def test_warm_up_passes_its_flags_and_remembers_what_it_covered(kind):
    """Each backend hands ``exercise`` what the run needs (causal repair, fit, posteriors kept) and
    warms up again only for what no earlier warm-up covered; a fit on the GPU takes each of its
    group-pair kernels in turn. (``exercise`` here records its calls: nothing compiles.)"""
    from battus.backends import CPUBackend
    from battus.backends.cuda import CUDABackend

    backend = CPUBackend() if kind == "cpu" else CUDABackend(small_bins())
    backend.simulated = False  # the simulator's warm-up compiles nothing, so it skips exercise
    calls = []

    def exercise(be, causal, fit, posteriors):
        calls.append((causal, fit, posteriors))

    for flags in ((False, False, False), (False, False, False), (False, False, True), (True, True, True),
                  (False, True, False), (False, False, True)):
        backend.warm_up(exercise, *flags)
    fits = 2 if kind == "cuda" else 1  # the two group-pair kernels
    assert calls == [(False, False, False), (False, False, True)] + [(True, True, True)] * fits
