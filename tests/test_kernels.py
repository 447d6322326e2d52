"""Numba CPU kernels against the naive references (tests/naive.py).

Random graphs of several shapes, directed and undirected, SI and SIR,
schedules of 1, 2 and 4 snapshots: posteriors within 1e-9 and identical
decoded histories.
"""

from __future__ import annotations

import naive as ref
import numpy as np
import pytest

from battus.backends import CPUBackend
from battus.graph import from_arcs
from battus.problem import Problem, observe, settled_frame
from battus.simulate import simulate


def random_graph(kind: str, n: int, rng: np.random.Generator):
    if kind == "sparse-directed":
        m = 3 * n
        return from_arcs(rng.integers(0, n, m), rng.integers(0, n, m), directed=True, n=n)
    if kind == "dense-undirected":
        m = 10 * n
        return from_arcs(rng.integers(0, n, m), rng.integers(0, n, m), directed=False, n=n)
    if kind == "star":  # one hub feeding everyone, plus isolated vertices
        leaves = np.arange(1, n - 3)
        return from_arcs(np.zeros_like(leaves), leaves, directed=True, n=n)
    if kind == "heavy-tail":
        weights = rng.pareto(1.5, n) + 1
        p = weights / weights.sum()
        m = 5 * n
        return from_arcs(rng.choice(n, m, p=p), rng.integers(0, n, m), directed=True, n=n)
    raise ValueError(kind)


SCHEDULES = {1: lambda T: [T], 2: lambda T: [T // 2, T], 4: lambda T: [2, T // 2, T - 2, T]}
CASES = [
    (kind, model, k)
    for kind in ("sparse-directed", "dense-undirected", "star", "heavy-tail")
    for model in ("si", "sir")
    for k in (1, 2, 4)
]


def make_problem(kind, model, k, seed=7, n=160, T=12):
    rng = np.random.default_rng(seed)
    graph = random_graph(kind, n, rng)
    truth = simulate(graph, model, T, n0=8, beta_i=0.25, beta_r=0.15, seed=seed)
    times = np.array(SCHEDULES[k](T))
    return Problem(graph=graph, model=model, T=T, n0=8, observations=observe(truth, times), truth=truth)


@pytest.mark.parametrize("kind,model,k", CASES)
@pytest.mark.parametrize("reset", [False, True])
def test_pipeline_matches_reference(kind, model, k, reset):
    problem = make_problem(kind, model, k)
    beta_i, beta_r = 0.12, (0.08 if model == "sir" else 0.0)
    backend = CPUBackend()
    prep = backend.prepare(problem)
    rho = backend.pressures(prep, problem.prior, beta_i, beta_r, reset)
    rho_ref = ref.naive_mean_field_pressures(problem, beta_i, beta_r, reset)
    np.testing.assert_allclose(rho, rho_ref, rtol=0, atol=1e-12)
    for backward in (True, False):
        gamma = backend.posteriors(prep, rho, problem.prior, beta_r, backward)
        gamma_ref = ref.naive_forward_backward(problem, rho_ref, beta_r, backward)
        assert np.max(np.abs(gamma - gamma_ref)) <= 1e-9
        for decoder in ("threshold", "map"):
            for projection in (True, False):
                t_inf, t_rec = backend.hitting_times(prep, gamma, decoder, 0.65, model == "sir", projection)
                want = ref.naive_reconstruct(problem, beta_i, beta_r, reset=reset, backward=backward,
                                             decoder=decoder, projection=projection)
                np.testing.assert_array_equal(t_inf, want[1])
                np.testing.assert_array_equal(t_rec, want[2])


@pytest.mark.parametrize("kind,model,k", [c for c in CASES if c[2] != 1])
def test_batched_likelihood_matches_reference(kind, model, k):
    problem = make_problem(kind, model, k, n=80, T=8)
    rng = np.random.default_rng(3)
    beta_i = rng.uniform(1e-4, 0.5, 9)
    beta_r = rng.uniform(1e-4, 0.5, 9) if model == "sir" else np.zeros(9)
    backend = CPUBackend()
    got = backend.loglik_batch(backend.prepare(problem), problem.prior, beta_i, beta_r)
    want = ref.naive_segmented_loglik(problem, beta_i, beta_r)
    np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("kind,model,k", [c for c in CASES if c[2] != 1])
def test_absorbed_vertices_skip_their_arcs_with_identical_values(kind, model, k):
    """A vertex with f_S = 0 for every candidate of a batch (reset to an observed I or R, or
    underflowed under a rate of 1) skips its arcs in the CPU fitting step. Every value equals the
    naive reference's, which gathers every arc, and each candidate's value is the same bit for bit
    alone as in the batch: alone, the rate-1 candidate's vertices skip their arcs wherever its f_S
    underflowed; in the batch they gather them, since the other candidates' f_S is not 0 there."""
    problem = make_problem(kind, model, k, n=80, T=8)
    assert np.count_nonzero(problem.observations.states[0])  # some vertices absorbed at the first reset
    rng = np.random.default_rng(5)
    beta_i = np.concatenate([rng.uniform(1e-4, 0.9, 9), [1.0]])  # a rate of 1: f_S underflows to 0 too
    beta_r = rng.uniform(1e-4, 0.5, 10) if model == "sir" else np.zeros(10)
    backend = CPUBackend()
    prep = backend.prepare(problem)
    got = backend.loglik_batch(prep, problem.prior, beta_i, beta_r)
    # the naive reference's log-pressures of a rate of 1 meet log1p(-1): compared on the other rates
    want = ref.naive_segmented_loglik(problem, beta_i[:-1], beta_r[:-1])
    np.testing.assert_allclose(got[:-1], want, rtol=1e-10, atol=1e-12)
    assert np.isfinite(got[-1])
    alone = np.concatenate([backend.loglik_batch(prep, problem.prior, beta_i[c:c + 1], beta_r[c:c + 1])
                            for c in range(beta_i.shape[0])])
    assert got.tobytes() == alone.tobytes()


def test_projected_history_agrees_with_every_observation():
    for kind, model, k in CASES:
        problem = make_problem(kind, model, k)
        backend = CPUBackend()
        prep = backend.prepare(problem)
        rho = backend.pressures(prep, problem.prior, 0.3, 0.3, False)
        gamma = backend.posteriors(prep, rho, problem.prior, 0.3 if model == "sir" else 0.0, False)
        t_inf, t_rec = backend.hitting_times(prep, gamma, "threshold", 0.95, model == "sir", True)
        from battus.decode import states_from_hitting_times

        states = states_from_hitting_times(t_inf, t_rec, problem.T)
        np.testing.assert_array_equal(states[problem.observations.times], problem.observations.states)
        assert np.all(np.diff(states.astype(int), axis=0) >= 0)


def _settling_problem(model):
    """An epidemic that reaches every vertex before the middle snapshot (frames 6 and 12 observed)."""
    rng = np.random.default_rng(11)
    graph = random_graph("dense-undirected", 120, rng)
    truth = simulate(graph, model, 12, n0=20, beta_i=0.9, beta_r=0.05, seed=11)
    problem = Problem(graph=graph, model=model, T=12, n0=20, observations=observe(truth, np.array([6, 12])),
                      truth=truth)
    assert np.all(truth[6] != 0)
    return problem


PINNED_CASES = [(kind, model, k, False) for kind, model, k in CASES if k != 1] + [
    ("settling", model, 2, True) for model in ("si", "sir")]


@pytest.mark.parametrize("kind,model,k,settles", PINNED_CASES)
@pytest.mark.parametrize("reset", [True, False])
def test_pinned_pressures_change_no_posterior(kind, model, k, settles, reset):
    """Pressures nothing reads are neutral (1) and not gathered: with reset, a vertex the last
    reset put in I or R, until the next observed frame; reset or not, every vertex after the
    settled frame. Its posteriors there have no S mass, so every posterior stays the same up to
    the backward normaliser's rounding, and every decoded history is the same."""
    problem = _settling_problem(model) if settles else make_problem(kind, model, k)
    beta_i, beta_r = 0.12, (0.08 if model == "sir" else 0.0)
    pinned = ref.naive_mean_field_pressures(problem, beta_i, beta_r, reset)
    gathered = ref.naive_mean_field_pressures(problem, beta_i, beta_r, reset, pin=False)
    obs = problem.observations
    settled = settled_frame(obs.times, obs.states, problem.T)
    assert settled < problem.T or not settles
    mask = np.zeros_like(pinned, dtype=bool)  # the (t, u) nothing reads
    if reset:  # u in I or R at the last observed frame before t
        for t, states in zip(obs.times, obs.states, strict=True):
            mask[t + 1:, states != 0] = True
            mask[t + 1:, states == 0] = False
    mask[settled + 1:] = True
    assert mask.any() or not (reset or settles)
    np.testing.assert_array_equal(pinned[mask], 1.0)
    np.testing.assert_array_equal(pinned[~mask], gathered[~mask])
    if kind not in ("star", "settling") and reset:  # a star's leaves are often pressure-free anyway
        assert np.any(gathered[mask] != 1.0)
    backend = CPUBackend()
    prep = backend.prepare(problem)
    rho = backend.pressures(prep, problem.prior, beta_i, beta_r, reset)
    np.testing.assert_allclose(rho, pinned, rtol=0, atol=1e-12)
    for backward in (True, False):
        want = ref.naive_forward_backward(problem, gathered, beta_r, backward)
        gamma = backend.posteriors(prep, rho, problem.prior, beta_r, backward)
        assert np.max(np.abs(gamma - want)) <= 1e-12
        for decoder in ("threshold", "map"):
            got = backend.hitting_times(prep, gamma, decoder, 0.65, model == "sir", False)
            full = backend.hitting_times(prep, backend.posteriors(prep, gathered, problem.prior, beta_r, backward),
                                         decoder, 0.65, model == "sir", False)
            for a, b in zip(got, full, strict=True):
                np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("kind,model,k", [c for c in CASES if c[0] != "dense-undirected"])
@pytest.mark.parametrize("n", [63, 64, 200])  # one partial block, one whole block, several and a partial one
def test_decoding_block_by_block_equals_decoding_the_posteriors(kind, model, k, n):
    """posterior_hitting_times (posteriors decoded a block of vertices at a time, never held whole)
    gives the hitting times of hitting_times(posteriors(...)) for every decoder and option."""
    problem = make_problem(kind, model, k, n=n)
    beta_i, beta_r = 0.12, (0.08 if model == "sir" else 0.0)
    backend = CPUBackend()
    prep = backend.prepare(problem)
    with_recovery = model == "sir"
    for reset in (False, True):
        rho = backend.pressures(prep, problem.prior, beta_i, beta_r, reset)
        for backward in (True, False):
            gamma = backend.posteriors(prep, rho, problem.prior, beta_r, backward)
            for decoder in ("threshold", "map"):
                for projection in (True, False):
                    want = backend.hitting_times(prep, gamma, decoder, 0.65, with_recovery, projection)
                    got = backend.posterior_hitting_times(prep, rho, problem.prior, beta_r, backward, decoder, 0.65,
                                                          with_recovery, projection)
                    np.testing.assert_array_equal(got[0], want[0])
                    np.testing.assert_array_equal(got[1], want[1])
