//! The benchmark's run, scenario by scenario: what is measured, in which order.

use super::*;

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

        // The objects, as the API server stores them.
        let sample = |name: &str| -> Value {
            let text = std::fs::read_to_string(self.repo.join("deploy/samples").join(name))
                .expect("sample");
            rayshare::offline::documents(&text).expect("sample YAML")[0].clone()
        };
        let dry = |object: &Value| -> Value {
            bodies::as_admitted(
                self.rt
                    .block_on(cluster::create(&self.kube, "bench", object, true)),
            )
        };
        let volcano_pod = dry(&sample("volcano-pod.yaml"));
        let rayjob_a = dry(&sample("rayjob-run-a.yaml"));
        let rayjob_b = dry(&sample("rayjob-run-b.yaml"));

        // The shared cluster of run-a's config, made by rayshare from the sample itself.
        let create_job = Template::new(
            &bodies::review(&rayjob_a, "rayjobs", "bench", false),
            self.seed,
        );
        let answer = self.probe(&ray, create_job.render(u64::MAX >> 1));
        let shared = shared_cluster_name(&answer)
            .unwrap_or_else(|| panic!("rayshare did not rewrite the sample RayJob: {answer}"));
        // Admission makes nothing: the cluster is what rayshare's provisioner makes of the
        // job as stored (the job is not stored here, so the benchmark makes it the same way).
        let mut job = rayjob_a.clone();
        let ops: json_patch::Patch =
            serde_json::from_value(Value::Array(results::patch_ops(&answer)))
                .expect("a JSON patch");
        json_patch::patch(&mut job, &ops).expect("the patch applies");
        job["metadata"]["namespace"] = json!("bench");
        let shared_clusters = rayshare::config::Config::default().shared_clusters;
        let made =
            rayshare::domain::shared_cluster::provision::cluster_for_job(&job, &shared_clusters)
                .unwrap_or_else(|e| panic!("the rewritten job names no cluster: {e:?}"));
        self.rt
            .block_on(cluster::create(&self.kube, "bench", &made, false));
        let stored_cluster = self.rt.block_on(cluster::get(
            &self.kube,
            "bench",
            &json!({"kind": "RayCluster"}),
            &shared,
        ));
        eprintln!("load: shared RayCluster {shared} created through rayshare");

        let worker_text =
            std::fs::read_to_string(self.repo.join("tests/bench/ray-worker-pod.yaml"))
                .expect("tests/bench/ray-worker-pod.yaml");
        let worker = |cluster: &str, group: &str, namespace: &str| -> Value {
            let text = worker_text
                .replace("{{cluster}}", cluster)
                .replace("{{group}}", group)
                .replace("{{namespace}}", namespace);
            let object = rayshare::offline::documents(&text).expect("worker pod YAML")[0].clone();
            let mut pod = bodies::as_admitted(
                self.rt
                    .block_on(cluster::create(&self.kube, namespace, &object, true)),
            );
            pod["metadata"]["name"] = json!(format!("{cluster}-{group}-worker-{N}"));
            pod
        };
        let worker_pod = worker(&shared, "cpu", "bench");

        // A multi-host group (4 hosts per replica) for the claim path.
        let mut tpu = clean_cluster(&stored_cluster, "bench-tpu", "bench");
        tpu["spec"]["workerGroupSpecs"][0]["groupName"] = json!("tpu");
        tpu["spec"]["workerGroupSpecs"][0]["numOfHosts"] = json!(4);
        self.rt
            .block_on(cluster::create(&self.kube, "bench", &tpu, false));
        let multihost_pod = worker("bench-tpu", "tpu", "bench");

        let template = |object: &Value, resource: &str, dry_run: bool| {
            Arc::new(Template::new(
                &bodies::review(object, resource, "bench", dry_run),
                self.seed,
            ))
        };
        let with_n = |object: &Value| {
            let mut o = object.clone();
            let name = o["metadata"]["name"].as_str().unwrap_or("job").to_string();
            o["metadata"]["name"] = json!(format!("{name}-{N}"));
            o
        };
        let mut grouped_pod = volcano_pod.clone();
        rayshare::labels::set(
            &mut grouped_pod,
            rayshare::labels::Meta::Annotations,
            rayshare::labels::GROUP_NAME,
            "train-7f3k2-pg",
        );
        let kinds = vec![
            Kind {
                name: "pod-unchanged",
                about: "deploy/samples/volcano-pod.yaml already naming its PodGroup (as a Volcano Job's pods do): nothing to change".into(),
                templates: vec![template(&grouped_pod, "pods", false)],
                expect_patch: false,
                calls_api: false,
            },
            Kind {
                name: "pod-podgroup",
                about: "deploy/samples/volcano-pod.yaml, dryRun: true: PodGroup planned and patched in, the create skipped (measured separately: pod-podgroup-create)".into(),
                templates: vec![template(&volcano_pod, "pods", true)],
                expect_patch: true,
                calls_api: false,
            },
            Kind {
                name: "worker-pod",
                about: format!("KubeRay worker pod (tests/bench/ray-worker-pod.yaml) of single-host group cpu of the cached shared cluster {shared}: cache lookup, no claim"),
                templates: vec![template(&worker_pod, "pods", false)],
                expect_patch: false,
                calls_api: false,
            },
            Kind {
                name: "rayjob-cached",
                about: format!("deploy/samples/rayjob-run-{{a,b}}.yaml alternately (unique names), dryRun: false, their shared cluster {shared} already cached: rewrite, no API call"),
                templates: vec![
                    template(&with_n(&rayjob_a), "rayjobs", false),
                    template(&with_n(&rayjob_b), "rayjobs", false),
                ],
                expect_patch: true,
                calls_api: false,
            },
        ];
        let separate = vec![
            Kind {
                name: "pod-podgroup-create",
                about: "deploy/samples/volcano-pod.yaml, dryRun: false: each request creates its PodGroup in the API server".into(),
                templates: vec![template(&volcano_pod, "pods", false)],
                expect_patch: true,
                calls_api: true,
            },
            Kind {
                name: "worker-pod-multihost",
                about: "KubeRay worker pod of a 4-host group, dryRun: true: the claim path lists the group's claim Leases (one API call), creates nothing".into(),
                templates: vec![template(&multihost_pod, "pods", true)],
                expect_patch: true,
                calls_api: true,
            },
        ];

        // Wait until rayshare's cache has both clusters.
        self.wait_until(&ray, "the fixture clusters are cached", &kinds[2], |a| {
            warnings(a).is_empty()
        });
        self.wait_until(&ray, "bench-tpu is cached", &separate[1], has_patch);
        if flood {
            // Fresh processes with default flags, no large caches needed.
            ray.proc.stop();
            floor.proc.stop();
            self.flood(&kinds[0], &with_n(&rayjob_a));
            return;
        }

        // Large caches: many RayClusters, namespaces and pods (not in rayshare's namespaces).
        let t = Instant::now();
        self.rt.block_on(async {
            for i in 0..bulk_ns {
                cluster::create_namespace(&self.kube, &format!("bulk-{i:02}"), &[]).await;
            }
        });
        let mut objects = Vec::new();
        for i in 0..bulk_rc {
            let mut c = clean_cluster(
                &stored_cluster,
                &format!("bulk-rc-{i:04}"),
                &format!("bulk-{:02}", i % bulk_ns),
            );
            rayshare::labels::set(
                &mut c,
                rayshare::labels::Meta::Annotations,
                rayshare::labels::CONFIG_DIGEST,
                &format!("{:064x}", i as u128 * 0x9e37_79b9_7f4a_7c15),
            );
            objects.push(c);
        }
        for i in 0..bulk_pods {
            let mut p = volcano_pod.clone();
            let meta = p["metadata"].as_object_mut().expect("metadata");
            meta.remove("generateName");
            meta.remove("managedFields");
            meta.insert("name".into(), json!(format!("bulk-pod-{i:05}")));
            meta.insert(
                "namespace".into(),
                json!(format!("bulk-{:02}", i % bulk_ns)),
            );
            objects.push(p);
        }
        let failed = self
            .rt
            .block_on(cluster::create_many(&self.kube, objects, 32));
        assert_eq!(failed, 0, "{failed} bulk objects could not be created");
        eprintln!(
            "load: [{}] created {bulk_ns} namespaces, {bulk_rc} RayClusters, {bulk_pods} pods in {:.1}s",
            elapsed(started),
            t.elapsed().as_secs_f64()
        );
        let probes: Vec<usize> = (0..10).map(|k| bulk_rc - 1 - k * bulk_rc / 10).collect();
        for &i in &probes {
            let ns = format!("bulk-{:02}", i % bulk_ns);
            let mut pod = worker_pod.clone();
            pod["metadata"]["labels"]["ray.io/cluster"] = json!(format!("bulk-rc-{i:04}"));
            let kind = Kind {
                name: "probe",
                about: String::new(),
                templates: vec![Arc::new(Template::new(
                    &bodies::review(&pod, "pods", &ns, true),
                    self.seed,
                ))],
                expect_patch: false,
                calls_api: false,
            };
            self.wait_until(&ray, "the bulk clusters are cached", &kind, |a| {
                warnings(a).is_empty()
            });
        }
        std::thread::sleep(Duration::from_secs(3));
        let (ray_large, _) = sys::rss_kib(ray.proc.pid());
        eprintln!(
            "load: [{}] RSS with {bulk_rc} RayClusters and {} namespaces cached: {:.1} MiB",
            elapsed(started),
            bulk_ns + 2,
            mib(ray_large)
        );

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

        // The orphan-PodGroup pass, on purpose: the probe of pod-podgroup-create above made
        // a group whose pod never comes; the leader's next pass lists every pod of the
        // cluster to find that out. Admission goes on meanwhile (1,000 req/s).
        let calls = self.api_requests();
        let (rss_before, _) = sys::rss_kib(ray.proc.pid());
        let pool = self.connect(&load, &ray, Proto::H2);
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

        self.paused_during_floor.set(Some(ray.proc.pid()));
        for proto in [Proto::H2, Proto::H1] {
            for kind in &kinds {
                for server in [&ray, &floor] {
                    self.saturate(&load, server, kind, proto, 1);
                }
            }
        }
        for proto in [Proto::H2, Proto::H1] {
            for kind in &kinds {
                for server in [&ray, &floor] {
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
        let pod_lists = cluster::delta(&calls_at_start, &self.api_requests())
            .get("LIST pods")
            .copied()
            .unwrap_or(0);
        let (floor_after, floor_hwm) = sys::rss_kib(floor.proc.pid());
        eprintln!("load: [{}] one-core runs done", elapsed(started));

        // Two cores: fresh servers (rayshare lists the large caches at start).
        ray.proc.check_alive();
        ray.proc.stop();
        floor.proc.stop();
        let ray2 = self.start_rayshare(2, None);
        let floor2 = self.start_floor(2);
        self.paused_during_floor.set(Some(ray2.proc.pid()));
        std::thread::sleep(Duration::from_secs(3));
        let (ray_fresh_large, ray_fresh_hwm) = sys::rss_kib(ray2.proc.pid());
        let load = self.load_runtime(2);
        for proto in [Proto::H2, Proto::H1] {
            for kind in &kinds {
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

        // The paths with API calls, at low rates, one core.
        let ray3 = self.start_rayshare(1, None);
        let load = self.load_runtime(1);
        let low_rates: Vec<f64> = if self.quick {
            vec![100.0]
        } else {
            vec![100.0, 300.0]
        };
        for kind in &separate {
            for &rate in &low_rates {
                self.open(&load, &ray3, kind, Proto::H2, rate, 1);
            }
        }
        drop(load);
        ray3.proc.stop();
        eprintln!("load: [{}] API-path runs done", elapsed(started));

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
