"""Plug-in methods (battus.plugins, `battus run-method`): the contract of docs/methods.md."""

import json
import sys
from pathlib import Path

import h5py
import numpy as np
import pytest

from battus.cli import main
from battus.generators import generate
from battus.io import read_prediction, write_history
from battus.problem import Problem, observe, schedule_times
from battus.simulate import simulate

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples/methods/forward_fill.py"


@pytest.fixture(scope="module")
def history(tmp_path_factory):
    graph = generate("ba", seed=1, n=200, m=3)
    truth = simulate(graph, "sir", 8, 10, 0.2, 0.1, seed=4)
    problem = Problem(graph=graph, model="sir", T=8, n0=10, observations=observe(truth, schedule_times(8)),
                      truth=truth, name="ba-sir")
    path = tmp_path_factory.mktemp("plugins") / "history.h5"
    write_history(path, problem)
    return path


def run(history, out, name, command, *extra):
    return main(["run-method", str(history), "--out", str(out), "--name", name, "--command", command, "--quiet",
                 *extra])


def test_example_plugin_runs_and_scores(tmp_path, history):
    out = tmp_path / "p.h5"
    assert run(history, out, "forward-fill", f"{sys.executable} {EXAMPLE} {{history}} {{out}}") == 0
    record = read_prediction(out)
    assert record["method"] == "forward-fill" and record["params"]["rule"].startswith("last observation")
    assert record["plugin_timing"] == "own"
    prov = record["provenance"]
    assert prov["input_sha256"] and "forward_fill.py" in record["plugin_command"]
    # forward fill: S before the first observation, then the last observed state
    with h5py.File(history) as f:
        times, observed = f["observations/times"][()], f["observations/states"][()]
    assert not record["states"][: times[0]].any()
    assert np.array_equal(record["states"][times], observed)
    score = tmp_path / "s.json"
    assert main(["score", str(history), str(out), "--out", str(score), "--quiet"]) == 0
    assert json.loads(score.read_text())["method"] == "forward-fill"


def test_plugin_never_sees_the_truth(tmp_path, history):
    probe = tmp_path / "probe.py"
    probe.write_text(
        "import sys, h5py, numpy as np\n"
        "f = h5py.File(sys.argv[1]); assert 'truth' not in f, 'truth visible'\n"
        "T, n = int(f.attrs['T']), f['observations/states'].shape[1]\n"
        "g = h5py.File(sys.argv[2], 'w'); g.attrs.update(format='battus-prediction', format_version=1)\n"
        "g['states'] = np.zeros((T + 1, n), np.uint8)\n"
    )
    assert run(history, tmp_path / "p.h5", "probe", f"{sys.executable} {probe} {{history}} {{out}}") == 0
    record = read_prediction(tmp_path / "p.h5")
    assert record["plugin_timing"] == "wall clock" and record["algorithm_seconds"] > 0


@pytest.mark.parametrize("command, needle", [
    ("{python} -c 'import sys; sys.exit(3)'", "method bad: command: exited with status 3"),
    ("true", "method bad: {out}: the command wrote no prediction file"),
    ("no-such-program-xyz {out}", "method bad: command: cannot run 'no-such-program-xyz'"),
    ("{python} -c 'open(\"{out}\", \"w\").write(\"junk\")'", "method bad: prediction"),
    ("{python} -c 'import h5py; f = h5py.File(\"{out}\", \"w\"); f.attrs[\"format\"] = \"battus-prediction\"; "
     "f.attrs[\"format_version\"] = 1; f[\"states\"] = [[1, 0]]'", "method bad: prediction: states: shape (1, 2)"),
    ("{python} {example} {history} {out} {nope}", "bad placeholder"),
    ("'unclosed", "--command"),
])
def test_a_failing_or_malformed_plugin_is_one_line_naming_it(tmp_path, history, capsys, command, needle):
    command = command.replace("{python}", sys.executable).replace("{example}", str(EXAMPLE))
    out = tmp_path / "p.h5"
    assert run(history, out, "bad", command) == 2
    err = capsys.readouterr().err
    assert needle in err and err.count("battus: error:") == 1, err
    assert not out.exists()


HANGING = """
import subprocess, sys, time
print("\\x1b[31mred\\x1b[0m\\x07", flush=True)
subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)  # battus-test-child"])
time.sleep(120)
"""


def _children_left() -> int:
    import subprocess

    found = subprocess.run(["pgrep", "-f", "battus-test-child"], capture_output=True, text=True)
    return len(found.stdout.split())


def test_a_plugin_past_its_time_limit_is_stopped_with_what_it_started(tmp_path, history, capsys):
    import tempfile

    script = tmp_path / "hang.py"
    script.write_text(HANGING)
    out = tmp_path / "p.h5"
    copies = set(Path(tempfile.gettempdir()).glob("battus-method-*"))
    status = run(history, out, "hang", f"{{python}} {script}", "--time-limit", "2")
    err = capsys.readouterr().err
    assert status == 2 and "method hang: time limit: still running after 2 s" in err
    assert "\x1b" not in err and "\\x1b[31mred" in err  # escape sequences shown, not obeyed
    assert not out.exists() and _children_left() == 0
    assert set(Path(tempfile.gettempdir()).glob("battus-method-*")) <= copies  # its history copy is gone


def test_sigterm_stops_the_plugin_and_leaves_nothing(tmp_path, history):
    import signal
    import subprocess
    import time

    script = tmp_path / "hang.py"
    script.write_text(HANGING)
    out = tmp_path / "p.h5"
    proc = subprocess.Popen([sys.executable, "-m", "battus.cli", "run-method", str(history), "--out", str(out),
                             "--name", "hang", "--command", f"{sys.executable} {script}", "--quiet"],
                            stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while _children_left() == 0 and time.monotonic() < deadline:
        time.sleep(0.2)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130 and "interrupted; no output written" in err
    assert not out.exists() and _children_left() == 0
