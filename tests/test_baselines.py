"""Controls and baselines (battus.baselines): consistent with the observations, and where they must score."""

import dataclasses
import json

import numpy as np
import pytest
from conftest import load_canonical
from hypothesis import given, settings
from hypothesis import strategies as st
from naive import naive_upstream_distance

from battus.baselines import BASELINES, baseline, upstream_distance
from battus.cli import main
from battus.generators import generate
from battus.graph import from_arcs
from battus.io import read_prediction, write_history
from battus.pipeline import method_options, reconstruct
from battus.problem import Problem, observe, schedule_times
from battus.score import history_defects, score_all
from battus.simulate import simulate


def make_problem(graph, model, T=10, n0=20, schedule="benchmark", seed=1, rates=(0.1, 0.1)):
    truth = simulate(graph, model, T, n0, *rates, seed=seed)
    return Problem(graph=graph, model=model, T=T, n0=n0, observations=observe(truth, schedule_times(T, schedule)),
                   truth=truth, name=f"{graph.name}-{model}")


@pytest.fixture(scope="module")
def ba():
    return generate("ba", seed=1, n=1000, m=4)


@pytest.mark.parametrize("schedule", ["benchmark", "final", "every:3"])
@pytest.mark.parametrize("model", ["si", "sir"])
def test_positive_control_scores_exactly_one_and_zero(ba, model, schedule):
    problem = make_problem(ba, model, schedule=schedule)
    scores = score_all(problem, baseline(problem, "truth").states)
    for scorer in ("hermes", "unobserved"):
        assert scores[scorer] == {"f1": 1.0, "nrmse": 0.0, "nrmse_ditto": 0.0}, (scorer, scores[scorer])
    assert scores["causal"]["prediction"]["violations"] == 0


@pytest.mark.parametrize("schedule", ["benchmark", "final"])
@pytest.mark.parametrize("model", ["si", "sir"])
def test_negative_control_scores_far_below_battus_z(ba, model, schedule):
    """Battus-Z beats the random control by at least .04 F1 and a quarter of its NRMSE, observed frames
    dropped (measured on this graph: .06-.14 F1 and 35-50% NRMSE)."""
    problem = make_problem(ba, model, n0=50, schedule=schedule)
    control = score_all(problem, baseline(problem, "random", seed=3).states)["unobserved"]
    method = score_all(problem, reconstruct(problem, method_options("battus-z")).states)["unobserved"]
    assert method["f1"] >= control["f1"] + 0.04, (method, control)
    assert method["nrmse"] <= 0.75 * control["nrmse"], (method, control)


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 2**31), model=st.sampled_from(["si", "sir"]), T=st.integers(2, 12),
       schedule=st.sampled_from(["benchmark", "final", "every:2", "all"]), method=st.sampled_from(BASELINES))
def test_every_baseline_is_a_valid_history_that_agrees_with_the_observations(seed, model, T, schedule, method):
    graph = generate("er", seed=seed % 1000, n=60, edges=150)
    problem = make_problem(graph, model, T=T, n0=5, schedule=schedule, seed=seed, rates=(0.3, 0.2))
    recon = baseline(problem, method, seed=seed)
    states = recon.states
    assert states.shape == (T + 1, graph.n) and states.dtype == np.uint8
    obs = problem.observations
    defects = history_defects(states, obs.times, obs.states)
    # the truth comes from an SIR step (no same-step recovery), so no S -> R is ever forced
    assert defects == {"backwards": 0, "skipped_infection": 0, "forced_skips": 0, "disagreeing": 0,
                       "valid": True}, defects
    if model == "si":
        assert states.max() <= 1
    assert np.array_equal(states[obs.times], obs.states), "disagrees with an observed frame"


def test_history_defects_counts_each_kind_of_defect():
    # columns: valid S-I-R; S -> R skipping I; backwards (I -> S); disagrees with frame 2; forced skip
    states = np.array([[0, 0, 1, 0, 0],
                       [1, 0, 0, 0, 0],
                       [2, 2, 0, 1, 2]], dtype=np.uint8)
    seen = np.array([[0, 0, 1, 0, 0], [2, 2, 0, 0, 2]], dtype=np.uint8)
    defects = history_defects(states, np.array([0, 2]), seen)
    assert defects == {"backwards": 1, "skipped_infection": 2, "forced_skips": 0, "disagreeing": 1,
                       "valid": False}
    # observed S at 1 and R at 2: no frame is left for I, the skip is forced and not a defect
    forced = history_defects(states[:, [0, 4]], np.array([1, 2]), np.array([[1, 0], [2, 2]], dtype=np.uint8))
    assert forced == {"backwards": 0, "skipped_infection": 1, "forced_skips": 1, "disagreeing": 0, "valid": True}
    assert history_defects(states[:, [0]])["valid"]


@pytest.mark.parametrize("method", ["observed-copy", "graph-distance", "random"])
def test_a_vertex_seen_s_then_r_is_infected_in_between(method):
    """Observed S at 2 and R at 6, never I: the vertex is I for at least one frame in between
    (observed-copy: at 3, right after its last S observation, and R from 4)."""
    graph = from_arcs(np.array([0, 1]), np.array([1, 2]), n=3, directed=True)
    truth = np.array([[1, 0, 0], [1, 0, 0], [1, 0, 0], [1, 1, 0], [2, 1, 0], [2, 2, 1], [2, 2, 2]], dtype=np.uint8)
    problem = Problem(graph=graph, model="sir", T=6, n0=1, observations=observe(truth, np.array([2, 6])),
                      truth=truth, name="path")
    states = baseline(problem, method, seed=5).states
    assert history_defects(states, problem.observations.times, problem.observations.states)["valid"]
    for v in (1, 2):
        assert 1 in states[3:6, v], (method, states[:, v])
    if method == "observed-copy":
        assert states[:, 1].tolist() == [0, 0, 0, 1, 2, 2, 2]


def test_an_s_to_r_step_the_observations_force_is_kept():
    """With same-step recovery the truth may go S -> R between two consecutive observed frames; no
    history agrees with them and passes through I, so the baselines keep the observed jump."""
    graph = from_arcs(np.array([0]), np.array([1]), n=2, directed=True)
    truth = np.array([[1, 0], [1, 0], [2, 2]], dtype=np.uint8)
    problem = Problem(graph=graph, model="sir", T=2, n0=1, observations=observe(truth, np.array([1, 2])),
                      truth=truth, name="jump")
    for method in ("observed-copy", "graph-distance", "random"):
        states = baseline(problem, method, seed=1).states
        defects = history_defects(states, problem.observations.times, problem.observations.states)
        assert defects["valid"] and defects["forced_skips"] == 1, (method, defects)


@pytest.mark.parametrize("name", ["ba-sir", "er-sir", "oregon2-sir", "prost-sir", "covid-sir", "heb-sir"])
def test_baselines_write_valid_histories_on_the_canonical_sir_data(name):
    """Every baseline on every canonical SIR history (through the mirror), under the benchmark's
    schedule {floor(T/2), T} and DITTO's final frame alone: valid, and no vertex skips I."""
    problem = load_canonical(name).to_problem()
    final = dataclasses.replace(problem, observations=observe(problem.truth, schedule_times(problem.T, "final")))
    for p in (problem, final):
        obs = p.observations
        for method in BASELINES:
            defects = history_defects(baseline(p, method, seed=0).states, obs.times, obs.states)
            assert defects["valid"] and defects["skipped_infection"] == 0, (name, list(obs.times), method, defects)


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 2**31), n=st.integers(1, 25), arcs=st.integers(0, 60), limit=st.integers(0, 6),
       directed=st.booleans())
def test_upstream_distance_matches_breadth_first_search_per_vertex(seed, n, arcs, limit, directed):
    rng = np.random.default_rng(seed)
    graph = from_arcs(rng.integers(0, n, arcs), rng.integers(0, n, arcs), n=n, directed=directed)
    targets = rng.random(graph.n) < 0.2
    assert np.array_equal(upstream_distance(graph, targets, limit), naive_upstream_distance(graph, targets, limit))


def test_random_control_is_deterministic_for_a_seed(ba):
    problem = make_problem(ba, "sir")
    a, b = baseline(problem, "random", seed=7), baseline(problem, "random", seed=7)
    assert np.array_equal(a.states, b.states)
    assert not np.array_equal(a.states, baseline(problem, "random", seed=8).states)


def test_cli_baseline_round_trip(tmp_path, ba):
    problem = make_problem(ba, "sir")
    history = tmp_path / "h.h5"
    write_history(history, problem)
    for method in BASELINES:
        pred, score = tmp_path / f"{method}.h5", tmp_path / f"{method}.json"
        assert main(["baseline", str(history), "--out", str(pred), "--method", method, "--quiet"]) == 0
        record = read_prediction(pred)
        assert record["method"] == method and record["params"]["method"] == method
        assert main(["score", str(history), str(pred), "--out", str(score), "--quiet"]) == 0
        result = json.loads(score.read_text())  # strict JSON: no NaN for the rates a baseline lacks
        assert result["beta_i"] is None and result["method"] == method


def test_positive_control_needs_the_truth(tmp_path, ba, capsys):
    problem = make_problem(ba, "si")
    problem.truth = None
    history = tmp_path / "h.h5"
    write_history(history, problem)
    assert main(["baseline", str(history), "--out", str(tmp_path / "p.h5"), "--method", "truth"]) == 2
    assert "truth" in capsys.readouterr().err and not (tmp_path / "p.h5").exists()
    assert main(["baseline", str(history), "--out", str(tmp_path / "p.h5"), "--method", "graph-distance",
                 "--quiet"]) == 0


def test_the_dittos_protocol_reaches_baselines_and_plugins(tmp_path, ba):
    """--schedule final re-observes the truth at {T} alone for baselines and plug-ins, as for reconstruct."""
    import sys
    from pathlib import Path

    problem = make_problem(ba, "sir")
    history = tmp_path / "h.h5"
    write_history(history, problem)
    example = Path(__file__).resolve().parents[1] / "examples/methods/forward_fill.py"
    made = {
        "baseline": ["baseline", str(history), "--method", "observed-copy"],
        "plugin": ["run-method", str(history), "--name", "ff",
                   "--command", f"{sys.executable} {example} {{history}} {{out}}"],
        "battus-z": ["reconstruct", str(history), "--method", "battus-z", "--backend", "cpu"],
    }
    for name, argv in made.items():
        out = tmp_path / f"{name}.h5"
        assert main([*argv, "--out", str(out), "--schedule", "final", "--quiet"]) == 0
        record = read_prediction(out)
        assert record["provenance"]["observed_times"] == [problem.T], name
        score = tmp_path / f"{name}.json"
        assert main(["score", str(history), str(out), "--out", str(score), "--quiet"]) == 0
        assert json.loads(score.read_text())["observed_times"] == [problem.T]
    # forward fill sees nothing before T: S everywhere before the final frame
    assert not read_prediction(tmp_path / "plugin.h5")["states"][: problem.T].any()
