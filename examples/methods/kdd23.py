"""The history <-> upstream conversion shared by the plug-ins that run q-rz/KDD23-DITTO's scripts.

q-rz/KDD23-DITTO (MIT) holds DITTO (``ditto.py``) and the baselines its paper compares: CRI
(``cri.py``), DHREC's PCDSVC variant (``dhrec.py``), GCN (``gcn.py``) and GIN (``gin.py``). Every
script has the same shape: parse its arguments, build ``inc.test.Tester(data_dir, device, model_fn)``,
call ``tester.test([dataset], ...)`` (which loads the named dataset *with its truth*, calls
``model_fn(data)`` and scores the result) and ``tester.save(output)``. The plug-ins run a script
unchanged, with two substitutions made here:

- ``inc.test.Tester`` is replaced by :class:`HistoryTester`, which hands ``model_fn`` the Data built
  from the Battus history (:func:`upstream_data`) and keeps the prediction; the truth never exists in
  the process. It seeds as ``Tester.test_dataset`` does for its first repetition: ``seed_all(seed ^ 0)``
  when the script passes a seed (``ditto.py``), nothing when it does not (the others seed once at
  start-up, before loading their data);
- where torch_scatter and ndlib (pinned by the upstream, no wheels for current PyTorch) are missing,
  ``ditto/shims`` goes last on ``sys.path`` (see ``ditto/shims``).

The Data is what every script reads: ``edge_index`` (arc sources in row 0, targets in row 1, the
direction of infection), ``T``, ``num_nodes`` and ``y`` of shape (n, T+1) whose last column is the
observed final frame and whose column 0 holds ``n0`` ones (the scripts read only how many: the
number infected at time 0). No script reads any other entry of ``y``: they all reconstruct from the
final frame, under either protocol. The prediction is the upstream's own ``test_fix_obs``: the
method's frames ``0..T-1`` and the observed final frame, as (T+1, n) ``states``.

Used by ``ditto/run_ditto.py``, ``cri/run_cri.py``, ``dhrec/run_dhrec.py``, ``gcn/run_gcn.py`` and
``gin/run_gin.py``; :func:`main` is the command line of the last four.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import runpy
import sys
import time
from collections.abc import Callable
from pathlib import Path

import h5py
import numpy as np

SHIMS = Path(__file__).resolve().parent / "ditto" / "shims"
UPSTREAM_SEED = 123456789  # every script under the upstream's scripts/ uses this seed
UPSTREAM_HOME_ENV = "DITTO_HOME"  # one checkout serves every script


def read_history(path: str, prog: str = "kdd23") -> dict:
    """Graph (as arc sources and targets), model, T, n0 and the final observed frame of a history."""
    with h5py.File(path, "r") as f:
        T, n0, model = int(f.attrs["T"]), int(f.attrs["n0"]), str(f.attrs["model"])
        indptr = f["graph/indptr"][()].astype(np.int64)
        sources = f["graph/indices"][()].astype(np.int64)
        times = f["observations/times"][()]
        states = f["observations/states"][()]
    if len(times) == 0 or int(times[-1]) != T:
        raise SystemExit(f"{prog}: {path}: observations/times: the upstream needs the final frame T={T} observed")
    targets = np.repeat(np.arange(len(indptr) - 1, dtype=np.int64), np.diff(indptr))
    return {"T": T, "n0": n0, "model": model, "sources": sources, "targets": targets,
            "final": states[-1].astype(np.int64), "n": len(indptr) - 1}


def upstream_data(history: dict, device: str):
    """The torch_geometric Data the upstream's ``model_fn`` reads (see the module docstring)."""
    import torch
    from torch_geometric.data import Data

    n, T = history["n"], history["T"]
    y = np.zeros((n, T + 1), dtype=np.int64)
    y[: history["n0"], 0] = 1  # the scripts count these ones (their I0); which vertices does not matter
    y[:, T] = history["final"]
    edge_index = torch.from_numpy(np.stack([history["sources"], history["targets"]]))
    data = Data(edge_index=edge_index, y=torch.from_numpy(y), num_nodes=n)
    data.T = torch.tensor(T, dtype=torch.long)
    return data.to(device)


def _synchronize(device: str) -> None:
    if device.startswith("cuda"):
        import torch

        torch.cuda.synchronize()


def run_script(home: Path, script: str, data, argv: list[str], device: str,
               patch: Callable[[], None] | None = None) -> tuple[np.ndarray, float]:
    """Run ``home/script`` unchanged on ``data``: its prediction as numpy and the seconds ``model_fn`` took."""
    sys.path.insert(0, str(home))
    for module in ("torch_scatter", "ndlib"):
        if importlib.util.find_spec(module) is None:
            sys.path.append(str(SHIMS))
    import inc.test as upstream_test  # the upstream's module; every script star-imports its names

    captured = {}

    class HistoryTester:
        """Stands in for the upstream's Tester: the same calls, this history instead of a named dataset."""

        def __init__(self, data_dir, device, model_fn):
            self.model_fn = model_fn

        def test(self, datasets=None, seed=None, **kwargs):
            if seed is not None:
                upstream_test.seed_all(seed ^ 0)  # as Tester.test_dataset does for its first repetition
            _synchronize(device)
            started = time.perf_counter()
            y_pred = self.model_fn(data)
            _synchronize(device)
            captured["seconds"] = time.perf_counter() - started
            captured["y_pred"] = y_pred.detach().cpu().numpy()

        def save(self, f, verbose=True):
            pass

    upstream_test.Tester = HistoryTester
    if patch is not None:
        patch()
    sys.argv = [script, *argv]
    runpy.run_path(str(home / script), run_name="__main__")
    if "y_pred" not in captured:
        raise SystemExit(f"{script}: never called its Tester's test()")
    return captured["y_pred"], captured["seconds"]


def prediction_states(y_pred: np.ndarray, history: dict) -> np.ndarray:
    """The upstream's ``test_fix_obs`` (frames ``0..T-1`` of (n, >=T) ``y_pred``, then the observed
    final frame) as Battus's (T+1, n) uint8 ``states``."""
    T, n = history["T"], history["n"]
    if y_pred.ndim != 2 or y_pred.shape[0] != n or y_pred.shape[1] < T:
        raise SystemExit(f"upstream prediction: shape {y_pred.shape}, expected ({n}, T or T+1) with T={T}")
    return np.concatenate([y_pred[:, :T], history["final"][:, None]], axis=1).T.astype(np.uint8)


def shims_used() -> list[str]:
    return [m for m in ("torch_scatter", "ndlib") if str(SHIMS) in str(getattr(sys.modules.get(m), "__file__", ""))]


def write_prediction(out: str, history: dict, method: str, states: np.ndarray, seconds: float, record: dict) -> None:
    with h5py.File(out, "w") as f:
        f.attrs.update(format="battus-prediction", format_version=1, model=history["model"], T=history["T"],
                       method=method, algorithm_seconds=seconds, params=json.dumps(record))
        f["states"] = states


def declare_missing_arguments(names: dict[str, type]) -> Callable[[], None]:
    """A patch declaring each ``--name`` on the script's argument parser where the script does not.

    ``gin.py`` reads ``args.b_pImax``, which its ``scripts/gin-*.sh`` pass, but its parser never
    declares it, so those scripts stop at argparse's "unrecognized arguments"; declaring it (the
    value still comes from the command line) is the least that lets the script run as written."""

    def patch() -> None:
        parse_args = argparse.ArgumentParser.parse_args

        def parse_declared(self, *args, **kwargs):
            for name, kind in names.items():
                if f"--{name}" not in self._option_string_actions:
                    self.add_argument(f"--{name}", type=kind)
            return parse_args(self, *args, **kwargs)

        argparse.ArgumentParser.parse_args = parse_declared

    return patch


def main(method: str, script: str, defaults: dict, doc: str, declare: dict[str, type] | None = None) -> None:
    """Command line of a plug-in running ``script`` (``cri.py``, ...) with its scripts/ arguments ``defaults``
    (``declare``: arguments its scripts pass that its parser lacks, see :func:`declare_missing_arguments`)."""
    ap = argparse.ArgumentParser(prog=f"run_{method}", description=doc.split("\n\n")[0])
    ap.add_argument("history")
    ap.add_argument("out")
    home = os.environ.get(UPSTREAM_HOME_ENV)
    ap.add_argument("--upstream-home", type=Path, default=Path(home) if home else None, required=not home,
                    help=f"a checkout of q-rz/KDD23-DITTO (default: ${UPSTREAM_HOME_ENV})")
    ap.add_argument("--device", default="cpu", help="PyTorch device (default cpu)")
    ap.add_argument("--seed", type=int, default=UPSTREAM_SEED, help=f"default {UPSTREAM_SEED}, the upstream's own")
    ap.add_argument("upstream_args", nargs="*", help=f"after --: {script} arguments overriding its scripts' values")
    args = ap.parse_args()
    if not (args.upstream_home / script).is_file():
        raise SystemExit(f"run_{method}: --upstream-home {args.upstream_home}: no {script} there")
    history = read_history(args.history, f"run_{method}")
    argv = ["--dataset", "battus-history", "--seed", str(args.seed), "--data_dir", ".", "--output", os.devnull,
            "--device", args.device]
    method_args = [x for key, value in defaults.items() for x in (f"--{key}", str(value))] + args.upstream_args
    os.environ.setdefault("TQDM_DISABLE", "1")  # the upstream's progress bars, one line per step otherwise
    y_pred, seconds = run_script(args.upstream_home.resolve(), script, upstream_data(history, args.device),
                                 argv + method_args, args.device,
                                 declare_missing_arguments(declare) if declare else None)
    import torch

    device_name = torch.cuda.get_device_name() if args.device.startswith("cuda") else "cpu"
    record = {"upstream_script": script, "upstream_args": method_args, "seed": args.seed,
              "torch": torch.__version__, "device": device_name, "shims": shims_used(),
              "declared": sorted(declare or {})}
    write_prediction(args.out, history, method, prediction_states(y_pred, history), seconds, record)
