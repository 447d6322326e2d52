"""DITTO's paper's baselines with public code (CRI, DHREC, GCN, GIN; q-rz/KDD23-DITTO) on the 12
canonical datasets, through their plug-ins (examples/methods/<method>/run_<method>.py), under both
protocols: the benchmark's {floor(T/2), T} and DITTO's final frame {T}. GCN and GIN run on the four
real-diffusion datasets only, as DITTO's paper runs them.

For each (method, dataset, protocol) it runs, one at a time,

    battus run-method HISTORIES/<dataset>.h5 --schedule <benchmark|final> --name <m> --seed 123456789
        --time-limit LIMIT --command "PYTHON examples/methods/<m>/run_<m>.py --upstream-home HOME
        --device DEVICE --seed {seed} {history} {out}"

then ``battus score``, and writes one CSV row per run (scores, the method's own time, wall time, or
the reason there is none: the time limit, a failure). Runs whose prediction and score are already
under ``--work`` are not repeated. Histories missing from ``--histories`` are imported from
``--mirror`` (``battus import-hermes``, benchmark schedule; run-method's ``--schedule`` sets the
protocol).

    python benchmarks/upstream_methods.py --upstream-home KDD23-DITTO --python VENV/bin/python \\
        --mirror ../shared/data/ditto --work /tmp/upstream --out data/measured/upstream_methods.csv
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SEED = 123456789
DATASETS = {  # name: its file under the mirror (docs/benchmarks.md, config/paper.yaml)
    "ba-si": "synthetic/ba-si.pt", "er-si": "synthetic/er-si.pt", "oregon2-si": "oregon2/oregon2-si.pt",
    "prost-si": "prost/prost-si.pt", "farmers-si": "farmers/farmers-si.pt", "pol-si": "pol/rt-pol.txt",
    "ba-sir": "synthetic/ba-sir.pt", "er-sir": "synthetic/er-sir.pt", "oregon2-sir": "oregon2/oregon2-sir.pt",
    "prost-sir": "prost/prost-sir.pt", "covid-sir": "covid/covid-sir.pt", "heb-sir": "heb/heb-sir.pt",
}
REAL = ["farmers-si", "pol-si", "covid-sir", "heb-sir"]
METHODS = {"cri": list(DATASETS), "dhrec": list(DATASETS), "gcn": REAL, "gin": REAL}
HEADER = """\
# Measured rows of DITTO's paper's baselines with public code, run from q-rz/KDD23-DITTO through their
# plug-ins (examples/methods/<method>/run_<method>.py) by benchmarks/upstream_methods.py; docs/benchmarks.md
# section 5 puts them beside the published rows. One row per (method, dataset, protocol): protocol final =
# only frame T observed (DITTO's), benchmark = {floor(T/2), T}. The methods read the final frame only, so
# both protocols give them the same input. f1, nrmse (the paper's convention), nrmse_ditto (DITTO's code):
# HERMES-compatible scores (final frame pinned); unobserved_*: observed frames dropped;
# causal_violation_rate: Eq. 8 (events). algorithm_seconds: the script's model_fn (rate fit and method),
# imports excluded; wall_seconds: the whole battus run-method. status: ok, "time limit" (stopped after
# time_limit_s, no prediction) or failed.
"""
FIELDS = ["method", "dataset", "protocol", "status", "f1", "nrmse", "nrmse_ditto", "unobserved_f1",
          "unobserved_nrmse", "causal_violation_rate", "algorithm_seconds", "wall_seconds", "time_limit_s",
          "upstream_commit", "battus_commit", "machine"]


def battus(*args: str) -> list[str]:
    return [sys.executable, "-m", "battus.cli", *args]


def git_commit() -> str:
    out = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    return out.stdout.strip() or "—"


def ensure_history(histories: Path, mirror: Path, dataset: str) -> Path:
    path = histories / f"{dataset}.h5"
    if not path.exists():
        histories.mkdir(parents=True, exist_ok=True)
        subprocess.run(battus("import-hermes", str(mirror / DATASETS[dataset]), "--name", dataset, "--out",
                              str(path), "--quiet"), check=True)
    return path


def run_one(args, method: str, dataset: str, protocol: str) -> dict:
    history = ensure_history(args.histories, args.mirror, dataset)
    stem = args.work / f"{method}-{dataset}-{protocol}"
    prediction, score, log, status_file = (stem.with_suffix(s) for s in (".h5", ".json", ".log", ".status"))
    row = {"method": method, "dataset": dataset, "protocol": protocol, "time_limit_s": args.time_limit,
           "upstream_commit": args.upstream_commit, "battus_commit": args.battus_commit, "machine": args.machine}
    if status_file.exists():  # done before: its own record
        return json.loads(status_file.read_text())
    wrapper = ROOT / f"examples/methods/{method}/run_{method}.py"
    command = (f"{args.python} {wrapper} --upstream-home {args.upstream_home} --device {args.device} "
               "--seed {seed} {history} {out}")
    started = time.perf_counter()
    env = dict(os.environ, TQDM_DISABLE="") if args.progress else None  # the upstream's progress bars, in the log
    with open(log, "w") as f:
        rc = subprocess.run(battus("run-method", str(history), "--schedule", protocol, "--name", method, "--seed",
                                   str(SEED), "--time-limit", str(args.time_limit), "--out", str(prediction),
                                   "--command", command, "--quiet"), stdout=f, stderr=subprocess.STDOUT,
                            env=env).returncode
    row["wall_seconds"] = round(time.perf_counter() - started, 1)
    if rc != 0:
        text = log.read_text()
        row["status"] = "time limit" if "time limit" in text else "failed"
    else:
        subprocess.run(battus("score", str(history), str(prediction), "--out", str(score), "--quiet"), check=True)
        s = json.loads(score.read_text())
        row.update(status="ok", f1=round(s["hermes"]["f1"], 4), nrmse=round(s["hermes"]["nrmse"], 4),
                   nrmse_ditto=round(s["hermes"]["nrmse_ditto"], 4), unobserved_f1=round(s["unobserved"]["f1"], 4),
                   unobserved_nrmse=round(s["unobserved"]["nrmse"], 4),
                   causal_violation_rate=round(s["causal"]["prediction"]["rate"], 4),
                   algorithm_seconds=round(s["algorithm_seconds"], 2))
    status_file.write_text(json.dumps(row))
    return row


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--upstream-home", type=Path, required=True, help="a checkout of q-rz/KDD23-DITTO")
    ap.add_argument("--upstream-commit", default="339f2d5", help="the checkout's commit, for the CSV")
    ap.add_argument("--python", required=True, help="the interpreter with PyTorch and PyTorch Geometric")
    ap.add_argument("--mirror", type=Path, default=ROOT.parent / "shared/data/ditto")
    ap.add_argument("--histories", type=Path, default=None, help="history files <dataset>.h5 (default WORK/hist)")
    ap.add_argument("--work", type=Path, required=True)
    ap.add_argument("--out", type=Path, required=True, help="CSV to write")
    ap.add_argument("--methods", default="cri,dhrec,gcn,gin")
    ap.add_argument("--protocols", default="final,benchmark")
    ap.add_argument("--datasets", default=None, help="comma-separated subset (default: each method's own)")
    ap.add_argument("--time-limit", type=int, default=3600, help="seconds per run (default 3600)")
    ap.add_argument("--machine", default=f"{platform.machine()} {platform.processor() or ''}".strip())
    ap.add_argument("--device", default="cpu", help="PyTorch's device for the wrappers (default: cpu)")
    ap.add_argument("--progress", action="store_true", help="keep the upstream's progress bars (in WORK/*.log)")
    ap.add_argument("--collect-only", action="store_true", help="write the CSV from runs done, run nothing")
    args = ap.parse_args()
    args.histories = args.histories or args.work / "hist"
    args.work.mkdir(parents=True, exist_ok=True)
    args.battus_commit = git_commit()
    wanted = set(args.datasets.split(",")) if args.datasets else None
    rows = []
    for protocol in args.protocols.split(","):
        for method in args.methods.split(","):
            for dataset in METHODS[method]:
                if wanted is not None and dataset not in wanted:
                    continue
                status = args.work / f"{method}-{dataset}-{protocol}.status"
                if args.collect_only:
                    if status.exists():
                        rows.append(json.loads(status.read_text()))
                    continue
                row = run_one(args, method, dataset, protocol)
                print(f"{method} {dataset} {protocol}: {row['status']} {row.get('f1', '')} "
                      f"{row.get('nrmse_ditto', '')} {row['wall_seconds']} s", flush=True)
                rows.append(row)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    with open(args.out, "w", newline="") as f:
        f.write(HEADER)
        writer = csv.DictWriter(f, fieldnames=FIELDS)
        writer.writeheader()
        writer.writerows(rows)


if __name__ == "__main__":
    main()
