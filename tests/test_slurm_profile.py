"""The SLURM profile (profiles/slurm) and the config's `cluster` key.

Dry runs under the profile: the GPU partition and gpu=1 go to exactly the jobs
that use a GPU, partitions and the account come from the config alone. Unit
tests of battus.suite.cluster.SlurmSite against a fake site: thread requests capped
at the partition's CPUs, a missing partition or a GPU partition without GPUs
stopping the run with a message, job-status polling that cannot hang. The real
cluster path (a one-node SLURM, the profile, a comparison with a local run) is
the CI step workflow_scripts/ci_slurm.sh.
"""

from __future__ import annotations

import copy
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml

from battus.suite import cluster as cluster_mod
from battus.suite.cluster import ClusterError, SlurmSite, min_job_age, read_partitions

ROOT = Path(__file__).resolve().parent.parent
SNAKEFILE = ROOT / "Snakefile"
_BIN = Path(sys.executable).parent
SNAKEMAKE = str(_BIN / "snakemake") if (_BIN / "snakemake").exists() else (shutil.which("snakemake") or "snakemake")
needs_snakemake = pytest.mark.skipif(shutil.which(SNAKEMAKE) is None, reason="snakemake is not installed")


# the workflow's localrules (rules/report.smk): a dry run lists them as `rule`, a real run as `localrule`
LOCAL_RULES = {"report_spec"}


def dry_run_jobs(workdir: Path, configfile: Path, *args: str, env: dict | None = None) -> list[dict]:
    """rule, wildcards and resources of every job a dry run under profiles/slurm would submit."""
    cmd = [SNAKEMAKE, "-s", str(SNAKEFILE), "-d", str(workdir), "--nocolor", "--dry-run",
           "--workflow-profile", str(ROOT / "profiles/slurm"), "--configfile", str(configfile), *args]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env={**os.environ, **(env or {})})
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    jobs = []
    for m in re.finditer(r"^(local)?rule (\w+):\n((?:    .*\n)+)", proc.stdout + proc.stderr, re.M):
        if m.group(1) or m.group(2) in LOCAL_RULES:  # run in Snakemake's own process, never on SLURM
            continue
        body = dict(re.findall(r"^    (\w+): (.*)$", m.group(3), re.M))
        jobs.append({
            "rule": m.group(2),
            "wildcards": dict(re.findall(r"(\w+)=([^,\s]+)", body.get("wildcards", ""))),
            "resources": dict(re.findall(r"(\w+)=([^,]+)", body.get("resources", ""))),
        })
    assert jobs, proc.stdout[-3000:]
    return jobs


def plan_of(configfile: Path):
    """battus.suite.experiments.Plan of a config file, schema defaults filled in as the workflow does."""
    from snakemake.utils import validate

    from battus.suite.experiments import Plan

    config = yaml.safe_load(configfile.read_text())
    validate(config, str(ROOT / "config/schemas/config.schema.yaml"))
    return Plan(config)


def uses_gpu(job: dict, plan) -> bool:
    if job["rule"] == "reconstruct":
        return plan.uses_gpu(job["wildcards"]["dataset"], job["wildcards"]["method"])
    if job["rule"] == "simulate":
        return plan.datasets[job["wildcards"]["dataset"]]["sim_backend"] == "cuda"
    return False


def test_profile_names_no_site():
    """Partitions, account and threads live in the config (and large_threads), not in the profile."""
    profile = yaml.safe_load((ROOT / "profiles/slurm/config.yaml").read_text())
    assert profile["executor"] == "slurm"
    defaults = profile.get("default-resources", {})
    assert not {"slurm_partition", "slurm_account"} & set(defaults), defaults
    assert "set-threads" not in profile and "set-resources" not in profile, profile
    for config in ("config/config.yaml", "config/paper.yaml"):
        cluster = yaml.safe_load((ROOT / config).read_text())["cluster"]
        assert cluster == {"cpu_partition": "", "gpu_partition": "gpu", "account": ""}, (config, cluster)


@needs_snakemake
def test_paper_dry_run_gives_gpus_to_exactly_the_gpu_jobs(tmp_path, monkeypatch):
    # no mirror, as the paper dry run of CI (the shared one lacks the large SNAP graphs)
    monkeypatch.setenv("BATTUS_MIRROR", "")
    configfile = ROOT / "config/paper.yaml"
    jobs = [j for j in dry_run_jobs(tmp_path, configfile) if j["rule"] not in ("all", "download")]
    plan = plan_of(configfile)
    gpu_jobs = cpu_reconstructions = 0
    for job in jobs:
        res = job["resources"]
        gpu = uses_gpu(job, plan)
        assert int(res.get("gpu", 0)) == int(gpu), job
        # the GPU partition for GPU jobs; no partition (the site's default) for every other job
        assert res.get("slurm_partition") == ("gpu" if gpu else None), job
        assert "slurm_account" not in res, job  # account "" -> none sent
        gpu_jobs += gpu
        cpu_reconstructions += job["rule"] == "reconstruct" and not gpu
    assert gpu_jobs >= 16, gpu_jobs  # both methods on the 8 large histories
    assert cpu_reconstructions > 100, cpu_reconstructions  # the canonical suite: no GPU asked


@needs_snakemake
def test_partitions_and_account_from_the_config(tmp_path):
    """config `cluster` names the partitions and the account of every job (cudasim: GPU and CPU jobs)."""
    config = yaml.safe_load((ROOT / "config/test/cudasim.yaml").read_text())
    config["cluster"] = {"cpu_partition": "short", "gpu_partition": "a100", "account": "lab42"}
    configfile = tmp_path / "cluster.yaml"
    configfile.write_text(yaml.safe_dump(config))
    jobs = [j for j in dry_run_jobs(tmp_path / "run", configfile) if j["rule"] != "all"]
    plan = plan_of(configfile)
    kinds = set()
    for job in jobs:
        gpu = uses_gpu(job, plan)
        kinds.add(gpu)
        assert job["resources"]["slurm_partition"] == ("a100" if gpu else "short"), job
        assert job["resources"]["slurm_account"] == "lab42", job
    assert kinds == {True, False}


# -- battus.suite.cluster.SlurmSite against a fake site ---------------------------------------------------------
SINFO = "cpu*|2|23081|(null)\ncpu*|16|64000|(null)\ngpu|8|32000|gpu:1\nbig|64|512000|(null)\n"


class FakeSite:
    """The commands SlurmSite runs, answered from a table."""

    def __init__(self, sinfo=SINFO, min_age=300, sacct_rc=1):
        self.answers = {
            "sinfo": (0, sinfo),
            "scontrol": (0, f"MinJobAge               = {min_age} sec\n"),
            "sacct": (sacct_rc, "" if sacct_rc == 0 else "Slurm accounting storage is disabled"),
        }
        self.calls = []

    def __call__(self, cmd):
        self.calls.append(cmd[0])
        rc, out = self.answers[cmd[0]]
        return subprocess.CompletedProcess(cmd, rc, out if rc == 0 else "", "" if rc == 0 else out)


def slurm_workflow(status_command="sacct", init=20, executor="slurm"):
    return SimpleNamespace(
        executor_plugin=SimpleNamespace(name=executor), is_main_process=True,
        executor_settings=SimpleNamespace(status_command=status_command, init_seconds_before_status_checks=init),
    )


@pytest.fixture
def fake(monkeypatch):
    def install(**kw):
        site = FakeSite(**kw)
        monkeypatch.setattr(cluster_mod, "_run", site)
        monkeypatch.setattr(cluster_mod.shutil, "which", lambda name: f"/usr/bin/{name}")
        return site

    return install


def test_read_site():
    parts = read_partitions(SINFO)
    assert parts["cpu"].default and parts["cpu"].cpus == 16 and not parts["cpu"].gpus
    assert parts["gpu"].gpus and parts["gpu"].cpus == 8 and not parts["gpu"].default
    assert min_job_age("MinJobAge               = 300 sec\nOther = 1\n") == 300


def test_local_runs_and_dry_runs_look_at_nothing(fake):
    site = fake()
    for workflow in (None, slurm_workflow(executor="dryrun"), slurm_workflow(executor="local")):
        s = SlurmSite({"cpu_partition": "nope", "gpu_partition": "nope"}, workflow, log=print)
        assert s.threads(8, gpu=False) == 8 and s.threads(8, gpu=True) == 8
        assert s.resources(lambda wc: 1)["slurm_partition"](None) == "nope"
    assert site.calls == []


def test_threads_capped_at_the_partition(fake):
    fake()
    logged = []
    site = SlurmSite({"gpu_partition": "gpu"}, slurm_workflow(), log=logged.append)
    assert site.threads(8, gpu=False) == 8  # default partition cpu: largest node 16 CPUs
    assert site.threads(32, gpu=False) == 16
    assert site.threads(32, gpu=True) == 8
    assert site.threads(32, gpu=True) == 8
    assert len([m for m in logged if "asking for 32 threads" in m]) == 2  # once per partition
    big = SlurmSite({"cpu_partition": "big"}, slurm_workflow(), log=logged.append)
    assert big.threads(32, gpu=False) == 32


def test_unknown_partition_or_gpu_partition_without_gpus_stops_the_run(fake):
    fake()
    with pytest.raises(ClusterError, match=r"cluster.cpu_partition: 'short' is not a partition.*cpu, gpu"):
        SlurmSite({"cpu_partition": "short"}, slurm_workflow(), log=print).threads(1, gpu=False)
    site = SlurmSite({"gpu_partition": "big"}, slurm_workflow(), log=print)
    assert site.resources(lambda wc: 0)["slurm_partition"](None) is None  # CPU jobs: fine
    with pytest.raises(ClusterError, match="offers no GPU"):
        site.resources(lambda wc: 1)["slurm_partition"](None)
    assert SlurmSite({}, slurm_workflow(), log=print).resources(lambda wc: 1)["slurm_partition"](None) == "gpu"


def test_account_only_when_set():
    assert "slurm_account" not in SlurmSite({"account": ""}).resources()
    assert SlurmSite({"account": "lab"}).resources()["slurm_account"] == "lab"


@pytest.mark.parametrize("sacct_rc, min_age, wanted, expect", [
    (1, 300, "sacct", "squeue"),   # no accounting storage: sacct fails -> squeue (MinJobAge long enough)
    (1, 300, "squeue", "squeue"),
    (0, 300, "sacct", "sacct"),    # accounting: the plugin's default stays
    (0, 60, "squeue", "sacct"),    # squeue would miss jobs finished between checks
    (1, 60, "sacct", None),        # neither works: a message, not a hang
])
def test_status_polling_never_hangs(fake, sacct_rc, min_age, wanted, expect):
    fake(sacct_rc=sacct_rc, min_age=min_age)
    workflow = slurm_workflow(status_command=wanted)
    site = SlurmSite({}, workflow, log=print)
    if expect is None:
        with pytest.raises(ClusterError, match="wait forever"):
            site.threads(1, gpu=False)
    else:
        site.threads(1, gpu=False)
        assert workflow.executor_settings.status_command == expect


def test_schema_documents_the_cluster_key():
    schema = yaml.safe_load((ROOT / "config/schemas/config.schema.yaml").read_text())
    props = schema["properties"]["cluster"]
    assert set(props["properties"]) == {"cpu_partition", "gpu_partition", "account"}
    assert all(p.get("description") for p in props["properties"].values())
    assert "cluster" in copy.deepcopy(schema["properties"]) and "large_threads" in schema["properties"]
