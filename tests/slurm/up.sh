#!/usr/bin/env bash
# A real single-node SLURM on this machine, for the tests: Debian's slurm-wlm daemons
# (munged, slurmdbd, slurmctld, slurmd), one node (this host, its real CPUs and memory) in
# two partitions, `cpu` (default) and `gpu` (same node, no GRES). Idempotent: installs what
# is missing, (re)writes the config, starts the daemons that are not running, and waits
# until `sinfo` shows the node idle. Needs root. `tests/slurm/down.sh` stops it again.
#
# `sacct` (which snakemake's SLURM executor polls) needs job accounting: slurmdbd with a
# local MariaDB (slurm 22.05 has no file-based accounting storage any more).
# Memory is enforced by polling (jobacct_gather/linux + OverMemoryKill) and processes are
# tracked by linuxproc: cgroups are not available in every container.
set -euo pipefail

CONF_DIR=/etc/slurm
CONF=$CONF_DIR/slurm.conf
DBD_CONF=$CONF_DIR/slurmdbd.conf
MARK="# written by headlab tests/slurm/up.sh"
STATE=/var/lib/headlab-slurm
LOGS=/var/log/headlab-slurm
CLUSTER=headlab

die() { echo "slurm up.sh: $*" >&2; exit 1; }
running() { pgrep -x "$1" >/dev/null; }
# write_conf FILE MODE: stdin to FILE if it differs; exit status 0 when it changed
write_conf() {
    local new
    new=$(mktemp)
    cat >"$new"
    if [ -e "$1" ] && ! grep -qF "$MARK" "$1"; then
        rm -f "$new"
        die "$1 exists and was not written by this script: not overwriting a real cluster's config"
    fi
    if cmp -s "$new" "$1"; then rm -f "$new"; return 1; fi
    install -m "$2" "$new" "$1"
    rm -f "$new"
}

[ "$(id -u)" -eq 0 ] || die "needs root (it installs packages and starts daemons)"

missing=()
for exe in munged slurmctld slurmd slurmdbd sbatch sacct mariadbd pgrep; do
    command -v "$exe" >/dev/null || missing+=("$exe")
done
if [ ${#missing[@]} -gt 0 ]; then
    command -v apt-get >/dev/null || die "missing ${missing[*]} and no apt-get to install them"
    echo "slurm up.sh: installing slurm-wlm, munge and mariadb (missing: ${missing[*]})"
    export DEBIAN_FRONTEND=noninteractive
    # the packages' maintainer scripts must not start daemons (no config yet): this script does
    if [ ! -e /usr/sbin/policy-rc.d ]; then
        policy=/usr/sbin/policy-rc.d
        trap 'rm -f "$policy"' EXIT
        printf '#!/bin/sh\nexit 101\n' >"$policy" && chmod +x "$policy"
    fi
    apt-get update -qq </dev/null
    apt-get install -y -qq --no-install-recommends \
        slurmctld slurmd slurmdbd slurm-client munge mariadb-server procps </dev/null >/dev/null
fi

host=$(hostname -s)
# the node's real CPUs and memory, as slurmd itself sees them
read -r cpus mem < <(slurmd -C | awk '/^NodeName/ {
    for (i = 1; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] }
    print v["CPUs"], v["RealMemory"] }')
[ -n "$cpus" ] && [ -n "$mem" ] || die "could not read CPUs/RealMemory from slurmd -C"

mkdir -p "$CONF_DIR" "$STATE/ctld" "$STATE/d" "$LOGS"

changed=0
write_conf "$CONF" 0644 <<EOF && changed=1
$MARK
ClusterName=$CLUSTER
SlurmctldHost=$host(127.0.0.1)
SlurmUser=root
AuthType=auth/munge
StateSaveLocation=$STATE/ctld
SlurmdSpoolDir=$STATE/d
SlurmctldPidFile=$STATE/slurmctld.pid
SlurmdPidFile=$STATE/slurmd.pid
SlurmctldLogFile=$LOGS/slurmctld.log
SlurmdLogFile=$LOGS/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
JobAcctGatherType=jobacct_gather/linux
JobAcctGatherFrequency=task=1
JobAcctGatherParams=OverMemoryKill
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=localhost
JobCompType=jobcomp/none
AccountingStoreFlags=job_comment
ReturnToService=2
SchedulerType=sched/backfill
MpiDefault=none
SlurmdTimeout=300
InactiveLimit=0
KillWait=10
NodeName=$host NodeAddr=127.0.0.1 CPUs=$cpus RealMemory=$mem State=UNKNOWN
PartitionName=cpu Nodes=$host Default=YES MaxTime=INFINITE State=UP
PartitionName=gpu Nodes=$host MaxTime=INFINITE State=UP
EOF

write_conf "$DBD_CONF" 0600 <<EOF || true
$MARK
AuthType=auth/munge
DbdHost=localhost
SlurmUser=root
PidFile=$STATE/slurmdbd.pid
LogFile=$LOGS/slurmdbd.log
StorageType=accounting_storage/mysql
StorageHost=localhost
StorageUser=slurm
StoragePass=headlab
StorageLoc=slurm_acct_db
EOF

# munge: a key, then the daemon
if [ ! -s /etc/munge/munge.key ]; then
    mungekey --create --keyfile /etc/munge/munge.key 2>/dev/null \
        || dd if=/dev/urandom bs=1 count=1024 of=/etc/munge/munge.key status=none
fi
mkdir -p /run/munge /var/log/munge /var/lib/munge
chown munge:munge /etc/munge/munge.key /run/munge /var/log/munge /var/lib/munge
chmod 0400 /etc/munge/munge.key
chmod 0755 /run/munge
running munged || runuser -u munge -- munged --force
for _ in $(seq 50); do munge -n </dev/null | unmunge >/dev/null 2>&1 && break; sleep 0.2; done
munge -n </dev/null | unmunge >/dev/null || die "munge does not work"

# the accounting database: MariaDB, slurmdbd, the cluster registered in it
running mariadbd || /etc/init.d/mariadb start </dev/null >/dev/null
mariadb <<'SQL'
CREATE DATABASE IF NOT EXISTS slurm_acct_db;
CREATE USER IF NOT EXISTS 'slurm'@'localhost' IDENTIFIED BY 'headlab';
GRANT ALL ON slurm_acct_db.* TO 'slurm'@'localhost';
SQL
running slurmdbd || slurmdbd
for _ in $(seq 60); do sacctmgr -n list cluster >/dev/null 2>&1 && break; sleep 0.5; done
if ! sacctmgr -n -P list cluster format=cluster | grep -qx "$CLUSTER"; then
    sacctmgr -i add cluster "$CLUSTER" >/dev/null
fi

if [ "$changed" = 1 ] && running slurmctld; then
    scontrol reconfigure || true
fi
running slurmctld || slurmctld
running slurmd || slurmd

# wait until the node is idle (or already running jobs)
for _ in $(seq 120); do
    state=$(sinfo -h -n "$host" -o %T 2>/dev/null | sort -u | head -n1 || true)
    case "$state" in
        idle|mixed|allocated)
            echo "slurm up.sh: node $host $state ($cpus CPUs, $mem MB), partitions: $(sinfo -h -o %P | tr '\n' ' ')"
            exit 0 ;;
        down*|drain*) scontrol update nodename="$host" state=resume 2>/dev/null || true ;;
    esac
    sleep 1
done
sinfo -N -l >&2 || true
tail -n 20 "$LOGS/slurmctld.log" "$LOGS/slurmd.log" "$LOGS/slurmdbd.log" >&2 || true
die "node $host did not become idle"
