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


@pytest.fixture(scope="module")
def backend():
    from battus.backends.cuda import CUDABackend

    # low thresholds: the hubs of a 30-vertex graph use the warp and hub bins
    return CUDABackend(warp_min_degree=4, hub_min_degree=9, hub_chunk=4, item_arcs=4)


def _problem(graph, model: str, n_snapshots: int) -> Problem:
    truth = simulate(graph, model, T, 3, 0.35, 0.25, seed=11)
    times = np.asarray(SCHEDULES[n_snapshots])
    return Problem(graph, model, T, 3, observe(truth, times), truth).validate()


def test_bins_cover_every_path(graph, backend):
    deg = graph.in_degree()
    assert (deg < 4).any() and ((deg >= 4) & (deg < 9)).any() and (deg >= 9).any()
    assert deg.max() > 4  # some fitting work items are split


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
def test_pressures_and_thread_kernel(graph, backend, reset):
    from battus.backends.cuda import CUDABackend

    problem = _problem(graph, "sir", 2)
    cpu = CPUBackend()
    ref = cpu.pressures(cpu.prepare(problem), problem.prior, 0.2, 0.1, reset)
    binned = backend.to_host(backend.pressures(backend.prepare(problem), problem.prior, 0.2, 0.1, reset))
    thread = CUDABackend(kernel="thread", reorder=False)
    plain = thread.to_host(thread.pressures(thread.prepare(problem), problem.prior, 0.2, 0.1, reset))
    np.testing.assert_allclose(binned, ref, rtol=1e-6)
    np.testing.assert_allclose(plain, binned, rtol=1e-6)


def test_loglik_batch_matches_cpu(graph, backend):
    problem = _problem(graph, "sir", 2)
    beta_i = np.linspace(0.01, 0.5, 11)
    beta_r = np.linspace(0.3, 0.02, 11)
    cpu = CPUBackend()
    ref = cpu.loglik_batch(cpu.prepare(problem), problem.prior, beta_i, beta_r)
    got = backend.loglik_batch(backend.prepare(problem), problem.prior, beta_i, beta_r)
    np.testing.assert_allclose(got, ref, rtol=1e-5)


@pytest.mark.parametrize("precision", ["mixed", "float64"])
def test_loglik_batch_independent_of_group_width(graph, precision):
    """A candidate's likelihood is bit-identical whatever group width (lanes) holds it and whichever
    step kernel runs it: single groups, group pairs with one lane per thread
    (batch_pressure_pair) or two (batch_pressure_pair_two_lanes), odd and even group counts."""
    from battus.backends.cuda import CUDABackend
    from battus.kernels import fit_cuda
    from battus.kernels.cuda_common import WARP

    problem = _problem(graph, "sir", 2)
    beta_i = np.linspace(0.01, 0.5, 11)
    beta_r = np.linspace(0.3, 0.02, 11)
    be = CUDABackend(fit_precision=precision, warp_min_degree=4, hub_min_degree=9, hub_chunk=4, item_arcs=4,
                     fit_pairs=False)
    prep = be.prepare(problem)
    assert prep.items["mean_arcs"] <= be.two_lane_max_arcs  # so that the default takes two lanes
    wide = be.loglik_batch(prep, problem.prior, beta_i, beta_r, lanes=WARP)
    for lanes in sorted({1, fit_cuda.NARROW, WARP // 2}):
        narrow = be.loglik_batch(prep, problem.prior, beta_i, beta_r, lanes=lanes)
        assert narrow.tobytes() == wide.tobytes(), lanes
    be.fit_pairs = True
    for two_lane_max_arcs in (0.0, 32.0):
        be.two_lane_max_arcs = two_lane_max_arcs
        for lanes in sorted({1, fit_cuda.NARROW, WARP // 2, WARP}):
            paired = be.loglik_batch(prep, problem.prior, beta_i, beta_r, lanes=lanes)
            assert paired.tobytes() == wide.tobytes(), ("pairs", two_lane_max_arcs, lanes)
    with pytest.raises(ValueError, match="lanes must divide"):
        be.loglik_batch(prep, problem.prior, beta_i, beta_r, lanes=3)


def test_float64_fit_precision(graph):
    from battus.backends.cuda import CUDABackend

    problem = _problem(graph, "si", 2)
    options = method_options("battus", fit_settings=SMALL_FIT)
    cpu = reconstruct(problem, options, CPUBackend())
    gpu = reconstruct(problem, options, CUDABackend(fit_precision="float64", item_arcs=4))
    assert (gpu.beta_i, gpu.beta_r) == (cpu.beta_i, cpu.beta_r)
    np.testing.assert_array_equal(gpu.states, cpu.states)


@pytest.mark.parametrize("n_snapshots, spread_by", [(1, "candidates"), (2, "frames")])
def test_fit_spread_over_two_devices_is_identical(graph, n_snapshots, spread_by, model="sir"):
    """Fitting rounds spread over a worker process (here on the same device): a round of several
    groups and the float64 re-score by candidates, the groups dealt; a round of one group and one
    re-scored candidate by frames where the pass halves at T/2 (two snapshots), else on one device.
    Every candidate's value, each round's best and the fitted rates equal one device's, bit for bit."""
    from battus.backends.cuda import CUDABackend, deal_candidates, segment_pieces
    from battus.fit import fit_rates
    from battus.kernels.cuda_common import WARP
    from battus.kernels.fit_cuda import POLISH

    knobs = dict(warp_min_degree=4, hub_min_degree=9, hub_chunk=4, item_arcs=4)
    problem = _problem(graph, model, n_snapshots)
    pieces = segment_pieces(problem.observations.index(problem.T), 2)
    assert len(pieces) == (2 if spread_by == "frames" else 1)
    settings = FitSettings(grid_points=9, refine_points=3, refine_rounds=1, chunk=16)  # 81 candidates: spread
    one = CUDABackend(**knobs)
    two = CUDABackend(devices=(0, 0), **knobs)
    try:
        warm_up(two, fit=True)
        assert len(two._workers) == 1 and "fit over CUDA devices 0, 0" in two.device
        prep_one, prep_two = one.prepare(problem), two.prepare(problem)
        assert prep_two.worker_key is not None
        count = 4 * WARP + 9  # 5 groups, spread 3 + 2 (the last one part-filled)
        beta_i = np.linspace(0.01, 0.5, count)
        beta_r = np.linspace(0.3, 0.02, count)
        for mode, n in (("float32", count), ("float64", count), ("float32", WARP), ("narrow64", POLISH),
                        ("narrow64", 1)):
            alone = one.evaluate(prep_one, problem.prior, beta_i[:n], beta_r[:n], mode, 8, {})
            spread = two._evaluate_spread(prep_two, problem.prior, beta_i[:n], beta_r[:n], mode, 8, {})
            assert spread.tobytes() == alone.tobytes(), (mode, n)
        if spread_by == "frames":  # a round pruned after T/2, both pieces cut by candidates over the devices
            norm = float(problem.n * n_snapshots)
            alone = one._evaluate_pruned(prep_one, problem.prior, beta_i, beta_r, 8, {}, pieces, norm)
            spread = two._evaluate_pruned(prep_two, problem.prior, beta_i, beta_r, 8, {}, pieces, norm)
            assert np.isfinite(alone).any() and spread.tobytes() == alone.tobytes()
        assert fit_rates(two, prep_two, problem, settings) == fit_rates(one, prep_one, problem, settings)
        del prep_two  # its copy on the worker is dropped with the next request
        assert two._freed_keys == [0]
        kept = two.prepare(problem)
        assert not two._freed_keys and kept.worker_key == 1
        alone = one.evaluate(prep_one, problem.prior, beta_i, beta_r, "float32", 8, {})
        assert two._evaluate_spread(kept, problem.prior, beta_i, beta_r, "float32", 8, {}).tobytes() == alone.tobytes()
    finally:
        two.close()
    grid = deal_candidates(576, 32, 2)  # a SIR grid: 18 groups, 9 each, alternating
    assert [pick.size for pick in grid] == [288, 288]
    assert grid[0][31:34].tolist() == [31, 64, 65] and grid[1][:2].tolist() == [32, 33]
    assert [pick.tolist() for pick in deal_candidates(5, 8, 2)] == [[0, 1, 2, 3, 4], []]
    assert [pick.tolist() for pick in deal_candidates(7, 4, 2)] == [[0, 1, 2, 3], [4, 5, 6]]  # a re-score
    assert [pick.size for pick in deal_candidates(100, 64, 3)] == [64, 36, 0]


@pytest.mark.parametrize("times", [[T // 2, T], list(range(1, T + 1))])
def test_folded_rescore_is_identical(graph, times):
    """Float64 passes of at most one narrow group folded (the pass's equal pieces side by side in the
    lanes): every candidate's value equals the unfolded pass's bit for bit, and so do the fitted rates."""
    from battus.backends.cuda import CUDABackend, fold_pieces
    from battus.fit import fit_rates

    truth = simulate(graph, "sir", T, 3, 0.35, 0.25, seed=11)
    problem = Problem(graph, "sir", T, 3, observe(truth, np.asarray(times)), truth).validate()
    knobs = dict(warp_min_degree=4, hub_min_degree=9, hub_chunk=4, item_arcs=4)
    folded, plain = CUDABackend(fold=True, **knobs), CUDABackend(fold=False, **knobs)
    assert fold_pieces(problem.observations.index(T), folded.narrow_lanes) == [(0, T // 2), (T // 2, T)]
    prep_f, prep_p = folded.prepare(problem), plain.prepare(problem)
    for count in range(1, folded.narrow_lanes + 1):
        beta_i = np.linspace(0.05, 0.6, count)
        beta_r = np.linspace(0.4, 0.1, count)
        got = folded.evaluate(prep_f, problem.prior, beta_i, beta_r, "narrow64", 8, {})
        want = plain.evaluate(prep_p, problem.prior, beta_i, beta_r, "narrow64", 8, {})
        assert got.tobytes() == want.tobytes(), count
    settings = FitSettings(grid_points=4, refine_points=3, refine_rounds=1)
    assert fit_rates(folded, prep_f, problem, settings) == fit_rates(plain, prep_p, problem, settings)


@pytest.mark.parametrize("model", ["si", "sir"])
def test_absorbed_vertices_skip_their_gathers_with_identical_values(graph, model):
    """A vertex reset to an observed I or R (f_S = 0) does not gather its neighbours' terms
    (``skip_absorbed``): every candidate's value, in every pass kind, equals the full pass's bit for
    bit, and so do the fitted rates."""
    from battus.backends.cuda import CUDABackend
    from battus.fit import fit_rates

    truth = simulate(graph, model, T, 3, 0.35, 0.25, seed=11)
    problem = Problem(graph, model, T, 3, observe(truth, np.asarray([T // 2, T])), truth).validate()
    middle = problem.observations.states[0]
    assert 0 < np.count_nonzero(middle) < problem.n  # some vertices absorbed at the reset, some not
    knobs = dict(warp_min_degree=4, hub_min_degree=9, hub_chunk=4, item_arcs=4)
    skipping, full = CUDABackend(**knobs), CUDABackend(skip_absorbed=False, **knobs)
    prep_s, prep_f = skipping.prepare(problem), full.prepare(problem)
    count = 2 * 8 + 3  # float32 passes: a group pair and a lone, part-filled group
    beta_i = np.linspace(0.02, 0.6, count)
    beta_r = np.linspace(0.4, 0.05, count) if model == "sir" else np.zeros(count)
    # narrow64 of 2: folded in `full`, unfolded with compact steps in `skipping` (fold defaults to that)
    for mode, n in (("float32", count), ("float64", count), ("narrow64", 2)):
        want = full.evaluate(prep_f, problem.prior, beta_i[:n], beta_r[:n], mode, count, {})
        assert np.all(np.isfinite(want))
        for two_lane_max_arcs in (0.0, 32.0):  # group pairs with one lane per thread, then two
            skipping.two_lane_max_arcs = two_lane_max_arcs
            got = skipping.evaluate(prep_s, problem.prior, beta_i[:n], beta_r[:n], mode, count, {})
            assert got.tobytes() == want.tobytes(), (mode, two_lane_max_arcs)
    settings = FitSettings(grid_points=5, refine_points=3, refine_rounds=1)
    assert fit_rates(skipping, prep_s, problem, settings) == fit_rates(full, prep_f, problem, settings)


@pytest.mark.parametrize("model", ["si", "sir"])
@pytest.mark.parametrize("schedule", ["half", "four", "all infected"])
def test_compact_steps_leave_every_value_unchanged(graph, model, schedule):
    """After a reset to a snapshot the steps launch only the work items of the vertices observed S
    there, and advance the ones observed I with L = 0 (``compact_steps``): every candidate's value,
    whole passes and pieces from a snapshot, and the fitted rates equal the steps over every vertex's
    items bit for bit, with split items, both pair kernels, a lone group, several snapshots, and a
    snapshot where nothing is left to gather."""
    from battus.backends.cuda import CUDABackend
    from battus.fit import fit_rates

    truth = simulate(graph, model, T, 3, 0.35, 0.25, seed=11)
    times = np.asarray([1, 2, 4, T] if schedule == "four" else [T // 2, T])
    problem = Problem(graph, model, T, 3, observe(truth, times), truth)
    if schedule == "all infected":  # every vertex I at T/2 (and I or R at T): compact steps gather nothing
        problem.observations.states[0][:] = 1
        problem.observations.states[1][:] = np.maximum(problem.observations.states[1], 1)
    knobs = dict(warp_min_degree=4, hub_min_degree=9, hub_chunk=4, item_arcs=4)
    compact, full = CUDABackend(**knobs), CUDABackend(compact_steps=False, **knobs)
    prep_c, prep_f = compact.prepare(problem), full.prepare(problem)
    assert prep_f.items["n_split"] > 0  # split items run too
    count = 2 * 8 + 3  # float32 passes: a group pair and a lone, part-filled group
    beta_i = np.linspace(0.02, 0.6, count)
    beta_r = np.linspace(0.4, 0.05, count) if model == "sir" else np.zeros(count)
    pieces = [None, (int(times[0]), int(times[-1]))]  # a whole pass, and a piece that starts from a snapshot
    for mode, frames in [("float32", f) for f in pieces] + [("float64", None)]:
        want = full.evaluate(prep_f, problem.prior, beta_i, beta_r, mode, count, {}, frames)
        assert np.all(np.isfinite(want))
        for two_lane_max_arcs in (0.0, 32.0):  # group pairs with one lane per thread, then two
            compact.two_lane_max_arcs = two_lane_max_arcs
            got = compact.evaluate(prep_c, problem.prior, beta_i, beta_r, mode, count, {}, frames)
            assert got.tobytes() == want.tobytes(), (mode, frames, two_lane_max_arcs)
    assert not prep_f.compact and set(prep_c.compact) == set(range(len(times) - 1))
    observed_s = int(np.count_nonzero(problem.observations.states[0] == 0))
    assert prep_c.compact[0]["n_items"] < prep_c.items["n_items"]
    assert (prep_c.compact[0]["n_items"] == 0) == (observed_s == 0)
    settings = FitSettings(grid_points=5, refine_points=3, refine_rounds=1)
    assert fit_rates(compact, prep_c, problem, settings) == fit_rates(full, prep_f, problem, settings)


@pytest.mark.parametrize("model", ["si", "sir"])
def test_pruned_round_keeps_every_candidate_that_can_reach_the_rescore(graph, model):
    """A float32 round cut at T/2 (``prune``): every candidate it evaluates whole has the full
    pass's value bit for bit, the others could not have been among the best POLISH, so the
    re-scored set, each round's best and the fitted rates are the same as without pruning."""
    from battus.backends.cuda import CUDABackend, segment_pieces
    from battus.fit import fit_rates
    from battus.kernels.fit_cuda import POLISH

    problem = _problem(graph, model, 2)
    knobs = dict(warp_min_degree=4, hub_min_degree=9, hub_chunk=4, item_arcs=4)
    pruning, full = CUDABackend(**knobs), CUDABackend(prune=False, **knobs)
    prep_p, prep_f = pruning.prepare(problem), full.prepare(problem)
    pieces = segment_pieces(prep_p.host_obs_index, 2)
    assert pieces == [(0, T // 2), (T // 2, T)]
    sir = model == "sir"
    beta_i, beta_r = candidate_grid(np.linspace(0.001, 0.999, 8), np.linspace(0.001, 0.999, 6) if sir else None)
    if not sir:
        beta_i, beta_r = np.linspace(0.001, 0.999, 40), np.zeros(40)
    norm = float(problem.n * 2)
    got = pruning._evaluate_pruned(prep_p, problem.prior, beta_i, beta_r, 8, {}, pieces, norm)
    want = full.evaluate(prep_f, problem.prior, beta_i, beta_r, "float32", 8, {}) / norm
    kept = np.isfinite(got)
    assert 0 < np.count_nonzero(~kept) and got[kept].tobytes() == want[kept].tobytes()
    best = np.argsort(-want, kind="stable")[:POLISH]
    assert kept[best].all() and np.array_equal(np.argsort(-got, kind="stable")[:POLISH], best)
    assert want[~kept].max() < np.sort(want)[-POLISH]
    assert pruning.best_candidate(prep_p, problem.prior, beta_i, beta_r, norm, 8, {}) == \
        full.best_candidate(prep_f, problem.prior, beta_i, beta_r, norm, 8, {})
    settings = FitSettings(grid_points=7, refine_points=3, refine_rounds=1, chunk=8)  # SIR: 49 in 7 passes
    assert fit_rates(pruning, prep_p, problem, settings) == fit_rates(full, prep_f, problem, settings)


def test_fold_pieces_need_equal_pieces_from_observed_frames():
    from battus.backends.cuda import fold_pieces
    from battus.kernels.cuda_common import WARP

    def index(times, horizon):
        obs = -np.ones(horizon + 1, dtype=np.int64)
        obs[list(times)] = np.arange(len(times))
        return obs

    narrow = WARP // 4  # 8 lanes on a GPU, 2 under the simulator
    assert fold_pieces(index([20, 40], 40), narrow) == [(0, 20), (20, 40)]  # the benchmark schedule
    assert fold_pieces(index([10, 20, 30, 40], 40), narrow) == [(0, 20), (20, 40)]
    assert fold_pieces(index([20, 40], 40), WARP) == []  # no room in a warp for two copies
    assert fold_pieces(index([40], 40), narrow) == []  # one snapshot: nothing to fold
    assert fold_pieces(index([0, 20, 40], 40), narrow) == []  # frame 0 observed: the first half is not from the prior
    assert fold_pieces(index([15, 20, 40], 40), narrow) == []  # halves that see different frames
    assert fold_pieces(index([10, 30], 30), narrow) == []  # the middle frame (15) unobserved
    assert fold_pieces(index([20, 41], 41), narrow) == []  # an odd number of steps


def test_segment_pieces_cut_the_pass_at_observed_frames():
    from battus.backends.cuda import segment_pieces

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
    from battus.backends.cuda_workers import WorkerError
    from battus.kernels.cuda_common import WARP

    two = CUDABackend(devices=(0, 0), item_arcs=4)
    try:
        warm_up(two, fit=True)
        prep = two.prepare(_problem(graph, "sir", 2))
        prep.worker_key = 12345  # a problem the worker never prepared
        many = np.full(4 * WARP + 1, 0.1)  # more than one group: the round is spread
        with pytest.raises(WorkerError, match="CUDA device 0: KeyError"):
            two._evaluate_spread(prep, np.array([0.9, 0.1, 0.0]), many, many, "float32", 64, {})
        two._workers[0]._proc.kill()
        two._workers[0]._proc.wait()
        with pytest.raises(WorkerError, match="has stopped"):
            two._evaluate_spread(prep, np.array([0.9, 0.1, 0.0]), many, many, "float32", 64, {})
    finally:
        two.close()


def test_every_worker_prepares_at_once(graph):
    """With three devices both workers are sent the problem at once (a thread each) and hold it: a
    round spread over the three (by frames, a round of one group: snapshots at 1, 2, 4, 6 cut the
    pass into three pieces of two steps; and by candidates, three groups) equals one device's, bit
    for bit. A worker that has stopped fails the prepare in one line, and the other worker's answer
    is still read, so its pipe stays in step."""
    from battus.backends.cuda import CUDABackend
    from battus.backends.cuda_workers import WorkerError
    from battus.kernels.cuda_common import WARP

    knobs = dict(warp_min_degree=4, hub_min_degree=9, hub_chunk=4, item_arcs=4)
    problem = _problem(graph, "sir", 4)
    one = CUDABackend(**knobs)
    three = CUDABackend(devices=(0, 0, 0), **knobs)
    try:
        warm_up(three, fit=True)
        assert len(three._workers) == 2
        prep = three.prepare(problem)
        assert prep.worker_key == 0
        count = 2 * WARP + 5
        beta_i = np.linspace(0.01, 0.5, count)
        beta_r = np.linspace(0.3, 0.02, count)
        prep_one = one.prepare(problem)
        alone = one.evaluate(prep_one, problem.prior, beta_i, beta_r, "float32", 8, {})
        by_frames = three._evaluate_spread(prep, problem.prior, beta_i[:WARP], beta_r[:WARP], "float32", 8, {})
        assert by_frames.tobytes() == alone[:WARP].tobytes()
        assert three._evaluate_spread(prep, problem.prior, beta_i, beta_r, "float32", 8, {}).tobytes() \
            == alone.tobytes()  # 8 + 8 + 5 dealt over the three devices
        # a pruned round's piece, by candidates
        by_candidates = three._evaluate_candidates_spread(prep, problem.prior, beta_i, beta_r, "float32", 8, {},
                                                        (0, T))
        assert by_candidates.tobytes() == alone.tobytes()
        three._workers[1]._proc.kill()
        three._workers[1]._proc.wait()
        with pytest.raises(WorkerError, match="the worker on CUDA device 0 has stopped") as err:
            three.prepare(problem)
        assert "\n" not in str(err.value)
        assert three._freed_keys == [1]  # the worker that prepared it drops it with the next request
        three._workers[0].request({"op": "warm_up"})
        assert three._workers[0].reply() == {"arrays": {}}  # the answer to this request, not the prepare's
    finally:
        three.close()


def test_prepare_sends_to_every_worker_concurrently(graph):
    """Stand-in workers whose transfers each wait until all are in flight: sent one after another, the
    first would wait for ever (here 30 s). On failures the first in device order is raised, and every
    worker whose transfer went through is answered for."""
    import threading

    from battus.backends.cuda import CUDABackend
    from battus.backends.cuda_workers import WorkerError

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
    be = CUDABackend(item_arcs=4)
    be._workers, be._spread = [Worker(1), Worker(2), Worker(3)], True
    prep = be.prepare(problem)
    assert prep.worker_key == 0 and [w.answered for w in be._workers] == [1, 1, 1]
    be._workers = [Worker(1), Worker(2, "reply"), Worker(3, "transfer")]
    with pytest.raises(WorkerError, match="^CUDA device 2: KeyError: 7$"):
        be.prepare(problem)
    assert [w.answered for w in be._workers] == [1, 1, 0]
    assert be._freed_keys == [1]  # dropped by the workers that did prepare it, with the next request


def test_device_memory_accounting(graph, backend):
    problem = _problem(graph, "sir", 2)
    backend.reset_peak()
    reconstruct(problem, method_options("battus-z"), backend)
    n, m = graph.n, graph.m
    assert backend.peak_bytes >= 4 * m + 16 * (T + 1) * n


@pytest.mark.parametrize("item_arcs", [1, 4, 64])
def test_work_items_take_no_more_than_their_estimate(graph, item_arcs):
    """The bytes _build_items uploads, for every vertex and for a compact step's vertices, stay
    within work_items_bytes (the estimate prepare and _compact_layout check before uploading)."""
    from battus.backends.cuda import CUDABackend

    be = CUDABackend(item_arcs=item_arcs)
    indptr = graph.indptr.astype(np.int64)
    gather_id = np.random.default_rng(5).permutation(graph.n).astype(np.int32)
    everyone = np.arange(graph.n, dtype=np.int64)
    for vertices in (everyone, everyone[::3], everyone[graph.in_degree() > 5], everyone[:0]):
        items = None  # the last case's arrays are released before this one is counted
        before = be.live_bytes
        items = be._build_items(indptr, gather_id, vertices)  # held, so its arrays stay counted
        assert items["n_items"] >= vertices.shape[0]
        arcs = int((indptr[vertices + 1] - indptr[vertices]).sum())
        assert 0 < be.live_bytes - before <= be.work_items_bytes(vertices.shape[0], arcs)


def test_graph_too_large_for_the_device_refused_up_front(graph, monkeypatch):
    """Device memory is checked before the upload: one line with the estimate, nothing allocated."""
    from battus.backends.cuda import CUDABackend
    from battus.errors import InputError

    problem = _problem(graph, "sir", 2)
    be = CUDABackend(item_arcs=4)
    needed = be.inference_bytes(problem.n, graph.m, problem.T, 2)
    assert needed >= 4 * graph.m + 16 * (problem.T + 1) * problem.n
    monkeypatch.setattr(be, "free_device_bytes", lambda: needed - 1)
    with pytest.raises(InputError, match="needs about .* on the GPU, more than the") as err:
        be.prepare(problem)
    assert "\n" not in str(err.value)
    assert be.peak_bytes == 0
    monkeypatch.setattr(be, "free_device_bytes", lambda: needed)
    prep = be.prepare(problem)  # fits exactly; the fit's state is checked when allocated
    monkeypatch.setattr(be, "free_device_bytes", lambda: 0)
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
        be = CUDABackend(item_arcs=4)
        be.free_device_bytes = lambda: 1024
        return be

    monkeypatch.setattr(battus.backends, "get_backend", tiny_gpu)
    said = []
    recon = reconstruct(problem, method_options("battus-z"), backend="auto", progress=said.append)
    assert recon.backend == "cpu" and any("on the CPU instead" in m for m in said)
    expected = reconstruct(problem, method_options("battus-z"), backend=CPUBackend())
    assert np.array_equal(recon.states, expected.states)
    with pytest.raises(InputError, match="device memory"):
        reconstruct(problem, method_options("battus-z"), backend="cuda")


def test_numpy_row_stack_workaround():
    """Simulate NumPy >= 2.5 in a fresh interpreter: the guard must let numba-cuda import."""
    import subprocess

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
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_ENABLE_CUDASIM"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "True"


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
