//! The benchmark's run, scenario by scenario: what is measured, in which order.

mod bulk;
mod fixtures;
mod runs;

use super::*;
use fixtures::{Fixtures, with_n};
use runs::{OneCore, TwoCores};

impl Bench {
    pub(super) fn run(
        mut self,
        profile: Option<Vec<String>>,
        compare: Option<Vec<PathBuf>>,
        memory: bool,
        flood: bool,
    ) {
        let started = Instant::now();
        let s = &self.settings;
        let (bulk_ns, bulk_rc, bulk_pods) = (s.bulk_namespaces, s.bulk_clusters, s.bulk_pods);
        // The CRDs from their Go modules (tests/tools/crds.sh prints the directory).
        let crd_dir = std::env::var_os("RAYSHARE_CRDS")
            .map(PathBuf::from)
            .unwrap_or_else(|| cluster::crds_from_modules(&self.repo));
        self.rt.block_on(async {
            cluster::install_crds(&self.kube, &crd_dir).await;
            cluster::create_namespace(&self.kube, "bench", &[("rayshare.io/enabled", "true")])
                .await;
            cluster::create_namespace(&self.kube, "rayshare-system", &[]).await;
        });

        // Fresh servers, one core each, idle.
        // Defaults, except that a PodGroup whose pod never came counts as orphaned after
        // 5 s (not 2 min) and the orphan pass runs every 5 s (not 30 s): so the pass can
        // be measured below, in seconds rather than minutes.
        let config = self.out.join("rayshare-config.yaml");
        std::fs::write(
            &config,
            "podGroups:\n  orphanGraceSeconds: 5\n  reconcileIntervalSeconds: 5\n",
        )
        .expect("writing the config");
        let mut ray = self.start_rayshare(1, Some(&config));
        let floor = self.start_floor(1);
        std::thread::sleep(Duration::from_secs(2));
        let calls_at_start = self.api_requests();
        let (ray_idle, _) = sys::rss_kib(ray.proc.pid());
        let (floor_idle, _) = sys::rss_kib(floor.proc.pid());
        eprintln!(
            "load: [{}] idle RSS: rayshare {:.1} MiB, floor {:.1} MiB",
            elapsed(started),
            mib(ray_idle),
            mib(floor_idle)
        );

        let fixtures = self.fixtures(&ray);
        if flood {
            // Fresh processes with default flags, no large caches needed.
            ray.proc.stop();
            floor.proc.stop();
            self.flood(&fixtures.kinds[0], &with_n(&fixtures.rayjob_a));
            return;
        }

        let ray_large = self.bulk_caches(&ray, &fixtures, started);
        let Fixtures {
            kinds, separate, ..
        } = fixtures;

        // What each kind gets from rayshare.
        let mut kind_info = serde_json::Map::new();
        for kind in kinds.iter().chain(&separate) {
            let answer = self.probe(&ray, kind.body()(1));
            let summary = answer_summary(&answer);
            let ok = has_patch(&answer) == kind.expect_patch;
            if !ok {
                eprintln!(
                    "load: WARNING: {} answered unexpectedly: {answer}",
                    kind.name
                );
            }
            kind_info.insert(
                kind.name.into(),
                json!({
                    "about": kind.about,
                    "body_bytes": kind.body_bytes(),
                    "rayshare_answer": summary,
                    "as_expected": ok,
                }),
            );
        }
        let floor_answer = self.probe(&floor, kinds[0].body()(1));
        assert_eq!(floor_answer["response"]["allowed"], true);

        if memory {
            self.memory(&ray, &kinds);
            return;
        }
        if let Some(bins) = compare {
            self.compare(&floor, &kinds, &bins);
            return;
        }
        if let Some(profile) = profile {
            self.profile(&ray, &kinds, &separate, &profile);
            return;
        }

        // Other work on the machine skews everything: wait (a while) for it to stop.
        let background = sys::wait_for_quiet(0.15, Duration::from_secs(180));
        self.results
            .insert("background_cores_before_runs", json!(round3(background)));
        if background >= 0.15 {
            eprintln!("load: WARNING: the machine is busy ({background:.2} cores) with other work");
        }

        // One core: servers on CPU 0, load generator on CPU 1.
        let load = self.load_runtime(1);

        self.orphan_pass(&load, &ray, &kinds, started);

        let OneCore {
            ray_after,
            ray_hwm,
            pod_lists,
            floor_after,
            floor_hwm,
        } = self.one_core_runs(load, &ray, &floor, &kinds, &calls_at_start, started);

        // Two cores: fresh servers (rayshare lists the large caches at start).
        ray.proc.check_alive();
        ray.proc.stop();
        floor.proc.stop();
        let TwoCores {
            ray_fresh_large,
            ray_fresh_hwm,
            ray2_after,
            ray2_hwm,
        } = self.two_core_runs(&kinds, started);

        self.api_path_runs(&separate, started);

        self.results.insert(
            "rss_kib",
            json!({
                "rayshare": {
                    "idle_fresh": ray_idle,
                    "large_caches_incremental": ray_large,
                    "after_one_core_runs": ray_after,
                    "peak_after_one_core_runs": ray_hwm,
                    "pod_list_pages_during_one_core_runs": pod_lists,
                    "after_orphan_pass": self.results.get("orphan_pass").map(|o| o["rss_kib_after"].clone()),
                    "large_caches_fresh_start": ray_fresh_large,
                    "large_caches_fresh_start_peak": ray_fresh_hwm,
                    "after_two_core_runs": ray2_after,
                    "peak_after_two_core_runs": ray2_hwm,
                },
                "floor": {
                    "idle_fresh": floor_idle,
                    "after_one_core_runs": floor_after,
                    "peak_after_one_core_runs": floor_hwm,
                },
                "large_caches": {
                    "ray_clusters": bulk_rc + 2,
                    "namespaces": bulk_ns + 2,
                    "pods": bulk_pods,
                    "note": "rayshare caches RayClusters (spec reduced to worker groups) and Namespaces, not pods; but its leader's reconcilers list RayClusters and RayJobs every 30 s, and the orphan-PodGroup pass lists every pod of the cluster (metadata, 500 per page, all pages kept) whenever a PodGroup has been without its pod for 2 min: see pod_list_pages_during_one_core_runs",
                },
            }),
        );
        self.results.insert("kinds", Value::Object(kind_info));
        self.finish(started);
    }
}
