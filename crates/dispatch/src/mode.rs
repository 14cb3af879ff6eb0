//! Which device operations may run on.

use std::fmt;
use std::str::FromStr;

/// Environment variable that sets the [`DeviceMode`] (`auto`, `cpu` or `gpu`).
pub const DEVICE_ENV: &str = "THREADX_DEVICE";

/// `Auto` decides per operation from timing profiles; `Cpu` and `Gpu` force a device
/// (a forced GPU that fails still falls back to the CPU, with a warning). `All` runs a
/// sweep's chunks on every worker of the device pool (each GPU and the CPU); single
/// operations (indicators, one backtest) treat it as `Auto`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase", try_from = "String")]
pub enum DeviceMode {
    #[default]
    Auto,
    Cpu,
    Gpu,
    All,
}

impl DeviceMode {
    /// The mode from `THREADX_DEVICE`; `auto` when unset or empty.
    pub fn from_env() -> Result<Self, String> {
        match std::env::var(DEVICE_ENV) {
            Ok(v) if !v.trim().is_empty() => v.parse().map_err(|e| format!("{DEVICE_ENV}: {e}")),
            _ => Ok(Self::Auto),
        }
    }
}

impl FromStr for DeviceMode {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim().to_ascii_lowercase().as_str() {
            "auto" => Ok(Self::Auto),
            "cpu" => Ok(Self::Cpu),
            "gpu" => Ok(Self::Gpu),
            "all" => Ok(Self::All),
            other => Err(format!("unknown device mode '{other}' (expected auto, cpu, gpu or all)")),
        }
    }
}

impl TryFrom<String> for DeviceMode {
    type Error = String;

    fn try_from(text: String) -> Result<Self, String> {
        text.parse()
    }
}

impl fmt::Display for DeviceMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Auto => "auto",
            Self::Cpu => "cpu",
            Self::Gpu => "gpu",
            Self::All => "all",
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_modes() {
        assert_eq!("AUTO".parse::<DeviceMode>(), Ok(DeviceMode::Auto));
        assert_eq!(" gpu ".parse::<DeviceMode>(), Ok(DeviceMode::Gpu));
        assert_eq!("cpu".parse::<DeviceMode>(), Ok(DeviceMode::Cpu));
        assert_eq!("All".parse::<DeviceMode>(), Ok(DeviceMode::All));
        assert!("tpu".parse::<DeviceMode>().unwrap_err().contains("unknown device mode 'tpu'"));
    }
}
