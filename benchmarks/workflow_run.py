"""What a user of the workflow waits for: one `snakemake` run, its wall time, the rules it spent it
in, and a digest of every decoded history it wrote.

Runs Snakemake in this repository with the given config files (as a user types it), then reads the
run's own records: the job count from its log, each job's time from the `benchmark:` files under the
results folder, and a SHA-256 of the decoded states of every `prediction.h5` (the (T+1, n) uint8
array in C order). Two runs of the same configuration, on any machines or backends, must write the
same digests; ``--compare`` says which differ.

    BATTUS_MIRROR=../shared/data NUMBA_CACHE_DIR=/tmp/nb python benchmarks/workflow_run.py \\
        --configfile config/paper.yaml config/test/paper-standins.yaml --cores 16 --digests run.json

Snakemake's arguments after ``--`` are passed on (``-- --resources gpu=1``).
"""

from __future__ import annotations

import argparse
import csv
import hashlib
import json
import os
import platform
import re
import signal
import subprocess
import sys
import time
from collections import defaultdict
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]


def results_folder(configfiles: list[str]) -> Path:
    """The `results` key of the last config file that sets it (Snakemake merges them in order)."""
    folder = "results"  # the schema's default
    for name in configfiles or [str(REPO / "config" / "config.yaml")]:
        with open(name, encoding="utf-8") as fh:
            folder = (yaml.safe_load(fh) or {}).get("results", folder)
    return REPO / folder


def run_snakemake(args: argparse.Namespace, log: Path) -> dict:
    cmd = [sys.executable, "-m", "snakemake", "--cores", str(args.cores)]
    if args.configfile:
        cmd += ["--configfile", *args.configfile]
    cmd += args.snakemake
    start = time.perf_counter()
    with open(log, "w", encoding="utf-8") as out:
        proc = subprocess.Popen(cmd, cwd=REPO, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            rc = proc.wait(timeout=args.time_limit)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGINT)  # Snakemake stops its jobs and removes their outputs
            try:
                rc = proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                rc = proc.wait()
    wall = time.perf_counter() - start
    text = log.read_text(encoding="utf-8", errors="replace")
    steps = re.findall(r"(\d+) of (\d+) steps", text)
    done, total = (int(steps[-1][0]), int(steps[-1][1])) if steps else (0, 0)
    return {"command": " ".join(cmd), "returncode": rc, "wall_s": round(wall, 1), "jobs_done": done,
            "jobs_total": total, "finished": rc == 0 and done == total}


def rule_times(results: Path) -> list[dict]:
    """Per rule: jobs, summed and longest wall time, from the `benchmark:` files of this run."""
    per_rule: dict[str, list[float]] = defaultdict(list)
    for tsv in (results / "benchmarks").glob("**/*.tsv"):
        rule = tsv.relative_to(results / "benchmarks").parts[0]
        with open(tsv, encoding="utf-8") as fh:
            rows = list(csv.DictReader(fh, delimiter="\t"))
        if rows:
            per_rule[rule].append(float(rows[0]["s"]))
    out = [{"rule": rule, "jobs": len(s), "sum_s": round(sum(s), 1), "max_s": round(max(s), 1)}
           for rule, s in per_rule.items()]
    return sorted(out, key=lambda r: -r["sum_s"])


def _digest(path: str) -> str:
    from battus.io import read_prediction

    states = read_prediction(path)["states"]
    return hashlib.sha256(states.astype("uint8", copy=False).tobytes(order="C")).hexdigest()


def digests(results: Path, workers: int) -> dict[str, str]:
    paths = sorted(str(p) for p in results.glob("**/prediction.h5"))
    with ProcessPoolExecutor(max_workers=workers) as pool:
        hashes = list(pool.map(_digest, paths, chunksize=4))
    return {str(Path(p).relative_to(results)): h for p, h in zip(paths, hashes, strict=True)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--configfile", nargs="*", default=[], help="config files, as for snakemake")
    ap.add_argument("--cores", default="all")
    ap.add_argument("--time-limit", type=float, default=None, help="stop Snakemake after this many seconds")
    ap.add_argument("--log", default="workflow_run.log", help="Snakemake's output (default: %(default)s)")
    ap.add_argument("--digests", help="write the decoded-history digests here (JSON)")
    ap.add_argument("--compare", help="digests of another run of the same configuration (JSON)")
    ap.add_argument("--json", help="write the summary here too")
    ap.add_argument("snakemake", nargs=argparse.REMAINDER, help="-- then Snakemake's own arguments")
    args = ap.parse_args()
    args.snakemake = [a for a in args.snakemake if a != "--"]
    results = results_folder(args.configfile)

    summary = {"machine": f"{platform.node()}, {os.cpu_count()} CPUs", **run_snakemake(args, Path(args.log))}
    print(f"{summary['jobs_done']} of {summary['jobs_total']} jobs in {summary['wall_s']} s "
          f"(exit status {summary['returncode']}) on {summary['machine']}")
    summary["rules"] = rule_times(results)
    print(f"{'rule':<24} {'jobs':>5} {'sum s':>9} {'max s':>8}")
    for r in summary["rules"]:
        print(f"{r['rule']:<24} {r['jobs']:>5} {r['sum_s']:>9} {r['max_s']:>8}")
    t = time.perf_counter()
    found = digests(results, os.cpu_count() or 1)
    print(f"{len(found)} decoded histories digested in {time.perf_counter() - t:.1f} s")
    summary["histories"] = len(found)
    if args.digests:
        Path(args.digests).write_text(json.dumps(found, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    status = 0 if summary["finished"] else 1
    if args.compare:
        other = json.loads(Path(args.compare).read_text(encoding="utf-8"))
        common = sorted(set(found) & set(other))
        differ = [k for k in common if found[k] != other[k]]
        summary["compared"] = {"common": len(common), "differ": differ}
        print(f"compared with {args.compare}: {len(common)} in common, {len(differ)} differ")
        for k in differ:
            print(f"  differs: {k}")
        status = status or (1 if differ else 0)
    if args.json:
        Path(args.json).write_text(json.dumps(summary, indent=1) + "\n", encoding="utf-8")
    return status


if __name__ == "__main__":
    sys.exit(main())
