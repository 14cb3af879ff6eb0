// Market kernel: one invocation runs one combo of a book the whole-backtest kernel does
// not trade (shorts and reversals, trails, stops inside the bar, fills at the next open)
// over a stretch of bars, with its state in `runs` between stretches, as backtest.wgsl
// does. It is crates/backtest/src/market.rs bar for bar, in the same order of checks and
// with the same f64 operations, each computed exactly by float64.wgsl (put in front of
// this file with exact.wgsl and backtest_common.wgsl): equity, shares, cash, levels and
// every return are the CPU's bits, so every decision is the CPU's. The host turns the
// final equity and drawdown ratio into log units (crates/backtest/src/gpu_market.rs) and
// runs on the CPU any combo whose arithmetic left the range float64.wgsl computes.
// One loop iteration per bar, plus one per block start recorded (64 at most).

// A combo's run: its sums and counts (Totals in crates/backtest/src/fixed.rs), its equity
// marks (the last, the peak, the lowest since the peak and the lowest ratio of a trough
// to its peak), its cash while flat, its position and pending order, where it stands.
struct MarketRun {
    sums: RunSums,
    equity: vec2<u32>,
    peak: vec2<u32>,
    trough: vec2<u32>,
    worst: vec2<u32>,
    cash: vec2<u32>,
    // The position: shares, cash beside them (a short's includes the sale), equity just
    // before its entry, its frozen stop and take-profit (0: none), its trail's factor
    // (1 − fraction for a long, 1 + fraction for a short) and distance, its best price.
    shares: vec2<u32>,
    beside: vec2<u32>,
    before: vec2<u32>,
    stop: vec2<u32>,
    take_profit: vec2<u32>,
    trail_factor: vec2<u32>,
    trail_distance: vec2<u32>,
    best: vec2<u32>,
    // The next bar, the fill bar and the decision bar of the position, the next block.
    t: u32,
    entry: u32,
    decided: u32,
    block: u32,
    // STATE_* bits.
    state: u32,
    pad: u32,
}

const STATE_IN_POSITION: u32 = 1u;
const STATE_SHORT: u32 = 2u;
const STATE_TRAILS: u32 = 4u;
const STATE_PENDING: u32 = 8u;
const STATE_PENDING_EXIT: u32 = 16u;
const STATE_PENDING_AT_LEVEL: u32 = 32u;
const STATE_PENDING_ENTRY: u32 = 64u;
const STATE_PENDING_SHORT: u32 = 128u;
// The combo's arithmetic left float64.wgsl's range: the host runs it on the CPU.
const STATE_OUT_OF_RANGE: u32 = 256u;

// Params.fills bits.
const FILL_NEXT_OPEN: u32 = 1u;
const FILL_INTRABAR: u32 = 2u;

// Stop kinds (crates/backtest/src/book/stops.rs::Stop): close − m · s, s itself,
// close · (1 ± s), m · s (a trail's distance); a stop's parameter is m, or the sign ±1.
const STOP_DISTANCE: u32 = 0u;
const STOP_LEVEL: u32 = 1u;
const STOP_FRACTION: u32 = 2u;
const STOP_SCALED: u32 = 3u;

// Per bar (close, open) then (high, low) as f64 bits; from index params.stop_sums, where
// an exit at a level pays other costs, its (exit Σr, exit Σr²) per bar.
@group(0) @binding(0) var<storage, read> prices: array<vec4<u32>>;
@group(0) @binding(6) var<storage, read_write> runs: array<MarketRun>;

const WORKGROUP: u32 = 64u;

var<private> run: MarketRun;

fn close_at(t: u32) -> vec2<u32> {
    return prices[2u * t].xy;
}

fn open_at(t: u32) -> vec2<u32> {
    return prices[2u * t].zw;
}

fn high_at(t: u32) -> vec2<u32> {
    return prices[2u * t + 1u].xy;
}

fn low_at(t: u32) -> vec2<u32> {
    return prices[2u * t + 1u].zw;
}

// Whether bit t of the row at word `base` is set; NO_STOP: a row of none.
fn bit_at(base: u32, t: u32) -> bool {
    return base != NO_STOP && ((bits[base + (t >> 5u)] >> (t & 31u)) & 1u) == 1u;
}

fn row_word(base: u32, t: u32) -> u32 {
    if (base == NO_STOP) {
        return 0u;
    }
    return bits[base + (t >> 5u)] >> (t & 31u);
}

fn in_position() -> bool {
    return (run.state & STATE_IN_POSITION) != 0u;
}

fn short_side() -> bool {
    return (run.state & STATE_SHORT) != 0u;
}

fn has(level: vec2<u32>) -> bool {
    return (level.x | level.y) != 0u;
}

// StopRule::frozen_level: the level of stop `stop` decided at bar d with close `close`,
// if positive and finite; 0: none.
fn frozen_level(stop: u32, d: u32, close: vec2<u32>) -> vec2<u32> {
    if (stop == NO_STOP) {
        return vec2<u32>(0u, 0u);
    }
    let s = stops[stop];
    let v = series[s.x * params.bars + d];
    if (!f64_finite(v)) {
        return vec2<u32>(0u, 0u);
    }
    var level = v;
    if (s.w == STOP_DISTANCE) {
        level = f64_sub(close, f64_mul(s.yz, v));
    } else if (s.w == STOP_FRACTION) {
        if (!f64_positive(v)) {
            return vec2<u32>(0u, 0u);
        }
        let signed = select(v, f64_neg(v), f64_negative(s.yz));
        level = f64_mul(close, f64_add(F64_ONE, signed));
    } else if (s.w == STOP_SCALED) {
        level = f64_mul(s.yz, v);
    }
    return select(vec2<u32>(0u, 0u), level, f64_positive(level));
}

// StopRule::trail at bar d: (fraction, distance), or zeros for none.
fn trail_at(stop: u32, d: u32) -> vec4<u32> {
    if (stop == NO_STOP) {
        return vec4<u32>(0u, 0u, 0u, 0u);
    }
    let s = stops[stop];
    var v = series[s.x * params.bars + d];
    if (!f64_finite(v)) {
        return vec4<u32>(0u, 0u, 0u, 0u);
    }
    if (s.w == STOP_SCALED) {
        v = f64_mul(s.yz, v);
    }
    if (!f64_positive(v)) {
        return vec4<u32>(0u, 0u, 0u, 0u);
    }
    if (s.w == STOP_FRACTION) {
        return vec4<u32>(v, 0u, 0u);
    }
    return vec4<u32>(0u, 0u, v);
}

// Position::binding_stop's level: the tighter of the stop and the trail (0: none).
fn binding_stop() -> vec2<u32> {
    if ((run.state & STATE_TRAILS) == 0u) {
        return run.stop;
    }
    let moved = f64_mul(run.best, run.trail_factor);
    var trail: vec2<u32>;
    if (short_side()) {
        trail = f64_add(moved, run.trail_distance);
        if (has(run.stop) && !f64_lt(trail, run.stop)) {
            return run.stop;
        }
    } else {
        trail = f64_sub(moved, run.trail_distance);
        if (has(run.stop) && !f64_lt(run.stop, trail)) {
            return run.stop;
        }
    }
    // A trail of exactly 0 reads as none: no positive price is at or below it.
    return trail;
}

// Whether price p is at or beyond stop level l (below a long's, above a short's).
fn stopped(p: vec2<u32>, l: vec2<u32>) -> bool {
    if (short_side()) {
        return f64_le(l, p);
    }
    return f64_le(p, l);
}

// Whether price p is at or beyond take-profit level l.
fn reached(p: vec2<u32>, l: vec2<u32>) -> bool {
    if (short_side()) {
        return f64_le(p, l);
    }
    return f64_le(l, p);
}

// The position's value at price p.
fn position_value(p: vec2<u32>) -> vec2<u32> {
    let worth = f64_mul(run.shares, p);
    if (short_side()) {
        return f64_sub(run.beside, worth);
    }
    return worth;
}

// Opens a position on `short` or long with the cash at hand, decided at bar d and filled
// at bar e at price p (market_position.rs::open, Position's levels frozen at d).
fn enter(short: bool, d: u32, e: u32, p: vec2<u32>, plan: Plan) {
    let cash = run.cash;
    if (short) {
        run.shares = f64_div(cash, f64_mul(f64_mul(p, params.slip_down), params.fee_up));
        run.beside = f64_add(cash, f64_mul(f64_mul(run.shares, p), params.sell_factor));
        run.stop = frozen_level(plan.short_stop, d, close_at(d));
        run.take_profit = frozen_level(plan.short_take_profit, d, close_at(d));
    } else {
        run.shares = f64_div(cash, f64_mul(p, params.buy_factor));
        run.beside = vec2<u32>(0u, 0u);
        run.stop = frozen_level(plan.stop, d, close_at(d));
        run.take_profit = frozen_level(plan.take_profit, d, close_at(d));
    }
    let trail = trail_at(plan.trail, d);
    var state = (run.state & ~(STATE_SHORT | STATE_TRAILS)) | STATE_IN_POSITION;
    if (short) {
        state |= STATE_SHORT;
    }
    if (has(trail.xy) || has(trail.zw)) {
        state |= STATE_TRAILS;
        if (short) {
            run.trail_factor = f64_add(F64_ONE, trail.xy);
        } else {
            run.trail_factor = f64_sub(F64_ONE, trail.xy);
        }
        run.trail_distance = trail.zw;
    }
    run.state = state;
    run.before = cash;
    run.entry = e;
    run.decided = d;
    run.best = p;
    run.sums.trades += 1u;
}

// Closes the position at bar x at price p, at a level (the fee alone) or not: the cash
// it leaves (market_position.rs::close_out; a short's never below 0), counted.
fn close_position(x: u32, p: vec2<u32>, at_level: bool) {
    let worth = f64_mul(run.shares, p);
    var after: vec2<u32>;
    if (short_side()) {
        after = f64_sub(run.beside, f64_mul(worth, select(params.buy_factor, params.fee_up, at_level)));
        if (f64_negative(after)) {
            after = vec2<u32>(0u, 0u);
        }
    } else {
        after = f64_mul(worth, select(params.sell_factor, params.fee_down, at_level));
    }
    run.sums.held += x - run.entry;
    run.sums.closed += 1u;
    let gain = f64_ret_units(f64_sub(f64_div(after, run.before), F64_ONE));
    // square_units holds |gain| < 2^95 (a return under 2^31); past it the CPU runs the combo.
    let magnitude = select(gain, sub128(ZERO4, gain), (gain.w >> 31u) == 1u);
    if (magnitude.w != 0u || magnitude.z >= 0x80000000u) {
        out_of_range = true;
    }
    let terms = trade_terms(gain);
    run.sums.trade_sum = add128(run.sums.trade_sum, terms[0]);
    run.sums.trade_sq = add128(run.sums.trade_sq, terms[1]);
    run.sums.trade_gain = add128(run.sums.trade_gain, terms[2]);
    if (f64_lt(run.before, after)) {
        run.sums.wins += 1u;
    }
    run.cash = after;
    run.state &= ~(STATE_IN_POSITION | STATE_SHORT | STATE_TRAILS);
}

// Bar t ends with equity e: its return (`given`: r1, r2 from the tables, else
// e / E[t−1] − 1 in f64), then peak, trough and drawdown (market.rs's Run::mark).
fn mark(e: vec2<u32>, given: bool, r1: vec4<u32>, r2: vec4<u32>) {
    var ret = r1;
    var ret_sq = r2;
    if (!given) {
        let x = f64_sub(f64_div(e, run.equity), F64_ONE);
        ret = f64_ret_units(x);
        ret_sq = f64_ret_units(f64_mul(x, x));
    }
    run.sums.sum = add128(run.sums.sum, ret);
    run.sums.sum_sq = add128(run.sums.sum_sq, ret_sq);
    run.sums.down_sq = add128(run.sums.down_sq, down_part(ret, ret_sq));
    if (f64_lt(run.peak, e)) {
        // A trough equal to its peak is a ratio of 1: no lower than `worst` (≤ 1).
        if (any(run.trough != run.peak)) {
            let ratio = f64_div(run.trough, run.peak);
            if (f64_lt(ratio, run.worst)) {
                run.worst = ratio;
            }
        }
        run.peak = e;
        run.trough = e;
    } else if (f64_lt(e, run.trough)) {
        run.trough = e;
    }
    run.equity = e;
}

// The stop or take-profit a bar reaches inside it (market_position.rs::intrabar_exit):
// (1, fill price) or (0, _). The stop comes first; a bar opening beyond a level fills at
// the open.
fn intrabar_exit(t: u32) -> vec3<u32> {
    let open = open_at(t);
    var against = low_at(t);
    var toward = high_at(t);
    if (short_side()) {
        against = high_at(t);
        toward = low_at(t);
    }
    let stop = binding_stop();
    if (has(stop)) {
        if (stopped(open, stop)) {
            return vec3<u32>(1u, open);
        }
        if (stopped(against, stop)) {
            return vec3<u32>(1u, stop);
        }
    }
    if (has(run.take_profit)) {
        if (reached(open, run.take_profit)) {
            return vec3<u32>(1u, open);
        }
        if (reached(toward, run.take_profit)) {
            return vec3<u32>(1u, run.take_profit);
        }
    }
    return vec3<u32>(0u, 0u, 0u);
}

// What the close of bar t decides for the position (market_position.rs::decide), as
// ORDER_* bits (0: hold).
const ORDER_EXIT: u32 = 1u;
const ORDER_AT_LEVEL: u32 = 2u;
const ORDER_ENTRY: u32 = 4u;
const ORDER_SHORT: u32 = 8u;

fn decide(t: u32, plan: Plan, rows: vec4<u32>, intrabar: bool) -> u32 {
    if (!intrabar) {
        let close = close_at(t);
        let stop = binding_stop();
        if (has(stop) && stopped(close, stop)) {
            return ORDER_EXIT | ORDER_AT_LEVEL;
        }
        if (has(run.take_profit) && reached(close, run.take_profit)) {
            return ORDER_EXIT | ORDER_AT_LEVEL;
        }
    }
    let long_in = bit_at(rows.x, t);
    let short_in = bit_at(rows.z, t);
    if (short_side()) {
        if (long_in && !short_in) {
            return ORDER_EXIT | ORDER_ENTRY;
        }
        if (bit_at(rows.w, t)) {
            return ORDER_EXIT;
        }
    } else {
        if (short_in && !long_in) {
            return ORDER_EXIT | ORDER_ENTRY | ORDER_SHORT;
        }
        if (bit_at(rows.y, t)) {
            return ORDER_EXIT;
        }
    }
    if (plan.max_bars != 0u && t >= run.entry + plan.max_bars) {
        return ORDER_EXIT;
    }
    return 0u;
}

// The return sums of a long left at bar t's close after holding through it, or entered
// there from flat, as the tables hold them (market.rs's `table_return`).
fn exit_return(t: u32, at_level: bool) -> array<vec4<u32>, 2> {
    var exit = sums[t].exit;
    var exit_sq = sums[t].exit_sq;
    if (at_level && params.stop_sums != 0u) {
        exit = prices[params.stop_sums + 2u * t];
        exit_sq = prices[params.stop_sums + 2u * t + 1u];
    }
    return array<vec4<u32>, 2>(sub128(exit, sums[t - 1u].ret), sub128(exit_sq, sums[t - 1u].ret_sq));
}

// One bar of market.rs's loop: a pending order fills at the open, stops inside the bar,
// the close decides, the close marks the equity.
fn market_bar(t: u32, plan: Plan, rows: vec4<u32>) {
    let next_open = (params.fills & FILL_NEXT_OPEN) != 0u;
    let intrabar = (params.fills & FILL_INTRABAR) != 0u;
    var traded = false;
    var entered_at_close = false;
    var exited_in_bar = false;
    // 1. A decision of the bar before fills at this open.
    if ((run.state & STATE_PENDING) != 0u) {
        traded = true;
        let pending = run.state;
        run.state &= ~(STATE_PENDING | STATE_PENDING_EXIT | STATE_PENDING_AT_LEVEL | STATE_PENDING_ENTRY
            | STATE_PENDING_SHORT);
        if ((pending & STATE_PENDING_EXIT) != 0u) {
            close_position(t, open_at(t), (pending & STATE_PENDING_AT_LEVEL) != 0u);
        }
        if ((pending & STATE_PENDING_ENTRY) != 0u) {
            enter((pending & STATE_PENDING_SHORT) != 0u, t - 1u, t, open_at(t), plan);
        }
    }
    // 2. Stops inside the bar, from the bar after the fill bar.
    if (in_position() && intrabar && t > run.entry) {
        let hit = intrabar_exit(t);
        if (hit.x == 1u) {
            traded = true;
            exited_in_bar = true;
            close_position(t, hit.yz, true);
        }
    }
    // 3. The close decides.
    var order = 0u;
    if (in_position()) {
        if (t > run.decided) {
            order = decide(t, plan, rows, intrabar);
        }
    } else if (next_open || !exited_in_bar) {
        let long_in = bit_at(rows.x, t);
        let short_in = bit_at(rows.z, t);
        if (long_in != short_in) {
            order = ORDER_ENTRY | select(0u, ORDER_SHORT, short_in);
        }
    }
    var given = false;
    var r1 = vec4<u32>(0u, 0u, 0u, 0u);
    var r2 = vec4<u32>(0u, 0u, 0u, 0u);
    if (order != 0u) {
        if (next_open) {
            // A decision on the last bar never fills.
            if (t + 1u < params.bars) {
                var pending = STATE_PENDING;
                if ((order & ORDER_EXIT) != 0u) {
                    pending |= STATE_PENDING_EXIT | select(0u, STATE_PENDING_AT_LEVEL, (order & ORDER_AT_LEVEL) != 0u);
                }
                if ((order & ORDER_ENTRY) != 0u) {
                    pending |= STATE_PENDING_ENTRY | select(0u, STATE_PENDING_SHORT, (order & ORDER_SHORT) != 0u);
                }
                run.state |= pending;
            }
        } else {
            let alone = !traded;
            traded = true;
            if ((order & ORDER_EXIT) != 0u) {
                let was_long = !short_side();
                let at_level = (order & ORDER_AT_LEVEL) != 0u;
                close_position(t, close_at(t), at_level);
                if (alone && was_long && (order & ORDER_ENTRY) == 0u) {
                    given = true;
                    let r = exit_return(t, at_level);
                    r1 = r[0];
                    r2 = r[1];
                }
            }
            if ((order & ORDER_ENTRY) != 0u) {
                let short = (order & ORDER_SHORT) != 0u;
                enter(short, t, t, close_at(t), plan);
                entered_at_close = true;
                if (alone && !short && (order & ORDER_EXIT) == 0u) {
                    given = true;
                    r1 = params.entry_ret;
                    r2 = params.entry_ret_sq;
                }
            }
        }
    }
    // 4. The close marks the equity; a trail follows the bar's best price.
    if (in_position()) {
        if (!given && !traded && !short_side()) {
            given = true;
            r1 = sub128(sums[t].ret, sums[t - 1u].ret);
            r2 = sub128(sums[t].ret_sq, sums[t - 1u].ret_sq);
        }
        mark(position_value(close_at(t)), given, r1, r2);
        if (!entered_at_close) {
            var p = close_at(t);
            if (intrabar) {
                p = select(high_at(t), low_at(t), short_side());
            }
            if (short_side()) {
                if (f64_lt(p, run.best)) {
                    run.best = p;
                }
            } else if (f64_lt(run.best, p)) {
                run.best = p;
            }
        }
    } else {
        mark(run.cash, given || !traded, r1, r2);
    }
}

@compute @workgroup_size(WORKGROUP)
fn market(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let i = gid.y * groups.x * WORKGROUP + gid.x;
    if (i >= params.combos) {
        return;
    }
    let plan = plans[params.first + i];
    let n = params.bars;
    out_of_range = false;
    if (params.start == 0u) {
        let zero2 = vec2<u32>(0u, 0u);
        let zero4 = vec4<u32>(0u, 0u, 0u, 0u);
        let sums = RunSums(zero4, zero4, zero4, zero4, zero4, zero4, 0u, 0u, 0u, 0u);
        run = MarketRun(sums, F64_ONE, F64_ONE, F64_ONE, F64_ONE, F64_ONE, zero2, zero2, zero2, zero2, zero2, zero2, zero2,
            zero2, plan.warmup, 0u, 0u, 0u, 0u, 0u);
    } else {
        run = runs[params.first + i];
    }
    // Word indices of the long and short entry and exit rows (NO_STOP: none).
    var rows = vec4<u32>(plan.entry * params.words, params.exit_rows + plan.exit * params.words, NO_STOP, NO_STOP);
    if (plan.short_entry != NO_STOP) {
        rows.z = plan.short_entry * params.words;
        rows.w = params.exit_rows + plan.short_exit * params.words;
    }
    let snap_base = (params.first + i) * params.blocks * 2u;
    loop {
        // The next block start, recorded with the sums before its bar, one an iteration.
        var next_start = 0xffffffffu;
        if (run.block < params.blocks) {
            next_start = params.block_first + run.block * params.block_len;
            if (next_start <= run.t) {
                snaps[snap_base + 2u * run.block] = run.sums.sum;
                snaps[snap_base + 2u * run.block + 1u] = run.sums.sum_sq;
                run.block += 1u;
                continue;
            }
        }
        if (run.t >= params.until || (run.state & STATE_OUT_OF_RANGE) != 0u) {
            break;
        }
        var t = run.t;
        if ((run.state & (STATE_IN_POSITION | STATE_PENDING)) == 0u) {
            // Flat: skip to the next entry bit of either side, a word at a time, not past
            // the next block start or the stretch.
            let word = row_word(rows.x, t) | row_word(rows.z, t);
            if (word == 0u) {
                run.t = min((t | 31u) + 1u, next_start);
                continue;
            }
            t += countTrailingZeros(word);
            if (t >= next_start || t >= params.until) {
                run.t = min(t, next_start);
                continue;
            }
        }
        market_bar(t, plan, rows);
        run.t = t + 1u;
        if (out_of_range) {
            run.state |= STATE_OUT_OF_RANGE;
        }
    }
    if (params.until == n && (run.state & STATE_OUT_OF_RANGE) == 0u) {
        // Still open after the last bar: its bars count as held.
        if (in_position()) {
            run.sums.held += n - run.entry;
        }
        // Block starts passed flat at the end.
        loop {
            if (run.block >= params.blocks) {
                break;
            }
            snaps[snap_base + 2u * run.block] = run.sums.sum;
            snaps[snap_base + 2u * run.block + 1u] = run.sums.sum_sq;
            run.block += 1u;
        }
    }
    runs[params.first + i] = run;
}
