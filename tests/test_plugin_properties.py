"""Property-based tests of `battus run-method` over a fake plug-in that hypothesis makes misbehave.

Behaviours: it hangs (past a short ``--time-limit``), crashes (any exit status, or killed by a
signal, after writing junk with escape sequences and raw bytes), writes a file that is not a
prediction, writes a prediction that lies (wrong shape, a state code outside the model, NaN
posteriors, cells not summing to 1), or writes a valid prediction. Any of them may first start
a child process that outlives it, holding the plug-in's output open or not.

Valid: exit 0 and a prediction that reads back. Anything else: exit 2, the error as the last
line on stderr and the only one (above it only the plug-in's own last messages, relayed with
control characters escaped), no output file. Always: no temporary file or history copy left,
and no process the plug-in started left alive.
"""

from __future__ import annotations

import contextlib
import io
import json
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path
from unittest import mock

import h5py
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from battus.cli import main
from battus.generators import generate
from battus.io import read_prediction, write_history
from battus.problem import Problem, observe, schedule_times
from battus.simulate import simulate

T, N = 6, 30

PLUGIN = r'''
import json, os, signal, subprocess, sys, time

spec = json.loads(open(sys.argv[1]).read())
history, out = sys.argv[2], sys.argv[3]
if spec["child"]:
    # a child that outlives the plug-in; the tag in its command line lets the test find it
    subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)", spec["child"]],
                     stdout=None if spec["child_holds_output"] else subprocess.DEVNULL,
                     stderr=None if spec["child_holds_output"] else subprocess.DEVNULL)
for fd, text in spec["noise"]:
    os.write(fd, text.encode("utf-8", "surrogateescape"))
behaviour = spec["behaviour"]
if behaviour == "hang":
    time.sleep(3600)
if behaviour == "crash":
    if spec["signal"]:
        os.kill(os.getpid(), spec["signal"])
    sys.exit(spec["status"])
if behaviour == "junk":
    open(out, "wb").write(bytes.fromhex(spec["junk"]))
    sys.exit(0)

import h5py
import numpy as np

with h5py.File(history) as f:
    T, n = int(f.attrs["T"]), f["observations/states"].shape[1]
shape = tuple(spec["shape"]) if behaviour == "shape" else (T + 1, n)
states = np.zeros(shape, np.uint8)
if behaviour == "code":
    states[spec["frame"] % shape[0], spec["vertex"] % shape[1]] = spec["code"]
with h5py.File(out, "w") as g:
    g.attrs.update(format="battus-prediction", format_version=1)
    g["states"] = states
    if spec["posteriors"] or behaviour in ("nan", "sum"):
        post = np.zeros((3, T + 1, n), np.float32)
        post[0] = 1.0
        if behaviour == "nan":
            post[spec["state"], spec["frame"] % (T + 1), spec["vertex"] % n] = np.nan
        if behaviour == "sum":  # each value still in [0, 1]: more in I or R, or less in S
            state = 1 + spec["state"] % 2 if spec["excess"] > 0 else 0
            post[state, spec["frame"] % (T + 1), spec["vertex"] % n] += spec["excess"]
        g["posteriors"] = post
'''

NOISE = st.lists(st.tuples(st.sampled_from([1, 2]),
                           st.one_of(st.text(max_size=40),
                                     st.sampled_from(["\x1b[31mred\x1b[0m\n", "\x07\x08\r\n", "\x1b]0;title\x07",
                                                      "\udcff\udcfe raw bytes\n", "\u202eevil\n", "no newline"]))),
                 max_size=3)
BEHAVIOURS = ("valid", "hang", "crash", "junk", "shape", "code", "nan", "sum")


@st.composite
def specs(draw, behaviour: str) -> dict:
    spec = {"behaviour": behaviour, "noise": draw(NOISE), "child": None,
            "child_holds_output": draw(st.booleans()), "posteriors": draw(st.booleans()),
            "frame": draw(st.integers(0, 100)), "vertex": draw(st.integers(0, 100)),
            "state": draw(st.integers(0, 2))}
    if draw(st.booleans()):
        spec["child"] = f"battus-plugin-property-child-{uuid.uuid4().hex}"
    if behaviour == "crash":
        spec["signal"] = draw(st.sampled_from([0, 0, 6, 9, 11, 15]))
        spec["status"] = draw(st.integers(1, 255))
    elif behaviour == "junk":
        spec["junk"] = draw(st.one_of(st.binary(max_size=64), st.just(b"\x89HDF\r\n\x1a\n" + b"\0" * 40))).hex()
    elif behaviour == "shape":
        spec["shape"] = draw(st.sampled_from([(T, N), (T + 1, N + 1), (T + 2, N), (1, N), (T + 1, 1), (0, N)]))
    elif behaviour == "code":
        spec["code"] = draw(st.integers(3, 255))
    elif behaviour == "sum":
        spec["excess"] = draw(st.sampled_from([0.01, 0.5, 1.0, -0.5]))
    return spec


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    folder = tmp_path_factory.mktemp("plugin-properties")
    graph = generate("ba", seed=1, n=N, m=2)
    truth = simulate(graph, "sir", T, 3, 0.3, 0.2, seed=4)
    problem = Problem(graph=graph, model="sir", T=T, n0=3, observations=observe(truth, schedule_times(T)),
                      truth=truth, name="toy")
    write_history(folder / "history.h5", problem)
    (folder / "plugin.py").write_text(PLUGIN)
    return folder


def _alive(tag: str) -> list[str]:
    found = subprocess.run(["pgrep", "-f", tag], capture_output=True, text=True)
    return found.stdout.split()


def _history_copies() -> set[Path]:
    return set(Path(tempfile.gettempdir()).glob("battus-method-*"))


@pytest.fixture(scope="module", autouse=True)
def private_tempdir(tmp_path_factory):
    """The plug-in's history copies go to a folder of this module's own: other programs on the machine
    make and remove theirs in the shared one meanwhile."""
    with mock.patch.object(tempfile, "tempdir", str(tmp_path_factory.mktemp("tmp"))):
        yield


def run_plugin(folder: Path, spec: dict) -> tuple[int, str, Path]:
    """Run the fake plug-in through the command line; (exit status, stderr, the --out path)."""
    work = Path(tempfile.mkdtemp(dir=folder))
    (work / "spec.json").write_text(json.dumps(spec))
    out = work / "p.h5"
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        status = main(["run-method", str(folder / "history.h5"), "--out", str(out), "--name", "fake", "--quiet",
                       # a short limit for the one that hangs; the others may take seconds to start on a busy machine
                       "--time-limit", "1" if spec["behaviour"] == "hang" else "60", "--command",
                       f"{sys.executable} {folder / 'plugin.py'} {work / 'spec.json'} {{history}} {{out}}"])
    return status, err.getvalue(), out


def _check(folder: Path, spec: dict) -> None:
    copies = _history_copies()
    status, err, out = run_plugin(folder, spec)
    leftover = _alive(spec["child"]) if spec["child"] else []
    assert not leftover, f"processes the plug-in started are still alive: {leftover}"
    assert _history_copies() <= copies, "the plug-in's copy of the history is left behind"
    assert not [p for p in out.parent.iterdir() if p.name.startswith(".p.h5")], "temporary file left behind"
    assert all(ch in "\n\t" or ch.isprintable() for ch in err), f"raw control characters on stderr: {err!r}"
    if spec["behaviour"] == "valid":
        assert status == 0, err
        record = read_prediction(out, model="sir")
        assert record["states"].shape == (T + 1, N)
        with h5py.File(out) as f:
            assert ("posteriors" in f) == spec["posteriors"]
        return
    lines = err.rstrip("\n").split("\n")
    assert status == 2, err
    assert lines[-1].startswith("battus: error: method fake"), err
    assert sum(line.startswith("battus: error:") for line in lines) == 1, err
    if spec["behaviour"] in ("junk", "shape", "code", "nan", "sum"):  # exit 0: nothing of the plug-in relayed
        assert len(lines) == 1, err
    expected = {"hang": "time limit: still running after 1 s", "crash": "command: exited with status",
                "shape": "states: shape", "nan": "posteriors: probabilities must be finite",
                "sum": "must sum to 1", "code": "states"}.get(spec["behaviour"], "prediction")
    assert expected in lines[-1], err
    assert not out.exists(), "no output may be written"


SETTINGS = settings(max_examples=3, derandomize=True, database=None, deadline=None,
                    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])


@pytest.mark.parametrize("behaviour", BEHAVIOURS)
def test_a_plugin_is_valid_or_refused_in_one_line_leaving_nothing(setup, behaviour):
    @SETTINGS
    @given(specs(behaviour))
    def check(spec):
        _check(setup, spec)

    check()


def test_a_valid_plugin_leaving_a_daemon_holding_its_output_ends_at_once(setup):
    """Its daemon holds the output open, so the output never closes: run-method ends it instead of
    waiting for the time limit (which would then refuse a valid prediction)."""
    spec = {"behaviour": "valid", "noise": [], "child": f"battus-plugin-property-child-{uuid.uuid4().hex}",
            "child_holds_output": True, "posteriors": False, "frame": 0, "vertex": 0, "state": 0}
    status, err, out = run_plugin(setup, spec)
    assert status == 0, err
    assert not _alive(spec["child"])
