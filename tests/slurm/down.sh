#!/usr/bin/env bash
# Stop what tests/slurm/up.sh started: cancel remaining jobs, stop slurmd, slurmctld,
# slurmdbd, MariaDB and munged (by their pid files / exact names). Leaves the packages and the config in place,
# so the next up.sh is quick. Idempotent.
set -uo pipefail
STATE=/var/lib/headlab-slurm
[ "$(id -u)" -eq 0 ] || { echo "slurm down.sh: needs root" >&2; exit 1; }

command -v scancel >/dev/null && scancel --full --quiet --user root 2>/dev/null
stop() {  # stop <name> <pidfile>
    local pid=""
    [ -s "$2" ] && pid=$(cat "$2")
    [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null || pid=$(pgrep -x "$1" | head -n1)
    [ -n "$pid" ] || return 0
    kill "$pid" 2>/dev/null
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || return 0; sleep 0.2; done
    kill -9 "$pid" 2>/dev/null
}
stop slurmd "$STATE/slurmd.pid"
stop slurmctld "$STATE/slurmctld.pid"
stop slurmdbd "$STATE/slurmdbd.pid"
if pgrep -x mariadbd >/dev/null; then /etc/init.d/mariadb stop </dev/null >/dev/null; fi
stop munged /run/munge/munged.pid
echo "slurm down.sh: stopped"
