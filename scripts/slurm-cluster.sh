#!/usr/bin/env bash
# A real SLURM cluster on this one machine, for the project's SLURM tests.
#
# Usage: scripts/slurm-cluster.sh {start|stop|status|env|check}   (as root)
#
#   start   Build the cluster (or reuse a healthy one: a fast no-op) and print
#           the `export` lines of `env` on stdout, so
#           `eval "$(scripts/slurm-cluster.sh start)"` works. Installs
#           slurm-wlm + munge via apt when missing. A cluster that is not
#           healthy, or whose generated config changed (e.g. another node
#           count), is torn down and rebuilt. Waits on `sinfo` (bounded).
#   stop    Cancel all jobs, stop slurmd/slurmctld/munged via their pid files,
#           end what is left in the node namespaces, delete the namespaces,
#           the bridge and the /etc/hosts lines. Safe to run when stopped.
#   status  Print `sinfo` and the reason the cluster is not healthy, if any;
#           exit 0 when healthy, 1 otherwise.
#   env     Print the shell exports tests eval (partition, nodes, node IPs,
#           interface name, host address, GPUs per node).
#   check   End-to-end proof on a healthy cluster (~2 s): a job over all
#           nodes, a step on the last node seeing its hostname, IP and GPUs,
#           and a TCP server in that step reached from the host. Cleans up.
#
# Environment:
#   SRT_SLURM_NODE_COUNT      nodes n1..nN (default 2, 1..9)
#   SRT_SLURM_GPUS_PER_NODE   fake GPUs per node (default 4, 1..8)
#   SRT_SLURM_CPUS_PER_NODE   CPUs each node advertises (default 8; the nodes
#                             share this machine's cores, SlurmdParameters=
#                             config_overrides lets slurmd accept the number)
#   SRT_SLURM_START_TIMEOUT   seconds to wait for all nodes idle (default 60)
# status/env/check/stop take the sizes of the running cluster unless they
# are set explicitly.
#
# Layout. The controller (slurmctld) runs on the host and listens on the
# bridge srtbr0 = 10.77.0.1/24. Node nK runs its own slurmd inside the network
# namespace srt-nK, entered with `nsenter --net=... unshare --uts` (not
# `ip netns exec`, which remounts /sys so slurmd finds no cgroup fs), with a
# veth whose inner end is `eth0` = 10.77.0.(10+K)/24, and hostname nK in its
# own UTS namespace. Everything a step runs on nK (slurmstepd and the task)
# inherits those namespaces, so `hostname` says nK and servers bind on
# 10.77.0.(10+K), reachable from the host and the other nodes over the
# bridge. The namespaces have no default route: traffic stays on this
# machine. Each node has GPUs /dev/fakegpu0..N-1 (char devices cloned from
# /dev/null; gres.conf needs `File=`, with `Count=` alone slurmd reports 0
# GPUs and the node goes INVAL); SLURM sets CUDA_VISIBLE_DEVICES from them.
# /etc/hosts gets `10.77.0.1K nK` lines (marked, removed by stop); the file
# is shared by the host and the namespaces (no mount namespace).
#
# Observed behaviour (Debian slurm-wlm 22.05.8, proctrack/linuxproc,
# task/none), checked with this script's cluster; the Rust executor relies on
# it:
#
# * `sbatch -N 2 --gres=gpu:4 --wrap 'sleep 300'` then
#   `srun --jobid J --overlap --nodelist n2 -N1 -n1 sh -c 'hostname;
#   ip -4 addr show eth0; echo $CUDA_VISIBLE_DEVICES'` prints n2, 10.77.0.12
#   and 0,1,2,3: an overlapping step gets all of the job's GRES on its node.
#   A `python3 -m http.server --bind 10.77.0.12 PORT` started that way is
#   reachable from the host with curl at 10.77.0.12:PORT.
# * A job starts 1-2.5 s after sbatch. `srun --jobid J` on a still pending
#   job fails at once ("Unable to confirm allocation for job J: Job is
#   pending execution"), so wait for `squeue -h -j J -o %T` = RUNNING first.
#
# * Step lifetime follows the srun client, which is two processes: srun and
#   a helper child srun forks (same process group). Observed:
#   - SIGKILL to the main srun only: the helper notices and cancels the step;
#     its tasks are killed at once (a task trapping SIGTERM saw no SIGTERM)
#     and the step leaves `squeue --steps` within ~2.5 s.
#   - SIGTERM to srun: srun prints "forcing job termination" and the tasks
#     are killed right away, again without a SIGTERM reaching them; srun
#     exits 137. Two SIGINTs within 1 s: SIGINT is forwarded to the tasks,
#     then the step is killed.
#   - SIGKILL to both srun processes (the whole process group): nobody tells
#     slurmctld; the step and its tasks keep running, orphaned (checked for
#     36 s, with a task writing to stdout), until `scancel JOB.STEP` or the
#     end of the job. Killing a process group that holds srun does NOT stop
#     the remote work.
#   - `setsid nohup srun ... </dev/null >log 2>&1 &` from a shell that then
#     exits: both srun processes survive (re-parented to init) and the step
#     keeps running.
#   - What survives a step's end: only processes that left the task's process
#     tree, e.g. a task's `(setsid sleep 1001 &)` re-parented to init:
#     proctrack/linuxproc finds step processes by ancestry, so such a daemon
#     is neither signalled nor killed. If it still holds the task's
#     stdout/stderr, slurmstepd waits for EOF and the step stays listed
#     ("Abandoning IO 60 secs after job shutdown initiated") for 60 s more.
#     `stop` ends such leftovers via `ip netns pids`.
#   - `scancel JOB` (whole job): tasks of every step get SIGTERM, then SIGKILL
#     after KillWait (10 s here); srun clients exit 137.
#
# * Step reporting:
#   - `squeue --steps -j JOB -h -o '%i %j'` prints one line per live step,
#     `JOB.STEP NAME`, plus `JOB.batch batch` for the batch script (no extern
#     step: PrologFlags has no Contain). NAME is srun's `-J/--job-name`, else
#     the command's basename (e.g. `python3`). Step ids count up from 0 per
#     job and are not reused. A finished step disappears at once; an unknown
#     job prints nothing and exits 0 with --steps (without --steps,
#     `squeue -j 999` exits 1 "Invalid job id specified").
#   - `scontrol show step JOB.STEP` prints a block (`-o`: one line) of
#     `Key=Value`: StepId=3.8 UserId=0 StartTime=... TimeLimit=UNLIMITED
#     State=RUNNING Partition=debug NodeList=n2 Nodes=1 CPUs=1 Tasks=1
#     Name=k3 ... SrunHost:Pid=vm:2899 TresPerNode=gres:gpu:4 (host name and
#     pid of the srun client). A finished/unknown step: "Job step 3.8 not
#     found", exit 1.
#   - `scancel --signal=TERM JOB.STEP` delivers SIGTERM to every process of
#     that step (the task and its children), and only that step: other steps
#     and the batch script are untouched. The step ends only if its tasks
#     exit; a task that traps TERM keeps it running. A task that exits 0 on
#     TERM makes its srun exit 0. slurmstepd writes "*** STEP J.S ON nX
#     CANCELLED ***" to the step's stderr even when the task survives.
#     Exit status: 0 when the step spans all of the job's nodes, but 225
#     with "Kill job error on job step id J: Invalid job id specified" when
#     the step runs on a subset of the job's nodes, although the signal WAS
#     delivered (the client-side signal path apparently also addresses job
#     nodes without that step). `scancel --ctld --signal=TERM JOB.STEP`
#     goes through slurmctld and exits 0 in both cases. A signal to a step
#     that no longer exists exits 0 silently.
#   - `scancel JOB.STEP` (no --signal) kills the step's tasks at once, with
#     no SIGTERM first; srun exits 137. On an unknown step it exits 225.
#     So a graceful stop is: `scancel --ctld --signal=TERM JOB.STEP`, wait,
#     then `scancel JOB.STEP`.
set -euo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

STATE_DIR=/run/srt-slurm

# `start` builds what the environment asks for; the other commands judge the
# cluster that runs, so they take unset sizes from the env file `start` wrote.
if [[ "${1:-}" != start && -r "$STATE_DIR/env" ]]; then
    while IFS='=' read -r key value; do
        case "$key" in
        "export SRT_SLURM_NODE_COUNT") : "${SRT_SLURM_NODE_COUNT:=$value}" ;;
        "export SRT_SLURM_GPUS_PER_NODE") : "${SRT_SLURM_GPUS_PER_NODE:=$value}" ;;
        "export SRT_SLURM_CPUS_PER_NODE") : "${SRT_SLURM_CPUS_PER_NODE:=$value}" ;;
        esac
    done <"$STATE_DIR/env"
fi
NODE_COUNT="${SRT_SLURM_NODE_COUNT:-2}"
GPUS_PER_NODE="${SRT_SLURM_GPUS_PER_NODE:-4}"
CPUS_PER_NODE="${SRT_SLURM_CPUS_PER_NODE:-8}"
START_TIMEOUT="${SRT_SLURM_START_TIMEOUT:-60}"

PARTITION=debug
BRIDGE=srtbr0
NET_PREFIX=10.77.0
HOST_IP="$NET_PREFIX.1"
NODE_IFACE=eth0
NS_PREFIX=srt-
VETH_PREFIX=srtv-
HOSTS_FILE=/etc/hosts
HOSTS_MARK="# srt-slurm-cluster"
SLURM_CONF=/etc/slurm/slurm.conf
GRES_CONF=/etc/slurm/gres.conf
CTLD_PID=/run/slurmctld.pid
CTLD_LOG=/var/log/slurm/slurmctld.log
CTLD_STATE=/var/spool/slurmctld
MUNGE_PID=/run/munge/munged.pid
CONF_MARK="# Written by srt scripts/slurm-cluster.sh"

[[ "$NODE_COUNT" =~ ^[1-9]$ ]] || die "SRT_SLURM_NODE_COUNT must be 1..9 (got '$NODE_COUNT')"
[[ "$GPUS_PER_NODE" =~ ^[1-8]$ ]] || die "SRT_SLURM_GPUS_PER_NODE must be 1..8 (got '$GPUS_PER_NODE')"
[[ "$CPUS_PER_NODE" =~ ^[1-9][0-9]*$ ]] || die "SRT_SLURM_CPUS_PER_NODE must be a positive integer"
[[ "$START_TIMEOUT" =~ ^[1-9][0-9]*$ ]] || die "SRT_SLURM_START_TIMEOUT must be a positive integer"

node_name() { printf 'n%s' "$1"; }
node_ip() { printf '%s.%s' "$NET_PREFIX" "$((10 + $1))"; }
node_ns() { printf '%sn%s' "$NS_PREFIX" "$1"; }
node_pidfile() { printf '/run/slurmd-n%s.pid' "$1"; }
node_list() {
    local i out=""
    for ((i = 1; i <= NODE_COUNT; i++)); do out+="${out:+,}$(node_name "$i")"; done
    printf '%s' "$out"
}

# ---------------------------------------------------------------- processes

# pid_alive PIDFILE COMM: the pid in PIDFILE runs a program named COMM.
# Checking the name guards against a recycled pid from a stale file.
pid_alive() {
    local pidfile="$1" comm="$2" pid
    [[ -r "$pidfile" ]] || return 1
    pid="$(tr -dc '0-9' <"$pidfile")"
    [[ -n "$pid" && -r "/proc/$pid/comm" ]] || return 1
    [[ "$(cat "/proc/$pid/comm" 2>/dev/null)" == "$comm"* ]]
}

# stop_daemons PIDFILE COMM [PIDFILE COMM]...: SIGTERM to every live one at
# once (each takes 1-3 s to exit), wait up to 10 s, then SIGKILL leftovers.
stop_daemons() {
    local pids=() pidfile comm pid
    while (($#)); do
        pidfile="$1" comm="$2"
        shift 2
        if pid_alive "$pidfile" "$comm"; then
            pid="$(tr -dc '0-9' <"$pidfile")"
            kill -TERM "$pid" 2>/dev/null || true
            pids+=("$pid")
        fi
        rm -f "$pidfile"
    done
    ((${#pids[@]})) || return 0
    wait_until 10 0.1 pids_gone "${pids[@]}" && return 0
    for pid in "${pids[@]}"; do
        if [[ -e "/proc/$pid" ]]; then
            warn "$(cat "/proc/$pid/comm" 2>/dev/null) (pid $pid) ignored SIGTERM; killing"
            kill -KILL "$pid" 2>/dev/null || true
        fi
    done
    wait_until 5 0.1 pids_gone "${pids[@]}" || warn "still alive: ${pids[*]}"
}
pids_gone() {
    local pid
    for pid in "$@"; do
        [[ ! -e "/proc/$pid" ]] || return 1
    done
}

# kill_ns_procs NS: ends every process whose network namespace is NS (stray
# slurmstepd, tasks a step left behind), SIGTERM first then SIGKILL.
kill_ns_procs() {
    local ns="$1" pids
    pids="$(ip netns pids "$ns" 2>/dev/null | tr '\n' ' ')"
    [[ -n "${pids// /}" ]] || return 0
    log "ending processes left in $ns: $pids"
    # shellcheck disable=SC2086  # word splitting of the pid list is intended
    kill -TERM $pids 2>/dev/null || true
    wait_until 5 0.2 ns_empty "$ns" && return 0
    pids="$(ip netns pids "$ns" 2>/dev/null | tr '\n' ' ')"
    # shellcheck disable=SC2086
    kill -KILL $pids 2>/dev/null || true
    wait_until 5 0.2 ns_empty "$ns" || warn "processes still in $ns: $(ip netns pids "$ns" | tr '\n' ' ')"
}
ns_empty() { [[ -z "$(ip netns pids "$1" 2>/dev/null)" ]]; }

# ------------------------------------------------------------------- config

write_slurm_conf() {
    local i
    cat <<CONF
$CONF_MARK; regenerated on every rebuild.
ClusterName=srt
SlurmctldHost=$(hostname -s)($HOST_IP)
AuthType=auth/munge
CredType=cred/munge
SlurmUser=root
SlurmdUser=root
SlurmctldPort=6817
SlurmdPort=6818
StateSaveLocation=$CTLD_STATE
SlurmctldPidFile=$CTLD_PID
SlurmctldLogFile=$CTLD_LOG
SlurmdSpoolDir=/var/spool/slurmd-%n
SlurmdPidFile=/run/slurmd-%n.pid
SlurmdLogFile=/var/log/slurm/slurmd-%n.log
TmpFS=/tmp/slurm-%n
SlurmdParameters=config_overrides
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
MpiDefault=none
SwitchType=switch/none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
GresTypes=gpu
ReturnToService=2
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/none
InactiveLimit=0
KillWait=10
MinJobAge=300
SlurmdTimeout=60
SlurmctldTimeout=60
CONF
    for ((i = 1; i <= NODE_COUNT; i++)); do
        printf 'NodeName=%s NodeAddr=%s NodeHostname=%s CPUs=%s RealMemory=8000 Gres=gpu:%s State=UNKNOWN\n' \
            "$(node_name "$i")" "$(node_ip "$i")" "$(node_name "$i")" "$CPUS_PER_NODE" "$GPUS_PER_NODE"
    done
    printf 'PartitionName=%s Nodes=%s Default=YES MaxTime=1-00:00:00 State=UP\n' "$PARTITION" "$(node_list)"
}

write_gres_conf() {
    printf '%s\nAutoDetect=off\n' "$CONF_MARK"
    if ((GPUS_PER_NODE == 1)); then
        printf 'NodeName=n[1-%s] Name=gpu File=/dev/fakegpu0\n' "$NODE_COUNT"
    else
        printf 'NodeName=n[1-%s] Name=gpu File=/dev/fakegpu[0-%s]\n' "$NODE_COUNT" "$((GPUS_PER_NODE - 1))"
    fi
}

hosts_lines() {
    local i
    for ((i = 1; i <= NODE_COUNT; i++)); do
        printf '%s %s %s\n' "$(node_ip "$i")" "$(node_name "$i")" "$HOSTS_MARK"
    done
}

# -------------------------------------------------------------------- health

# cluster_health: returns 0 when the running cluster matches this script's
# configuration and every node is usable; else sets UNHEALTHY to the reason.
UNHEALTHY=""
cluster_health() {
    UNHEALTHY=""
    local i
    if [[ ! -f "$SLURM_CONF" ]] || [[ "$(cat "$SLURM_CONF")" != "$(write_slurm_conf)" ]]; then
        UNHEALTHY="$SLURM_CONF missing or differs from the wanted config"
        return 1
    fi
    if [[ ! -f "$GRES_CONF" ]] || [[ "$(cat "$GRES_CONF")" != "$(write_gres_conf)" ]]; then
        UNHEALTHY="$GRES_CONF missing or differs from the wanted config"
        return 1
    fi
    if [[ "$(grep -F "$HOSTS_MARK" "$HOSTS_FILE" 2>/dev/null)" != "$(hosts_lines)" ]]; then
        UNHEALTHY="$HOSTS_FILE lacks the node lines"
        return 1
    fi
    if ! munge_ok; then
        UNHEALTHY="munge does not work"
        return 1
    fi
    if ! pid_alive "$CTLD_PID" slurmctld; then
        UNHEALTHY="slurmctld is not running"
        return 1
    fi
    for ((i = 1; i <= NODE_COUNT; i++)); do
        if [[ ! -e "/var/run/netns/$(node_ns "$i")" ]]; then
            UNHEALTHY="namespace $(node_ns "$i") is missing"
            return 1
        fi
        if ! pid_alive "$(node_pidfile "$i")" slurmd; then
            UNHEALTHY="slurmd of $(node_name "$i") is not running"
            return 1
        fi
    done
    nodes_usable || return 1
}

# nodes_usable: `sinfo` lists exactly our nodes in the partition, each
# idle, allocated, mixed or completing (no `*` = not responding, no drain).
nodes_usable() {
    local out name state seen=0 i
    if ! out="$(timeout 15 sinfo -h -N -p "$PARTITION" -o '%N %T' 2>&1)"; then
        UNHEALTHY="sinfo failed: $out"
        return 1
    fi
    while read -r name state; do
        [[ -n "$name" ]] || continue
        case "$state" in
        idle | allocated | mixed | completing) ;;
        *)
            UNHEALTHY="node $name is $state"
            return 1
            ;;
        esac
        for ((i = 1; i <= NODE_COUNT; i++)); do
            [[ "$name" == "$(node_name "$i")" ]] && seen=$((seen + 1))
        done
    done <<<"$out"
    if ((seen != NODE_COUNT)); then
        UNHEALTHY="sinfo shows $seen of $NODE_COUNT nodes: $(tr '\n' ' ' <<<"$out")"
        return 1
    fi
}

munge_ok() { munge -n 2>/dev/null | unmunge >/dev/null 2>&1; }

# ------------------------------------------------------------------- pieces

start_munge() {
    if munge_ok; then
        return 0
    fi
    if [[ ! -s /etc/munge/munge.key ]]; then
        log "creating /etc/munge/munge.key"
        install -d -o munge -g munge -m 700 /etc/munge
        dd if=/dev/urandom of=/etc/munge/munge.key bs=1024 count=1 status=none
        chown munge:munge /etc/munge/munge.key
        chmod 400 /etc/munge/munge.key
    fi
    install -d -o munge -g munge -m 755 /run/munge
    install -d -o munge -g munge -m 700 /var/log/munge /var/lib/munge
    stop_daemons "$MUNGE_PID" munged
    log "starting munged"
    su -s /bin/sh munge -c '/usr/sbin/munged' </dev/null >/dev/null 2>&1 ||
        die "munged failed to start (see /var/log/munge/munged.log)"
    mkdir -p "$STATE_DIR"
    touch "$STATE_DIR/munged-started"
    wait_until 10 0.2 munge_ok || die "munge -n | unmunge does not succeed"
}

make_fake_gpus() {
    local g dev
    for ((g = 0; g < GPUS_PER_NODE; g++)); do
        dev="/dev/fakegpu$g"
        if [[ -c "$dev" && "$(stat -c '%t:%T' "$dev")" == "1:3" ]]; then
            continue
        fi
        rm -f "$dev"
        mknod -m 666 "$dev" c 1 3
    done
}

build_network() {
    local i ns veth
    if ! ip link show "$BRIDGE" >/dev/null 2>&1; then
        ip link add "$BRIDGE" type bridge
    fi
    ip addr replace "$HOST_IP/24" dev "$BRIDGE"
    ip link set "$BRIDGE" up
    for ((i = 1; i <= NODE_COUNT; i++)); do
        ns="$(node_ns "$i")"
        veth="$VETH_PREFIX$(node_name "$i")"
        ip netns add "$ns"
        ip link add "$veth" type veth peer name "$NODE_IFACE" netns "$ns"
        ip link set "$veth" master "$BRIDGE"
        ip link set "$veth" up
        ip -n "$ns" link set lo up
        ip -n "$ns" addr add "$(node_ip "$i")/24" dev "$NODE_IFACE"
        ip -n "$ns" link set "$NODE_IFACE" up
    done
}

add_hosts_lines() {
    remove_hosts_lines
    hosts_lines >>"$HOSTS_FILE"
}

# Rewrites /etc/hosts in place (it may be a bind mount, so no rename).
remove_hosts_lines() {
    local kept
    grep -qF "$HOSTS_MARK" "$HOSTS_FILE" 2>/dev/null || return 0
    kept="$(grep -vF "$HOSTS_MARK" "$HOSTS_FILE" || true)"
    printf '%s\n' "$kept" >"$HOSTS_FILE"
}

write_configs() {
    mkdir -p /etc/slurm
    if [[ -f "$SLURM_CONF" ]] && ! grep -qF "$CONF_MARK" "$SLURM_CONF"; then
        log "keeping the previous $SLURM_CONF as $SLURM_CONF.srt-orig"
        cp -n "$SLURM_CONF" "$SLURM_CONF.srt-orig"
    fi
    write_slurm_conf >"$SLURM_CONF"
    write_gres_conf >"$GRES_CONF"
}

start_slurmctld() {
    install -d -m 755 /var/log/slurm
    rm -rf "$CTLD_STATE"
    install -d -m 755 "$CTLD_STATE"
    log "starting slurmctld"
    # -c: start from a clean state (no jobs of an earlier cluster).
    slurmctld -c -i </dev/null >/dev/null 2>>"$CTLD_LOG" || die "slurmctld failed to start; see $CTLD_LOG"
    wait_until 20 0.2 ctld_up || die "slurmctld does not answer 'scontrol ping'; see $CTLD_LOG"
}
ctld_up() { timeout 5 scontrol ping 2>/dev/null | grep -q 'is UP'; }

start_slurmd() {
    local i="$1" name ns
    name="$(node_name "$i")"
    ns="$(node_ns "$i")"
    rm -rf "/var/spool/slurmd-$name" "/tmp/slurm-$name"
    install -d -m 755 "/var/spool/slurmd-$name"
    # Each node's TmpFS (slurm.conf): the nodes share this machine's /tmp, where the
    # PMIx plugin makes a directory per step that must not collide across nodes.
    install -d -m 1777 "/tmp/slurm-$name"
    log "starting slurmd $name in namespace $ns"
    nsenter --net="/var/run/netns/$ns" unshare --uts \
        sh -c "hostname $name && exec slurmd -N $name" \
        </dev/null >/dev/null 2>>"/var/log/slurm/slurmd-$name.log" ||
        die "slurmd $name failed to start; see /var/log/slurm/slurmd-$name.log"
}

print_env() {
    local i
    printf 'export SRT_SLURM_PARTITION=%s\n' "$PARTITION"
    printf 'export SRT_SLURM_NODE_COUNT=%s\n' "$NODE_COUNT"
    printf 'export SRT_SLURM_NODES=%s\n' "$(node_list)"
    local ips=""
    for ((i = 1; i <= NODE_COUNT; i++)); do ips+="${ips:+,}$(node_ip "$i")"; done
    printf 'export SRT_SLURM_NODE_IPS=%s\n' "$ips"
    for ((i = 1; i <= NODE_COUNT; i++)); do
        printf 'export SRT_SLURM_IP_N%s=%s\n' "$i" "$(node_ip "$i")"
    done
    printf 'export SRT_SLURM_IFACE=%s\n' "$NODE_IFACE"
    printf 'export SRT_SLURM_HOST_IP=%s\n' "$HOST_IP"
    printf 'export SRT_SLURM_GPUS_PER_NODE=%s\n' "$GPUS_PER_NODE"
    printf 'export SRT_SLURM_CPUS_PER_NODE=%s\n' "$CPUS_PER_NODE"
    printf 'export SRT_SLURM_NETNS_PREFIX=%s\n' "$NS_PREFIX"
}

# ----------------------------------------------------------------- commands

cmd_start() {
    need_root
    local start
    start="$(now)"
    ensure_slurm_packages
    if cluster_health; then
        log "cluster healthy, reusing it ($(elapsed_since "$start") s)"
        print_env
        return 0
    fi
    if pid_alive "$CTLD_PID" slurmctld || ip link show "$BRIDGE" >/dev/null 2>&1; then
        log "rebuilding: $UNHEALTHY"
    fi
    cmd_stop_quiet keep-munge
    start_munge
    make_fake_gpus
    build_network
    add_hosts_lines
    write_configs
    start_slurmctld
    local i
    for ((i = 1; i <= NODE_COUNT; i++)); do start_slurmd "$i"; done
    if ! wait_until "$START_TIMEOUT" 0.5 cluster_health; then
        timeout 15 sinfo -N >&2 || true
        die "cluster not healthy after ${START_TIMEOUT}s: $UNHEALTHY (logs in /var/log/slurm)"
    fi
    mkdir -p "$STATE_DIR"
    print_env >"$STATE_DIR/env"
    log "cluster up: $(node_list) in partition $PARTITION ($(elapsed_since "$start") s)"
    print_env
}

# Tears down whatever exists, whatever NODE_COUNT it was built with.
# `keep-munge` leaves munged running (a rebuild reuses it).
cmd_stop_quiet() {
    local ns pidfile jobs
    if pid_alive "$CTLD_PID" slurmctld; then
        jobs="$(timeout 15 squeue -h -o '%A' 2>/dev/null | tr '\n' ' ' || true)"
        if [[ -n "${jobs// /}" ]]; then
            log "cancelling jobs: $jobs"
            # shellcheck disable=SC2086
            timeout 15 scancel $jobs 2>/dev/null || true
            # A few seconds let tasks exit on SIGTERM; whatever is left (e.g.
            # a job stuck COMPLETING on a dead node) ends with the namespaces.
            wait_until 5 0.2 no_jobs_running || log "jobs still listed: $(squeue -h -o '%A %T' | tr '\n' ' ')"
        fi
    fi
    local daemons=()
    for pidfile in /run/slurmd-n*.pid; do
        [[ -e "$pidfile" ]] && daemons+=("$pidfile" slurmd)
    done
    daemons+=("$CTLD_PID" slurmctld)
    stop_daemons "${daemons[@]}"
    for ns in $(ip netns list 2>/dev/null | awk '{print $1}' | grep "^${NS_PREFIX}n[0-9]" || true); do
        kill_ns_procs "$ns"
        ip netns del "$ns"
    done
    if ip link show "$BRIDGE" >/dev/null 2>&1; then
        ip link del "$BRIDGE"
    fi
    remove_hosts_lines
    if [[ "${1:-}" == keep-munge ]]; then
        rm -f "$STATE_DIR/env"
        return 0
    fi
    if [[ -e "$STATE_DIR/munged-started" ]]; then
        stop_daemons "$MUNGE_PID" munged
    fi
    rm -rf "$STATE_DIR"
}
no_jobs_running() {
    [[ -z "$(timeout 10 squeue -h -t PENDING,RUNNING,CONFIGURING,COMPLETING,SUSPENDED -o '%A' 2>/dev/null)" ]]
}

cmd_stop() {
    need_root
    local start
    start="$(now)"
    cmd_stop_quiet
    log "cluster stopped ($(elapsed_since "$start") s)"
}

cmd_status() {
    if ! have sinfo; then
        echo "SLURM is not installed" >&2
        return 1
    fi
    if pid_alive "$CTLD_PID" slurmctld; then
        timeout 15 sinfo -N -l || true
    else
        echo "slurmctld is not running"
    fi
    if cluster_health; then
        echo "healthy: $(node_list) in partition $PARTITION"
        return 0
    fi
    echo "not healthy: $UNHEALTHY"
    return 1
}

# A quick end-to-end proof that the cluster does what the SLURM tests rely
# on: a multi-node GPU job, an overlapping step pinned to the last node that
# sees that node's hostname, IP and GPUs, and a TCP server in that step that
# the host reaches over the bridge. Leaves nothing behind.
CHECK_JOB=""
cmd_check() {
    need_root
    local start
    start="$(now)"
    cluster_health || die "cluster not healthy: $UNHEALTHY"
    have curl || apt_install curl
    local last ip gpus port=18099 out
    last="$(node_name "$NODE_COUNT")"
    ip="$(node_ip "$NODE_COUNT")"
    gpus="$(seq -s, 0 $((GPUS_PER_NODE - 1)))"
    CHECK_JOB="$(sbatch --parsable -N "$NODE_COUNT" --gres="gpu:$GPUS_PER_NODE" -J srt-check \
        -o /dev/null --wrap 'sleep 300')"
    trap 'scancel "$CHECK_JOB" 2>/dev/null || true' EXIT
    wait_until 30 0.2 job_running "$CHECK_JOB" || die "job $CHECK_JOB did not start"
    # shellcheck disable=SC2016  # $CUDA_VISIBLE_DEVICES expands on the node
    out="$(timeout 30 srun --jobid "$CHECK_JOB" --overlap --nodelist "$last" -N1 -n1 \
        sh -c 'hostname; ip -4 -o addr show eth0; echo "$CUDA_VISIBLE_DEVICES"')" ||
        die "srun on $last failed"
    [[ "$(sed -n 1p <<<"$out")" == "$last" ]] || die "hostname on $last: $out"
    grep -q "inet $ip/24" <<<"$out" || die "eth0 on $last lacks $ip: $out"
    [[ "$(sed -n 3p <<<"$out")" == "$gpus" ]] || die "CUDA_VISIBLE_DEVICES on $last: $out"
    log "step on $last: hostname $last, eth0 $ip, CUDA_VISIBLE_DEVICES=$gpus"
    srun --jobid "$CHECK_JOB" --overlap --nodelist "$last" -N1 -n1 -J srt-check-http \
        python3 -m http.server --bind "$ip" "$port" </dev/null >/dev/null 2>&1 &
    local srun_pid=$!
    if ! wait_until 30 0.2 curl -sf -m 2 -o /dev/null "http://$ip:$port/"; then
        kill "$srun_pid" 2>/dev/null || true
        die "server in a step on $last not reachable at $ip:$port"
    fi
    log "TCP from the host to a step on $last at $ip:$port works"
    kill -TERM "$srun_pid" 2>/dev/null || true
    wait "$srun_pid" 2>/dev/null || true
    scancel "$CHECK_JOB"
    trap - EXIT
    log "check passed ($(elapsed_since "$start") s)"
}
job_running() { [[ "$(squeue -h -j "$1" -o '%T' 2>/dev/null)" == RUNNING ]]; }

cmd_env() {
    if [[ -r "$STATE_DIR/env" ]]; then
        cat "$STATE_DIR/env"
    else
        warn "cluster not started; printing the values 'start' would use"
        print_env
    fi
}

case "${1:-}" in
start) cmd_start ;;
stop) cmd_stop ;;
status) cmd_status ;;
env) cmd_env ;;
check) cmd_check ;;
-h | --help | help) sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//' ;;
*)
    echo "usage: $0 {start|stop|status|env|check}" >&2
    exit 2
    ;;
esac
