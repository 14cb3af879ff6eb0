// Whole-backtest kernel: one invocation runs one combo over a stretch of bars and keeps
// its integer totals and state in `runs`; the host dispatches the stretches in order, and
// after the last one `runs` holds the totals, bit for bit the CPU's `simulate_totals`
// (crates/backtest/src/simulate.rs). A stretch is at most MAX_LOOP_STEPS bars
// (crates/dispatch/src/gpu.rs): the loop below advances at least one bar per iteration,
// but for at most one iteration per block start that only records it (64 at most), so no
// invocation runs much more than that in one dispatch (lavapipe silently ends an
// invocation's loops after 65,535 iterations in all).
// It reads the signal book and its fixed-point tables, uploaded once: entry and exit
// decisions as bit rows (decided in f64 on the host), each bar's close as f64 bits and
// log close in 2^-52 units, the prefix sums of returns in 2^-64 units, and the stop
// series as f64 bits: ATR rows, from which the stop level is formed exactly as the CPU's
// f64 arithmetic does (exact.wgsl, put in front of this file at compile time), or a
// user's or a rule's levels (positive, or 0 for none), used as they are. A trade exits
// at the first close at or below its stop, at or above its take-profit, on an exit bit,
// or after max_bars bars. No float is used: a closed trade's return is the exact product
// of the exit close and the entry bar's gain factor, in integers (the host keeps a book's
// prices within a ratio where it stays under 2^31, crates/backtest/src/gpu_tables.rs).

// A combo's run: its totals so far (Totals in crates/backtest/src/fixed.rs; after the
// last stretch, the combo's totals), then where it stands between stretches.
struct Run {
    log_equity: vec2<u32>,
    drawdown: vec2<u32>,
    sums: RunSums,
    peak: vec2<u32>,
    level: vec2<u32>,
    take_profit_level: vec2<u32>,
    base: vec2<u32>,
    hi: vec2<u32>,
    low: vec2<u32>,
    // The next bar to look at, the entry bar, 1 while in a position, and the next block
    // start to record.
    t: u32,
    e: u32,
    in_position: u32,
    block: u32,
}

// (close bits low, high, log close low, high) per bar; then, where an exit at a level
// pays other costs than one on a signal, its (exit Σr, exit Σr²) per bar (params.stop_sums).
// Between the two, from index `bars`, the prefix sums of the downside per bar
// (BarTables::held: each HeldRow's third sum).
@group(0) @binding(0) var<storage, read> bar: array<vec4<u32>>;
@group(0) @binding(6) var<storage, read_write> runs: array<Run>;

const WORKGROUP: u32 = 64u;

// close · gain · 2^64, rounded half up, less 2^64 (fixed.rs::product_units), for a
// positive normal close and gain whose product is under 2^31.
fn product_units(close: vec2<u32>, gain: vec2<u32>) -> vec4<u32> {
    let m = mul53(significand(close), significand(gain));
    let shift = i32(biased_exponent(close)) + i32(biased_exponent(gain)) - 2086;
    var units = ZERO4;
    if (shift >= 0) {
        units = shl128(m, u32(shift));
    } else if (shift >= -107) {
        let k = u32(-shift);
        units = add128(shr128(m, k), vec4<u32>(shr128(m, k - 1u).x & 1u, 0u, 0u, 0u));
    }
    return sub128(units, vec4<u32>(0u, 0u, 1u, 0u));
}

// This kernel's stop kinds: 0, close − multiplier · the series (an ATR); 1, the series'
// level itself.
// The bits of level `stop` of `stops` for a trade entered at bar `e` with close bits
// `close`: 0 for NO_STOP or a level ≤ 0.
fn level_at(stop: u32, e: u32, close: vec2<u32>) -> vec2<u32> {
    if (stop == NO_STOP) {
        return vec2<u32>(0u, 0u);
    }
    let s = stops[stop];
    let value = series[s.x * params.bars + e];
    if (s.w == 1u) {
        return value;
    }
    return stop_level(close, value, s.yz);
}

@compute @workgroup_size(WORKGROUP)
fn backtest(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let i = gid.y * groups.x * WORKGROUP + gid.x;
    if (i >= params.combos) {
        return;
    }
    let plan = plans[params.first + i];
    let n = params.bars;
    let entry_base = plan.entry * params.words;
    let exit_base = params.exit_rows + plan.exit * params.words;
    let zero2 = vec2<u32>(0u, 0u);
    let zero4 = vec4<u32>(0u, 0u, 0u, 0u);
    var r = Run(zero2, zero2, RunSums(zero4, zero4, zero4, zero4, zero4, zero4, 0u, 0u, 0u, 0u), zero2, zero2, zero2,
        zero2, zero2, zero2, plan.warmup, 0u, 0u, 0u);
    if (params.start != 0u) {
        r = runs[params.first + i];
    }
    var trades = r.sums.trades;
    var closed = r.sums.closed;
    var wins = r.sums.wins;
    var held = r.sums.held;
    var drawdown = r.drawdown;
    var sum = r.sums.sum;
    var sum_sq = r.sums.sum_sq;
    var down_sq = r.sums.down_sq;
    var trade_sum = r.sums.trade_sum;
    var trade_sq = r.sums.trade_sq;
    var trade_gain = r.sums.trade_gain;
    // The entry bar's downside (the third of BarTables::entry).
    let entry_down = down_part(params.entry_ret, params.entry_ret_sq);
    var equity = r.log_equity;
    var peak = r.peak;
    // One flat loop over the bars, a state machine (flat or in a position): lavapipe
    // mixed up invocations whose nested loops (entry search, then the held stretch)
    // ran for different counts.
    var t = r.t;
    var in_position = r.in_position == 1u;
    var e = r.e;
    var level = r.level;
    var take_profit_level = r.take_profit_level;
    var base = r.base;
    var hi = r.hi;
    var low = r.low;
    var block = r.block;
    let snap_base = (params.first + i) * params.blocks * 2u;
    loop {
        // The next block start to record, or none (past every bar). Each iteration passes
        // at most one: the flat skip stops at it.
        var next_start = 0xffffffffu;
        if (block < params.blocks) {
            next_start = params.block_first + block * params.block_len;
            if (next_start <= t) {
                // Bars before it are done; in a position it is after the entry bar.
                var at = sum;
                var at_sq = sum_sq;
                if (in_position) {
                    at = add128(sum, add128(sub128(params.entry_ret, sums[e].ret), sums[next_start - 1u].ret));
                    at_sq = add128(sum_sq, add128(sub128(params.entry_ret_sq, sums[e].ret_sq), sums[next_start - 1u].ret_sq));
                }
                snaps[snap_base + 2u * block] = at;
                snaps[snap_base + 2u * block + 1u] = at_sq;
                block += 1u;
                next_start = 0xffffffffu;
                if (block < params.blocks) {
                    next_start = params.block_first + block * params.block_len;
                }
            }
        }
        if (t >= params.until) {
            break;
        }
        if (!in_position && next_start <= t) {
            // A warm-up passed several block starts: the next iteration records the next.
        } else if (!in_position) {
            // Skip to the next entry bit (none past the last bar), a word at a time, but
            // not past the next block start.
            let word = bits[entry_base + (t >> 5u)] >> (t & 31u);
            if (word == 0u) {
                t = min((t | 31u) + 1u, next_start);
            } else if (t + countTrailingZeros(word) >= next_start) {
                t = next_start;
            } else {
                t += countTrailingZeros(word);
                e = t;
                trades += 1u;
                let at_entry = bar[e];
                // Level 0 (no stop, or a level ≤ 0): no positive close is at or below
                // it; a take_profit_level of 0 is none.
                level = level_at(plan.stop, e, at_entry.xy);
                take_profit_level = level_at(plan.take_profit, e, at_entry.xy);
                base = sub64(add64(equity, params.log_buy), at_entry.zw);
                hi = max_i64(at_entry.zw, sub64(peak, base));
                low = sub64(at_entry.zw, hi);
                in_position = true;
                t += 1u;
            }
        } else {
            let b = bar[t];
            let signal = ((bits[exit_base + (t >> 5u)] >> (t & 31u)) & 1u) == 1u;
            let reached = (take_profit_level.x | take_profit_level.y) != 0u && le_u64(take_profit_level, b.xy);
            let expired = plan.max_bars != 0u && t - e >= plan.max_bars;
            let at_level = le_u64(b.xy, level) || reached;
            if (signal || at_level || expired) {
                drawdown = min_i64(drawdown, low);
                held += t - e;
                closed += 1u;
                var exit_sum = sums[t].exit;
                var exit_sq = sums[t].exit_sq;
                var sell = params.log_sell;
                var gain_at = params.gain_at;
                if (at_level) {
                    sell = params.log_sell_stop;
                    gain_at = params.gain_at_level;
                    if (params.stop_sums != 0u) {
                        exit_sum = bar[params.stop_sums + 2u * t];
                        exit_sq = bar[params.stop_sums + 2u * t + 1u];
                    }
                }
                sum = add128(sum, add128(sub128(params.entry_ret, sums[e].ret), exit_sum));
                sum_sq = add128(sum_sq, add128(sub128(params.entry_ret_sq, sums[e].ret_sq), exit_sq));
                // The exit bar's downside from its own terms (the third of BarTables::exit's sums).
                let exit_down = down_part(sub128(exit_sum, sums[t - 1u].ret), sub128(exit_sq, sums[t - 1u].ret_sq));
                down_sq = add128(down_sq, add128(sub128(entry_down, bar[n + e]), add128(bar[n + t - 1u], exit_down)));
                let terms = trade_terms(product_units(b.xy, series[gain_at + e]));
                trade_sum = add128(trade_sum, terms[0]);
                trade_sq = add128(trade_sq, terms[1]);
                trade_gain = add128(trade_gain, terms[2]);
                let after = add64(add64(base, sell), b.zw);
                if (lt_i64(zero2, sub64(after, equity))) {
                    wins += 1u;
                }
                peak = max_i64(add64(base, hi), after);
                drawdown = min_i64(drawdown, sub64(after, peak));
                equity = after;
                in_position = false;
                // No new entry on the bar of an exit.
                t += 1u;
            } else {
                hi = max_i64(hi, b.zw);
                low = min_i64(low, sub64(b.zw, hi));
                t += 1u;
            }
        }
    }
    if (params.until == n && in_position) {
        // Still open after the last bar: valued at the last close, no exit fee.
        drawdown = min_i64(drawdown, low);
        held += n - e;
        sum = add128(sum, add128(sub128(params.entry_ret, sums[e].ret), sums[n - 1u].ret));
        sum_sq = add128(sum_sq, add128(sub128(params.entry_ret_sq, sums[e].ret_sq), sums[n - 1u].ret_sq));
        down_sq = add128(down_sq, add128(sub128(entry_down, bar[n + e]), bar[n + n - 1u]));
        equity = add64(base, bar[n - 1u].zw);
        in_position = false;
    }
    if (params.until == n) {
        // Block starts a warm-up passed at the end, all flat.
        loop {
            if (block >= params.blocks) {
                break;
            }
            snaps[snap_base + 2u * block] = sum;
            snaps[snap_base + 2u * block + 1u] = sum_sq;
            block += 1u;
        }
    }
    let sums = RunSums(sum, sum_sq, down_sq, trade_sum, trade_sq, trade_gain, trades, closed, wins, held);
    runs[params.first + i] = Run(equity, drawdown, sums, peak, level, take_profit_level, base, hi, low, t, e,
        select(0u, 1u, in_position), block);
}
