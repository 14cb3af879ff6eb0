// CSCV's screen (crates/stats/src/device.rs). `screen`: each invocation places one
// split's side against CHUNK combos of a pass; it counts the sets surely below the split's
// value and lists the pairs it leaves open, which the CPU compares exactly. `likeliest`:
// each workgroup finds one split's pair, not surely below, whose sums give the highest
// Σr/√Σr² (pass 1's first round). The arithmetic is `DeviceScreen::place` and
// `OpenPair::likeness`, operation for operation. device.rs proves that any order of the
// sums, flushed subnormals and fused products leave every placement certain.

struct Params {
    // Splits in this dispatch, and the first one's index in the pass.
    splits: u32,
    split_first: u32,
    // Combo records in this dispatch, and the first one's position in the pass.
    combos: u32,
    combo_first: u32,
    blocks: u32,
    // threadx_stats::Listing as u32. `screen`: NOT_BELOW lists every pair not surely
    // below (pass 1), else only the pairs neither below nor above (pass 2).
    listing: u32,
    // Entries of `open`; pairs past it are counted, not written.
    capacity: u32,
    pad: u32,
}

// A split's value: threadx_stats::DeviceScreen.
struct Screen {
    kind: u32,
    mirrored: u32,
    sign: f32,
    c1_up: f32,
    c2_dn: f32,
    c1_dn: f32,
    c2_up: f32,
    varies: f32,
}

// A pair left open, with the sums it was placed by: threadx_stats::OpenPair.
struct Open {
    split: u32,
    combo: u32,
    sum: f32,
    sum_sq: f32,
}

const WORKGROUP: u32 = 64u;
// Combos per invocation.
const CHUNK: u32 = 128u;
const NOT_BELOW: u32 = 1u;
const NONE: u32 = 0xffffffffu;
// f32::MIN: the likeness of a set with no variance.
const LEAST: f32 = -3.40282347e38f;
const RATIO: u32 = 0u;
const NOT_NAN: u32 = 1u;
// 2^-60: the least Σr² placed by its ratio (lanes.rs's Q_MIN).
const Q_MIN: f32 = 0x1p-60f;

@group(0) @binding(0) var<uniform> params: Params;
// Per combo: its blocks' (Σr, Σr²) scaled, then (slack, 0).
@group(0) @binding(1) var<storage, read> records: array<vec2<f32>>;
// Per split of the dispatch: its side's blocks (bit b for block b, low word first).
@group(0) @binding(2) var<storage, read> masks: array<vec2<u32>>;
@group(0) @binding(3) var<storage, read> screens: array<Screen>;
// [0]: the pairs left open; [1 + i]: split i's pairs placed below.
@group(0) @binding(4) var<storage, read_write> counts: array<atomic<u32>>;
// The open pairs: split and combo position, both of the pass.
@group(0) @binding(5) var<storage, read_write> open: array<Open>;

// (surely below the value or NaN, surely above it and not NaN).
fn place(s: Screen, sum: f32, q: f32, slack: f32) -> vec2<bool> {
    if slack < 0.0 {
        return vec2<bool>(false, false);
    }
    let a = sum * s.sign;
    let mag = abs(a) + slack;
    let varies = mag * mag < q * s.varies && q >= Q_MIN;
    if s.kind == NOT_NAN {
        return vec2<bool>(false, varies);
    }
    if s.kind != RATIO {
        return vec2<bool>(false, false);
    }
    let hi = a + slack;
    let lo = a - slack;
    let less = hi * hi * s.c1_up < q * s.c2_dn;
    let more = q * s.c2_up < lo * lo * s.c1_dn;
    let under = a <= -slack || (varies && less);
    let over = varies && slack < a && more;
    if s.mirrored == 0u {
        return vec2<bool>(under, over);
    }
    return vec2<bool>(over, under && varies);
}

// The sums of combo record `j` over the blocks in `mask`.
fn set_sums(mask: vec2<u32>, j: u32) -> vec2<f32> {
    let base = j * (params.blocks + 1u);
    var sum = 0.0;
    var q = 0.0;
    for (var b = 0u; b < params.blocks; b++) {
        let word = select(mask.x, mask.y, b >= 32u);
        let inside = ((word >> (b & 31u)) & 1u) == 1u;
        let block = records[base + b];
        // Adding 0 changes no bit, so the sum is the side's blocks alone.
        sum += select(0.0, block.x, inside);
        q += select(0.0, block.y, inside);
    }
    return vec2<f32>(sum, q);
}

fn slack(j: u32) -> f32 {
    return records[j * (params.blocks + 1u) + params.blocks].x;
}

// Appends an open pair (counted past the list's room, not written).
fn list(split: u32, j: u32, sums: vec2<f32>) {
    let at = atomicAdd(&counts[0], 1u);
    if at < params.capacity {
        open[at] = Open(params.split_first + split, params.combo_first + j, sums.x, sums.y);
    }
}

@compute @workgroup_size(WORKGROUP)
fn screen(@builtin(global_invocation_id) gid: vec3<u32>) {
    let split = gid.x;
    if split >= params.splits {
        return;
    }
    let mask = masks[split];
    let value = screens[split];
    let first = gid.y * CHUNK;
    let last = min(first + CHUNK, params.combos);
    var below = 0u;
    for (var j = first; j < last; j++) {
        let sums = set_sums(mask, j);
        let placed = place(value, sums.x, sums.y, slack(j));
        if placed.x {
            below += 1u;
        } else if params.listing == NOT_BELOW || !placed.y {
            list(split, j, sums);
        }
    }
    if below > 0u {
        atomicAdd(&counts[1u + split], below);
    }
}

var<workgroup> keys: array<f32, WORKGROUP>;
var<workgroup> picks: array<u32, WORKGROUP>;

// One workgroup per split; each invocation takes every WORKGROUP-th combo.
@compute @workgroup_size(WORKGROUP)
fn likeliest(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lane: u32) {
    let split = wid.x;
    if split >= params.splits {
        return;
    }
    let mask = masks[split];
    let value = screens[split];
    var key = LEAST;
    var pick = NONE;
    for (var j = lane; j < params.combos; j += WORKGROUP) {
        let sums = set_sums(mask, j);
        if !place(value, sums.x, sums.y, slack(j)).x {
            let k = select(LEAST, sums.x / sqrt(sums.y), sums.y > 0.0);
            if pick == NONE || k > key {
                key = k;
                pick = j;
            }
        }
    }
    keys[lane] = key;
    picks[lane] = pick;
    // The highest key; of equal keys the first combo.
    for (var half = WORKGROUP / 2u; half > 0u; half >>= 1u) {
        workgroupBarrier();
        if lane < half {
            let k = keys[lane + half];
            let p = picks[lane + half];
            if p != NONE && (picks[lane] == NONE || k > keys[lane] || (k == keys[lane] && p < picks[lane])) {
                keys[lane] = k;
                picks[lane] = p;
            }
        }
    }
    workgroupBarrier();
    if lane == 0u && picks[0] != NONE {
        list(split, picks[0], set_sums(mask, picks[0]));
    }
}
