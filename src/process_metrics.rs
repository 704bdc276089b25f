//! The process metrics of Prometheus' client libraries, under their names, read from
//! /proc/self at each scrape: `process_cpu_seconds_total`, `process_resident_memory_bytes`,
//! `process_virtual_memory_bytes`, `process_open_fds`, `process_max_fds`,
//! `process_start_time_seconds`. Linux only: elsewhere the collector writes nothing.
//!
//! A value that cannot be read is left out of that scrape (and logged at debug level): a
//! scrape never fails for it.

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;

/// Registered on a registry without a prefix (the names are Prometheus' own).
#[derive(Debug, Default)]
pub struct ProcessCollector {
    /// The start time does not change; read once.
    #[cfg_attr(not(target_os = "linux"), allow(dead_code))]
    start_time: std::sync::OnceLock<f64>,
}

/// One look at the process; `None`: could not be read (or not on Linux).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Sample {
    /// User and system CPU time, in seconds.
    pub cpu_seconds: Option<f64>,
    pub resident_memory_bytes: Option<u64>,
    pub virtual_memory_bytes: Option<u64>,
    pub open_fds: Option<u64>,
    /// The soft limit on open files (`ulimit -n`).
    pub max_fds: Option<f64>,
    /// Seconds since the Unix epoch.
    pub start_time_seconds: Option<f64>,
}

impl ProcessCollector {
    /// Reads /proc/self now.
    pub fn sample(&self) -> Sample {
        #[cfg(target_os = "linux")]
        {
            linux::sample(&self.start_time)
        }
        #[cfg(not(target_os = "linux"))]
        {
            Sample::default()
        }
    }
}

impl Collector for ProcessCollector {
    fn encode(&self, encoder: DescriptorEncoder) -> std::fmt::Result {
        encode(&self.sample(), encoder)
    }
}

/// Writes the values `sample` has, with Prometheus' names, help texts and types.
pub fn encode(sample: &Sample, mut encoder: DescriptorEncoder) -> std::fmt::Result {
    if let Some(v) = sample.cpu_seconds {
        let counter = ConstCounter::new(v);
        counter.encode(encoder.encode_descriptor(
            "process_cpu_seconds",
            "Total user and system CPU time spent in seconds.",
            None,
            counter.metric_type(),
        )?)?;
    }
    let gauges = [
        (
            "process_resident_memory_bytes",
            "Resident memory size in bytes.",
            sample.resident_memory_bytes.map(|v| v as f64),
        ),
        (
            "process_virtual_memory_bytes",
            "Virtual memory size in bytes.",
            sample.virtual_memory_bytes.map(|v| v as f64),
        ),
        (
            "process_open_fds",
            "Number of open file descriptors.",
            sample.open_fds.map(|v| v as f64),
        ),
        (
            "process_max_fds",
            "Maximum number of open file descriptors.",
            sample.max_fds,
        ),
        (
            "process_start_time_seconds",
            "Start time of the process since unix epoch in seconds.",
            sample.start_time_seconds,
        ),
    ];
    for (name, help, value) in gauges {
        if let Some(v) = value {
            let gauge = ConstGauge::new(v);
            gauge.encode(encoder.encode_descriptor(name, help, None, gauge.metric_type())?)?;
        }
    }
    Ok(())
}

#[cfg(target_os = "linux")]
mod linux {
    use std::sync::OnceLock;

    use procfs::process::{LimitValue, Process};

    use super::Sample;

    pub(super) fn sample(start_time: &OnceLock<f64>) -> Sample {
        let mut out = Sample::default();
        let me = match Process::myself() {
            Ok(me) => me,
            Err(e) => {
                tracing::debug!(error = %e, "process metrics: cannot open /proc/self");
                return out;
            }
        };
        let ticks = procfs::ticks_per_second() as f64;
        match me.stat() {
            Ok(stat) => {
                out.cpu_seconds = Some((stat.utime + stat.stime) as f64 / ticks);
                out.resident_memory_bytes = Some(stat.rss.saturating_mul(procfs::page_size()));
                out.virtual_memory_bytes = Some(stat.vsize);
                out.start_time_seconds = start_time.get().copied().or_else(|| {
                    let boot = procfs::boot_time_secs()
                        .map_err(|e| tracing::debug!(error = %e, "process metrics: boot time"))
                        .ok()?;
                    let started = boot as f64 + stat.starttime as f64 / ticks;
                    Some(*start_time.get_or_init(|| started))
                });
            }
            Err(e) => tracing::debug!(error = %e, "process metrics: cannot read /proc/self/stat"),
        }
        match me.fd_count() {
            Ok(n) => out.open_fds = Some(n as u64),
            Err(e) => tracing::debug!(error = %e, "process metrics: cannot count /proc/self/fd"),
        }
        match me.limits() {
            // As Prometheus' Go client: an unlimited soft limit is the largest u64.
            Ok(limits) => {
                out.max_fds = Some(match limits.max_open_files.soft_limit {
                    LimitValue::Value(v) => v as f64,
                    LimitValue::Unlimited => u64::MAX as f64,
                })
            }
            Err(e) => tracing::debug!(error = %e, "process metrics: cannot read /proc/self/limits"),
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use prometheus_client::registry::Registry;

    fn render(collector: impl Collector) -> String {
        let mut registry = Registry::default();
        registry.register_collector(Box::new(collector));
        let mut out = String::new();
        prometheus_client::encoding::text::encode(&mut out, &registry).unwrap();
        out
    }

    /// A collector that writes a given sample.
    #[derive(Debug)]
    struct Fixed(Sample);

    impl Collector for Fixed {
        fn encode(&self, encoder: DescriptorEncoder) -> std::fmt::Result {
            super::encode(&self.0, encoder)
        }
    }

    /// The value of the sample line `name` (without labels) in an exposition.
    fn value(text: &str, name: &str) -> Option<f64> {
        text.lines()
            .find_map(|l| l.strip_prefix(name)?.strip_prefix(' '))
            .map(|v| v.parse().unwrap())
    }

    #[test]
    fn encodes_each_value_with_prometheus_names_and_types() {
        let text = render(Fixed(Sample {
            cpu_seconds: Some(1.5),
            resident_memory_bytes: Some(4096),
            virtual_memory_bytes: Some(8192),
            open_fds: Some(7),
            max_fds: Some(1024.0),
            start_time_seconds: Some(1.7e9),
        }));
        assert!(
            text.contains("# TYPE process_cpu_seconds counter\n"),
            "{text}"
        );
        assert!(text.contains("# TYPE process_open_fds gauge\n"), "{text}");
        assert_eq!(value(&text, "process_cpu_seconds_total"), Some(1.5));
        assert_eq!(value(&text, "process_resident_memory_bytes"), Some(4096.0));
        assert_eq!(value(&text, "process_virtual_memory_bytes"), Some(8192.0));
        assert_eq!(value(&text, "process_open_fds"), Some(7.0));
        assert_eq!(value(&text, "process_max_fds"), Some(1024.0));
        assert_eq!(value(&text, "process_start_time_seconds"), Some(1.7e9));
    }

    #[test]
    fn leaves_out_what_it_could_not_read() {
        let text = render(Fixed(Sample::default()));
        assert!(!text.contains("process_"), "{text}");
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn reads_this_process() {
        let text = render(ProcessCollector::default());
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs_f64();
        let get = |name| value(&text, name).unwrap_or_else(|| panic!("no {name} in\n{text}"));
        assert!(get("process_cpu_seconds_total") >= 0.0);
        assert!(get("process_resident_memory_bytes") > 0.0);
        assert!(get("process_virtual_memory_bytes") >= get("process_resident_memory_bytes"));
        let open = get("process_open_fds");
        assert!(open > 0.0);
        assert!(get("process_max_fds") >= open);
        let started = get("process_start_time_seconds");
        // Started within the last day, and not in the future (boot time is whole seconds).
        assert!(
            started > now - 86_400.0 && started < now + 2.0,
            "{started} vs {now}"
        );
    }

    #[cfg(not(target_os = "linux"))]
    #[test]
    fn absent_elsewhere() {
        assert!(!render(ProcessCollector::default()).contains("process_"));
    }
}
