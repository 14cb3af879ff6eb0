//! `threadx devices`: every adapter, its rank and why, the default, and NVML's presence.

use anyhow::Result;
use serde_json::json;
use threadx_dispatch::{ADAPTER_ENV, AdapterReport, DeviceMode, fingerprint, format_bytes, select_every_gpu};

/// Mesa's Vulkan driver on the CPU reports itself as llvmpipe.
fn is_lavapipe(a: &AdapterReport) -> bool {
    a.backend == "vulkan" && a.driver == "llvmpipe"
}

pub fn run(as_json: bool, device: Option<DeviceMode>) -> Result<()> {
    let mode = crate::mode(device)?;
    let selection = select_every_gpu();
    let nvml = threadx_telemetry::nvml_gpus();
    let fp = fingerprint(selection.chosen_report());
    if as_json {
        let out = json!({
            "adapters": selection.adapters,
            "default": selection.chosen_report().map(|a| a.rank),
            "problem": selection.problem,
            "mode": mode.to_string(),
            "nvml": nvml.is_ok(),
            "fingerprint": fp,
        });
        outln!("{}", serde_json::to_string_pretty(&out)?);
        return Ok(());
    }
    if selection.adapters.is_empty() {
        outln!("No GPU adapter found.");
    } else {
        outln!("GPU adapters, best first ({ADAPTER_ENV}=<part of a name> picks another):");
        outln!(
            "{:>4}  {:<36} {:<7} {:<15} {:<34} {:>10} {:>12} {:>11}",
            "rank",
            "name",
            "backend",
            "type",
            "driver",
            "max buffer",
            "max binding",
            "wg per dim"
        );
        for a in &selection.adapters {
            let marker = if selection.chosen == Some(a.rank - 1) { "*" } else { " " };
            let driver = format!("{} {}", a.driver, a.driver_info);
            outln!(
                "{:>3}{marker}  {:<36} {:<7} {:<15} {:<34} {:>10} {:>12} {:>11}",
                a.rank,
                a.name,
                a.backend,
                a.device_type,
                driver.trim(),
                format_bytes(a.max_buffer_size),
                format_bytes(a.max_storage_buffer_binding_size),
                a.max_compute_workgroups_per_dimension
            );
            outln!("       why: {}", a.why);
            if is_lavapipe(a) {
                outln!(
                    "       lavapipe: Mesa's Vulkan on the CPU; kernels run correctly, but it says nothing of GPU speed"
                );
            }
        }
    }
    match (selection.chosen_report(), &selection.problem) {
        (Some(a), _) => outln!("Default adapter: #{} {}", a.rank, a.label()),
        (None, Some(problem)) => outln!("Default adapter: none ({problem}); everything runs on the CPU"),
        (None, None) => outln!("Default adapter: none; everything runs on the CPU"),
    }
    outln!("Device mode: {mode} (--device or THREADX_DEVICE: auto, cpu, gpu)");
    outln!(
        "NVML: {}",
        match &nvml {
            Ok(n) => format!("present, {n} GPU(s) (telemetry: threadx monitor, sweep --monitor)"),
            Err(e) => format!("not present (no NVIDIA GPU telemetry): {e}"),
        }
    );
    outln!("Profile fingerprint: {fp}");
    Ok(())
}
