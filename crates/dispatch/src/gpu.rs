//! One GPU device and queue, and the few operations kernels need: upload, dispatch,
//! read back. Pipelines are compiled once per kernel and cached for the context's life.

use crate::adapter_report::AdapterReport;
use crate::error::{GpuError, from_wgpu};
use crate::shader::{Kernel, workgroup_size};
use std::collections::HashMap;
use std::fmt;
use std::marker::PhantomData;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;
use wgpu::util::DeviceExt;

/// The most loop iterations one kernel invocation may run in one dispatch, all its loops
/// together, on a CPU-software adapter: Mesa's llvmpipe (lavapipe) silently ends an
/// invocation's loops after 65,535 iterations in all (`LP_MAX_TGSI_LOOP_ITERATIONS`). A
/// kernel that walks the bars cuts them into stretches of at most
/// [`GpuContext::max_loop_steps`], or leaves work that would need more to the CPU.
pub const MAX_LOOP_STEPS: u32 = 1 << 15;

/// The same bound on hardware, where loops are not counted and only time is: a driver
/// resets a device whose dispatch runs for seconds, so callers also bound each dispatch's
/// total work.
pub const HARDWARE_LOOP_STEPS: u32 = 1 << 20;

/// A device and queue on one adapter, with its limits and a cache of compiled pipelines.
pub struct GpuContext {
    report: AdapterReport,
    device: wgpu::Device,
    queue: wgpu::Queue,
    limits: wgpu::Limits,
    pipelines: Mutex<HashMap<&'static str, wgpu::ComputePipeline>>,
    lost: Arc<AtomicBool>,
    /// Whether the adapter has timestamp queries, and the kernel time they measured (ns).
    timestamps: bool,
    kernel_ns: Mutex<f64>,
    /// Held by every submit and poll: wgpu-core 30.0.1 panics when two threads maintain
    /// one device at once (its queue-empty assert races, fixed upstream in gfx-rs/wgpu#9958),
    /// and a context is shared by the threads of a sweep and of a test binary.
    maintain: Mutex<()>,
}

impl fmt::Debug for GpuContext {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GpuContext").field("adapter", &self.report.label()).finish_non_exhaustive()
    }
}

impl GpuContext {
    /// How often a waiting [`Self::finish_read_back`] asks whether the data is still wanted.
    pub const WANTED_POLL: Duration = Duration::from_millis(10);

    pub(crate) fn open(adapter: wgpu::Adapter, report: AdapterReport) -> Result<Self, GpuError> {
        let limits = adapter.limits();
        let timestamps = adapter.features().contains(wgpu::Features::TIMESTAMP_QUERY);
        let (device, queue) = pollster::block_on(adapter.request_device(&wgpu::DeviceDescriptor {
            label: Some("threadx"),
            required_limits: limits.clone(),
            required_features: if timestamps { wgpu::Features::TIMESTAMP_QUERY } else { wgpu::Features::empty() },
            ..Default::default()
        }))
        .map_err(|e| GpuError::Open { adapter: report.label(), reason: e.to_string() })?;
        let lost = Arc::new(AtomicBool::new(false));
        let flag = lost.clone();
        device.set_device_lost_callback(move |_, _| flag.store(true, Ordering::SeqCst));
        // wgpu's default handler panics; errors are captured by scopes around each call,
        // and anything that escapes them is only logged.
        device.on_uncaptured_error(Arc::new(|e| tracing::warn!("uncaptured GPU error: {e}")));
        Ok(Self {
            report,
            device,
            queue,
            limits,
            pipelines: Mutex::default(),
            lost,
            timestamps,
            kernel_ns: Mutex::new(0.0),
            maintain: Mutex::new(()),
        })
    }

    /// Seconds the kernels of [`Self::dispatch_and_read_back`] ran on the device so far,
    /// measured by timestamp queries (of those read back); `None` where the adapter has
    /// no timestamps.
    pub fn kernel_seconds(&self) -> Option<f64> {
        self.timestamps.then(|| *self.kernel_ns.lock().unwrap_or_else(PoisonError::into_inner) * 1e-9)
    }

    pub fn report(&self) -> &AdapterReport {
        &self.report
    }

    pub fn limits(&self) -> &wgpu::Limits {
        &self.limits
    }

    pub fn device(&self) -> &wgpu::Device {
        &self.device
    }

    /// Submits `encoder`'s commands, in turn with other submits and polls (see `maintain`).
    fn submit(&self, encoder: wgpu::CommandEncoder) -> wgpu::SubmissionIndex {
        let commands = encoder.finish();
        let _turn = self.maintain.lock().unwrap_or_else(PoisonError::into_inner);
        self.queue.submit([commands])
    }

    /// Runs `f` inside out-of-memory and validation error scopes.
    fn scoped<R>(&self, f: impl FnOnce() -> Result<R, GpuError>) -> Result<R, GpuError> {
        if self.lost.load(Ordering::SeqCst) {
            return Err(GpuError::Lost(self.report.label()));
        }
        let oom = self.device.push_error_scope(wgpu::ErrorFilter::OutOfMemory);
        let validation = self.device.push_error_scope(wgpu::ErrorFilter::Validation);
        let result = f();
        let validation = pollster::block_on(validation.pop());
        let oom = pollster::block_on(oom.pop());
        if self.lost.load(Ordering::SeqCst) {
            return Err(GpuError::Lost(self.report.label()));
        }
        match (oom, validation) {
            (Some(e), _) | (None, Some(e)) => Err(from_wgpu(e)),
            (None, None) => result,
        }
    }

    /// The compute pipeline of `kernel`, compiled on first use.
    pub fn pipeline(&self, kernel: &Kernel) -> Result<wgpu::ComputePipeline, GpuError> {
        let mut cache = self.pipelines.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(p) = cache.get(kernel.name) {
            return Ok(p.clone());
        }
        let pipeline = self.scoped(|| {
            let module = self.device.create_shader_module(wgpu::ShaderModuleDescriptor {
                label: Some(kernel.name),
                source: wgpu::ShaderSource::Wgsl(kernel.source.into()),
            });
            Ok(self.device.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
                label: Some(kernel.name),
                layout: None,
                module: &module,
                entry_point: Some(kernel.entry),
                compilation_options: Default::default(),
                cache: None,
            }))
        })?;
        cache.insert(kernel.name, pipeline.clone());
        Ok(pipeline)
    }

    /// About how many invocations the adapter runs at once, by its type (wgpu tells no
    /// core count): a discrete GPU 2^18 (an H100 holds 132 × 2,048 threads), an integrated
    /// or virtual one 2^16, a CPU-software adapter 2^12 per host thread. Work is handed to
    /// a device in dispatches at least this wide, so that it is not latency-bound.
    pub fn parallelism(&self) -> u64 {
        match self.report.device_type.as_str() {
            "discrete GPU" => 1 << 18,
            "CPU (software)" => 4096 * std::thread::available_parallelism().map_or(1, |n| n.get() as u64),
            _ => 1 << 16,
        }
    }

    /// The most loop iterations one invocation may run in a dispatch on this adapter:
    /// [`MAX_LOOP_STEPS`] on a CPU-software one, [`HARDWARE_LOOP_STEPS`] elsewhere.
    pub fn max_loop_steps(&self) -> u32 {
        if self.report.software { MAX_LOOP_STEPS } else { HARDWARE_LOOP_STEPS }
    }

    /// Whether each dispatch goes in a submission of its own, and callers keep a dispatch's
    /// work short ([`Self::max_dispatch_work`]): on OpenGL, wgpu holds the adapter's one
    /// context for a whole submission (llvmpipe runs the kernels inside it), and panics in
    /// another thread of the process that waits more than 6 s for it.
    pub fn submits_each_dispatch(&self) -> bool {
        self.report.backend == "gl"
    }

    /// The most work (in a kernel's own units, e.g. bar·combos) one dispatch should take,
    /// from the kernel's bound `hardware` where dispatches share a submission: a 64th of
    /// it where each holds the context alone ([`Self::submits_each_dispatch`]), so that a
    /// dispatch ends within about a second on a CPU-software adapter.
    pub fn max_dispatch_work(&self, hardware: u64) -> u64 {
        if self.submits_each_dispatch() { (hardware / 64).max(1) } else { hardware }
    }

    /// The largest storage buffer one binding can hold, in bytes (callers cut work to it).
    pub fn max_binding_bytes(&self) -> u64 {
        self.limits.max_storage_buffer_binding_size.min(self.limits.max_buffer_size)
    }

    /// The workgroup grid for `invocations` invocations of `workgroup_size`: x up to the
    /// adapter's per-dimension limit, then rows. The kernel's linear index is
    /// `gid.y * num_workgroups.x * workgroup_size + gid.x`, and it must skip indices past
    /// its work (the last row is rounded up). The workgroup size is the one `kernel`'s
    /// WGSL declares ([`workgroup_size`]): it is written there alone.
    pub fn grid(&self, kernel: &Kernel, invocations: u64) -> Result<[u32; 3], GpuError> {
        let workgroup_size = workgroup_size(kernel)?;
        let groups = invocations.div_ceil(workgroup_size.into()).max(1);
        let max = u64::from(self.limits.max_compute_workgroups_per_dimension);
        let x = groups.min(max);
        let y = groups.div_ceil(x);
        if y > max || invocations > u64::from(u32::MAX) {
            return Err(GpuError::TooLarge {
                what: format!("a dispatch of {invocations} invocations"),
                needed: invocations,
                limit: u64::from(u32::MAX).min(max * max * u64::from(workgroup_size)),
            });
        }
        Ok([x as u32, y as u32, 1])
    }

    fn check_binding(&self, what: &str, bytes: u64) -> Result<(), GpuError> {
        let limit = self.max_binding_bytes();
        if bytes > limit {
            return Err(GpuError::TooLarge { what: format!("{what} ({bytes} bytes)"), needed: bytes, limit });
        }
        Ok(())
    }

    /// A storage buffer holding `data` (padded to 4 bytes when empty: WGSL arrays cannot be).
    pub fn storage_buffer<T: bytemuck::Pod>(&self, label: &str, data: &[T]) -> Result<wgpu::Buffer, GpuError> {
        let bytes: &[u8] = bytemuck::cast_slice(data);
        self.check_binding(label, bytes.len() as u64)?;
        let contents = if bytes.is_empty() { &[0u8; 4][..] } else { bytes };
        self.scoped(|| {
            Ok(self.device.create_buffer_init(&wgpu::util::BufferInitDescriptor {
                label: Some(label),
                contents,
                usage: wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_DST | wgpu::BufferUsages::COPY_SRC,
            }))
        })
    }

    /// A uniform buffer holding one value.
    pub fn uniform_buffer<T: bytemuck::Pod>(&self, label: &str, value: &T) -> Result<wgpu::Buffer, GpuError> {
        self.scoped(|| {
            Ok(self.device.create_buffer_init(&wgpu::util::BufferInitDescriptor {
                label: Some(label),
                contents: bytemuck::bytes_of(value),
                usage: wgpu::BufferUsages::UNIFORM | wgpu::BufferUsages::COPY_DST,
            }))
        })
    }

    /// An uninitialised storage buffer of `len` elements of `T` for a kernel to write.
    pub fn output_buffer<T: bytemuck::Pod>(&self, label: &str, len: usize) -> Result<wgpu::Buffer, GpuError> {
        let bytes = (len * std::mem::size_of::<T>()).max(4) as u64;
        self.check_binding(label, bytes)?;
        self.scoped(|| {
            Ok(self.device.create_buffer(&wgpu::BufferDescriptor {
                label: Some(label),
                size: bytes,
                usage: wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_SRC,
                mapped_at_creation: false,
            }))
        })
    }

    /// Dispatches `kernel` over `workgroups` with `buffers` bound at bindings 0, 1, … of
    /// group 0. The caller cuts work so that each dimension fits the adapter's limit.
    pub fn dispatch(&self, kernel: &Kernel, buffers: &[&wgpu::Buffer], workgroups: [u32; 3]) -> Result<(), GpuError> {
        let mut encoder = self.encoder(kernel.name);
        self.encode_dispatch(&mut encoder, kernel, buffers, workgroups, None)?;
        self.scoped(|| {
            self.submit(encoder);
            Ok(())
        })
    }

    /// `dispatches` in order, then the copy of `len` elements of `out` to the host (and of
    /// the first `words` u32 of a second output, `also`), in one submission (one per
    /// dispatch where [`Self::submits_each_dispatch`]): only these kernels stand between
    /// the caller and its data, and [`Self::finish_read_back`] can leave them running when
    /// the data is no longer wanted.
    pub fn dispatch_and_read_back<T: bytemuck::Pod>(
        &self,
        dispatches: &[Dispatch<'_>],
        out: &wgpu::Buffer,
        len: usize,
        also: Option<(&wgpu::Buffer, usize)>,
    ) -> Result<PendingRead<T>, GpuError> {
        let mut encoder = self.encoder("dispatch_and_read_back");
        // Timestamps at the start of the first pass and the end of the last.
        let queries = (self.timestamps && !dispatches.is_empty()).then(|| {
            self.device.create_query_set(&wgpu::QuerySetDescriptor {
                label: Some("kernel time"),
                ty: wgpu::QueryType::Timestamp,
                count: 2,
            })
        });
        let last = dispatches.len().saturating_sub(1);
        for (i, d) in dispatches.iter().enumerate() {
            // Passes between the first and the last write none (wgpu refuses a
            // timestamp-writes entry with neither index).
            let writes = queries.as_ref().filter(|_| i == 0 || i == last).map(|q| wgpu::ComputePassTimestampWrites {
                query_set: q,
                beginning_of_pass_write_index: (i == 0).then_some(0),
                end_of_pass_write_index: (i == last).then_some(1),
            });
            self.encode_dispatch(&mut encoder, d.kernel, d.buffers, d.workgroups, writes)?;
            // Each but the last in a submission of its own (the last goes with the copy).
            if i < last && self.submits_each_dispatch() {
                self.submit(std::mem::replace(&mut encoder, self.encoder("dispatch_and_read_back")));
            }
        }
        let stamps = queries.map(|q| {
            let resolved = self.device.create_buffer(&wgpu::BufferDescriptor {
                label: Some("kernel time"),
                size: 16,
                usage: wgpu::BufferUsages::QUERY_RESOLVE | wgpu::BufferUsages::COPY_SRC,
                mapped_at_creation: false,
            });
            encoder.resolve_query_set(&q, 0..2, &resolved, 0);
            resolved
        });
        self.submit_read_back(encoder, out, len, also, stamps.as_ref())
    }

    fn encoder(&self, label: &str) -> wgpu::CommandEncoder {
        self.device.create_command_encoder(&wgpu::CommandEncoderDescriptor { label: Some(label) })
    }

    fn encode_dispatch(
        &self,
        encoder: &mut wgpu::CommandEncoder,
        kernel: &Kernel,
        buffers: &[&wgpu::Buffer],
        workgroups: [u32; 3],
        timestamp_writes: Option<wgpu::ComputePassTimestampWrites<'_>>,
    ) -> Result<(), GpuError> {
        let limit = self.limits.max_compute_workgroups_per_dimension;
        if let Some(&n) = workgroups.iter().find(|&&n| n > limit) {
            return Err(GpuError::TooLarge {
                what: format!("{} dispatch of {n} workgroups", kernel.name),
                needed: n.into(),
                limit: limit.into(),
            });
        }
        let pipeline = self.pipeline(kernel)?;
        self.scoped(|| {
            let entries: Vec<wgpu::BindGroupEntry<'_>> = buffers
                .iter()
                .enumerate()
                .map(|(i, b)| wgpu::BindGroupEntry { binding: i as u32, resource: b.as_entire_binding() })
                .collect();
            let bind_group = self.device.create_bind_group(&wgpu::BindGroupDescriptor {
                label: Some(kernel.name),
                layout: &pipeline.get_bind_group_layout(0),
                entries: &entries,
            });
            let mut pass =
                encoder.begin_compute_pass(&wgpu::ComputePassDescriptor { label: Some(kernel.name), timestamp_writes });
            pass.set_pipeline(&pipeline);
            pass.set_bind_group(0, &bind_group, &[]);
            pass.dispatch_workgroups(workgroups[0], workgroups[1], workgroups[2]);
            Ok(())
        })
    }

    /// Copies the first `len` elements of `buffer` back to the host (waits for the GPU).
    pub fn read_back<T: bytemuck::Pod>(&self, buffer: &wgpu::Buffer, len: usize) -> Result<Vec<T>, GpuError> {
        let pending = self.submit_read_back(self.encoder("readback"), buffer, len, None, None)?;
        Ok(self.finish_read_back(pending, &|| true)?.map(|read| read.items).unwrap_or_default())
    }

    /// Appends the copy of `len` elements of `buffer` (then of the first `words` u32 of
    /// `also`, then of the two resolved timestamps in `stamps`) to `encoder`, submits it
    /// and asks for the staging buffer's mapping.
    fn submit_read_back<T: bytemuck::Pod>(
        &self,
        mut encoder: wgpu::CommandEncoder,
        buffer: &wgpu::Buffer,
        len: usize,
        also: Option<(&wgpu::Buffer, usize)>,
        stamps: Option<&wgpu::Buffer>,
    ) -> Result<PendingRead<T>, GpuError> {
        let bytes = (len * std::mem::size_of::<T>()) as u64;
        // The words follow the data, the stamps (u64s) the words.
        let words_at = bytes.next_multiple_of(8);
        let words = also.map_or(0, |(_, words)| words);
        let stamps_at = (words_at + 4 * words as u64).next_multiple_of(8);
        self.scoped(|| {
            if stamps_at == 0 && stamps.is_none() {
                self.submit(encoder);
                return Ok(PendingRead { copy: None, len, words, stamps_at: None, _items: PhantomData });
            }
            let staging = self.device.create_buffer(&wgpu::BufferDescriptor {
                label: Some("readback"),
                size: if stamps.is_some() { stamps_at + 16 } else { stamps_at },
                usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
                mapped_at_creation: false,
            });
            if bytes > 0 {
                encoder.copy_buffer_to_buffer(buffer, 0, &staging, 0, bytes);
            }
            if let Some((also, words)) = also.filter(|&(_, words)| words > 0) {
                encoder.copy_buffer_to_buffer(also, 0, &staging, words_at, 4 * words as u64);
            }
            if let Some(stamps) = stamps {
                encoder.copy_buffer_to_buffer(stamps, 0, &staging, stamps_at, 16);
            }
            let submission = self.submit(encoder);
            let (tx, mapped) = mpsc::channel();
            staging.map_async(wgpu::MapMode::Read, .., move |r| {
                let _ = tx.send(r);
            });
            let stamps_at = stamps.map(|_| stamps_at as usize);
            Ok(PendingRead { copy: Some((staging, submission, mapped)), len, words, stamps_at, _items: PhantomData })
        })
    }

    /// Waits for a read-back started by [`GpuContext::dispatch_and_read_back`] and returns its
    /// data, or `None` as soon as `wanted` says it is no longer needed (asked every
    /// [`Self::WANTED_POLL`] while the device works): the kernel may run on, but the
    /// caller need not wait for it.
    pub fn finish_read_back<T: bytemuck::Pod>(
        &self,
        pending: PendingRead<T>,
        wanted: &dyn Fn() -> bool,
    ) -> Result<Option<ReadBack<T>>, GpuError> {
        let Some((staging, submission, mapped)) = pending.copy else {
            return Ok(Some(ReadBack { items: Vec::new(), words: Vec::new() }));
        };
        self.scoped(|| {
            loop {
                let wait = wgpu::PollType::Wait {
                    submission_index: Some(submission.clone()),
                    timeout: Some(Self::WANTED_POLL),
                };
                let polled = {
                    let _turn = self.maintain.lock().unwrap_or_else(PoisonError::into_inner);
                    self.device.poll(wait)
                };
                match polled {
                    Ok(_) => break,
                    Err(wgpu::PollError::Timeout) if !wanted() => return Ok(None),
                    Err(wgpu::PollError::Timeout) => {}
                    Err(e) => return Err(GpuError::Readback(e.to_string())),
                }
            }
            mapped
                .recv()
                .map_err(|e| GpuError::Readback(e.to_string()))?
                .map_err(|e| GpuError::Readback(e.to_string()))?;
            let data = {
                let view = staging.get_mapped_range(..).map_err(|e| GpuError::Readback(e.to_string()))?;
                if let Some(at) = pending.stamps_at {
                    let stamp =
                        |k: usize| u64::from_le_bytes(view[at + 8 * k..at + 8 * k + 8].try_into().unwrap_or([0; 8]));
                    let (begin, end) = (stamp(0), stamp(1));
                    if end > begin {
                        let ns = (end - begin) as f64 * f64::from(self.queue.get_timestamp_period());
                        *self.kernel_ns.lock().unwrap_or_else(PoisonError::into_inner) += ns;
                    }
                }
                let bytes = pending.len * std::mem::size_of::<T>();
                let words_at = bytes.next_multiple_of(8);
                ReadBack {
                    items: copied_out(&view[..bytes]),
                    words: copied_out(&view[words_at..words_at + 4 * pending.words]),
                }
            };
            staging.unmap();
            Ok(Some(data))
        })
    }
}

/// The values of mapped bytes, copied out on the host's pool: a wide dispatch's totals are
/// hundreds of megabytes, one thread's copy a good part of its read-back.
fn copied_out<T: bytemuck::Pod>(bytes: &[u8]) -> Vec<T> {
    use rayon::prelude::*;
    const PIECE: usize = 1 << 20;
    let mut out: Vec<T> = bytemuck::zeroed_vec(bytes.len() / std::mem::size_of::<T>());
    bytemuck::cast_slice_mut::<T, u8>(&mut out)
        .par_chunks_mut(PIECE)
        .zip(bytes.par_chunks(PIECE))
        .for_each(|(to, from)| to.copy_from_slice(from));
    out
}

/// One kernel launch for [`GpuContext::dispatch_and_read_back`]: `buffers` bound at
/// bindings 0, 1, … of group 0, over `workgroups`.
#[derive(Debug, Clone, Copy)]
pub struct Dispatch<'a> {
    pub kernel: &'a Kernel,
    pub buffers: &'a [&'a wgpu::Buffer],
    pub workgroups: [u32; 3],
}

/// Tells when a staging buffer is mapped (or why it could not be).
type MappedSignal = mpsc::Receiver<Result<(), wgpu::BufferAsyncError>>;

/// What a read-back brings: the output's elements and the second output's words.
#[derive(Debug, Clone, PartialEq)]
pub struct ReadBack<T> {
    pub items: Vec<T>,
    pub words: Vec<u32>,
}

/// A read-back in flight: its staging buffer, the submission that fills it and the
/// signal that it is mapped.
pub struct PendingRead<T> {
    copy: Option<(wgpu::Buffer, wgpu::SubmissionIndex, MappedSignal)>,
    len: usize,
    /// u32 words of the second output, after the elements (8-byte aligned).
    words: usize,
    /// Where the kernels' two timestamps follow the data in the staging buffer.
    stamps_at: Option<usize>,
    _items: PhantomData<T>,
}

impl<T> fmt::Debug for PendingRead<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PendingRead").field("len", &self.len).finish_non_exhaustive()
    }
}

/// `x − reference` as (hi, lo) f32 pairs whose sum is the f64 difference to about 1e-14:
/// how kernels receive prices, so that f32 keeps its precision on moves, not on the level.
pub fn f32_pairs(x: &[f64], reference: f64) -> Vec<[f32; 2]> {
    x.iter()
        .map(|&v| {
            let d = v - reference;
            let hi = d as f32;
            [hi, (d - f64::from(hi)) as f32]
        })
        .collect()
}
