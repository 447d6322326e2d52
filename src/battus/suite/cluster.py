"""Where the workflow's jobs go on a SLURM cluster, and whether the site can run them.

The config's `cluster` key is the one place for partitions and the account
(config/schemas/config.schema.yaml); `large_threads` is the one place for thread
requests. rules/common.smk turns them into each job's `slurm_partition`,
`slurm_account` and threads through :class:`SlurmSite`.

When the workflow runs under the SLURM executor plugin (never locally, never in
a dry run, never inside a job), the first job looked at reads the site once
(`sinfo`, `scontrol show config`, a trial `sacct`) and:

- caps thread requests at the CPUs of the largest node of the job's partition
  (a job asking for more would pend forever with Reason=PartitionConfig);
- fails with a message when a partition named in the config does not exist, or
  the GPU partition offers no GPU (`--gpus=1` there would also pend forever);
- makes sure the plugin's job-status polling can see jobs finish: on a site
  without accounting storage `sacct` fails and plugin 2.8.0 would wait forever,
  so it is told to poll with `squeue` (which sees a finished job for MinJobAge
  seconds); when neither can work the run stops here with a message instead
  of hanging.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Callable
from dataclasses import dataclass

# plugin 2.8.0: status checks start `init_seconds_before_status_checks` after
# submission and back off to at most 180 s apart; squeue only sees a finished
# job for MinJobAge seconds, so it must be longer than the longest gap
PLUGIN_MAX_STATUS_INTERVAL = 180


class ClusterError(Exception):
    """The SLURM site cannot run this configuration as configured."""


@dataclass
class Partition:
    name: str
    default: bool
    cpus: int  # of its largest node
    mem_mb: int
    gpus: bool


def read_partitions(sinfo_out: str) -> dict[str, Partition]:
    """Partitions from `sinfo -h -N -o '%P|%c|%m|%G'` (one line per node and partition)."""
    parts: dict[str, Partition] = {}
    for line in sinfo_out.splitlines():
        fields = line.strip().split("|")
        if len(fields) != 4:
            continue
        name, cpus, mem, gres = fields
        default = name.endswith("*")
        name = name.rstrip("*")
        cpus_n = int(cpus.rstrip("+")) if cpus.rstrip("+").isdigit() else 0
        mem_n = int(mem.rstrip("+")) if mem.rstrip("+").isdigit() else 0
        p = parts.setdefault(name, Partition(name, default, 0, 0, False))
        p.default |= default
        p.cpus = max(p.cpus, cpus_n)
        p.mem_mb = max(p.mem_mb, mem_n)
        p.gpus |= "gpu" in gres
    return parts


def min_job_age(config_out: str) -> int | None:
    """MinJobAge in seconds from `scontrol show config`."""
    for line in config_out.splitlines():
        key, _, value = line.partition("=")
        if key.strip() == "MinJobAge":
            number = value.strip().split()[0] if value.strip() else ""
            return int(number) if number.isdigit() else None
    return None


def _run(cmd: list[str]) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, capture_output=True, text=True, timeout=60)


class SlurmSite:
    """The config's `cluster` key, applied to jobs (see the module docstring)."""

    def __init__(self, cluster: dict, workflow=None, log: Callable[[str], None] | None = None):
        self.cpu_partition = cluster.get("cpu_partition") or None
        self.gpu_partition = cluster.get("gpu_partition") or "gpu"
        self.account = cluster.get("account") or None
        self.workflow = workflow
        self.log = log or _log
        self.partitions: dict[str, Partition] | None = None
        self._capped: set[tuple[str, int]] = set()
        self._gpu_checked = False

    # -- what every job gets, on any executor ---------------------------------
    def partition(self, gpu: bool) -> str | None:
        """The partition a job asks for; None = the site's default partition."""
        return self.gpu_partition if gpu else self.cpu_partition

    def resources(self, gpus: Callable | None = None) -> dict:
        """A rule's `slurm_partition` (a function of the job: None drops it, so the
        plugin uses the site's default partition) and `slurm_account` when set."""

        def slurm_partition(wildcards):
            gpu = bool(gpus(wildcards)) if gpus is not None else False
            self.check(gpu)
            return self.partition(gpu)

        res: dict = {"slurm_partition": slurm_partition}
        if self.account:
            res["slurm_account"] = self.account
        return res

    def threads(self, requested: int, gpu: bool) -> int:
        """`requested`, capped at the CPUs of the partition's largest node on SLURM."""
        if not self.on_slurm():
            return requested  # Snakemake caps at --cores locally
        self.check(gpu)
        part = self._partition_of(gpu)
        if part is None or not part.cpus or requested <= part.cpus:
            return requested
        if (part.name, requested) not in self._capped:
            self._capped.add((part.name, requested))
            self.log(
                f"battus: jobs asking for {requested} threads (large_threads, or a "
                f"plug-in's threads) get --cpus-per-task={part.cpus}: the nodes of "
                f"partition '{part.name}' have at most {part.cpus} CPUs"
            )
        return part.cpus

    # -- the site, read once when the slurm executor runs ---------------------
    def on_slurm(self) -> bool:
        wf = self.workflow
        plugin = getattr(wf, "executor_plugin", None) if wf is not None else None
        return plugin is not None and plugin.name == "slurm" and wf.is_main_process

    def check(self, gpu: bool) -> None:
        if not self.on_slurm():
            return
        if self.partitions is None:
            self.partitions = self._read_site()
            self._check_status_polling()
            self._require(self.cpu_partition, "cpu_partition", gpu=False)
        if gpu and not self._gpu_checked:
            self._gpu_checked = True
            self._require(self.gpu_partition, "gpu_partition", gpu=True)

    def _read_site(self) -> dict[str, Partition]:
        out = _run(["sinfo", "-h", "-N", "-o", "%P|%c|%m|%G"])
        if out.returncode != 0:
            raise ClusterError(f"`sinfo` failed ({out.stderr.strip()}): is this a SLURM login node?")
        parts = read_partitions(out.stdout)
        if not parts:
            raise ClusterError("`sinfo` lists no partition with nodes")
        return parts

    def _partition_of(self, gpu: bool) -> Partition | None:
        assert self.partitions is not None
        name = self.partition(gpu)
        if name is None:
            return next((p for p in self.partitions.values() if p.default), None)
        return self.partitions.get(name)

    def _require(self, name: str | None, key: str, gpu: bool) -> None:
        assert self.partitions is not None
        listed = ", ".join(sorted(self.partitions)) or "none"
        if name is not None and name not in self.partitions:
            raise ClusterError(
                f"config cluster.{key}: '{name}' is not a partition of this site "
                f"(sinfo lists: {listed}); set it in the config's `cluster` key"
            )
        if gpu:
            part = self.partitions[name]
            if not part.gpus:
                raise ClusterError(
                    f"config cluster.{key}: partition '{name}' offers no GPU "
                    f"(`sinfo -p {name} -o %G`), so GPU jobs (--gpus=1) would pend "
                    "forever; name the GPU partition, or set `backend: cpu`"
                )

    def _check_status_polling(self) -> None:
        """Make the plugin poll job status with a command that works here."""
        settings = getattr(self.workflow, "executor_settings", None)
        if settings is None or not hasattr(settings, "status_command"):
            return
        init = getattr(settings, "init_seconds_before_status_checks", 40) or 40
        config = _run(["scontrol", "show", "config"])
        age = min_job_age(config.stdout) if config.returncode == 0 else None
        needed = max(3 * init, PLUGIN_MAX_STATUS_INTERVAL + init)
        squeue_ok = age is not None and age >= needed
        sacct_ok = shutil.which("sacct") is not None and _run(
            ["sacct", "-X", "-n", "-o", "JobID", "--starttime", "now", "--endtime", "now"]
        ).returncode == 0
        wanted = settings.status_command
        if wanted == "squeue" and squeue_ok:
            return
        if wanted != "squeue" and sacct_ok:
            return
        if squeue_ok:
            settings.status_command = "squeue"
            self.log(
                f"battus: `sacct` does not work here (no accounting storage): job status "
                f"is polled with `squeue` (MinJobAge={age} s >= {needed} s)"
            )
        elif sacct_ok:
            settings.status_command = "sacct"
            self.log(
                f"battus: MinJobAge={age} s is shorter than the plugin's status interval "
                f"(needs >= {needed} s for `squeue`): job status is polled with `sacct`"
            )
        else:
            raise ClusterError(
                "no way to see SLURM jobs finish: `sacct` fails (no accounting "
                f"storage) and MinJobAge={age} s is too short for `squeue` (needs >= "
                f"{needed} s; `scontrol show config | grep MinJobAge`). The run would "
                "wait forever: ask the administrators for accounting (slurmdbd) or a "
                "longer MinJobAge, or lower --slurm-init-seconds-before-status-checks"
            )


def _log(message: str) -> None:
    try:
        from snakemake.logging import logger

        logger.warning(message)
    except Exception:  # pragma: no cover - outside Snakemake
        print(message)
