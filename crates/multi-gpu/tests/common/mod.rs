//! A workload with an exact CPU twin and a WGSL kernel (u32 hashes), for the pool's tests.
#![allow(dead_code)] // Each test binary uses its part.

use std::collections::BTreeMap;
use std::ops::Range;
use std::sync::Arc;
use threadx_dispatch::{Dispatch, GpuContext, Kernel, PendingRead, wgpu};
use threadx_multi_gpu::{Chunk, DevicePool, DistributeOptions, PoolError, RunStats, WorkError, WorkerDevice, Workload};

const HASH: Kernel = Kernel {
    name: "pool_test_hash",
    source: "
struct Params { first: u32, count: u32, rounds: u32, offset: u32 }
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
    out[params.offset + gid.x] = x;
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
/// A GPU lane asks for `gpu_width` items a dispatch.
pub struct Hashes {
    pub items: u64,
    pub rounds: u32,
    pub nap: std::time::Duration,
    pub gpu_width: u64,
    /// The items of every dispatch, in the order submitted (what tests of wide dispatches read).
    pub dispatched: std::sync::Mutex<Vec<u64>>,
}

impl Hashes {
    pub fn new(items: u64, rounds: u32) -> Self {
        Self { items, rounds, nap: std::time::Duration::ZERO, gpu_width: 0, dispatched: Default::default() }
    }

    /// Items that each take `nap` of sleep and a few rounds of hashing on the CPU.
    pub fn napping(items: u64, nap: std::time::Duration) -> Self {
        Self { rounds: 4, nap, ..Self::new(items, 4) }
    }

    /// The same work, a GPU lane taking `width` items a dispatch.
    pub fn gpu_width(self, width: u64) -> Self {
        Self { gpu_width: width, ..self }
    }
}

pub enum Lane {
    Cpu,
    Gpu(Arc<GpuContext>),
}

/// The outputs (all pieces' in one vector) and each piece's length.
pub enum Pending {
    Ready(Vec<u32>, Vec<u64>),
    Gpu(PendingRead<u32>, Vec<u64>),
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

    fn dispatch_items(&self, lane: &Lane) -> u64 {
        match lane {
            Lane::Cpu => 0,
            Lane::Gpu(_) => self.gpu_width,
        }
    }

    fn submit(&self, lane: &mut Lane, pieces: &[Range<u64>]) -> Result<Pending, WorkError> {
        let lens: Vec<u64> = pieces.iter().map(|p| p.end - p.start).collect();
        self.dispatched.lock().unwrap().push(lens.iter().sum());
        match lane {
            // One thread per range: workers measured side by side do not share cores.
            Lane::Cpu => {
                let items = pieces.iter().flat_map(|p| p.clone());
                std::thread::sleep(self.nap * lens.iter().sum::<u64>() as u32);
                Ok(Pending::Ready(items.map(|i| hash(i as u32, self.rounds)).collect(), lens))
            }
            Lane::Gpu(ctx) => {
                // Every piece a dispatch of its own, writing its place in one output: one read-back.
                let total: u64 = lens.iter().sum();
                let out = ctx.output_buffer::<u32>("hashes", total as usize)?;
                let mut offset = 0u32;
                let mut params = Vec::new();
                for p in pieces {
                    let count = (p.end - p.start) as u32;
                    params.push((ctx.uniform_buffer("params", &[p.start as u32, count, self.rounds, offset])?, count));
                    offset += count;
                }
                let buffers: Vec<[&wgpu::Buffer; 2]> = params.iter().map(|(u, _)| [&out, u]).collect();
                let launches = buffers
                    .iter()
                    .zip(&params)
                    .map(|(b, (_, count))| {
                        Ok(Dispatch { kernel: &HASH, buffers: b, workgroups: ctx.grid(&HASH, (*count).into())? })
                    })
                    .collect::<Result<Vec<_>, WorkError>>()?;
                Ok(Pending::Gpu(ctx.dispatch_and_read_back(&launches, &out, total as usize, None)?, lens))
            }
        }
    }

    fn finish(
        &self,
        lane: &mut Lane,
        pending: Pending,
        wanted: &dyn Fn() -> bool,
    ) -> Result<Option<Vec<Vec<u32>>>, WorkError> {
        let split = |all: Vec<u32>, lens: &[u64]| {
            let mut at = 0;
            lens.iter()
                .map(|&n| {
                    at += n as usize;
                    all[at - n as usize..at].to_vec()
                })
                .collect()
        };
        match (lane, pending) {
            (_, Pending::Ready(v, lens)) => Ok(Some(split(v, &lens))),
            (Lane::Gpu(ctx), Pending::Gpu(read, lens)) => {
                Ok(ctx.finish_read_back(read, wanted)?.map(|read| split(read.items, &lens)))
            }
            (Lane::Cpu, Pending::Gpu(..)) => Err(WorkError::Failed("a GPU read on the CPU".into())),
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

/// Held by each test of the pool and the balance: one at a time. lavapipe's kernels take
/// both cores, so a starved worker could see every chunk taken before its injected
/// failure strikes, and the balance's figures are times.
pub fn one_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());
    ONE_AT_A_TIME.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}
