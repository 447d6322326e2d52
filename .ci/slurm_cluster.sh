#!/usr/bin/env bash
# A one-node SLURM cluster on this machine, for CI: `start` installs (Debian's
# slurm-wlm and munge, if missing), configures and starts munged, slurmctld and
# slurmd; `stop` stops exactly the daemons `start` started (by PID).
#
# No systemd, no cgroups, no accounting daemon: proctrack/linuxproc,
# task/none, accounting_storage/none. Two partitions on the one node: `cpu`
# (default) and `gpu`, the latter with a GPU generic resource backed by a fake
# device file, so GPU-marked jobs are routed and scheduled as on a real site.
# Every finished job is recorded by slurmctld in $STATE/log/jobcomp.txt
# (jobcomp/filetxt: state, partition, CPUs, memory), which is not accounting:
# `sacct` still fails here, as on a site without slurmdbd. MinJobAge=3600 keeps
# finished jobs in `scontrol show job` for an hour (and lets the plugin poll
# with squeue).
#
# Exit status 3: SLURM is not installed and cannot be (no apt-get, not root, or
# apt-get failed, e.g. offline); the caller may skip.
set -euo pipefail
STATE=${SLURM_CI_STATE:-/tmp/battus-slurm}
ACTION=${1:?usage: slurm_cluster.sh start|stop}

stop() {
    for name in slurmd slurmctld munged; do
        if [[ -f "$STATE/$name.pid" ]]; then
            pid=$(cat "$STATE/$name.pid")
            kill "$pid" 2>/dev/null || true
            for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
            rm -f "$STATE/$name.pid"
        fi
    done
}

if [[ $ACTION == stop ]]; then stop; exit 0; fi
stop  # daemons left by an earlier `start` (their PID files), never others

cannot() { echo "slurm_cluster.sh: cannot install SLURM: $*" >&2; exit 3; }
if ! command -v slurmctld >/dev/null || ! command -v slurmd >/dev/null \
        || ! command -v sbatch >/dev/null || ! command -v munged >/dev/null; then
    [[ $(id -u) == 0 ]] || cannot "not root"
    command -v apt-get >/dev/null || cannot "no apt-get (not Debian/Ubuntu)"
    # keep the packages' maintainer scripts from starting services during install
    # (an image's own policy-rc.d is left as it is)
    if [[ ! -e /usr/sbin/policy-rc.d ]]; then
        printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d && chmod +x /usr/sbin/policy-rc.d
        trap 'rm -f /usr/sbin/policy-rc.d' EXIT
    fi
    # offline: fail fast (no retries, short timeouts), not after many minutes
    apt=(-o Acquire::Retries=0 -o Acquire::http::Timeout=20 -o Acquire::https::Timeout=20)
    timeout 180 apt-get "${apt[@]}" update -qq || cannot "apt-get update failed (offline?)"
    DEBIAN_FRONTEND=noninteractive timeout 600 apt-get "${apt[@]}" install -y -qq \
        slurmctld slurmd slurm-client munge >/dev/null || cannot "apt-get install failed (offline?)"
fi

rm -f "$STATE/log/jobcomp.txt"  # a record of this cluster's jobs only
mkdir -p "$STATE"/{spool,state,log} /etc/slurm /run/munge /var/log/munge /var/lib/munge
host=$(hostname -s)
cpus=$(nproc)
mem_mb=$(( $(awk '/MemTotal/ {print $2}' /proc/meminfo) / 1024 - 1024 ))
fake_gpu="$STATE/fake-gpu0"  # slurmd only checks that a GPU's device file exists
touch "$fake_gpu"

cat > /etc/slurm/slurm.conf <<CONF
ClusterName=battus-ci
SlurmctldHost=$host
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
StateSaveLocation=$STATE/state
SlurmdSpoolDir=$STATE/spool
SlurmctldPidFile=$STATE/slurmctld.pid
SlurmdPidFile=$STATE/slurmd.pid
SlurmctldLogFile=$STATE/log/slurmctld.log
SlurmdLogFile=$STATE/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/filetxt
JobCompLoc=$STATE/log/jobcomp.txt
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
GresTypes=gpu
ReturnToService=2
MinJobAge=3600
SchedulerParameters=batch_sched_delay=0
NodeName=$host CPUs=$cpus RealMemory=$mem_mb Gres=gpu:1 State=UNKNOWN
PartitionName=cpu Nodes=$host Default=YES MaxTime=INFINITE State=UP
PartitionName=gpu Nodes=$host Default=NO MaxTime=INFINITE State=UP
CONF
printf 'NodeName=%s Name=gpu File=%s\n' "$host" "$fake_gpu" > /etc/slurm/gres.conf

if [[ ! -s /etc/munge/munge.key ]]; then
    mkdir -p /etc/munge
    dd if=/dev/urandom of=/etc/munge/munge.key bs=1024 count=1 status=none
fi
chown -R munge:munge /etc/munge /run/munge /var/log/munge /var/lib/munge 2>/dev/null || true
chmod 0400 /etc/munge/munge.key
su -s /bin/sh munge -c "/usr/sbin/munged --pid-file=/run/munge/munged.pid" 
for _ in $(seq 50); do [[ -s /run/munge/munged.pid ]] && break; sleep 0.1; done
cp /run/munge/munged.pid "$STATE/munged.pid"

/usr/sbin/slurmctld -i -f /etc/slurm/slurm.conf
/usr/sbin/slurmd -f /etc/slurm/slurm.conf
for _ in $(seq 100); do
    # a daemon that died (bad config) ends the wait at once
    for name in slurmctld slurmd; do
        if ! kill -0 "$(cat "$STATE/$name.pid" 2>/dev/null || echo 0)" 2>/dev/null; then
            sleep 1  # it may still be writing its PID file
            kill -0 "$(cat "$STATE/$name.pid" 2>/dev/null || echo 0)" 2>/dev/null || break 2
        fi
    done
    if timeout 5 sinfo -h -o '%T' 2>/dev/null | grep -qE '^(idle|mixed)'; then
        sinfo
        exit 0
    fi
    sleep 0.2
done
echo "slurm_cluster.sh: the node did not come up; logs in $STATE/log" >&2
tail -20 "$STATE"/log/*.log >&2 || true
stop
exit 1
