"""HDF5 round trips and atomic writes."""

from __future__ import annotations

import hashlib

import numpy as np
import pytest

from battus import files
from battus.errors import InputError
from battus.graph import from_arcs
from battus.io import (
    atomic_path,
    read_graph,
    read_history,
    read_prediction,
    write_graph,
    write_history,
    write_prediction,
)
from battus.pipeline import method_options, reconstruct
from battus.problem import Problem, observe
from battus.simulate import simulate


def toy_problem(with_truth=True):
    rng = np.random.default_rng(4)
    graph = from_arcs(rng.integers(0, 50, 200), rng.integers(0, 50, 200), directed=True, n=50,
                      node_ids=np.arange(1000, 1050))
    truth = simulate(graph, "sir", 6, 3, 0.3, 0.2, seed=1)
    return Problem(graph=graph, model="sir", T=6, n0=3, observations=observe(truth, np.array([3, 6])),
                   truth=truth if with_truth else None, name="toy")


def test_history_round_trip(tmp_path):
    problem = toy_problem()
    write_history(tmp_path / "h.h5", problem, {"seed": 1})
    back = read_history(tmp_path / "h.h5", truth="required")
    assert np.array_equal(back.graph.indptr, problem.graph.indptr)
    assert np.array_equal(back.graph.indices, problem.graph.indices)
    assert np.array_equal(back.graph.node_ids, problem.graph.node_ids)
    assert back.graph.directed and back.model == "sir" and back.T == 6 and back.n0 == 3
    assert np.array_equal(back.truth, problem.truth)
    assert back.provenance["seed"] == 1


def test_scoring_needs_truth(tmp_path):
    write_history(tmp_path / "h.h5", toy_problem(with_truth=False))
    assert read_history(tmp_path / "h.h5").truth is None
    with pytest.raises(InputError, match="truth"):
        read_history(tmp_path / "h.h5", truth="required")


def test_a_reconstruction_never_reads_the_truth(tmp_path):
    write_history(tmp_path / "h.h5", toy_problem())
    assert read_history(tmp_path / "h.h5", truth="skip").truth is None


def test_a_hard_link_cycle_is_read_at_once(tmp_path):
    """A group hard-linked into itself is a valid file: it is read, each object walked once."""
    import time

    import h5py

    problem = toy_problem()
    write_history(tmp_path / "h.h5", problem)
    with h5py.File(tmp_path / "h.h5", "a") as fh:
        fh["graph"]["loop"] = fh["graph"]
        fh["observations"]["root"] = fh
    started = time.monotonic()
    back = read_history(tmp_path / "h.h5", truth="required")
    assert time.monotonic() - started < 10  # the walk's own limit is 60 s
    assert np.array_equal(back.truth, problem.truth)


def test_graph_round_trip(tmp_path):
    graph = toy_problem().graph
    write_graph(tmp_path / "g.h5", graph)
    back = read_graph(tmp_path / "g.h5")
    assert np.array_equal(back.indices, graph.indices) and back.directed


def test_prediction_records_provenance(tmp_path):
    problem = toy_problem()
    write_history(tmp_path / "h.h5", problem)
    recon = reconstruct(problem, method_options("battus-z"), backend="cpu")
    write_prediction(tmp_path / "p.h5", recon, problem, tmp_path / "h.h5")
    pred = read_prediction(tmp_path / "p.h5")
    assert np.array_equal(pred["states"], recon.states)
    for key in ("method", "backend", "device", "package_version", "algorithm_seconds", "beta_i", "beta_r"):
        assert key in pred, key
    assert pred["provenance"]["input_sha256"] == hashlib.sha256((tmp_path / "h.h5").read_bytes()).hexdigest()
    # a digest still being taken is asked for once the arrays are written, and recorded the same
    asked = []
    written = write_prediction(tmp_path / "q.h5", recon, problem, tmp_path / "h.h5",
                               input_sha256=lambda: asked.append(1) or pred["provenance"]["input_sha256"])
    assert asked == [1] and written["provenance"]["input_sha256"] == pred["provenance"]["input_sha256"]
    assert read_prediction(tmp_path / "q.h5")["provenance"]["input_sha256"] == pred["provenance"]["input_sha256"]


@pytest.mark.parametrize("size", [0, 1, 7, 8, 9, 25])
def test_sha256_file_over_block_edges(tmp_path, monkeypatch, size):
    monkeypatch.setattr(files, "_HASH_BLOCK", 8)
    data = bytes(range(size))
    (tmp_path / "f").write_bytes(data)
    assert files.sha256_file(tmp_path / "f") == hashlib.sha256(data).hexdigest()


def test_atomic_write_leaves_nothing_on_failure(tmp_path):
    target = tmp_path / "out.h5"
    with pytest.raises(RuntimeError), atomic_path(target) as tmp:
        tmp.write_bytes(b"partial")
        raise RuntimeError("killed")
    assert not target.exists()
    assert list(tmp_path.iterdir()) == []


def test_deterministic_reconstruction(tmp_path):
    problem = toy_problem()
    a = reconstruct(problem, method_options("battus", fit_settings=__import__("battus.fit").fit.FitSettings(
        grid_points=6, refine_rounds=2)), backend="cpu")
    b = reconstruct(problem, method_options("battus", fit_settings=__import__("battus.fit").fit.FitSettings(
        grid_points=6, refine_rounds=2)), backend="cpu")
    assert np.array_equal(a.states, b.states) and a.beta_i == b.beta_i and a.beta_r == b.beta_r


@pytest.mark.parametrize("pidfd", [True, False], ids=["pidfd", "polling"])
def test_the_probe_waits_for_its_child_or_its_deadline(monkeypatch, pidfd):
    """The wait behind the forked HDF5 probe: an ending child's status as soon as it ends (a crash
    as a signal), a child past the deadline as None (then killed by the caller)."""
    import faulthandler
    import os
    import signal
    import time

    from battus.hdf5_probe import wait_for

    if not hasattr(os, "fork"):
        pytest.skip("no fork on this platform")
    if not pidfd:
        monkeypatch.delattr(os, "pidfd_open", raising=False)

    def child(action) -> int:
        pid = os.fork()
        if pid == 0:  # pragma: no cover - the child
            faulthandler.disable()  # pytest's handler would print the child's crash as if it were a bug
            action()
            os._exit(0)
        return pid

    started = time.monotonic()
    status = wait_for(child(lambda: time.sleep(0.05)), 10)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0 and time.monotonic() - started < 5
    status = wait_for(child(lambda: os.kill(os.getpid(), signal.SIGSEGV)), 10)
    assert os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGSEGV
    slow = child(lambda: time.sleep(30))
    assert wait_for(slow, 0.2) is None
    os.kill(slow, signal.SIGKILL)
    os.waitpid(slow, 0)


def test_an_input_that_cannot_be_hashed_is_named_and_nothing_is_written(tmp_path):
    problem = toy_problem()
    recon = reconstruct(problem, method_options("battus-z"), backend="cpu")

    def unreadable():
        raise OSError(5, "Input/output error")

    with pytest.raises(InputError, match="h.h5: file: reading it for its sha256 failed"):
        write_prediction(tmp_path / "p.h5", recon, problem, tmp_path / "h.h5", input_sha256=unreadable)
    with pytest.raises(InputError, match="missing.h5: file: reading it for its sha256 failed"):
        write_prediction(tmp_path / "p.h5", recon, problem, tmp_path / "missing.h5")
    assert list(tmp_path.iterdir()) == []
