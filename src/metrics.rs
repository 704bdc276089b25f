//! Prometheus metrics, served in text format on the admin port.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

pub use crate::cause::Cause;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RequestLabels {
    pub kind: &'static str,
    pub operation: &'static str,
    pub outcome: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct LatencyLabels {
    pub kind: &'static str,
    pub outcome: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct KindLabel {
    pub kind: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ReloadLabel {
    /// `reloaded` or `rejected`.
    pub cause: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct CauseLabel {
    pub cause: Cause,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct StateLabel {
    pub state: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ReasonLabel {
    pub reason: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ProtocolLabel {
    /// `h2` or `http/1.1`, as the TLS handshake agreed (ALPN).
    pub protocol: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct BuildLabels {
    pub version: &'static str,
    /// The git commit, 12 hex digits, or `unknown` (see build.rs).
    pub revision: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ImageLabels {
    /// The reference the chart deployed (`serve --image`), or `unknown`.
    pub image: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ClusterLabels {
    /// Not `namespace`: Prometheus gives scraped series the scrape target's `namespace`.
    pub cluster_namespace: String,
    pub cluster: String,
}

pub struct Metrics {
    /// Unprefixed: Prometheus' `process_*` metrics; rayshare's own are in its `rayshare`
    /// sub-registry.
    registry: Registry,
    pub requests: Family<RequestLabels, Counter>,
    pub duration: Family<LatencyLabels, Histogram, fn() -> Histogram>,
    pub patches: Family<KindLabel, Counter>,
    pub created: Family<KindLabel, Counter>,
    pub deleted: Family<KindLabel, Counter>,
    pub reused: Family<KindLabel, Counter>,
    pub planned: Family<KindLabel, Counter>,
    pub reconcile_passes: Family<KindLabel, Counter>,
    pub provision_seconds: Histogram,
    pub errors: Family<CauseLabel, Counter>,
    pub cert_reloads: Family<ReloadLabel, Counter>,
    pub in_flight: Gauge,
    pub connections: Family<ProtocolLabel, Counter>,
    pub connections_open: Gauge,
    /// 1 while this replica holds the reconcilers' lease.
    pub leader: Gauge,
    pub shared_clusters: Family<StateLabel, Gauge>,
    pub cluster_jobs: Family<ClusterLabels, Gauge>,
    pub ray_jobs_stopped: Family<ReasonLabel, Counter>,
    pub ray_jobs_deleted: Counter,
    pub jobs_woken: Counter,
    pub jobs_cut_off: Counter,
    pub ray_jobs_unattributed: Family<ClusterLabels, Gauge>,
    pub events: Family<ReasonLabel, Counter>,
    pub events_dropped: Family<ReasonLabel, Counter>,
}

impl Default for Metrics {
    fn default() -> Self {
        let mut root = Registry::default();
        root.register_collector(Box::new(crate::process_metrics::ProcessCollector::default()));
        let registry = root.sub_registry_with_prefix("rayshare");
        let build_info = Family::<BuildLabels, Gauge>::default();
        build_info
            .get_or_create(&BuildLabels {
                version: crate::version::VERSION,
                revision: crate::version::REVISION,
            })
            .set(1);
        registry.register(
            "build_info",
            "1, labelled with the version and the git revision rayshare was built from",
            build_info,
        );
        let placeholder = Family::<ImageLabels, Gauge>::default();
        let (image, is_placeholder) = crate::placeholder::noted();
        placeholder
            .get_or_create(&ImageLabels { image })
            .set(i64::from(is_placeholder));
        registry.register(
            "image_placeholder",
            "1 when this build runs under the release's image name without being that release's build (see docs/install.md), labelled with the image the chart deployed",
            placeholder,
        );
        registry.register_collector(Box::new(DroppedLogLines));
        let requests = Family::<RequestLabels, Counter>::default();
        registry.register(
            "admission_requests",
            "Admission requests by kind, operation and outcome",
            requests.clone(),
        );
        // 50 µs .. 52 s: the interesting part of a webhook's latency is sub-millisecond, and
        // the top buckets reach past the longest webhook timeout (30 s) so a p99 near the
        // timeout can be seen at all.
        let duration: Family<LatencyLabels, Histogram, fn() -> Histogram> =
            Family::new_with_constructor(|| {
                Histogram::new(prometheus_client::metrics::histogram::exponential_buckets(
                    0.00005, 2.0, 21,
                ))
            });
        registry.register(
            "admission_duration_seconds",
            "Time to answer an admission request, by kind and outcome",
            duration.clone(),
        );
        let patches = Family::<KindLabel, Counter>::default();
        registry.register("patches", "Responses that carried a patch", patches.clone());
        let created = Family::<KindLabel, Counter>::default();
        registry.register(
            "objects_created",
            "Objects created by rayshare",
            created.clone(),
        );
        let deleted = Family::<KindLabel, Counter>::default();
        registry.register(
            "objects_deleted",
            "Objects deleted by rayshare's reconcilers",
            deleted.clone(),
        );
        let reused = Family::<KindLabel, Counter>::default();
        registry.register(
            "objects_reused",
            "Admissions that found the object they needed already there (creations avoided)",
            reused.clone(),
        );
        let planned = Family::<KindLabel, Counter>::default();
        registry.register(
            "objects_planned",
            "Admissions whose object did not exist yet: the provisioner makes it once the admitted object is stored",
            planned.clone(),
        );
        let reconcile_passes = Family::<KindLabel, Counter>::default();
        registry.register(
            "reconcile_passes",
            "Passes of the controllers, by the kind they reconcile",
            reconcile_passes.clone(),
        );
        let provision_seconds = Histogram::new(
            prometheus_client::metrics::histogram::exponential_buckets(0.001, 2.0, 14),
        );
        registry.register(
            "provision_create_seconds",
            "Time of the API call that created a shared cluster",
            provision_seconds.clone(),
        );
        let errors = Family::<CauseLabel, Counter>::default();
        registry.register("errors", "Errors by cause", errors.clone());
        let cert_reloads = Family::<ReloadLabel, Counter>::default();
        registry.register(
            "certificate_reloads",
            "Certificate reloads by result",
            cert_reloads.clone(),
        );
        let in_flight = Gauge::default();
        registry.register(
            "admission_in_flight",
            "Admission requests being answered",
            in_flight.clone(),
        );
        let connections = Family::<ProtocolLabel, Counter>::default();
        registry.register(
            "webhook_connections",
            "Connections to the webhook port that completed the TLS handshake, by protocol: an API server sends all its calls over one HTTP/2 connection while it stays open (docs/operating.md)",
            connections.clone(),
        );
        let connections_open = Gauge::default();
        registry.register(
            "webhook_connections_open",
            "Connections to the webhook port being served",
            connections_open.clone(),
        );
        let leader = Gauge::default();
        registry.register(
            "leader",
            "1 while this replica holds the lease and runs the reconcilers",
            leader.clone(),
        );
        let shared_clusters = Family::<StateLabel, Gauge>::default();
        registry.register(
            "shared_clusters",
            "rayshare's shared RayClusters by state (busy, idle, expired), as of the last reclaim pass",
            shared_clusters.clone(),
        );
        let cluster_jobs = Family::<ClusterLabels, Gauge>::default();
        registry.register(
            "shared_cluster_active_jobs",
            "Active RayJobs per shared RayCluster, as of the last reclaim pass",
            cluster_jobs.clone(),
        );
        let ray_jobs_stopped = Family::<ReasonLabel, Counter>::default();
        registry.register(
            "ray_jobs_stopped",
            "Ray jobs stopped on shared clusters because their RayJob was deleted, finished or superseded",
            ray_jobs_stopped.clone(),
        );
        let ray_jobs_deleted = Counter::default();
        registry.register(
            "ray_jobs_deleted",
            "Records of finished Ray jobs deleted from shared clusters' job tables because their RayJob is gone",
            ray_jobs_deleted.clone(),
        );
        let jobs_woken = Counter::default();
        registry.register(
            "jobs_woken",
            "RayJobs that waited for their shared cluster, touched when it was made and again when it became ready, so KubeRay takes them up at once",
            jobs_woken.clone(),
        );
        let jobs_cut_off = Counter::default();
        registry.register(
            "jobs_cut_off",
            "Running RayJobs whose shared cluster was suspended under them (Kueue preempted or deactivated it): their Ray job went with its pods; each gets a Warning Event",
            jobs_cut_off.clone(),
        );
        let ray_jobs_unattributed = Family::<ClusterLabels, Gauge>::default();
        registry.register(
            "ray_jobs_unattributed",
            "Running Ray jobs on a shared cluster that no RayJob rewritten by rayshare submitted (never stopped), as of the last look",
            ray_jobs_unattributed.clone(),
        );
        let events = Family::<ReasonLabel, Counter>::default();
        registry.register(
            "events_recorded",
            "Kubernetes Events recorded, by event reason",
            events.clone(),
        );
        let events_dropped = Family::<ReasonLabel, Counter>::default();
        registry.register(
            "events_dropped",
            "Events not recorded, by why: bad_name (a name no stored object can have), queue_full, not_stored (the admitted object never appeared), rate_limited, api_error",
            events_dropped.clone(),
        );
        Self {
            registry: root,
            events,
            events_dropped,
            ray_jobs_stopped,
            ray_jobs_deleted,
            jobs_woken,
            jobs_cut_off,
            ray_jobs_unattributed,
            shared_clusters,
            cluster_jobs,
            requests,
            duration,
            patches,
            created,
            deleted,
            reused,
            planned,
            reconcile_passes,
            provision_seconds,
            errors,
            cert_reloads,
            in_flight,
            connections,
            connections_open,
            leader,
        }
    }
}

/// `rayshare_log_lines_dropped_total`, read from the log writer at each scrape.
#[derive(Debug)]
struct DroppedLogLines;

impl prometheus_client::collector::Collector for DroppedLogLines {
    fn encode(
        &self,
        mut encoder: prometheus_client::encoding::DescriptorEncoder,
    ) -> std::fmt::Result {
        use prometheus_client::encoding::EncodeMetric;
        let counter =
            prometheus_client::metrics::counter::ConstCounter::new(crate::logging::dropped_lines());
        let metric = encoder.encode_descriptor(
            "log_lines_dropped",
            "Log lines dropped because the log output could not keep up (admission never waits for it)",
            None,
            counter.metric_type(),
        )?;
        counter.encode(metric)
    }
}

impl Metrics {
    /// Leadership changed. The gauges only the leader sets are cleared when it is lost, so
    /// a former leader does not keep exporting what it saw last.
    pub fn set_leading(&self, leading: bool) {
        self.leader.set(i64::from(leading));
        if !leading {
            self.shared_clusters.clear();
            self.cluster_jobs.clear();
            self.ray_jobs_unattributed.clear();
        }
    }

    pub fn error(&self, cause: Cause) {
        self.errors.get_or_create(&CauseLabel { cause }).inc();
    }

    pub fn encode(&self) -> String {
        let mut out = String::new();
        prometheus_client::encoding::text::encode(&mut out, &self.registry)
            .expect("writing to a String cannot fail");
        out
    }
}

#[cfg(test)]
mod tests {
    use super::Metrics;

    #[test]
    fn exports_build_info_and_keeps_the_rayshare_prefix() {
        let text = Metrics::default().encode();
        let build_info = format!(
            "rayshare_build_info{{version=\"{}\",revision=\"{}\"}} 1\n",
            env!("CARGO_PKG_VERSION"),
            crate::version::REVISION
        );
        assert!(text.contains(&build_info), "{text}");
        assert!(
            text.contains("# TYPE rayshare_log_lines_dropped counter\n"),
            "{text}"
        );
        assert!(
            text.contains("# TYPE rayshare_admission_in_flight gauge\n"),
            "{text}"
        );
    }

    /// Prometheus' process metrics, unprefixed, with plausible values.
    #[cfg(target_os = "linux")]
    #[test]
    fn exports_process_metrics() {
        let text = Metrics::default().encode();
        let value = |name: &str| -> f64 {
            text.lines()
                .find_map(|l| l.strip_prefix(name)?.strip_prefix(' '))
                .unwrap_or_else(|| panic!("no {name} in\n{text}"))
                .parse()
                .unwrap()
        };
        assert!(value("process_cpu_seconds_total") >= 0.0);
        assert!(value("process_resident_memory_bytes") > 0.0);
        assert!(value("process_virtual_memory_bytes") > 0.0);
        assert!(value("process_open_fds") > 0.0);
        assert!(value("process_max_fds") >= value("process_open_fds"));
        assert!(value("process_start_time_seconds") > 1.5e9);
        assert!(!text.contains("rayshare_process_"), "{text}");
    }
}
