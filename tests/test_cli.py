"""The command line end to end, and every class of bad input.

Bad input ends with one line on stderr naming the file and the field, exit
status 2, and no output file.
"""

from __future__ import annotations

import io
import json
import os
import pickle
import subprocess
import sys
import zipfile
from pathlib import Path

import h5py
import numpy as np
import pytest
from conftest import DITTO

from battus.cli import main
from battus.graph import from_arcs
from battus.io import read_history, read_prediction, write_history
from battus.problem import Problem, observe
from battus.simulate import simulate


@pytest.fixture()
def history(tmp_path) -> Path:
    rng = np.random.default_rng(1)
    graph = from_arcs(rng.integers(0, 60, 240), rng.integers(0, 60, 240), directed=False, n=60)
    truth = simulate(graph, "sir", 8, 4, 0.3, 0.2, seed=5)
    problem = Problem(graph=graph, model="sir", T=8, n0=4, observations=observe(truth, np.array([4, 8])),
                      truth=truth, name="toy")
    path = tmp_path / "toy.h5"
    write_history(path, problem)
    return path


def fails_cleanly(capsys, argv, out: Path, field: str) -> str:
    code = main(argv)
    err = capsys.readouterr().err.strip()
    assert code == 2, err
    assert len(err.splitlines()) == 1, err
    assert field in err, err
    assert not out.exists()
    assert not list(out.parent.glob(f".{out.name}.*")), "temporary file left behind"
    return err


def test_round_trip(tmp_path, history, capsys):
    pred = tmp_path / "pred.h5"
    assert main(["reconstruct", str(history), "--out", str(pred), "--method", "battus-z",
                 "--backend", "cpu", "--posteriors", "--quiet"]) == 0
    data = read_prediction(pred)
    assert data["states"].shape == (9, 60)
    assert data["posteriors"].shape == (3, 9, 60)
    prov = data["provenance"]
    for key in ("method", "params", "backend", "device", "package_version", "input_sha256", "algorithm_seconds"):
        assert key in prov, key
    assert data["params"]["tau"] == 0.65
    score = tmp_path / "score.json"
    capsys.readouterr()
    assert main(["score", str(history), str(pred), "--out", str(score)]) == 0
    import json

    result = json.loads(score.read_text())
    assert 0 < result["hermes"]["f1"] <= 1 and result["unobserved"]["nrmse"] >= 0
    assert result["causal"]["truth"]["violations"] == 0  # simulated histories are feasible
    # with --out: one summary line on stderr, not the whole JSON
    out, err = capsys.readouterr()
    assert out == "" and len(err.strip().splitlines()) == 1, (out, err)
    assert f"F1 {result['hermes']['f1']:.4f}" in err and str(score) in err
    # without --out the JSON itself is the output
    assert main(["score", str(history), str(pred)]) == 0
    assert json.loads(capsys.readouterr().out)["hermes"] == result["hermes"]


def test_reconstruction_never_reads_the_truth(tmp_path, history):
    problem = read_history(history)
    stripped = Problem(problem.graph, problem.model, problem.T, problem.n0, problem.observations, None, "x")
    no_truth = tmp_path / "obs-only.h5"
    write_history(no_truth, stripped)
    a, b = tmp_path / "a.h5", tmp_path / "b.h5"
    assert main(["reconstruct", str(history), "--out", str(a), "--method", "battus", "--quiet",
                 "--backend", "cpu", "--grid-points", "5", "--refine-rounds", "1"]) == 0
    assert main(["reconstruct", str(no_truth), "--out", str(b), "--method", "battus", "--quiet",
                 "--backend", "cpu", "--grid-points", "5", "--refine-rounds", "1"]) == 0
    np.testing.assert_array_equal(read_prediction(a)["states"], read_prediction(b)["states"])


def test_import_and_simulate(tmp_path, capsys):
    hist = tmp_path / "covid.h5"
    assert main(["import-hermes", str(DITTO / "covid/covid-sir.pt"), "--out", str(hist), "--quiet"]) == 0
    problem = read_history(hist)
    assert (problem.n, problem.T, problem.n0, problem.model) == (344, 10, 50, "sir")
    assert problem.observations.times.tolist() == [5, 10]
    sim = tmp_path / "sim.h5"
    assert main(["simulate", str(hist), "--out", str(sim), "--model", "si", "--T", "6", "--n0", "3",
                 "--quiet"]) == 0
    again = tmp_path / "sim2.h5"
    assert main(["simulate", str(hist), "--out", str(again), "--model", "si", "--T", "6", "--n0", "3",
                 "--quiet"]) == 0
    np.testing.assert_array_equal(read_history(sim).truth, read_history(again).truth)
    assert main(["info", str(sim)]) == 0
    assert "battus-history" in capsys.readouterr().out


def _mutate(src: Path, dst: Path, edit) -> Path:
    dst.write_bytes(src.read_bytes())
    with h5py.File(dst, "r+") as fh:
        edit(fh)
    return dst


def test_missing_dataset(tmp_path, history, capsys):
    bad = _mutate(history, tmp_path / "bad.h5", lambda fh: fh.__delitem__("observations/times"))
    fails_cleanly(capsys, ["reconstruct", str(bad), "--out", str(tmp_path / "p.h5"), "--method",
                           "battus-z"], tmp_path / "p.h5", "observations/times")


def test_missing_input_file(tmp_path, capsys):
    fails_cleanly(capsys, ["reconstruct", str(tmp_path / "nope.h5"), "--out", str(tmp_path / "p.h5"),
                           "--method", "battus-z"], tmp_path / "p.h5", "nope.h5")


def test_wrong_shape(tmp_path, history, capsys):
    def edit(fh):
        del fh["observations/states"]
        fh["observations/states"] = np.zeros((2, 59), dtype=np.uint8)

    bad = _mutate(history, tmp_path / "bad.h5", edit)
    fails_cleanly(capsys, ["reconstruct", str(bad), "--out", str(tmp_path / "p.h5"), "--method",
                           "battus-z"], tmp_path / "p.h5", "observations/states")


def test_non_monotone_truth(tmp_path, history, capsys):
    def edit(fh):
        truth = fh["truth"][()]
        col = int(np.nonzero(truth[-1] == 2)[0][0])
        truth[-1, col] = 0
        truth[8 // 2, col] = truth[4, col]
        del fh["truth"]
        fh["truth"] = truth

    bad = _mutate(history, tmp_path / "bad.h5", edit)
    fails_cleanly(capsys, ["score", str(bad), str(history), "--out", str(tmp_path / "s.json")],
                  tmp_path / "s.json", "truth")


def test_observed_frame_out_of_range(tmp_path, history, capsys):
    def edit(fh):
        del fh["observations/times"]
        fh["observations/times"] = np.array([4, 9])

    bad = _mutate(history, tmp_path / "bad.h5", edit)
    fails_cleanly(capsys, ["reconstruct", str(bad), "--out", str(tmp_path / "p.h5"), "--method",
                           "battus-z"], tmp_path / "p.h5", "observations/times")


def test_schedule_out_of_range(tmp_path, history, capsys):
    fails_cleanly(capsys, ["reconstruct", str(history), "--out", str(tmp_path / "p.h5"), "--method",
                           "battus-z", "--schedule", "3,12"], tmp_path / "p.h5", "schedule")


def test_unknown_method(tmp_path, history, capsys):
    fails_cleanly(capsys, ["reconstruct", str(history), "--out", str(tmp_path / "p.h5"), "--method",
                           "hermes"], tmp_path / "p.h5", "--method")


@pytest.mark.parametrize("tau", ["0", "1.2", "-0.1", "nan"])
def test_tau_outside_unit_interval(tmp_path, history, capsys, tau):
    fails_cleanly(capsys, ["reconstruct", str(history), "--out", str(tmp_path / "p.h5"), "--method",
                           "battus-z", "--tau", tau], tmp_path / "p.h5", "tau")


@pytest.mark.parametrize("flag,value", [("--beta-i", "1.5"), ("--beta-r", "-0.2")])
def test_rate_outside_unit_interval(tmp_path, history, capsys, flag, value):
    fails_cleanly(capsys, ["reconstruct", str(history), "--out", str(tmp_path / "p.h5"), "--method",
                           "battus-z", flag, value], tmp_path / "p.h5", flag)


def test_simulate_rate_outside_unit_interval(tmp_path, history, capsys):
    fails_cleanly(capsys, ["simulate", str(history), "--out", str(tmp_path / "s.h5"), "--model", "sir",
                           "--n0", "3", "--beta-i", "2"], tmp_path / "s.h5", "--beta-i")


def test_truncated_hdf5(tmp_path, history, capsys):
    data = history.read_bytes()
    bad = tmp_path / "truncated.h5"
    bad.write_bytes(data[: len(data) // 2])
    fails_cleanly(capsys, ["reconstruct", str(bad), "--out", str(tmp_path / "p.h5"), "--method",
                           "battus-z"], tmp_path / "p.h5", "truncated.h5")


def test_wrong_file_kind(tmp_path, history, capsys):
    fails_cleanly(capsys, ["score", str(history), str(history), "--out", str(tmp_path / "s.json")],
                  tmp_path / "s.json", "format")


class _Exploit:
    def __reduce__(self):
        return (os.system, ("echo pwned > /dev/null",))


def test_pt_with_foreign_class_is_refused(tmp_path, capsys):
    buf = io.BytesIO()
    pickle.dump({"edge_index": _Exploit()}, buf, protocol=2)
    bad = tmp_path / "evil.pt"
    with zipfile.ZipFile(bad, "w") as zf:
        zf.writestr("archive/data.pkl", buf.getvalue())
    err = fails_cleanly(capsys, ["import-hermes", str(bad), "--out", str(tmp_path / "h.h5")],
                        tmp_path / "h.h5", "pickle")
    assert "system" in err


def test_pt_that_is_not_a_zip(tmp_path, capsys):
    bad = tmp_path / "plain.pt"
    bad.write_bytes(b"not a zip")
    fails_cleanly(capsys, ["import-hermes", str(bad), "--out", str(tmp_path / "h.h5")], tmp_path / "h.h5", "file")


def test_installed_entry_point_exit_status(tmp_path, history):
    out = tmp_path / "p.h5"
    proc = subprocess.run([sys.executable, "-m", "battus.cli", "reconstruct", str(history), "--out", str(out),
                           "--method", "battus-z", "--tau", "3"], capture_output=True, text=True)
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1 and "tau" in proc.stderr
    assert not out.exists()


def test_the_command_ends_at_once_with_everything_written(tmp_path, history):
    """The ``battus`` command (battus.cli:run) ends its process without tearing it down: the
    prediction is in place, and what it printed reaches a pipe whole."""
    import tomllib

    scripts = tomllib.loads((Path(__file__).parents[1] / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts["battus"] == "battus.cli:run"
    out = tmp_path / "p.h5"
    made = subprocess.run([sys.executable, "-m", "battus.cli", "reconstruct", str(history), "--out", str(out),
                           "--method", "battus-z"], capture_output=True, text=True)
    assert made.returncode == 0 and "done in" in made.stderr, made.stderr
    printed = subprocess.run([sys.executable, "-m", "battus.cli", "score", str(history), str(out)],
                             capture_output=True, text=True)
    assert printed.returncode == 0, printed.stderr
    assert json.loads(printed.stdout)["prediction"] == str(out)


def test_a_closed_pipe_ends_quietly(tmp_path, history):
    """`battus info pred.h5 | head -1`: the reader leaves early; no traceback, the status of SIGPIPE."""
    proc = subprocess.Popen([sys.executable, "-m", "battus.cli", "info", str(history)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    proc.stdout.close()  # before the command has printed anything (it first imports the package)
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=120) == 141
    assert "Traceback" not in err and "BrokenPipe" not in err, err


def test_help_explains_every_option(capsys):
    for command in ("import-hermes", "graph", "simulate", "reconstruct", "score", "info"):
        assert main([command, "--help"]) == 0
        text = capsys.readouterr().out
        assert "usage:" in text


def test_graph_command_on_a_snap_edge_list(tmp_path, capsys):
    from battus.io import read_graph

    out = tmp_path / "oregon2.h5"
    src = DITTO.parent / "snap" / "oregon2_010526.txt.gz"
    assert main(["graph", str(src), "--undirected", "--out", str(out), "--quiet"]) == 0
    graph = read_graph(out)
    assert (graph.n, graph.num_edges, graph.directed) == (11461, 32730, False)


def test_graph_command_rejects_a_malformed_edge_list(tmp_path, capsys):
    bad = tmp_path / "bad.txt"
    bad.write_text("# comment\n1 2\n3 x\n")
    fails_cleanly(capsys, ["graph", str(bad), "--directed", "--out", str(tmp_path / "g.h5")], tmp_path / "g.h5",
                  "bad.txt")


def test_repeats_record_the_median_and_every_run(tmp_path, history):
    """--repeats times the algorithm several times after warm-up: same history, median recorded."""
    import json
    import statistics

    once, thrice = tmp_path / "once.h5", tmp_path / "thrice.h5"
    common = [str(history), "--method", "battus", "--backend", "cpu", "--quiet", "--grid-points", "4",
              "--refine-rounds", "1"]
    assert main(["reconstruct", *common, "--out", str(once)]) == 0
    assert main(["reconstruct", *common, "--out", str(thrice), "--repeats", "3", "--repeat-seconds", "60"]) == 0
    a, b = read_prediction(once), read_prediction(thrice)
    assert np.array_equal(a["states"], b["states"]) and (a["beta_i"], a["beta_r"]) == (b["beta_i"], b["beta_r"])
    runs = json.loads(b["algorithm_seconds_runs"])
    assert len(runs) == 3 and b["algorithm_seconds"] == statistics.median(runs)
    assert "algorithm_seconds_runs" not in a and a["warmup_seconds"] >= 0
    # the budget stops repeating: a zero budget gives one run
    budget = tmp_path / "budget.h5"
    assert main(["reconstruct", *common, "--out", str(budget), "--repeats", "5", "--repeat-seconds", "0"]) == 0
    assert len(json.loads(read_prediction(budget)["algorithm_seconds_runs"])) == 1
    score = tmp_path / "s.json"
    assert main(["score", str(history), str(thrice), "--out", str(score), "--quiet"]) == 0
    assert json.loads(score.read_text())["algorithm_seconds_runs"] == runs


def test_score_reports_calibration_of_posteriors_and_refuses_bad_ones(tmp_path, history, capsys):
    import json

    pred = tmp_path / "pred.h5"
    assert main(["reconstruct", str(history), "--out", str(pred), "--method", "battus-z", "--backend", "cpu",
                 "--posteriors", "--quiet"]) == 0
    score = tmp_path / "s.json"
    assert main(["score", str(history), str(pred), "--out", str(score), "--quiet"]) == 0
    calibration = json.loads(score.read_text())["calibration"]
    assert 0 < calibration["brier"] < 2 and calibration["log_loss"] > 0 and calibration["frames"] == "unobserved"
    with h5py.File(pred, "r+") as f:
        f["posteriors"][0] *= 0.5  # no longer sums to 1
    capsys.readouterr()
    assert main(["score", str(history), str(pred), "--out", str(tmp_path / "t.json")]) == 2
    err = capsys.readouterr().err
    assert "posteriors" in err and "sum to 1" in err and err.count("\n") == 1
    assert not (tmp_path / "t.json").exists()


def test_score_refuses_a_prediction_made_from_another_history(tmp_path, history, capsys):
    other = tmp_path / "other.h5"
    problem = read_history(history, truth="required")
    truth = simulate(problem.graph, "sir", problem.T, problem.n0, 0.3, 0.1, seed=99)
    write_history(other, Problem(problem.graph, "sir", problem.T, problem.n0,
                                 observe(truth, problem.observations.times), truth))
    pred = tmp_path / "p.h5"
    assert main(["reconstruct", str(other), "--method", "battus-z", "--out", str(pred), "--quiet"]) == 0
    out = tmp_path / "s.json"
    error = fails_cleanly(capsys, ["score", str(history), str(pred), "--out", str(out)], out,
                          "@provenance/input_sha256")
    assert "made from another history" in error and "--allow-other-history" in error
    assert main(["score", str(history), str(pred), "--out", str(out), "--allow-other-history", "--quiet"]) == 0


def test_rates_under_which_the_observations_are_impossible_are_refused(tmp_path, history, capsys):
    out = tmp_path / "p.h5"
    error = fails_cleanly(capsys, ["reconstruct", str(history), "--method", "battus-z", "--beta-r", "0",
                                   "--posteriors", "--out", str(out), "--quiet"], out, "rates")
    assert "--beta-i/--beta-r" in error


FORWARD_FILL = Path(__file__).resolve().parent.parent / "examples/methods/forward_fill.py"


@pytest.mark.parametrize("command", [
    ["reconstruct", "--method", "battus-z", "--backend", "cpu", "--posteriors"],
    ["reconstruct", "--method", "battus", "--backend", "cpu", "--causal", "--grid-points", "5",
     "--refine-rounds", "1"],
    ["reconstruct", "--method", "battus-z", "--backend", "cpu", "--schedule", "final"],
    ["baseline", "--method", "random", "--seed", "3"],
    ["baseline", "--method", "truth"],
    ["run-method", "--name", "forward-fill", "--command", f"{sys.executable} {FORWARD_FILL} {{history}} {{out}}"],
], ids=["battus-z-posteriors", "battus-c-fitted", "final-schedule", "random", "truth", "plug-in"])
def test_score_in_the_same_run_equals_battus_score(tmp_path, history, command):
    """--score scores the prediction as written, in the run that wrote it: the same JSON as
    `battus score` on the file, and the prediction file the same as without --score."""
    import json

    pred, scores, again = tmp_path / "pred.h5", tmp_path / "scores.json", tmp_path / "again.json"
    name, *options = command
    assert main([name, str(history), "--out", str(pred), "--score", str(scores), "--quiet", *options]) == 0
    assert main(["score", str(history), str(pred), "--out", str(again), "--quiet"]) == 0
    assert json.loads(scores.read_text()) == json.loads(again.read_text())
    alone = tmp_path / "alone.h5"
    assert main([name, str(history), "--out", str(alone), "--quiet", *options]) == 0
    np.testing.assert_array_equal(read_prediction(alone)["states"], read_prediction(pred)["states"])


def test_write_prediction_returns_what_read_prediction_reads(tmp_path, history):
    from battus.io import write_prediction
    from battus.options import method_options
    from battus.pipeline import reconstruct

    problem = read_history(history)
    recon = reconstruct(problem, method_options("battus-z"), keep_posteriors=True)
    recon.extras.update({"flag": True, "count": np.int64(7), "ratio": np.float32(0.25), "note": "text",
                         "listed": [1, 2], "nan": float("nan")})
    pred = tmp_path / "pred.h5"
    written = write_prediction(pred, recon, problem, history, extra={"observed_times": [4, 8]})
    read = read_prediction(pred)
    assert written.keys() == read.keys()
    for key, value in read.items():
        if isinstance(value, np.ndarray):
            assert written[key].dtype == value.dtype and np.array_equal(written[key], value), key
        elif isinstance(value, float) and np.isnan(value):
            assert np.isnan(written[key]), key
        else:
            assert type(written[key]) is type(value) and written[key] == value, key


def test_score_option_refusals(tmp_path, history, capsys):
    problem = read_history(history)
    no_truth = tmp_path / "obs-only.h5"
    write_history(no_truth, Problem(problem.graph, problem.model, problem.T, problem.n0, problem.observations,
                                    None, "x"))
    pred, scores = tmp_path / "pred.h5", tmp_path / "scores.json"
    base = ["reconstruct", "--method", "battus-z", "--backend", "cpu"]
    fails_cleanly(capsys, [base[0], str(no_truth), "--out", str(pred), "--score", str(scores), *base[1:]], pred,
                  "truth")
    assert not scores.exists()
    fails_cleanly(capsys, [base[0], str(history), "--out", str(pred), "--score", str(pred), *base[1:]], pred,
                  "--score")
    err = fails_cleanly(capsys, ["baseline", str(history), "--out", str(pred), "--score", str(history), "--method",
                                 "random"], pred, "--score")
    assert "inputs are never overwritten" in err
