//! This process's memory: what it holds now (Linux's `VmRSS`), from which a run's
//! estimate starts, and the most it has held since it started (`VmHWM`), which a run
//! reports beside that estimate; and what the machine can still give (its cgroup's limit
//! included), against which a run's estimate is checked.

/// The resident memory of this process now, in bytes; None where the system does not say
/// (no `/proc`).
pub fn resident_bytes() -> Option<u64> {
    status_kib("VmRSS:")
}

/// The peak resident memory of this process in bytes; None where the system does not say.
pub fn peak_resident_bytes() -> Option<u64> {
    status_kib("VmHWM:")
}

fn status_kib(field: &str) -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with(field))?;
    let kib: u64 = line.trim_start_matches(field).trim().trim_end_matches("kB").trim().parse().ok()?;
    Some(kib * 1024)
}

/// The memory this machine can give a new allocation now (its cgroup's limit included);
/// `None` where the system does not say.
pub fn available_memory() -> Option<u64> {
    let mut system = sysinfo::System::new();
    system.refresh_memory();
    let cgroup = system.cgroup_limits().map(|c| (c.total_memory, c.rss));
    let limited = within_cgroup(system.available_memory(), cgroup);
    (limited > 0).then_some(limited)
}

/// What the machine has `available`, within a cgroup of limit `total` whose processes
/// hold `rss` of it: the page cache the cgroup is charged for is given back under
/// pressure, so it does not count as used (sysinfo's `free_memory` counts it: a build
/// box's cache refused sweeps that fit).
fn within_cgroup(available: u64, cgroup: Option<(u64, u64)>) -> u64 {
    cgroup.map_or(available, |(total, rss)| available.min(total.saturating_sub(rss)))
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_cgroups_page_cache_is_not_memory_in_use() {
        const GIB: u64 = 1 << 30;
        // No limit, 22 GiB of cache charged to the cgroup, 4 MiB held by processes.
        assert_eq!(super::within_cgroup(22 * GIB, Some((24 * GIB, 4 << 20))), 22 * GIB);
        // An 8 GiB limit with 6 GiB held leaves 2 GiB, whatever the machine has.
        assert_eq!(super::within_cgroup(22 * GIB, Some((8 * GIB, 6 * GIB))), 2 * GIB);
        assert_eq!(super::within_cgroup(3 * GIB, None), 3 * GIB);
    }

    #[test]
    fn the_peak_holds_what_this_process_touched() {
        let Some(before) = super::peak_resident_bytes() else { return };
        let touched = vec![1u8; 64 << 20];
        let (now, after) = (super::resident_bytes().unwrap(), super::peak_resident_bytes().unwrap());
        assert!(now >= touched.len() as u64 && after >= now && after >= before, "{before} → {now}, {after}");
        assert_eq!(touched.iter().map(|&b| u64::from(b)).sum::<u64>(), 64 << 20);
    }
}
