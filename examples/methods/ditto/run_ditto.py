"""DITTO (Qiu et al., KDD'23) as a Battus plug-in method, run from an unmodified checkout of its code.

    python run_ditto.py --ditto-home KDD23-DITTO [--device cuda] [--preset auto] [--seed S] HISTORY OUT [-- ARGS]

DITTO's code (https://github.com/q-rz/KDD23-DITTO, MIT) is not copied here: ``--ditto-home`` names a
checkout (commit 339f2d5 was run). This wrapper

1. reads the history (docs/format.md) with h5py and builds the PyTorch Geometric ``Data`` DITTO's
   ``main`` takes: ``edge_index`` (arc sources in row 0, targets in row 1, DITTO's direction of
   infection), ``T``, and ``y`` of shape (n, T+1) whose last column is the observed final frame.
   DITTO reads nothing else of ``y`` but the number of vertices infected at time 0 (the supplied
   ``n0``: that many ones in column 0) and its final column, so no other frame is needed;
2. makes the smallest patches that let ``ditto.py`` run unchanged: its ``inc.test.Tester``, which
   loads a named dataset *with its truth* and scores it, is replaced by one that hands DITTO this
   history and keeps the prediction (the truth never exists here); and ``Tensor.sort`` returns
   contiguous values again, as PyTorch 1.7 (DITTO's pin) did, without which current PyTorch
   fails on a ``.view`` in DITTO's ``QNet.lik``;
3. where torch_scatter 2.0.7 and ndlib 5.1.1 (pinned by DITTO, no wheels for current PyTorch) are
   missing, puts ``shims/`` last on ``sys.path``: torch_scatter's five reductions on PyTorch's own
   ``scatter_reduce`` (``shims/torch_scatter``), and an import-only ndlib (DITTO uses it only to
   simulate a dataset that is missing, which cannot happen here);
4. writes the prediction: DITTO's (n, T) history with the observed final frame appended, as its
   own ``test_fix_obs`` does, transposed to Battus's (T+1, n) ``states``. ``@algorithm_seconds``
   is DITTO's ``main`` (rate estimation, proposal training and MCMC: DITTO trains on each history
   it reconstructs), timed after CUDA synchronisation, start-up and imports excluded.

DITTO observes the final frame only. Under the benchmark's {floor(T/2), T} schedule it still uses
only the final frame; its prediction is then scored against that schedule like any method's.

Presets are DITTO's own settings from its ``scripts/ditto-<dataset>.sh``. ``auto`` picks the
synthetic datasets' settings by size: 10 proposal samples up to 5,000 vertices (BA, ER), else 2
(Oregon2, Prost). The real datasets' scripts differ in more than that: name them (``--preset
covid-sir``). Any DITTO argument can be overridden after ``--``: ``-- --q_steps 100``.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import kdd23  # noqa: E402  (../kdd23.py: the conversion and the Tester shared with CRI, DHREC, GCN, GIN)

SHIMS = kdd23.SHIMS
DITTO_SEED = kdd23.UPSTREAM_SEED  # every one of DITTO's scripts uses this seed

_COMMON = {"b_pI0": 1e-6, "b_pR0": 1e-6, "b_steps": 500, "b_lr": 0.003, "q_steps": 500, "q_lr": 0.001,
           "q_hid": 16, "q_gnn": 3, "q_mlp": 2, "q_samples": 10, "q_zlim": 16, "p_coef": 1.0,
           "t_samples": 100, "t_steps": 10, "t_keep": 0.5}
# scripts/ditto-<dataset>.sh at 339f2d5: what each changes from _COMMON
PRESETS = {
    **{name: {} for name in ("ba-si", "ba-sir", "er-si", "er-sir")},
    **{name: {"q_samples": 2} for name in ("oregon2-si", "oregon2-sir", "prost-si", "prost-sir")},
    "farmers-si": {"q_steps": 2000, "t_steps": 1000},
    "pol-si": {"q_steps": 300, "q_samples": 2},
    "covid-sir": {"b_pI0": 0.001, "b_pR0": 0.001, "q_steps": 250, "t_samples": 1000, "t_steps": 100},
    "heb-sir": {"q_steps": 200, "q_samples": 2},
}


def preset_args(preset: str, n: int) -> dict:
    """DITTO's arguments for a preset name, or for ``auto`` by the graph's size."""
    if preset == "auto":
        preset = "ba-si" if n <= 5000 else "oregon2-si"
    if preset not in PRESETS:
        raise SystemExit(f"run_ditto: --preset {preset!r}: expected auto or one of {', '.join(PRESETS)}")
    return _COMMON | PRESETS[preset]


def read_history(path: str) -> dict:
    """Graph (as arc sources and targets), model, T, n0 and the final observed frame of a history."""
    return kdd23.read_history(path, "run_ditto")


ditto_data = kdd23.upstream_data  # the torch_geometric Data DITTO's main() reads (see ../kdd23.py)


def _sort_contiguous() -> None:
    """PyTorch 1.7, which DITTO pins, returned sort's values contiguous; current PyTorch keeps the input's
    strides, and DITTO's QNet.lik then .view()s a sorted transposed tensor and fails. Same values, the
    old layout."""
    import torch

    sort = torch.Tensor.sort

    def sort_contiguous(self, *args, **kwargs):
        values, indices = sort(self, *args, **kwargs)
        return torch.return_types.sort((values.contiguous(), indices.contiguous()))

    torch.Tensor.sort = sort_contiguous


def run(ditto_home: Path, data, argv: list[str], device: str) -> tuple[np.ndarray, float]:
    """Run ditto.py unchanged on ``data``; its (n, T) prediction and the seconds its main() took."""
    return kdd23.run_script(ditto_home, "ditto.py", data, argv, device, _sort_contiguous)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("history")
    ap.add_argument("out")
    home = os.environ.get("DITTO_HOME")
    ap.add_argument("--ditto-home", type=Path, default=Path(home) if home else None, required=not home,
                    help="a checkout of q-rz/KDD23-DITTO (default: $DITTO_HOME)")
    ap.add_argument("--device", default="cuda", help="PyTorch device (default cuda)")
    ap.add_argument("--preset", default="auto", help=f"auto or one of {', '.join(PRESETS)}")
    ap.add_argument("--seed", type=int, default=DITTO_SEED, help=f"default {DITTO_SEED}, DITTO's own")
    ap.add_argument("ditto_args", nargs="*", help="after --: DITTO arguments overriding the preset")
    args = ap.parse_args()
    if not (args.ditto_home / "ditto.py").is_file():
        raise SystemExit(f"run_ditto: --ditto-home {args.ditto_home}: no ditto.py there")
    history = read_history(args.history)
    params = preset_args(args.preset, history["n"])
    argv = ["--dataset", "battus-history", "--seed", str(args.seed), "--data_dir", ".", "--output", os.devnull,
            "--device", args.device]
    argv += [x for key, value in params.items() for x in (f"--{key}", str(value))] + args.ditto_args
    os.environ.setdefault("TQDM_DISABLE", "1")  # DITTO's progress bars, one line per step otherwise
    y_pred, seconds = run(args.ditto_home.resolve(), ditto_data(history, args.device), argv, args.device)
    import torch

    device_name = torch.cuda.get_device_name() if args.device.startswith("cuda") else "cpu"
    record = {"ditto_args": argv[8:], "preset": args.preset, "seed": args.seed, "torch": torch.__version__,
              "device": device_name, "shims": kdd23.shims_used()}
    # DITTO's test_fix_obs: its frames 0..T-1, then the observed final frame
    kdd23.write_prediction(args.out, history, "ditto", kdd23.prediction_states(y_pred, history), seconds, record)


if __name__ == "__main__":
    main()
