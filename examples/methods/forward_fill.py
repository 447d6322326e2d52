"""A worked plug-in method for the Battus benchmark: last observation carried forward.

    python examples/methods/forward_fill.py HISTORY.h5 PREDICTION.h5

Each vertex keeps its last observed state until its next observation (S
before the first one). The method needs nothing from Battus: it reads the
history with h5py and writes the prediction in the documented format
(docs/format.md, docs/methods.md). Add it to a workflow config with

    methods:
      forward-fill:
        label: Forward fill (example plug-in)
        command: ["{python}", "{workflow}/examples/methods/forward_fill.py", "{history}", "{out}"]

and name it in an experiment's `methods` list as [forward-fill, default].
"""

import json
import sys
import time

import h5py
import numpy as np


def forward_fill(times: np.ndarray, observed: np.ndarray, T: int) -> np.ndarray:
    """(T+1, n) states: the last observed state at or before each frame, S before the first."""
    states = np.zeros((T + 1, observed.shape[1]), dtype=np.uint8)
    for k, t in enumerate(times):
        end = times[k + 1] if k + 1 < len(times) else T + 1
        states[t:end] = observed[k]
    return states


def main(history: str, prediction: str) -> None:
    with h5py.File(history, "r") as f:
        model, T = str(f.attrs["model"]), int(f.attrs["T"])
        times = f["observations/times"][()]
        observed = f["observations/states"][()]
    started = time.perf_counter()
    states = forward_fill(times, observed, T)
    seconds = time.perf_counter() - started
    with h5py.File(prediction, "w") as f:
        f.attrs.update(format="battus-prediction", format_version=1, model=model, T=T,
                       method="forward-fill", algorithm_seconds=seconds,
                       params=json.dumps({"rule": "last observation carried forward"}))
        f["states"] = states


if __name__ == "__main__":
    main(*sys.argv[1:3])
