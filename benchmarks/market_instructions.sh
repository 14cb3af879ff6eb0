#!/usr/bin/env bash
# Issue #51's one-core market benches counted in instructions, not seconds: on a shared VM
# whose timings move ±30 % from run to run, callgrind's count of the instructions a combo's
# simulation runs is the same on every run, so two builds compare exactly. For each of
# `market_cpu/{close_only,intrabar_trail,long_short}` (benches/backtest.rs: 100 combos ×
# 35,040 bars) it runs the bench binary under callgrind for a short profile, counts the
# instructions inside `simulate_totals` (the simulation of one combo, the indicators and
# the book excluded) and divides by its calls: instructions per combo, and the ratio of
# close_only's to each (at equal instructions per cycle, the ratio of their bar·combos/s).
# Needs valgrind. Takes about two minutes.
#
# Usage: bash benchmarks/market_instructions.sh
set -euo pipefail
command -v valgrind >/dev/null || { echo "market_instructions.sh: valgrind is needed" >&2; exit 2; }
cd "$(dirname "$0")/.."
bench="$(cargo bench -p threadx-backtest --bench backtest --no-run 2>&1 | sed -n 's/.*Executable .*(\(.*\))/\1/p' | tail -1)"
[ -x "$bench" ] || { echo "market_instructions.sh: the bench binary was not built" >&2; exit 1; }
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
declare -A per_combo
for name in close_only intrabar_trail long_short; do
    valgrind --tool=callgrind --toggle-collect='*simulate_totals*' --callgrind-out-file="$work/$name" \
        "$bench" --bench "market_cpu/$name\$" --profile-time 2 >/dev/null 2>&1
    # Only simulate_totals is collected: the run's total is its cost; its calls are the
    # `calls=` lines under each `cfn=` naming it (by name once, then by its number).
    ir="$(awk '/^(summary|totals):/ {print $2; exit}' "$work/$name")"
    calls="$(awk '
        /^cfn=.*simulate::simulate_totals$/ {id = $1; sub(/ .*/, "", id); sub(/^cfn=/, "", id)}
        /^cfn=/ {c = $1; sub(/ .*/, "", c); sub(/^cfn=/, "", c); under = (id != "" && c == id); next}
        under && /^calls=/ {split($1, n, "="); total += n[2]; under = 0}
        END {print total + 0}' "$work/$name")"
    [ "$calls" -gt 0 ] || { echo "market_instructions.sh: no call of simulate_totals in $name's profile" >&2; exit 1; }
    per_combo[$name]=$((ir / calls))
done
printf '%-16s %14s %10s\n' bench "instr/combo" "close_only/it"
for name in close_only intrabar_trail long_short; do
    printf '%-16s %14s %9.1f%%\n' "$name" "${per_combo[$name]}" \
        "$(awk -v a="${per_combo[close_only]}" -v b="${per_combo[$name]}" 'BEGIN {print 100 * a / b}')"
done
