//! `threadx profile show|reset`.

use anyhow::{Context, Result};
use clap::Subcommand;
use threadx_dispatch::{DeviceMode, Dispatcher, fingerprint, thousands};
use threadx_profile_store::Profiles;

#[derive(Debug, Subcommand)]
pub enum Action {
    /// Every profiled operation (samples and mean time per device, and where it would run
    /// now), then every saved balance (each worker's share and throughput).
    Show,
    /// Empty both profiles (thresholds and the balances of `threadx balance`).
    Reset,
}

pub fn run(action: Action, device: Option<DeviceMode>) -> Result<()> {
    match action {
        Action::Show => show(device),
        Action::Reset => reset(),
    }
}

fn stats(s: &threadx_profile_store::RunningStats) -> String {
    match (s.mean(), s.variance()) {
        (None, _) => "-".into(),
        (Some(m), Some(v)) => format!("{m:.3} ± {:.3}", v.sqrt()),
        (Some(m), None) => format!("{m:.3}"),
    }
}

fn show(device: Option<DeviceMode>) -> Result<()> {
    let dispatcher = Dispatcher::from_env(Some(crate::mode(device)?)).map_err(anyhow::Error::msg)?;
    let rows = dispatcher.profile_decisions();
    outln!("Thresholds: {} ({} entries)", dispatcher.profile_path().display(), rows.len());
    outln!("Fingerprint: {}", dispatcher.fingerprint());
    outln!("Device mode: {}", dispatcher.mode());
    // Why "no GPU available" where `devices` lists adapters: auto leaves software ones out.
    let adapters = dispatcher.selection().map(|s| s.adapters.clone()).unwrap_or_default();
    if dispatcher.gpu().is_none() && !adapters.is_empty() && adapters.iter().all(|a| a.software) {
        let names: Vec<String> = adapters.iter().map(|a| a.label()).collect();
        outln!(
            "GPU: none in {} mode: the adapters found ({}) run on the CPU's own cores; --device gpu uses them",
            dispatcher.mode(),
            names.join(", ")
        );
    }
    if !rows.is_empty() {
        outln!(
            "{:<52} {:>5} {:>18} {:>5} {:>18}  {:<7}  would run on",
            "operation",
            "cpu n",
            "cpu ms",
            "gpu n",
            "gpu ms",
            "trusted"
        );
    }
    for (key, view, decision) in rows {
        let choice =
            decision.map_or_else(|| "- (key has no size)".to_owned(), |d| format!("{} ({})", d.device, d.reason));
        outln!(
            "{key:<52} {:>5} {:>18} {:>5} {:>18}  {:<7}  {choice}",
            view.cpu.n,
            stats(&view.cpu),
            view.gpu.n,
            stats(&view.gpu),
            if view.trusted { "yes" } else { "no" },
        );
    }
    let profiles = Profiles::from_env(dispatcher.fingerprint());
    let multi = profiles.get_multigpu_profiles()?;
    outln!("Multi-GPU ratios: {} ({} workload tags)", profiles.multigpu_path().display(), multi.profiles.len());
    for (tag, p) in &multi.profiles {
        outln!("  {tag} (updated {}):", p.updated_at.as_deref().unwrap_or("?"));
        for (worker, ratio) in &p.ratios {
            let rate = p.throughput.get(worker).map(|t| format!(", {} per s", thousands(t.round() as u64)));
            outln!("    {worker:<40} {:>6.1} %{}", ratio * 100.0, rate.unwrap_or_default());
        }
    }
    Ok(())
}

fn reset() -> Result<()> {
    let profiles = Profiles::from_env(fingerprint(None));
    let cleared = profiles.reset().context("resetting the profiles")?;
    if cleared.is_empty() {
        outln!(
            "Nothing to reset: no profile at {} or {}",
            profiles.thresholds_path().display(),
            profiles.multigpu_path().display()
        );
    }
    for path in cleared {
        outln!("Emptied {}", path.display());
    }
    Ok(())
}
