#!/usr/bin/env bash
# Proves the Slurm recipe on a real scheduler: starts a one-node Slurm cluster on this
# machine, submits examples/scale-out/slurm-sweep.sh unchanged as a job array of 3 shards
# plus its dependent merge job, waits for them, and checks that the merged file is the
# same bytes as one `threadx sweep` process on the same flags.
#
#   sudo examples/scale-out/slurm-local.sh        # Debian/Ubuntu; root, or sudo
#
# THREADX=path/to/threadx uses that binary instead of building a release one, and
# DATA=synthetic:bars=N,seed=S (read by slurm-sweep.sh) makes the sweep smaller: CI runs
# it on its debug build with 3,000 bars.
#
# Installs Debian's slurm-wlm and munge when missing. The cluster's files (config, state,
# logs, results) live in a temporary folder, and its daemons are stopped on exit; a
# munge daemon that was already running is left alone. Settings the example needs:
#   - the script asks for --cpus-per-task=16: on a smaller node, sbatch's
#     --cpus-per-task on the command line overrides it (done below);
#   - every task must reach the same $OUT_DIR (here one node; on a cluster, a shared
#     file system) and the same `threadx` ($THREADX, exported with --export=ALL).
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$PWD

sudo_if_needed() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }

if ! command -v slurmctld >/dev/null || ! command -v munged >/dev/null; then
    echo "== installing slurm-wlm and munge"
    sudo_if_needed apt-get update -qq
    DEBIAN_FRONTEND=noninteractive sudo_if_needed apt-get install -y -qq --no-install-recommends slurm-wlm munge >/dev/null
fi

if [ -z "${THREADX:-}" ]; then
    echo "== building threadx (release)"
    cargo build --release --quiet -p threadx
    THREADX=$root/target/release/threadx
fi
export THREADX

work=$(mktemp -d /tmp/threadx-slurm.XXXXXX)
chmod 755 "$work"
# Mesa's GL probing (threadx looks for adapters) wants a runtime folder.
export XDG_RUNTIME_DIR=${XDG_RUNTIME_DIR:-$work}
started_munge=0
cleanup() {
    local status=$?
    for pidfile in "$work"/slurmctld.pid "$work"/slurmd.pid; do
        [ -s "$pidfile" ] && sudo_if_needed kill "$(cat "$pidfile")" 2>/dev/null || true
    done
    # munged forks away from the pid that started it: stop it by name, if it is ours.
    [ "$started_munge" = 1 ] && sudo_if_needed pkill -x munged 2>/dev/null || true
    if [ "$status" != 0 ]; then
        echo "== failed; the cluster's logs:" >&2
        tail -n 20 "$work"/*.log >&2 2>/dev/null || true
    fi
    exit "$status"
}
trap cleanup EXIT

# munge: the authentication Slurm's daemons and commands share.
munge_works() { munge -n 2>/dev/null | unmunge >/dev/null 2>&1; }
if ! munge_works; then
    if [ ! -s /etc/munge/munge.key ]; then
        sudo_if_needed mkdir -p /etc/munge
        sudo_if_needed dd if=/dev/urandom of=/etc/munge/munge.key bs=1024 count=1 status=none
        sudo_if_needed chown munge:munge /etc/munge/munge.key 2>/dev/null || true
        sudo_if_needed chmod 400 /etc/munge/munge.key
    fi
    sudo_if_needed mkdir -p /run/munge /var/log/munge /var/lib/munge
    sudo_if_needed chown munge:munge /run/munge /var/log/munge /var/lib/munge 2>/dev/null || true
    sudo_if_needed runuser -u munge -- munged --force 2>/dev/null || sudo_if_needed munged --force
    started_munge=1
fi
for _ in $(seq 50); do munge_works && break; sleep 0.1; done
if ! munge_works; then
    echo "munge does not work here (see /var/log/munge/munged.log): Slurm cannot authenticate" >&2
    exit 1
fi

host=$(hostname -s)
cpus=$(nproc)
memory_mb=$(awk '/MemTotal/ { print int($2 / 1024) - 512 }' /proc/meminfo)
export SLURM_CONF=$work/slurm.conf
cat >"$SLURM_CONF" <<CONF
ClusterName=threadx-local
SlurmctldHost=$host
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
StateSaveLocation=$work/state
SlurmdSpoolDir=$work/spool
SlurmctldPidFile=$work/slurmctld.pid
SlurmdPidFile=$work/slurmd.pid
SlurmctldLogFile=$work/slurmctld.log
SlurmdLogFile=$work/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
MpiDefault=none
ReturnToService=2
MinJobAge=3600
NodeName=$host CPUs=$cpus RealMemory=$memory_mb State=UNKNOWN
PartitionName=local Nodes=$host Default=YES MaxTime=INFINITE State=UP
CONF
mkdir -p "$work/state" "$work/spool"
echo "== starting slurmctld and slurmd on $host ($cpus CPUs)"
sudo_if_needed env SLURM_CONF="$SLURM_CONF" slurmctld -i
sudo_if_needed env SLURM_CONF="$SLURM_CONF" slurmd
for _ in $(seq 100); do sinfo -h -o %t 2>/dev/null | grep -qE '^(idle|mix|alloc)' && break; sleep 0.2; done
if ! sinfo -h -o %t | grep -qE '^(idle|mix|alloc)'; then
    echo "the node did not come up within 20 s:" >&2
    sinfo >&2 || true
    exit 1
fi
sinfo

shards=3
export OUT_DIR=$work/out SHARDS=$shards
script=$root/examples/scale-out/slurm-sweep.sh
cd "$work"
array=$(sbatch --parsable --array=0-$((shards - 1)) --cpus-per-task=1 --export=ALL "$script")
merge=$(sbatch --parsable --dependency=afterok:"$array" --cpus-per-task=1 --export=ALL,MERGE=1 "$script")
echo "== submitted job array $array (shards 0-$((shards - 1))) and merge job $merge"

state() { scontrol show job "$1" 2>/dev/null | grep -o 'JobState=[A-Z_]*' | sort -u | cut -d= -f2 | paste -sd, -; }
deadline=$((SECONDS + ${SLURM_LOCAL_TIMEOUT:-900}))
while :; do
    s=$(state "$merge")
    case "$s" in
        COMPLETED) break ;;
        *FAILED* | *CANCELLED* | *TIMEOUT* | *NODE_FAIL* | *OUT_OF_MEMORY*)
            echo "merge job $merge ended $s; array $array: $(state "$array")" >&2
            tail -n 20 "$work"/threadx-sweep-*.log >&2 || true
            exit 1
            ;;
    esac
    if [ "$SECONDS" -ge "$deadline" ]; then
        echo "timed out; array $array: $(state "$array"), merge: $s" >&2
        exit 1
    fi
    sleep 1
done
echo "== array $array: $(state "$array"); merge $merge: COMPLETED"

# One process on the script's own flags: its SWEEP array, read from the file itself.
eval "$(sed -n '/^SWEEP=(/,/)$/p' "$script")"
echo "== one process: threadx ${SWEEP[*]}"
"$THREADX" "${SWEEP[@]}" --out "$work/one.csv"
if cmp "$OUT_DIR/results.csv" "$work/one.csv"; then
    echo "== identical: the merge of $shards Slurm shards is the bytes of one process" \
        "($(wc -l <"$work/one.csv") lines, sha256 $(sha256sum "$work/one.csv" | cut -c1-16)…)"
else
    echo "== the merged file differs from one process's" >&2
    exit 1
fi
