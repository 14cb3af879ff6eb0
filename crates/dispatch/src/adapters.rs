//! Adapter enumeration, ranking and selection, and the hardware fingerprint of profiles.

use crate::adapter_report::AdapterReport;
use crate::error::GpuError;
use crate::gpu::GpuContext;
use std::sync::Arc;

/// The adapters found, best first, and the one chosen.
#[derive(Debug)]
pub struct GpuSelection {
    pub adapters: Vec<AdapterReport>,
    /// Index into `adapters` of the adapter to use, if any.
    pub chosen: Option<usize>,
    /// Why no adapter is chosen, when none is.
    pub problem: Option<String>,
    handles: Vec<wgpu::Adapter>,
}

impl GpuSelection {
    pub fn chosen_report(&self) -> Option<&AdapterReport> {
        self.chosen.map(|i| &self.adapters[i])
    }

    /// Opens a device on the chosen adapter.
    pub fn open(&self) -> Result<Arc<GpuContext>, GpuError> {
        let i = self.chosen.ok_or_else(|| GpuError::NoAdapter(self.problem.clone().unwrap_or_default()))?;
        GpuContext::open(self.handles[i].clone(), self.adapters[i].clone()).map(Arc::new)
    }

    /// Indices into `adapters` of one adapter per physical device, best first: a GPU
    /// that several backends expose (Vulkan and GL) is kept once, through its native API.
    pub fn physical(&self) -> Vec<usize> {
        let identity = |a: &AdapterReport| {
            if a.pci_bus_id.is_empty() {
                format!("{:x}:{:x}:{}", a.vendor_id, a.device_id, a.name)
            } else {
                a.pci_bus_id.clone()
            }
        };
        let backend = |i: usize| backend_order(self.handles[i].get_info().backend);
        let mut best: Vec<usize> = Vec::new();
        for (i, a) in self.adapters.iter().enumerate() {
            match best.iter_mut().find(|j| identity(&self.adapters[**j]) == identity(a)) {
                Some(j) if backend(i) < backend(*j) => *j = i,
                Some(_) => {}
                None => best.push(i),
            }
        }
        best.sort_unstable();
        best
    }

    /// Opens a device on adapter `i` of `adapters`.
    pub fn open_at(&self, i: usize) -> Result<Arc<GpuContext>, GpuError> {
        GpuContext::open(self.handles[i].clone(), self.adapters[i].clone()).map(Arc::new)
    }

    /// Opens a device on every adapter, best first, with the error of each that fails.
    pub fn open_all(&self) -> Vec<(AdapterReport, Result<Arc<GpuContext>, GpuError>)> {
        self.handles
            .iter()
            .zip(&self.adapters)
            .map(|(h, r)| (r.clone(), GpuContext::open(h.clone(), r.clone()).map(Arc::new)))
            .collect()
    }
}

fn type_order(t: wgpu::DeviceType) -> (u8, &'static str) {
    match t {
        wgpu::DeviceType::DiscreteGpu => (0, "discrete GPU"),
        wgpu::DeviceType::IntegratedGpu => (1, "integrated GPU"),
        wgpu::DeviceType::VirtualGpu => (2, "virtual GPU"),
        wgpu::DeviceType::Cpu => (3, "CPU (software)"),
        wgpu::DeviceType::Other => (4, "unknown type"),
    }
}

/// The native compute APIs come before GL, whose compute support is the narrowest.
fn backend_order(b: wgpu::Backend) -> u8 {
    match b {
        wgpu::Backend::Vulkan | wgpu::Backend::Metal => 0,
        wgpu::Backend::Dx12 => 1,
        wgpu::Backend::Gl => 2,
        _ => 3,
    }
}

/// A byte count as people read it: `2.0 GiB`, `128 MiB`.
pub fn format_bytes(bytes: u64) -> String {
    const KIB: f64 = 1024.0;
    const MIB: f64 = KIB * 1024.0;
    const GIB: f64 = MIB * 1024.0;
    const TIB: f64 = GIB * 1024.0;
    let b = bytes as f64;
    match b {
        b if b >= TIB => format!("{:.1} TiB", b / TIB),
        b if b >= GIB => format!("{:.1} GiB", b / GIB),
        b if b >= MIB => format!("{:.0} MiB", b / MIB),
        b if b >= KIB => format!("{:.0} KiB", b / KIB),
        _ => format!("{bytes} B"),
    }
}

/// `1,234,567`: a count with thousands separators, for messages.
pub fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() * 4 / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// Why no adapter was found: the backend `WGPU_BACKEND` limited the search to, when set
/// (another backend's driver may be there), else that no driver is installed.
fn no_adapter_reason(backends: Option<&str>) -> String {
    match backends.map(str::trim).filter(|b| !b.is_empty()) {
        Some(b) => format!(
            "no GPU adapter found for WGPU_BACKEND={b}: only that backend was searched (unset \
             WGPU_BACKEND to search Vulkan, Metal, DX12 and GL), and it has no driver here \
             (on Debian/Ubuntu, `apt-get install mesa-vulkan-drivers` gives lavapipe)"
        ),
        None => "no GPU adapter found: no Vulkan, Metal, DX12 or GL driver is installed \
                 (on Debian/Ubuntu, `apt-get install mesa-vulkan-drivers` gives lavapipe)"
            .to_owned(),
    }
}

/// Enumerates the adapters a run may use, ranks them and picks one: the best, or the first
/// whose name contains `THREADX_ADAPTER` (case-insensitive). The backends are
/// `WGPU_BACKEND`'s where it is set; else the native ones (Vulkan, Metal, DX12), and GL only
/// where none of those has an adapter: starting GL (EGL) costs a run as much as its own
/// adapter, for a second view of the same device.
pub fn select_gpu() -> GpuSelection {
    match wgpu::Backends::from_env() {
        Some(backends) => select_among(backends),
        None => {
            let native = select_among(wgpu::Backends::PRIMARY);
            if native.adapters.is_empty() { select_among(wgpu::Backends::SECONDARY) } else { native }
        }
    }
}

/// Every adapter of every backend (`WGPU_BACKEND`'s where it is set), ranked, one picked as
/// [`select_gpu`] does: what `threadx devices` lists and what tests run on.
pub fn select_every_gpu() -> GpuSelection {
    select_among(wgpu::Backends::from_env().unwrap_or(wgpu::Backends::all()))
}

fn select_among(backends: wgpu::Backends) -> GpuSelection {
    tracing::debug!("probing GPU adapters ({backends:?})");
    let mut descriptor = wgpu::InstanceDescriptor::new_without_display_handle_from_env();
    descriptor.backends = backends;
    let instance = wgpu::Instance::new(descriptor);
    let mut found: Vec<(wgpu::Adapter, wgpu::AdapterInfo, wgpu::Limits)> =
        pollster::block_on(instance.enumerate_adapters(backends))
            .into_iter()
            .map(|a| {
                let (info, limits) = (a.get_info(), a.limits());
                (a, info, limits)
            })
            .collect();
    // Device memory is not exposed portably; the largest buffer the adapter allows is the
    // closest stand-in, and it is what bounds the work one dispatch can take.
    found.sort_by(|(_, a, la), (_, b, lb)| {
        (type_order(a.device_type).0, std::cmp::Reverse(la.max_buffer_size), backend_order(a.backend), &a.name).cmp(&(
            type_order(b.device_type).0,
            std::cmp::Reverse(lb.max_buffer_size),
            backend_order(b.backend),
            &b.name,
        ))
    });
    let adapters: Vec<AdapterReport> = found
        .iter()
        .enumerate()
        .map(|(i, (_, info, limits))| AdapterReport {
            rank: i + 1,
            name: info.name.clone(),
            backend: info.backend.to_string(),
            device_type: type_order(info.device_type).1.to_owned(),
            driver: info.driver.clone(),
            driver_info: info.driver_info.clone(),
            vendor_id: info.vendor,
            device_id: info.device,
            pci_bus_id: info.device_pci_bus_id.clone(),
            max_buffer_size: limits.max_buffer_size,
            max_storage_buffer_binding_size: limits.max_storage_buffer_binding_size,
            max_compute_workgroups_per_dimension: limits.max_compute_workgroups_per_dimension,
            max_compute_invocations_per_workgroup: limits.max_compute_invocations_per_workgroup,
            software: info.device_type == wgpu::DeviceType::Cpu,
            why: format!(
                "{}; max buffer {}; {} backend{}",
                type_order(info.device_type).1,
                format_bytes(limits.max_buffer_size),
                info.backend,
                if info.device_type == wgpu::DeviceType::Cpu {
                    "; runs on the CPU's own cores, so auto never picks it (only --device gpu runs it)"
                } else {
                    ""
                }
            ),
        })
        .collect();
    let handles = found.into_iter().map(|(a, _, _)| a).collect();

    let wanted = crate::DevicePolicy::wanted_adapter();
    let (chosen, problem) = match (&wanted, adapters.is_empty()) {
        (_, true) => (None, Some(no_adapter_reason(std::env::var("WGPU_BACKEND").ok().as_deref()))),
        (Some(w), false) => match adapters.iter().position(|a| crate::DevicePolicy::names_adapter(w, &a.name)) {
            Some(i) => (Some(i), None),
            None => (
                None,
                Some(format!(
                    "{}={w:?} matches no adapter (found: {})",
                    crate::ADAPTER_ENV,
                    adapters.iter().map(AdapterReport::label).collect::<Vec<_>>().join(", ")
                )),
            ),
        },
        (None, false) => (Some(0), None),
    };
    GpuSelection { adapters, chosen, problem, handles }
}

/// The hardware fingerprint stored with profile entries: this program's version, the
/// CPU, and the GPU adapter with its driver. Timings taken under another fingerprint
/// are not trusted until re-measured.
pub fn fingerprint(gpu: Option<&AdapterReport>) -> String {
    let gpu = gpu.map_or_else(
        || "no GPU".to_owned(),
        |g| format!("{} ({}, driver {} {})", g.name, g.backend, g.driver, g.driver_info),
    );
    format!("{}{gpu}", host_fingerprint())
}

/// The part of [`fingerprint`] that needs no GPU probe: the ThreadX version and the CPU.
pub fn host_fingerprint() -> String {
    format!("threadx {}; cpu {}; gpu ", env!("CARGO_PKG_VERSION"), threadx_profile_store::host_cpu())
}
