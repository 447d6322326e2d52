#!/usr/bin/env bash
# A one-node SLURM cluster on this machine, for CI: `start` installs (Debian's
# slurm-wlm and munge, if missing), configures and starts munged, slurmctld and
# slurmd; `stop` stops exactly the daemons `start` started (by PID).
#
# No systemd, no cgroups, no accounting daemon: proctrack/linuxproc,
# task/none, accounting_storage/none. Two partitions on the one node: `cpu`
# (default) and `gpu`, the latter with a GPU generic resource backed by a fake
# device file, so GPU-marked jobs are routed and scheduled as on a real site.
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

if ! command -v slurmctld >/dev/null || ! command -v munged >/dev/null; then
    # keep the packages' maintainer scripts from starting services during install
    printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d && chmod +x /usr/sbin/policy-rc.d
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq slurmctld slurmd slurm-client munge >/dev/null
    rm -f /usr/sbin/policy-rc.d
fi

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
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
GresTypes=gpu
ReturnToService=2
MinJobAge=300
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
    if sinfo -h -o '%T' 2>/dev/null | grep -qE '^(idle|mixed)'; then
        sinfo
        exit 0
    fi
    sleep 0.2
done
echo "slurm_cluster.sh: the node did not come up; logs in $STATE/log" >&2
tail -20 "$STATE"/log/*.log >&2 || true
stop
exit 1
