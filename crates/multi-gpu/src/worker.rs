//! Workers: a device (the CPU on a rayon pool, or one GPU context) with a stable name, and
//! the wrappers tests use to make one slow or faulty.

use crate::error::WorkError;
use std::fmt;
use std::sync::Arc;
use threadx_dispatch::{DevicePolicy, GpuContext, GpuSelection, select_gpu};

/// What a worker computes on.
#[derive(Clone)]
pub enum WorkerDevice {
    /// The CPU: chunks run on the worker's rayon pool.
    Cpu,
    /// One GPU device and queue.
    Gpu(Arc<GpuContext>),
}

impl WorkerDevice {
    /// The GPU's context, if this is a GPU.
    pub fn gpu(&self) -> Option<&Arc<GpuContext>> {
        match self {
            Self::Cpu => None,
            Self::Gpu(ctx) => Some(ctx),
        }
    }
}

impl fmt::Debug for WorkerDevice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Cpu => f.write_str("Cpu"),
            Self::Gpu(ctx) => write!(f, "Gpu({})", ctx.report().label()),
        }
    }
}

/// A failure injected into a worker, so that tests and `cargo xtask determinism` can prove
/// that failures do not change results.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Fault {
    /// The worker fails (as a lost device does) on the `chunk`-th chunk it takes, from 0.
    FailAt { chunk: u64 },
    /// Any piece of more than `items` items runs out of memory on this worker.
    OutOfMemoryAbove { items: u64 },
}

/// One member of a [`DevicePool`](crate::DevicePool): a named device, how many chunks it
/// works on at once, and optional test wrappers (a slowdown, a fault).
#[derive(Clone)]
pub struct Worker {
    pub(crate) name: String,
    pub(crate) device: WorkerDevice,
    /// Chunks run side by side (CPU: one per thread of its pool; GPU: one).
    pub(crate) lanes: usize,
    /// Chunks in flight per lane: a GPU keeps two, so the next upload overlaps the kernel.
    pub(crate) depth: usize,
    /// The rayon pool its work runs on (None: the global one): the CPU's chunks, or a
    /// GPU's host work beside a CPU worker.
    pub(crate) threads: Option<Arc<rayon::ThreadPool>>,
    pub(crate) slowdown: f64,
    pub(crate) fault: Option<Fault>,
}

impl fmt::Debug for Worker {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Worker")
            .field("name", &self.name)
            .field("device", &self.device)
            .field("lanes", &self.lanes)
            .field("depth", &self.depth)
            .field("slowdown", &self.slowdown)
            .field("fault", &self.fault)
            .finish()
    }
}

impl Worker {
    /// The CPU on the global rayon pool, named `cpu`.
    pub fn cpu() -> Self {
        Self {
            name: "cpu".into(),
            device: WorkerDevice::Cpu,
            lanes: rayon::current_num_threads(),
            depth: 1,
            threads: None,
            slowdown: 0.0,
            fault: None,
        }
    }

    /// The CPU on `threads` (e.g. the `--threads` pool), named `cpu`.
    pub fn cpu_on(threads: Arc<rayon::ThreadPool>) -> Self {
        Self { lanes: threads.current_num_threads(), threads: Some(threads), ..Self::cpu() }
    }

    /// GPU number `index` of the pool, named `gpu<index>:<adapter name>`.
    pub fn gpu(index: usize, ctx: Arc<GpuContext>) -> Self {
        Self {
            name: format!("gpu{index}:{}", ctx.report().name),
            device: WorkerDevice::Gpu(ctx),
            lanes: 1,
            depth: 2,
            threads: None,
            slowdown: 0.0,
            fault: None,
        }
    }

    /// The same worker under another name (names key the ratios in `multigpu.json`).
    pub fn named(mut self, name: impl Into<String>) -> Self {
        self.name = name.into();
        self
    }

    /// A slower stand-in: after each chunk's real work it sleeps `slowdown` times as long,
    /// so its throughput is `1 / (1 + slowdown)` of the real worker's. One chunk at a time.
    pub fn throttled(mut self, slowdown: f64) -> Self {
        self.slowdown = slowdown.max(0.0);
        self.depth = 1;
        self
    }

    /// The same worker with `lanes` chunks side by side.
    pub fn with_lanes(mut self, lanes: usize) -> Self {
        self.lanes = lanes.max(1);
        self
    }

    /// The same worker, failing as `fault` says.
    pub fn with_fault(mut self, fault: Fault) -> Self {
        self.fault = Some(fault);
        self
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn device(&self) -> &WorkerDevice {
        &self.device
    }

    /// The out-of-memory error an [`Fault::OutOfMemoryAbove`] worker gives for `items`.
    pub(crate) fn injected_out_of_memory(&self, items: &std::ops::Range<u64>) -> Result<(), WorkError> {
        match self.fault {
            Some(Fault::OutOfMemoryAbove { items: max }) if items.end - items.start > max => {
                Err(WorkError::OutOfMemory(format!("injected: more than {max} items")))
            }
            _ => Ok(()),
        }
    }

    /// Runs `f` on this worker's rayon pool (the global one if it has none).
    pub(crate) fn install<R: Send>(&self, f: impl FnOnce() -> R + Send) -> R {
        match &self.threads {
            Some(pool) => pool.install(f),
            None => f(),
        }
    }
}

/// Which devices [`DevicePool::open`](crate::DevicePool::open) takes.
#[derive(Debug, Clone, Default)]
pub struct PoolOptions {
    /// Include CPU-software adapters (lavapipe, llvmpipe, WARP): they share the CPU's
    /// cores, so they join only when asked. An adapter named by `THREADX_ADAPTER` is asked for.
    pub software: bool,
    /// Logical workers per adapter (tests run several on one adapter); 0 or 1: one.
    pub logical: usize,
    /// The CPU worker's rayon pool (None: the global pool); ignored when `cpu` is false.
    pub threads: Option<Arc<rayon::ThreadPool>>,
    /// Include the CPU as a worker.
    pub cpu: bool,
    /// An already open context to reuse for its adapter instead of opening a second one.
    pub reuse: Option<Arc<GpuContext>>,
    /// Adapters already enumerated (the dispatcher's); None: enumerate them now.
    pub selection: Option<Arc<GpuSelection>>,
}

/// The GPU workers and the CPU worker `options` ask for, with the problems of adapters
/// that would not open (each is left out).
pub(crate) fn open_workers(options: &PoolOptions) -> (Vec<Worker>, Vec<String>) {
    let mut workers = Vec::new();
    let mut problems = Vec::new();
    let selection = options.selection.clone().unwrap_or_else(|| Arc::new(select_gpu()));
    let mut index = 0;
    // Beside the CPU worker, whose chunks hold every thread of its pool for their whole
    // run, the GPUs' host work (plans, rows, chunk files) gets a pool of its own, as wide:
    // on the CPU's pool it waited behind those chunks while the GPU stood idle.
    let host = std::cell::OnceCell::new();
    for i in selection.physical() {
        let report = &selection.adapters[i];
        if !DevicePolicy::admits(report, options.software) {
            continue;
        }
        let same = |ctx: &&Arc<GpuContext>| {
            let r = ctx.report();
            (r.name.as_str(), r.backend.as_str(), r.pci_bus_id.as_str())
                == (report.name.as_str(), report.backend.as_str(), report.pci_bus_id.as_str())
        };
        let ctx = match options.reuse.as_ref().filter(same) {
            Some(ctx) => Ok(ctx.clone()),
            None => selection.open_at(i),
        };
        match ctx {
            Ok(ctx) => {
                for copy in 0..options.logical.max(1) {
                    let threads =
                        host.get_or_init(|| options.cpu.then(|| gpu_host_pool(options.threads.as_ref())).flatten());
                    let worker = Worker { threads: threads.clone(), ..Worker::gpu(index, ctx.clone()) };
                    workers.push(if copy == 0 {
                        worker
                    } else {
                        let name = format!("gpu{index}.{copy}:{}", report.name);
                        worker.named(name)
                    });
                }
                index += 1;
            }
            Err(e) => problems.push(format!("{} left out: {e}", report.label())),
        }
    }
    if options.cpu {
        workers.push(options.threads.clone().map_or_else(Worker::cpu, Worker::cpu_on));
    }
    (workers, problems)
}

/// The GPUs' host pool beside a CPU worker on `cpu_threads` (the global pool when none):
/// as many threads; none (the global pool) if it cannot be started.
fn gpu_host_pool(cpu_threads: Option<&Arc<rayon::ThreadPool>>) -> Option<Arc<rayon::ThreadPool>> {
    let n = cpu_threads.map_or_else(rayon::current_num_threads, |p| p.current_num_threads());
    rayon::ThreadPoolBuilder::new()
        .num_threads(n)
        .thread_name(|i| format!("threadx-gpu-host-{i}"))
        .build()
        .map(Arc::new)
        .inspect_err(|e| tracing::warn!("the GPUs' host work shares the CPU's threads: {e}"))
        .ok()
}
