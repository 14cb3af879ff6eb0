// What both backtest kernels (backtest.wgsl, market.wgsl) read: the dispatch's
// parameters, a combo's plan and the tables' prefix sums at a bar (the host's Params,
// ComboPlan and BarTables, crates/backtest/src/gpu.rs).

const NO_STOP: u32 = 0xffffffffu;

struct Params {
    bars: u32,
    // u32 words per bit row.
    words: u32,
    combos: u32,
    // Index of this dispatch's first combo in plans/outcomes.
    first: u32,
    // Word index of the first exit row in `bits` (entry rows come first).
    exit_rows: u32,
    // This dispatch's stretch of bars: [start, until). start 0: runs begin at the plans.
    until: u32,
    // −ln(1 + fee) and ln(1 − fee), i64 in 2^-52 units.
    log_buy: vec2<u32>,
    log_sell: vec2<u32>,
    start: u32,
    // Blocks whose starts are recorded in `snaps` (0: none); block k starts at bar
    // block_first + k · block_len (crates/backtest/src/blocks.rs).
    blocks: u32,
    // The entry bar's return and its square, 2^-64 units.
    entry_ret: vec4<u32>,
    entry_ret_sq: vec4<u32>,
    block_first: u32,
    block_len: u32,
    // ln(1 − fee): an exit at a stop or take-profit pays no slippage (vectorbt's
    // `stoplimit`); and where its terms differ from `sums[t]`'s, the index in `bar` of
    // bar 0's (exit Σr, exit Σr²), two entries per bar (0: they do not differ).
    log_sell_stop: vec2<u32>,
    stop_sums: u32,
    // The market kernel's: FILL_* bits, and the cost factors its f64 arithmetic uses
    // (1 + h, 1 − g, 1 + fee, 1 − fee, 1 − slippage; crates/backtest/src/costs.rs).
    fills: u32,
    buy_factor: vec2<u32>,
    sell_factor: vec2<u32>,
    fee_up: vec2<u32>,
    fee_down: vec2<u32>,
    slip_down: vec2<u32>,
    // The whole-backtest kernel's: where in `series` each entry bar's gain factor starts
    // (bar_tables.rs::HeldRow's gain), for an exit on a signal and at a level (the same index
    // where they do not differ).
    gain_at: u32,
    gain_at_level: u32,
}

// A combo's sums and counts so far (Totals in crates/backtest/src/fixed.rs but for its log
// equity and drawdown, which each kernel keeps its own way): what both kernels' runs hold
// first among their totals (the host's RunSums, crates/backtest/src/gpu_sums.rs).
struct RunSums {
    sum: vec4<u32>,
    sum_sq: vec4<u32>,
    down_sq: vec4<u32>,
    trade_sum: vec4<u32>,
    trade_sq: vec4<u32>,
    trade_gain: vec4<u32>,
    trades: u32,
    closed: u32,
    wins: u32,
    held: u32,
}

struct Plan {
    entry: u32,
    exit: u32,
    stop: u32,
    warmup: u32,
    // A level of `stops` like `stop`, exit at a close at or above it; NO_STOP: none.
    take_profit: u32,
    // Exit after this many bars in a trade; 0: no limit.
    max_bars: u32,
    // Short rows, short levels and the trail (ComboPlan in crates/backtest/src/book/mod.rs):
    // read by the market kernel only.
    short_entry: u32,
    short_exit: u32,
    short_stop: u32,
    short_take_profit: u32,
    trail: u32,
    pad: u32,
}

// Prefix sums at one bar (see BarTables): held-bar returns, their squares, and the same
// with the return of an exit at this bar.
struct Sums {
    ret: vec4<u32>,
    ret_sq: vec4<u32>,
    exit: vec4<u32>,
    exit_sq: vec4<u32>,
}

const ZERO4: vec4<u32> = vec4<u32>(0u, 0u, 0u, 0u);

// A bar's part of the downside (fixed.rs::down_part): r² when r (units) is below 0.
fn down_part(r: vec4<u32>, r_sq: vec4<u32>) -> vec4<u32> {
    return select(ZERO4, r_sq, (r.w >> 31u) == 1u);
}

// A trade return's square term from its units x (fixed.rs::square_units), for |x| < 2^95:
// (|x| >> 16)² >> 32 below 2^79, else (|x| >> 32)².
fn square_units(x: vec4<u32>) -> vec4<u32> {
    var a = x;
    if ((x.w >> 31u) == 1u) {
        a = sub128(ZERO4, x);
    }
    if (a.w == 0u && a.z < 0x8000u) {
        let q = shr128(a, 16u);
        return shr128(mul53(q.xy, q.xy), 32u);
    }
    let q = shr128(a, 32u);
    return mul53(q.xy, q.xy);
}

// A closed trade's terms (fixed.rs::Totals::close_trade_units) from its return's units x:
// x, its square term, and x again where above 0.
fn trade_terms(x: vec4<u32>) -> array<vec4<u32>, 3> {
    return array<vec4<u32>, 3>(x, square_units(x), select(x, ZERO4, (x.w >> 31u) == 1u));
}

// The bindings both kernels share; each declares its own bars (binding 0) and runs
// (binding 6).
@group(0) @binding(1) var<storage, read> sums: array<Sums>;
@group(0) @binding(2) var<storage, read> bits: array<u32>;
// Stop series (indicator rows or level rows) of `bars` f64 values each; the whole-backtest
// kernel's entry gain factors after them (params.gain_at).
@group(0) @binding(3) var<storage, read> series: array<vec2<u32>>;
// (series, parameter bits low, high, kind) per stop (each kernel's kinds).
@group(0) @binding(4) var<storage, read> stops: array<vec4<u32>>;
@group(0) @binding(5) var<storage, read> plans: array<Plan>;
@group(0) @binding(7) var<uniform> params: Params;
// Per combo and block start: the run's Σr, then Σr², as they stand just before that bar
// (2 · blocks entries per combo).
@group(0) @binding(8) var<storage, read_write> snaps: array<vec4<u32>>;
