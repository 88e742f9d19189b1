#!/usr/bin/env bash
# Start a single-node Slurm cluster on this machine (slurmctld + slurmd on localhost), for CI
# and for developers who want to try `bench run --launcher slurm` without a cluster.
#
#   sudo scripts/slurm_local_cluster.sh          # install if needed, configure, start; idempotent
#   sudo scripts/slurm_local_cluster.sh stop     # stop the daemons this script started
#   scripts/slurm_local_cluster.sh status        # exit 0 when the node is up and idle/mixed/alloc
#
# Uses Debian's packages (slurm-wlm 22.05, munge). munged runs as user munge; slurmctld and
# slurmd run as root (SlurmUser=root), with select/cons_tres, proctrack/linuxproc and task/none,
# so no cgroup setup is needed (containers included). The configuration is written to
# /etc/slurm/slurm.conf only when none exists or when it carries this script's marker, so a
# real cluster's configuration is never overwritten.
set -euo pipefail

MARKER="# written by debias-bench scripts/slurm_local_cluster.sh"
CONF=/etc/slurm/slurm.conf
NODE="$(hostname -s)"
PARTITION="${SLURM_LOCAL_PARTITION:-debug}"
LOG_DIR=/var/log/slurm

log() { echo "slurm_local_cluster: $*" >&2; }

need_root() {
    if [ "$(id -u)" -ne 0 ]; then
        log "must run as root (it installs packages and starts daemons); try sudo $0 $*"
        exit 1
    fi
}

node_state() {
    sinfo -h -N -n "$NODE" -o '%T' 2>/dev/null | head -n1 || true
}

is_up() {
    command -v sinfo >/dev/null 2>&1 || return 1
    scontrol ping 2>/dev/null | grep -q 'is UP' || return 1
    case "$(node_state)" in
        idle* | mixed* | alloc* | allocated* | completing*) return 0 ;;
        *) return 1 ;;
    esac
}

install_packages() {
    if command -v slurmctld >/dev/null && command -v slurmd >/dev/null \
        && command -v munged >/dev/null && command -v sbatch >/dev/null; then
        return
    fi
    log "installing slurm-wlm and munge from Debian's packages"
    export DEBIAN_FRONTEND=noninteractive
    apt-get -o DPkg::Lock::Timeout=600 update -qq
    apt-get -o DPkg::Lock::Timeout=600 install -y -qq --no-install-recommends slurm-wlm munge >/dev/null
}

start_munge() {
    if [ ! -s /etc/munge/munge.key ]; then
        log "creating /etc/munge/munge.key"
        if command -v mungekey >/dev/null; then
            mungekey --create --keyfile=/etc/munge/munge.key --force
        else
            dd if=/dev/urandom of=/etc/munge/munge.key bs=1024 count=1 status=none
        fi
    fi
    chown munge:munge /etc/munge/munge.key
    chmod 400 /etc/munge/munge.key
    install -d -o munge -g munge -m 0755 /run/munge
    install -d -o munge -g munge -m 0700 /var/lib/munge /var/log/munge
    if munge -n 2>/dev/null | unmunge >/dev/null 2>&1; then
        return
    fi
    log "starting munged as user munge"
    runuser -u munge -- /usr/sbin/munged
    for _ in $(seq 50); do
        munge -n 2>/dev/null | unmunge >/dev/null 2>&1 && return
        sleep 0.1
    done
    log "munged did not answer"
    exit 1
}

write_config() {
    if [ -f "$CONF" ] && ! grep -qF "$MARKER" "$CONF"; then
        log "$CONF exists and was not written by this script; leaving it as it is"
        return
    fi
    local cpus mem
    cpus="$(nproc)"
    mem="$(awk '/MemTotal/ {print int($2 / 1024 * 0.9)}' /proc/meminfo)"
    install -d /etc/slurm /var/spool/slurmctld /var/spool/slurmd "$LOG_DIR"
    cat >"$CONF.tmp" <<EOF
$MARKER
ClusterName=localcluster
SlurmctldHost=$NODE(127.0.0.1)
SlurmUser=root
AuthType=auth/munge
CredType=cred/munge
MpiDefault=none
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
ReturnToService=2
JobRequeue=1
StateSaveLocation=/var/spool/slurmctld
SlurmdSpoolDir=/var/spool/slurmd
SlurmctldPidFile=/run/slurmctld.pid
SlurmdPidFile=/run/slurmd.pid
SlurmctldLogFile=$LOG_DIR/slurmctld.log
SlurmdLogFile=$LOG_DIR/slurmd.log
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/none
SchedulerType=sched/backfill
SchedulerParameters=sched_interval=2
MinJobAge=300
KillWait=10
InactiveLimit=0
SlurmctldTimeout=30
SlurmdTimeout=30
NodeName=$NODE NodeAddr=127.0.0.1 CPUs=$cpus RealMemory=$mem State=UNKNOWN
PartitionName=$PARTITION Nodes=$NODE Default=YES MaxTime=INFINITE State=UP OverSubscribe=NO
EOF
    if [ -f "$CONF" ] && cmp -s "$CONF" "$CONF.tmp"; then
        rm -f "$CONF.tmp"
    else
        mv "$CONF.tmp" "$CONF"
        CONFIG_CHANGED=1
    fi
}

daemon_running() { # name pidfile
    [ -f "$2" ] && kill -0 "$(cat "$2")" 2>/dev/null
}

start_daemons() {
    if [ "${CONFIG_CHANGED:-0}" = 1 ]; then
        stop_daemons
    fi
    if ! daemon_running slurmctld /run/slurmctld.pid; then
        log "starting slurmctld"
        slurmctld
    fi
    if ! daemon_running slurmd /run/slurmd.pid; then
        log "starting slurmd"
        slurmd
    fi
    for _ in $(seq 60); do
        if is_up; then
            log "up: node $NODE ($(node_state)), partition $PARTITION"
            return
        fi
        case "$(node_state)" in
            down* | drain* | drained* | fail*)
                scontrol update NodeName="$NODE" State=RESUME 2>/dev/null || true
                ;;
        esac
        sleep 1
    done
    log "the node did not come up; see $LOG_DIR/slurmctld.log and $LOG_DIR/slurmd.log"
    sinfo -N -l >&2 || true
    tail -n 20 "$LOG_DIR/slurmctld.log" "$LOG_DIR/slurmd.log" >&2 || true
    exit 1
}

stop_daemons() {
    local name pidfile
    for name in slurmd slurmctld; do
        pidfile="/run/$name.pid"
        if daemon_running "$name" "$pidfile"; then
            log "stopping $name"
            kill "$(cat "$pidfile")"
            for _ in $(seq 50); do
                daemon_running "$name" "$pidfile" || break
                sleep 0.2
            done
        fi
    done
}

case "${1:-start}" in
    start)
        need_root "$@"
        install_packages
        start_munge
        write_config
        start_daemons
        ;;
    stop)
        need_root "$@"
        stop_daemons
        ;;
    status)
        if is_up; then
            echo "up: node $NODE ($(node_state))"
        else
            echo "down"
            exit 1
        fi
        ;;
    *)
        echo "usage: $0 [start|stop|status]" >&2
        exit 2
        ;;
esac
