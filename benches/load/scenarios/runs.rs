//! The timed runs, one core then two, then the paths that call the API server.

use super::*;

/// RSS (KiB) after the one-core runs, and the pages of pods listed meanwhile.
pub(super) struct OneCore {
    pub(super) ray_after: u64,
    pub(super) ray_hwm: u64,
    pub(super) pod_lists: u64,
    pub(super) floor_after: u64,
    pub(super) floor_hwm: u64,
}

/// rayshare's RSS (KiB) at a fresh start with large caches and after the two-core runs.
pub(super) struct TwoCores {
    pub(super) ray_fresh_large: u64,
    pub(super) ray_fresh_hwm: u64,
    pub(super) ray2_after: u64,
    pub(super) ray2_hwm: u64,
}

impl Bench {
    pub(super) fn orphan_pass(
        &mut self,
        load: &tokio::runtime::Runtime,
        ray: &Server,
        kinds: &[Kind],
        started: Instant,
    ) {
        // The orphan-PodGroup pass, on purpose: the probe of pod-podgroup-create above made
        // a group whose pod never comes; the leader's next pass lists every pod of the
        // cluster to find that out. Admission goes on meanwhile (1,000 req/s).
        let calls = self.api_requests();
        let (rss_before, _) = sys::rss_kib(ray.proc.pid());
        let pool = self.connect(load, ray, Proto::H2);
        let run = load.block_on(client::open_loop(
            pool,
            kinds[0].body(),
            1000.0,
            Duration::ZERO,
            Duration::from_secs(if self.quick { 8 } else { 14 }),
            ray.proc.pid(),
        ));
        let pages = cluster::delta(&calls, &self.api_requests())
            .get("LIST pods")
            .copied()
            .unwrap_or(0);
        let (rss_after, _) = sys::rss_kib(ray.proc.pid());
        eprintln!(
            "load: [{}] orphan-PodGroup pass ({pages} pages of pods listed): RSS {:.1} -> {:.1} MiB; pod-unchanged at 1000/s meanwhile: p50 {:.2} p99 {:.2} max {:.2} ms",
            elapsed(started),
            mib(rss_before),
            mib(rss_after),
            run.pct_us(0.5) / 1000.0,
            run.pct_us(0.99) / 1000.0,
            run.pct_us(1.0) / 1000.0
        );
        self.results.insert(
            "orphan_pass",
            json!({
                "about": "one PodGroup without its pod; rayshare's leader lists every pod of the cluster (metadata, pages of 500, all kept) to check; orphanGraceSeconds 5 and reconcileIntervalSeconds 5 for this instance",
                "pod_list_pages": pages,
                "rss_kib_before": rss_before,
                "rss_kib_after": rss_after,
                "admission_meanwhile": {
                    "kind": kinds[0].name,
                    "offered_rps": 1000,
                    "protocol": "h2",
                    "p50_us": round1(run.pct_us(0.5)),
                    "p99_us": round1(run.pct_us(0.99)),
                    "p999_us": round1(run.pct_us(0.999)),
                    "max_us": round1(run.pct_us(1.0)),
                    "errors": run.errors,
                },
            }),
        );
    }

    pub(super) fn one_core_runs(
        &mut self,
        load: tokio::runtime::Runtime,
        ray: &Server,
        floor: &Server,
        kinds: &[Kind],
        calls_at_start: &BTreeMap<String, f64>,
        started: Instant,
    ) -> OneCore {
        self.paused_during_floor.set(Some(ray.proc.pid()));
        for proto in [Proto::H2, Proto::H1] {
            for kind in kinds {
                for server in [ray, floor] {
                    self.saturate(&load, server, kind, proto, 1);
                }
            }
        }
        for proto in [Proto::H2, Proto::H1] {
            for kind in kinds {
                for server in [ray, floor] {
                    for &rate in &self.settings.rates.clone() {
                        self.open(&load, server, kind, proto, rate, 1);
                    }
                }
            }
        }
        drop(load);
        let (ray_after, ray_hwm) = sys::rss_kib(ray.proc.pid());
        // rayshare's orphan-PodGroup pass lists every pod of the cluster (the probe of
        // pod-podgroup-create left one orphan); nothing else here lists pods.
        let pod_lists = cluster::delta(calls_at_start, &self.api_requests())
            .get("LIST pods")
            .copied()
            .unwrap_or(0);
        let (floor_after, floor_hwm) = sys::rss_kib(floor.proc.pid());
        eprintln!("load: [{}] one-core runs done", elapsed(started));
        OneCore {
            ray_after,
            ray_hwm,
            pod_lists,
            floor_after,
            floor_hwm,
        }
    }

    /// Fresh servers on two cores (rayshare lists the large caches at start).
    pub(super) fn two_core_runs(&mut self, kinds: &[Kind], started: Instant) -> TwoCores {
        let ray2 = self.start_rayshare(2, None);
        let floor2 = self.start_floor(2);
        self.paused_during_floor.set(Some(ray2.proc.pid()));
        std::thread::sleep(Duration::from_secs(3));
        let (ray_fresh_large, ray_fresh_hwm) = sys::rss_kib(ray2.proc.pid());
        let load = self.load_runtime(2);
        for proto in [Proto::H2, Proto::H1] {
            for kind in kinds {
                for server in [&ray2, &floor2] {
                    self.saturate(&load, server, kind, proto, 2);
                }
            }
        }
        drop(load);
        eprintln!("load: [{}] two-core runs done", elapsed(started));
        let (ray2_after, ray2_hwm) = sys::rss_kib(ray2.proc.pid());
        ray2.proc.stop();
        floor2.proc.stop();

        self.paused_during_floor.set(None);
        TwoCores {
            ray_fresh_large,
            ray_fresh_hwm,
            ray2_after,
            ray2_hwm,
        }
    }

    pub(super) fn api_path_runs(&mut self, separate: &[Kind], started: Instant) {
        // The paths with API calls, at low rates, one core.
        let ray3 = self.start_rayshare(1, None);
        let load = self.load_runtime(1);
        let low_rates: Vec<f64> = if self.quick {
            vec![100.0]
        } else {
            vec![100.0, 300.0]
        };
        for kind in separate {
            for &rate in &low_rates {
                self.open(&load, &ray3, kind, Proto::H2, rate, 1);
            }
        }
        drop(load);
        ray3.proc.stop();
        eprintln!("load: [{}] API-path runs done", elapsed(started));
    }
}
