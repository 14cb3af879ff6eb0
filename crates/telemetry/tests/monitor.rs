//! The system monitor in time: samples at the interval, a bounded history, a prompt stop,
//! and the machine and process recorded when NVML is absent.

use std::time::{Duration, Instant};
use threadx_telemetry::{MonitorError, MonitorOptions, SystemMonitor, history_csv, parse_history_csv};

fn without_nvml(interval_ms: u64, max_history: usize) -> MonitorOptions {
    MonitorOptions {
        interval: Duration::from_millis(interval_ms),
        max_history,
        nvml_library: Some("/nonexistent/libnvidia-ml.so.1".into()),
    }
}

/// This process's user + system CPU time from /proc (Linux; `None` elsewhere).
fn process_cpu_seconds() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // Fields after the command's closing parenthesis; utime and stime are the 14th and
    // 15th of the line, in clock ticks of 1/100 s.
    let rest = &stat[stat.rfind(')')? + 2..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks: f64 = fields.get(11)?.parse::<f64>().ok()? + fields.get(12)?.parse::<f64>().ok()?;
    Some(ticks / 100.0)
}

#[test]
fn samples_come_at_the_interval_into_a_bounded_history_and_stop_promptly() {
    let mut monitor = SystemMonitor::start(&without_nvml(200, 5)).unwrap();
    // Work for the process to be seen doing: one thread spinning, which is one core's
    // worth on an idle machine and less where other jobs share the cores.
    let (cpu_before, wall_before) = (process_cpu_seconds(), Instant::now());
    let until = Instant::now() + Duration::from_millis(1_900);
    let mut spins = 0u64;
    while Instant::now() < until {
        spins = spins.wrapping_add(std::hint::black_box(1));
    }
    let history = monitor.history();
    // What the kernel says this process used over the spin, in % of a core.
    let used = process_cpu_seconds()
        .map(|after| (after - cpu_before.unwrap_or(after)) / wall_before.elapsed().as_secs_f64() * 100.0);
    assert_eq!(history.len(), 5, "the history keeps the last 5 of 9 samples");
    let gaps: Vec<f64> = history.windows(2).map(|w| w[1].elapsed_s - w[0].elapsed_s).collect();
    let mean = gaps.iter().sum::<f64>() / gaps.len() as f64;
    assert!((mean - 0.2).abs() < 0.02, "mean gap {mean:.4} s for a 0.2 s interval: {gaps:?}");
    assert!(history[0].elapsed_s > 0.9, "the oldest samples were dropped: {:.3}", history[0].elapsed_s);
    let last = monitor.latest().unwrap();
    let busy = history.iter().map(|s| s.process_cpu_percent).sum::<f64>() / history.len() as f64;
    if let Some(used) = used {
        assert!((busy - used).abs() <= 30.0, "sampled {busy:.1} % of a core, the kernel counted {used:.1} %");
    }
    assert!(last.memory_total_bytes > last.memory_used_bytes && last.memory_used_bytes > 0);
    assert!(last.process_rss_bytes > 1_000_000 && (0.0..=100.0).contains(&last.cpu_percent), "{last:?}");
    assert!(last.gpus.is_empty());
    assert!(monitor.gpu_status().starts_with("NVML unavailable"), "{}", monitor.gpu_status());
    assert!(monitor.gpu_names().is_empty());
    assert_eq!(parse_history_csv(&history_csv(&history)).unwrap(), history);

    // A long interval: stopping does not wait for it.
    let mut slow = SystemMonitor::start(&without_nvml(30_000, 10)).unwrap();
    std::thread::sleep(Duration::from_millis(20));
    let stopping = Instant::now();
    slow.stop();
    assert!(stopping.elapsed() < Duration::from_millis(200), "stop took {:?}", stopping.elapsed());
    assert!(slow.history().is_empty());
    let stopping = Instant::now();
    monitor.stop();
    assert!(stopping.elapsed() < Duration::from_millis(200));
    let kept = monitor.history().len();
    std::thread::sleep(Duration::from_millis(100));
    assert_eq!(monitor.history().len(), kept, "no sample after stop");
}

#[test]
fn absurd_options_are_refused() {
    let err = SystemMonitor::start(&without_nvml(50, 8)).err().unwrap();
    assert!(matches!(err, MonitorError::Interval(_)), "{err}");
    let err = SystemMonitor::start(&without_nvml(500, 0)).err().unwrap();
    assert!(err.to_string().contains("at least one sample"), "{err}");
}
