//! [`AdapterReport`]: what ThreadX knows of one adapter (its name, backend, type, driver,
//! limits and why it ranks where it does): what `threadx devices` shows, what a GPU
//! context carries and what the device policy judges.

use serde::Serialize;

/// What `threadx devices` shows of one adapter.
#[derive(Debug, Clone, Serialize)]
pub struct AdapterReport {
    /// 1 is the best; the default adapter is rank 1 unless `THREADX_ADAPTER` says otherwise.
    pub rank: usize,
    pub name: String,
    pub backend: String,
    pub device_type: String,
    pub driver: String,
    pub driver_info: String,
    pub vendor_id: u32,
    pub device_id: u32,
    /// The PCI bus id where the driver gives one: what tells two identical GPUs apart.
    pub pci_bus_id: String,
    pub max_buffer_size: u64,
    pub max_storage_buffer_binding_size: u64,
    pub max_compute_workgroups_per_dimension: u32,
    pub max_compute_invocations_per_workgroup: u32,
    /// A CPU-software adapter (lavapipe, llvmpipe, WARP): it runs on the CPU's own cores,
    /// so `auto` never picks it; it runs only when the GPU is forced.
    pub software: bool,
    /// Why it is ranked where it is.
    pub why: String,
}

impl AdapterReport {
    /// `name (backend)`: how warnings and tables name an adapter.
    pub fn label(&self) -> String {
        format!("{} ({})", self.name, self.backend)
    }
}
