"""The plug-ins that run q-rz/KDD23-DITTO's scripts (examples/methods/{ditto,cri,dhrec,gcn,gin}, sharing
examples/methods/kdd23.py), without the upstream code and without PyTorch.

Each wrapper runs against a fake checkout written here: ``<method>.py`` and ``inc/test.py`` with the
upstream's real structure (the same argument parser, ``from inc.test import *``, ``seed_all``,
``Tester(data_dir, device, model_fn).test([dataset], ...)`` and ``.save(output)``), whose ``model_fn``
records the Data it is handed and returns a known prediction. A stub ``torch``/``torch_geometric``
(numpy arrays with ``detach``/``cpu``/``numpy``) stands in for PyTorch, first on the wrapper's path,
so this runs the same with PyTorch installed or not. One test repeats the CRI run with the real
PyTorch Geometric where it is installed.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import h5py
import numpy as np
import pytest

from battus.cli import main
from battus.generators import generate
from battus.graph import from_arcs
from battus.io import read_prediction, write_history
from battus.problem import Problem, observe, schedule_times
from battus.simulate import simulate

ROOT = Path(__file__).resolve().parents[1]
METHODS = ROOT / "examples/methods"
T, N0 = 6, 3

# each script's own parser at 339f2d5 (name, type); gin.py lacks --b_pImax although its scripts pass it
_BASE = [("dataset", "str"), ("seed", "int"), ("data_dir", "str"), ("output", "str"), ("device", "str")]
_B = [("b_pI0", "float"), ("b_pR0", "float"), ("b_steps", "int"), ("b_lr", "float")]
_NN = [("lr", "float"), ("epochs", "int"), ("batch_size", "int"), ("units", "int"), ("layers", "int"),
       ("dropout", "float")]
_Q = [("q_steps", "int"), ("q_lr", "float"), ("q_hid", "int"), ("q_gnn", "int"), ("q_mlp", "int"),
      ("q_samples", "int"), ("q_zlim", "int"), ("p_coef", "float"), ("t_samples", "int"), ("t_steps", "int"),
      ("t_keep", "float")]
# method: (its parser, frames its model_fn returns, whether it hands Tester.test its seed, args its scripts pass)
UPSTREAM = {
    "cri": (_BASE, T + 1, False, {}),
    "dhrec": (_BASE + _B, T + 1, False, {"b_pI0": 0.001, "b_pR0": 0.001, "b_steps": 500, "b_lr": 0.003}),
    "gcn": (_BASE + _B + _NN, T, False, {"b_pI0": 0.001, "b_steps": 500, "epochs": 1000, "units": 64}),
    "gin": (_BASE + _B + _NN, T, False, {"b_pImax": 0.999, "epochs": 1000, "layers": 3, "dropout": 0.1}),
    "ditto": (_BASE + _B + _Q, T, True, {"b_pI0": 1e-6, "q_steps": 500, "q_samples": 10, "t_keep": 0.5}),
}

STUB_TORCH = '''
"""Stub PyTorch for the wrapper tests: tensors are numpy arrays with the few methods the wrappers call."""
import numpy as np

__version__ = "stub"
long = np.int64


class Tensor(np.ndarray):
    device = "cpu"

    def detach(self):
        return self

    def cpu(self):
        return self

    def to(self, device):
        return self

    def numpy(self):
        return np.asarray(self)


def from_numpy(a):
    return np.asarray(a).view(Tensor)


def tensor(x, dtype=None, device=None):
    return np.asarray(x, dtype=dtype).view(Tensor)
'''
STUB_PYG_DATA = '''
class Data:
    def __init__(self, **kwargs):
        self.__dict__.update(kwargs)

    def to(self, device):
        return self
'''
FAKE_INC_TEST = '''
"""Fake of the upstream's inc/test.py: seed_all and a Tester that must never be used."""
import json, os
import numpy as np
import torch

SEEDS = []


def seed_all(seed):
    SEEDS.append(seed)


class Tester:
    def __init__(self, data_dir, device, model_fn):
        raise AssertionError("the wrapper must replace inc.test.Tester")
'''
FAKE_SCRIPT = '''
from inc.test import *
import argparse


def get_args():
    parser = argparse.ArgumentParser()
{arguments}
    return parser.parse_args()


def model_fn(data):
    T = data.T.item()
    np.savez(os.environ["FAKE_UPSTREAM_DUMP"], y=data.y.cpu().numpy(), edge_index=data.edge_index.cpu().numpy(),
             T=T, n=data.num_nodes, seeds=np.array(SEEDS), args=json.dumps(vars(ARGS)))
    pred = np.load(os.environ["FAKE_UPSTREAM_PREDICTION"])[:, :{frames}]
    return torch.tensor(pred, dtype=torch.long, device=data.y.device)


ARGS = get_args()
{seed_line}
tester = Tester(ARGS.data_dir, ARGS.device, model_fn)
tester.test([ARGS.dataset], {test_seed}rep=1)
tester.save(ARGS.output)
'''


@pytest.fixture(scope="module")
def history(tmp_path_factory):
    # directed: each edge of a small BA graph in one direction, every third in both, so a swapped
    # source/target row in the conversion cannot go unnoticed
    ba = generate("ba", seed=2, n=40, m=2)
    targets = np.repeat(np.arange(ba.n), np.diff(ba.indptr))
    src, dst = ba.indices[ba.indices < targets], targets[ba.indices < targets]
    both = np.arange(len(src)) % 3 == 0
    graph = from_arcs(np.concatenate([src, dst[both]]), np.concatenate([dst, src[both]]), directed=True, n=ba.n)
    truth = simulate(graph, "sir", T, N0, 0.3, 0.2, seed=5)
    problem = Problem(graph=graph, model="sir", T=T, n0=N0, observations=observe(truth, schedule_times(T)),
                      truth=truth, name="tiny-sir")
    path = tmp_path_factory.mktemp("upstream") / "history.h5"
    write_history(path, problem)
    return path


@pytest.fixture(scope="module")
def stub_path(tmp_path_factory):
    root = tmp_path_factory.mktemp("stubs")
    (root / "torch").mkdir()
    (root / "torch/__init__.py").write_text(STUB_TORCH)
    (root / "torch_geometric").mkdir()
    (root / "torch_geometric/__init__.py").write_text("")
    (root / "torch_geometric/data.py").write_text(STUB_PYG_DATA)
    return root


def fake_checkout(root: Path, method: str) -> Path:
    parser, frames, passes_seed, _ = UPSTREAM[method]
    home = root / "KDD23-DITTO"
    (home / "inc").mkdir(parents=True)
    (home / "inc/test.py").write_text(FAKE_INC_TEST)
    arguments = "\n".join(f"    parser.add_argument('--{name}', type={kind})" for name, kind in parser)
    (home / f"{method}.py").write_text(FAKE_SCRIPT.format(
        arguments=arguments, frames=frames, seed_line="" if passes_seed else "seed_all(ARGS.seed)",
        test_seed="seed=ARGS.seed, " if passes_seed else ""))
    return home


def read_arcs(path: Path) -> set[tuple[int, int]]:
    with h5py.File(path, "r") as f:
        indptr, indices = f["graph/indptr"][()], f["graph/indices"][()]
    return {(int(s), t) for t in range(len(indptr) - 1) for s in indices[indptr[t]:indptr[t + 1]]}


def run_wrapper(tmp_path, history, method, pythonpath, extra=()):
    """Run the wrapper on ``history`` against a fake checkout; the dump of what it handed the upstream,
    the prediction the fake returned and the file the wrapper wrote."""
    home = fake_checkout(tmp_path, method)
    rng = np.random.default_rng(7)
    with h5py.File(history, "r") as f:
        n = len(f["graph/indptr"]) - 1
    predicted = rng.integers(0, 3, size=(n, T + 1))  # the fake's known answer, (n, T+1)
    np.save(tmp_path / "prediction.npy", predicted)
    env = dict(os.environ, FAKE_UPSTREAM_DUMP=str(tmp_path / "dump.npz"),
               FAKE_UPSTREAM_PREDICTION=str(tmp_path / "prediction.npy"))
    if pythonpath is not None:
        env["PYTHONPATH"] = str(pythonpath)
    out = tmp_path / "out.h5"
    home_flag = "--ditto-home" if method == "ditto" else "--upstream-home"
    device = ["--device", "cpu"] if method == "ditto" else []
    proc = subprocess.run([sys.executable, str(METHODS / method / f"run_{method}.py"), home_flag, str(home), *device,
                           "--seed", "42", str(history), str(out), *extra],
                          env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    return np.load(tmp_path / "dump.npz"), predicted, out


@pytest.mark.parametrize("method", list(UPSTREAM))
def test_wrapper_hands_upstream_the_history_and_writes_its_prediction(tmp_path, history, stub_path, method):
    dump, predicted, out = run_wrapper(tmp_path, history, method, stub_path)
    with h5py.File(history, "r") as f:
        final = f["observations/states"][-1]
        assert f["observations/times"][-1] == T
    # what the upstream was handed: the arcs (source row 0, target row 1), T, n, n0 ones in column 0,
    # the observed final frame in column T, and nothing else
    y = dump["y"]
    assert int(dump["T"]) == T and int(dump["n"]) == len(final) and y.shape == (len(final), T + 1)
    assert set(zip(dump["edge_index"][0].tolist(), dump["edge_index"][1].tolist(), strict=True)) == read_arcs(history)
    assert dump["edge_index"].shape[1] == len(read_arcs(history))
    assert (y[:, T] == final).all() and int(y[:, 0].sum()) == N0 and set(np.unique(y[:, 0])) <= {0, 1}
    assert not y[:, 1:T].any()
    # its own arguments: the seed, and every value its scripts/ pass
    args = json.loads(str(dump["args"]))
    assert args["seed"] == 42 and dump["seeds"].tolist() == [42]
    for key, value in UPSTREAM[method][3].items():
        assert args[key] == value, key
    # the prediction: the upstream's frames 0..T-1, then the observed final frame (its test_fix_obs)
    with h5py.File(out, "r") as f:
        states = f["states"][()]
        attrs = dict(f.attrs)
    assert states.dtype == np.uint8 and states.shape == (T + 1, len(final))
    np.testing.assert_array_equal(states[:T], predicted[:, :T].T)
    np.testing.assert_array_equal(states[T], final)
    assert attrs["format"] == "battus-prediction" and attrs["method"] == method and attrs["T"] == T
    assert attrs["model"] == "sir" and attrs["algorithm_seconds"] >= 0
    assert json.loads(attrs["params"])["seed"] == 42


def test_arguments_after_the_separator_override_the_scripts(tmp_path, history, stub_path):
    dump, _, _ = run_wrapper(tmp_path, history, "dhrec", stub_path, extra=["--", "--b_steps", "7"])
    args = json.loads(str(dump["args"]))
    assert args["b_steps"] == 7 and args["b_lr"] == 0.003


def test_history_without_the_final_frame_is_refused(tmp_path, stub_path):
    graph = generate("ba", seed=2, n=20, m=2)
    truth = simulate(graph, "si", T, 2, 0.3, 0.0, seed=5)
    problem = Problem(graph=graph, model="si", T=T, n0=2, observations=observe(truth, [2]), truth=truth, name="x")
    write_history(tmp_path / "h.h5", problem)
    home = fake_checkout(tmp_path, "cri")
    proc = subprocess.run([sys.executable, str(METHODS / "cri/run_cri.py"), "--upstream-home", str(home),
                           str(tmp_path / "h.h5"), str(tmp_path / "out.h5")],
                          env=dict(os.environ, PYTHONPATH=str(stub_path)), capture_output=True, text=True, timeout=60)
    assert proc.returncode != 0 and "final frame T=6" in proc.stderr
    assert not (tmp_path / "out.h5").exists()


def test_through_run_method_under_the_final_frame_protocol(tmp_path, history, stub_path, monkeypatch):
    """The documented command, through the contract: the plug-in sees a copy with only the final frame."""
    home = fake_checkout(tmp_path, "cri")
    with h5py.File(history, "r") as f:
        n = len(f["graph/indptr"]) - 1
    np.save(tmp_path / "prediction.npy", np.zeros((n, T + 1), dtype=np.int64))
    monkeypatch.setenv("FAKE_UPSTREAM_DUMP", str(tmp_path / "dump.npz"))
    monkeypatch.setenv("FAKE_UPSTREAM_PREDICTION", str(tmp_path / "prediction.npy"))
    monkeypatch.setenv("PYTHONPATH", str(stub_path))
    out = tmp_path / "p.h5"
    wrapper = METHODS / "cri/run_cri.py"
    command = f"{sys.executable} {wrapper} --upstream-home {home} --seed {{seed}} {{history}} {{out}}"
    assert main(["run-method", str(history), "--out", str(out), "--name", "cri", "--command", command, "--quiet",
                 "--schedule", "final", "--seed", "123456789"]) == 0
    record = read_prediction(out)
    assert record["method"] == "cri" and record["plugin_timing"] == "own"
    assert record["params"]["upstream_script"] == "cri.py" and record["params"]["seed"] == 123456789
    assert json.loads(str(np.load(tmp_path / "dump.npz")["args"]))["seed"] == 123456789


def test_with_pytorch_geometric_where_installed(tmp_path, history):
    pytest.importorskip("torch")
    pytest.importorskip("torch_geometric")
    dump, predicted, out = run_wrapper(tmp_path, history, "cri", None)
    with h5py.File(out, "r") as f:
        np.testing.assert_array_equal(f["states"][:T], predicted[:, :T].T)
    assert int(dump["y"][:, 0].sum()) == N0
