//! A workload with an exact CPU twin and a WGSL kernel (u32 hashes), for the pool's tests.
#![allow(dead_code)] // Each test binary uses its part.

use std::collections::BTreeMap;
use std::ops::Range;
use std::sync::Arc;
use threadx_dispatch::{Dispatch, GpuContext, Kernel, PendingRead};
use threadx_multi_gpu::{Chunk, DevicePool, DistributeOptions, PoolError, RunStats, WorkError, WorkerDevice, Workload};

const HASH: Kernel = Kernel {
    name: "pool_test_hash",
    source: "
struct Params { first: u32, count: u32, rounds: u32, pad: u32 }
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
@group(0) @binding(1) var<uniform> params: Params;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    if (gid.x >= params.count) { return; }
    var x = params.first + gid.x;
    for (var r = 0u; r < params.rounds; r++) {
        x ^= x << 13u; x ^= x >> 17u; x ^= x << 5u;
        x = x * 0x9E3779B1u + r;
    }
    out[gid.x] = x;
}",
    entry: "main",
};

/// The CPU twin of the kernel.
pub fn hash(item: u32, rounds: u32) -> u32 {
    let mut x = item;
    for r in 0..rounds {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        x = x.wrapping_mul(0x9E37_79B1).wrapping_add(r);
    }
    x
}

/// `items` hashes of `rounds` rounds each: item i's output is `hash(i)`. On the CPU each
/// item also takes `nap` of sleep: a simulated device whose speed is set in time, not by
/// how busy the machine's cores are (tests of the balance use it, so they hold under load).
pub struct Hashes {
    pub items: u64,
    pub rounds: u32,
    pub nap: std::time::Duration,
}

impl Hashes {
    pub fn new(items: u64, rounds: u32) -> Self {
        Self { items, rounds, nap: std::time::Duration::ZERO }
    }

    /// Items that each take `nap` of sleep and a few rounds of hashing on the CPU.
    pub fn napping(items: u64, nap: std::time::Duration) -> Self {
        Self { items, rounds: 4, nap }
    }
}

pub enum Lane {
    Cpu,
    Gpu(Arc<GpuContext>),
}

pub enum Pending {
    Ready(Vec<u32>),
    Gpu(PendingRead<u32>),
}

impl Workload for Hashes {
    type Lane = Lane;
    type Pending = Pending;
    type Output = Vec<u32>;

    fn items(&self) -> u64 {
        self.items
    }

    fn open(&self, device: &WorkerDevice) -> Result<Lane, WorkError> {
        Ok(match device {
            WorkerDevice::Cpu => Lane::Cpu,
            WorkerDevice::Gpu(ctx) => {
                ctx.pipeline(&HASH)?;
                Lane::Gpu(ctx.clone())
            }
        })
    }

    fn submit(&self, lane: &mut Lane, items: Range<u64>) -> Result<Pending, WorkError> {
        match lane {
            // One thread per range: workers measured side by side do not share cores.
            Lane::Cpu => {
                std::thread::sleep(self.nap * (items.end - items.start) as u32);
                Ok(Pending::Ready(items.map(|i| hash(i as u32, self.rounds)).collect()))
            }
            Lane::Gpu(ctx) => {
                let count = (items.end - items.start) as u32;
                let out = ctx.output_buffer::<u32>("hashes", count as usize)?;
                let params = ctx.uniform_buffer("params", &[items.start as u32, count, self.rounds, 0])?;
                let launch =
                    Dispatch { kernel: &HASH, buffers: &[&out, &params], workgroups: ctx.grid(&HASH, count.into())? };
                Ok(Pending::Gpu(ctx.dispatch_and_read_back(&[launch], &out, count as usize, None)?))
            }
        }
    }

    fn finish(
        &self,
        lane: &mut Lane,
        pending: Pending,
        wanted: &dyn Fn() -> bool,
    ) -> Result<Option<Vec<u32>>, WorkError> {
        match (lane, pending) {
            (_, Pending::Ready(v)) => Ok(Some(v)),
            (Lane::Gpu(ctx), Pending::Gpu(read)) => Ok(ctx.finish_read_back(read, wanted)?.map(|read| read.items)),
            (Lane::Cpu, Pending::Gpu(_)) => Err(WorkError::Failed("a GPU read on the CPU".into())),
        }
    }

    fn join(&self, parts: Vec<Vec<u32>>) -> Vec<u32> {
        parts.concat()
    }
}

pub fn chunks(items: u64, size: u64) -> Vec<Chunk> {
    (0..items.div_ceil(size)).map(|c| Chunk { index: c, items: c * size..((c + 1) * size).min(items) }).collect()
}

/// Runs `work` on `pool` and returns the outputs in delivery order, checking that
/// delivery follows the chunk index.
pub fn run(pool: &DevicePool, work: &Hashes, chunks: &[Chunk], options: &DistributeOptions) -> (Vec<u32>, RunStats) {
    let mut out = Vec::new();
    let mut next = 0;
    let stats = pool
        .distribute::<_, PoolError>(work, chunks, options, &|_, _| Ok(()), &mut |chunk, output| {
            assert_eq!(chunk.index, next, "delivered in chunk order");
            next += 1;
            assert_eq!(output.len() as u64, chunk.items.end - chunk.items.start);
            out.extend(output);
            Ok(())
        })
        .unwrap();
    assert_eq!(next as usize, chunks.len());
    (out, stats)
}

pub fn ratios(pairs: &[(&str, f64)]) -> BTreeMap<String, f64> {
    pairs.iter().map(|(n, r)| (n.to_string(), *r)).collect()
}
