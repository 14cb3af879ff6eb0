#!/usr/bin/env bash
# One ThreadX sweep spread over a Slurm job array: task I of N runs shard I/N, and a
# dependent job merges the shards into the file one process would have written.
#
#   sbatch --array=0-7 examples/scale-out/slurm-sweep.sh          # 8 shards
#   sbatch --dependency=afterok:<jobid> --export=ALL,MERGE=1 examples/scale-out/slurm-sweep.sh
#
# Every task needs the same data and the same flags (the spec, data and chunking are
# checked at merge time). Results go to $OUT_DIR on a shared file system. A task that is
# preempted or killed resumes where it stopped when resubmitted (--resume).
#SBATCH --job-name=threadx-sweep
#SBATCH --cpus-per-task=16
#SBATCH --time=02:00:00
#SBATCH --output=threadx-sweep-%A_%a.log
set -euo pipefail

THREADX=${THREADX:-threadx}
OUT_DIR=${OUT_DIR:-$PWD/sweep-out}
SHARDS=${SHARDS:-${SLURM_ARRAY_TASK_COUNT:-8}}
SWEEP=(sweep --data "${DATA:-synthetic:bars=35040,seed=42}" --strategy bb_atr
       --grid bb_period=10:200:2 --grid bb_std=1:3:0.25 --grid atr_period=5:50:5 --grid atr_mult=0.5:5:0.5
       --quiet)
mkdir -p "$OUT_DIR"

if [[ "${MERGE:-0}" == 1 ]]; then
    shards=()
    for ((i = 0; i < SHARDS; i++)); do shards+=("$OUT_DIR/shard-$i.csv"); done
    exec "$THREADX" merge "${shards[@]}" --out "$OUT_DIR/results.csv"
fi

i=${SLURM_ARRAY_TASK_ID:?run as a job array: sbatch --array=0-$((SHARDS - 1))}
resume=()
[[ -d "$OUT_DIR/shard-$i.csv.parts" ]] && resume=(--resume)
threads=()
[[ -n "${SLURM_CPUS_PER_TASK:-}" ]] && threads=(--threads "$SLURM_CPUS_PER_TASK")
exec "$THREADX" "${SWEEP[@]}" --shard "$i/$SHARDS" "${threads[@]}" \
    --out "$OUT_DIR/shard-$i.csv" --heatmap "$OUT_DIR/shard-$i.svg" "${resume[@]}"
