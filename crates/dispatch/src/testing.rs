//! Support for test suites that run the same checks on the CPU and on every adapter.
//!
//! Tests that need a GPU call [`adapters`]: with no adapter they print why and skip their
//! GPU part, unless `THREADX_REQUIRE_GPU=1` (set in CI), where they fail instead.
#![allow(clippy::print_stderr)] // Skip reasons are meant for the test log.

use crate::{GpuContext, select_every_gpu};
use std::sync::{Arc, OnceLock};

/// Set to `1` to make tests fail, rather than skip, when no adapter can be used.
pub const REQUIRE_GPU_ENV: &str = "THREADX_REQUIRE_GPU";

fn required() -> bool {
    std::env::var(REQUIRE_GPU_ENV).is_ok_and(|v| v == "1")
}

/// Every adapter that opens, best first, opened once per test process.
pub fn adapters() -> &'static [Arc<GpuContext>] {
    static ALL: OnceLock<Vec<Arc<GpuContext>>> = OnceLock::new();
    ALL.get_or_init(|| {
        let selection = select_every_gpu();
        let mut opened = Vec::new();
        for (report, ctx) in selection.open_all() {
            match ctx {
                Ok(ctx) => opened.push(ctx),
                Err(e) => eprintln!("adapter {} does not open: {e}", report.label()),
            }
        }
        if opened.is_empty() {
            let why = selection.problem.unwrap_or_else(|| "no adapter could be opened".into());
            assert!(!required(), "{REQUIRE_GPU_ENV}=1 but no GPU adapter is usable: {why}");
            eprintln!("skipping GPU checks: {why}");
        }
        opened
    })
}

/// The best adapter, if any (same skip rules as [`adapters`]).
pub fn best_adapter() -> Option<Arc<GpuContext>> {
    adapters().first().cloned()
}

/// A dispatcher in `mode` on the best adapter (none in CPU mode) with its profile under
/// `dir`: tests never write the working tree's artifacts/.
pub fn dispatcher_in(dir: &std::path::Path, mode: crate::DeviceMode) -> crate::Dispatcher {
    let profiles = threadx_profile_store::Profiles::at(dir.join("thresholds.json"), dir.join("multigpu.json"), "test");
    let store = profiles.threshold_store().unwrap_or_else(|e| panic!("a test profile under {}: {e}", dir.display()));
    let gpu = if mode == crate::DeviceMode::Cpu { None } else { best_adapter() };
    crate::Dispatcher::new(mode, gpu, store, crate::DevicePolicy::default())
}
