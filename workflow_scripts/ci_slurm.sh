#!/usr/bin/env bash
# CI step: the cluster path on a real one-node SLURM, from the repository root:
#   bash workflow_scripts/ci_slurm.sh
#
# Starts SLURM on this machine (.ci/slurm_cluster.sh: partitions cpu and gpu,
# a fake GPU, no accounting storage, so `sacct` fails as on a site without
# slurmdbd), then runs two small configurations through
# snakemake-executor-plugin-slurm with `--workflow-profile profiles/slurm`,
# exactly as docs/workflow.md ("Cluster (SLURM)") tells users, nothing else on
# the command line but --directory:
#   config/test/slurm.yaml    each kind of job (graph, simulations, both methods,
#                             scores, tables, figures) on the CPU, one `large`
#                             dataset asking large_threads=8 on a node with fewer
#                             CPUs (capped to the node's CPUs, not pending forever)
#   config/test/cudasim.yaml  GPU jobs (simulation and reconstructions on the CUDA
#                             backend, Numba's CUDA simulator standing in for the
#                             device) through the gpu partition with --gpus=1
# Checks, from slurmctld's own record of each finished job (jobcomp.txt, and
# `scontrol show job` for the GPUs it asked for), that
# every job Snakemake made went through sbatch, finished, and ran in the
# partition with the CPUs, memory and GPUs Snakemake asked for; that the GPU
# partition and a GPU went to exactly the GPU jobs; and that the report tables
# equal those of a local run of the same configuration (timing columns aside).
# Stops the daemons it started (by PID), also on failure.
#
# When SLURM is not installed and cannot be (offline apt, not root, not
# Debian), the step is skipped with a message and exits 0.
set -euo pipefail
cd "$(dirname "$0")/.."
REPO=$PWD
if [ -x .venv/bin/snakemake ]; then export PATH="$PWD/.venv/bin:$PATH"; fi
WORK="${SLURM_CI_WORK:-$REPO/build/ci-slurm}"  # build/ is git-ignored
export SLURM_CI_STATE="${SLURM_CI_STATE:-$WORK/slurm}"
TIMEOUT="${SLURM_CI_TIMEOUT:-1200}"  # seconds per cluster run: a hang fails the step
step() { printf '\n== %s (%ss)\n' "$*" "$SECONDS"; }

python -c 'import snakemake_executor_plugin_slurm' \
    || { echo "ci_slurm.sh: snakemake-executor-plugin-slurm is not installed (pip install -e '.[workflow]')" >&2; exit 1; }

step "one-node SLURM"
rm -rf "$WORK"/cluster-* "$WORK"/local-* && mkdir -p "$WORK"
rc=0; bash .ci/slurm_cluster.sh start || rc=$?
if [[ $rc == 3 ]]; then
    echo "ci_slurm.sh: SKIPPED: SLURM cannot be installed on this machine (see above);"
    echo "ci_slurm.sh: the paper dry run's GPU routing is still checked by tests/test_slurm_profile.py"
    exit 0
fi
[[ $rc == 0 ]] || exit "$rc"
cleanup() {
    # jobs of our runs only (their name is the run's UUID; none should be left)
    for id in $(squeue -h -o '%i' 2>/dev/null); do scancel "$id" 2>/dev/null || true; done
    bash .ci/slurm_cluster.sh stop
}
trap cleanup EXIT
NODE_CPUS=$(sinfo -h -N -p cpu -o '%c' | sort -n | tail -1)
echo "node CPUs: $NODE_CPUS"

run_cluster() {  # config, extra env (NAME=VALUE ...)
    local name; name=$(basename "$1" .yaml)
    step "$name through SLURM: snakemake --workflow-profile profiles/slurm --configfile $1"
    mkdir -p "$WORK/cluster-$name"
    # the profile waits 20 s before it first asks SLURM about a job (a real cluster's accounting
    # lags); this one-node cluster answers at once, and its jobs take seconds
    if ! env "${@:2}" timeout "$TIMEOUT" snakemake --workflow-profile profiles/slurm \
            --slurm-init-seconds-before-status-checks 2 \
            --configfile "$1" --directory "$WORK/cluster-$name" > "$WORK/cluster-$name.log" 2>&1; then
        tail -60 "$WORK/cluster-$name.log"
        echo "ci_slurm.sh: the SLURM run of $1 failed or ran past ${TIMEOUT}s; squeue:" >&2
        squeue -o '%i %j %T %R' >&2 || true
        exit 1
    fi
    grep -E "steps \(100%\) done|Nothing to be done" "$WORK/cluster-$name.log"
    # what each job asked SLURM for (kept MinJobAge=3600 s after it ends), for the GPUs
    scontrol show job -o > "$WORK/cluster-$name.jobs"
}
run_local() {
    local name; name=$(basename "$1" .yaml)
    step "$name locally: snakemake --cores 2 --configfile $1"
    env "${@:2}" snakemake --cores 2 --configfile "$1" --directory "$WORK/local-$name" \
        > "$WORK/local-$name.log" 2>&1 || { tail -40 "$WORK/local-$name.log"; exit 1; }
}

# All four runs at once: a cluster run mostly waits (each job is a Snakemake of its own, and the
# executor polls SLURM every few seconds, backing off by 10 s when nothing has finished), so the
# two cluster runs and the two local ones share the node's cores instead of taking turns.
runs=()
run_cluster config/test/slurm.yaml & runs+=($!)
run_cluster config/test/cudasim.yaml NUMBA_ENABLE_CUDASIM=1 & runs+=($!)
run_local config/test/slurm.yaml & runs+=($!)
run_local config/test/cudasim.yaml NUMBA_ENABLE_CUDASIM=1 & runs+=($!)
for run in "${runs[@]}"; do
    wait "$run" || { kill "${runs[@]}" 2>/dev/null; exit 1; }
done

step "every job through sbatch with what it asked for; tables equal to the local runs"
python3 - "$WORK" "$SLURM_CI_STATE/log/jobcomp.txt" "$NODE_CPUS" <<'PY'
import csv
import re
import sys
from pathlib import Path

work, jobcomp, node_cpus = Path(sys.argv[1]), Path(sys.argv[2]), int(sys.argv[3])
TIMING = re.compile(r"time|seconds|(^|_)s$|runtime|speed|elapsed|wall", re.I)
GPU_RULES = {"slurm": set(), "cudasim": {"simulate", "reconstruct"}}
LARGE = {"slurm": {"ba-sir"}, "cudasim": {"ba-sir"}}

# slurmctld's record of each finished job: JobId=.. Partition=.. ProcCnt=.. Tres=cpu=2,mem=1053M,..
record = {}
for line in jobcomp.read_text().splitlines():
    fields = dict(re.findall(r"(\w+)=(\S*)", line))
    record[fields["JobId"]] = fields
# `scontrol show job -o`: TresPerJob=gres:gpu:1 for --gpus=1 (jobcomp lists no GRES without slurmdbd)
gpus_of = {}
for path in work.glob("cluster-*.jobs"):
    for line in path.read_text().splitlines():
        fields = dict(re.findall(r"(\w+)=(\S*)", line))
        m = re.search(r"gpu:(\d+)", fields.get("TresPerJob", "") + " " + fields.get("TresPerNode", ""))
        gpus_of[fields.get("JobId")] = int(m.group(1)) if m else 0


def tres(fields):
    return dict(kv.split("=", 1) for kv in fields.get("Tres", "").split(",") if "=" in kv)


def mem_mb(value):
    number, unit = float(value[:-1]), value[-1]
    return round(number * {"M": 1, "G": 1024, "T": 1024 * 1024}[unit])


def jobs_of(log):
    """Snakemake's job blocks (rule, wildcards, threads, resources) with their SLURM job id."""
    text = log.read_text()
    blocks = {}
    for m in re.finditer(r"^(local)?rule (\w+):\n((?:    .*\n)+)", text, re.M):
        if m.group(1) or m.group(2) == "report_spec":  # local rules run in Snakemake's own process, not on SLURM
            continue
        body = dict(re.findall(r"^    (\w+): (.*)$", m.group(3), re.M))
        blocks[body["jobid"]] = {
            "rule": m.group(2),
            "wildcards": body.get("wildcards", ""),
            "threads": int(body.get("threads", 1)),
            "resources": dict(re.findall(r"(\w+)=([^,]+)", body.get("resources", ""))),
        }
    submitted = dict(re.findall(r"Job (\d+) has been submitted with SLURM jobid (\d+)", text))
    return blocks, submitted


failures = []
total = 0
for name in ("slurm", "cudasim"):
    blocks, submitted = jobs_of(work / f"cluster-{name}.log")
    jobs = {k: v for k, v in blocks.items() if v["rule"] != "all"}
    assert jobs, f"{name}: no job blocks in the log"
    for jobid, job in sorted(jobs.items(), key=lambda kv: int(kv[0])):
        what = f"{name}: {job['rule']} {job['wildcards']}"
        if jobid not in submitted:
            failures.append(f"{what}: not submitted through sbatch")
            continue
        slurm_id = submitted[jobid]
        got = record.get(slurm_id)
        if got is None:
            failures.append(f"{what}: SLURM job {slurm_id} has no completion record")
            continue
        res, t = job["resources"], tres(got)
        gpu = int(res.get("gpu", 0))
        want_part = res.get("slurm_partition", "cpu")  # none given: the site's default
        dataset = re.search(r"dataset=([^,\s]+)", job["wildcards"])
        checks = {
            "state": (got["JobState"], "COMPLETED"),
            "partition": (got["Partition"], want_part),
            "cpus": (int(got["ProcCnt"]), job["threads"]),
            "mem_mb": (mem_mb(t["mem"]), int(res["mem_mb"])),
            "gpus": (gpus_of.get(slurm_id), gpu),
            # routing: the GPU partition and a GPU exactly for the jobs that use one
            "gpu job": (gpu == 1 and want_part == "gpu", job["rule"] in GPU_RULES[name]),
        }
        if dataset and dataset.group(1) in LARGE[name] and job["rule"] in ("simulate", "reconstruct"):
            checks["large_threads 8, capped"] = (job["threads"], min(8, node_cpus))
        for key, (have, want) in checks.items():
            if have != want:
                failures.append(f"{what} (SLURM {slurm_id}): {key} {have!r}, expected {want!r}")
        total += 1
    print(f"{name}: {len(jobs)} jobs, each submitted, completed, partition/CPUs/memory/GPUs as asked")

    local, cluster = work / f"local-{name}/results/report/tables", work / f"cluster-{name}/results/report/tables"
    tables = sorted(p.name for p in local.glob("*.csv"))
    assert tables and tables == sorted(p.name for p in cluster.glob("*.csv")), (tables, list(cluster.glob("*.csv")))
    for table in tables:
        rows = []
        for folder in (local, cluster):
            with open(folder / table, newline="") as f:
                data = list(csv.reader(f))
            keep = [i for i, col in enumerate(data[0]) if not TIMING.search(col)]
            # long tables carry timings as rows: metric time_ms, geomean_time_ms, ...
            metric = data[0].index("metric") if "metric" in data[0] else None
            rows.append([[row[i] for i in keep if i < len(row)] for row in data
                         if metric is None or not TIMING.search(row[metric])])
        if rows[0] != rows[1]:
            failures.append(f"{name}: {table} differs between the local and the SLURM run")
    print(f"{name}: {len(tables)} tables equal to the local run's (timing columns aside)")

if failures:
    print("\n".join(failures), file=sys.stderr)
    sys.exit(1)
print(f"all {total} SLURM jobs checked")
PY
step "done"
