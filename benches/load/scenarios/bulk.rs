//! Large caches: rayshare's memory and cache lookups with many objects it must not hold.

use super::*;
use fixtures::Fixtures;

impl Bench {
    /// Creates the bulk objects, waits until rayshare has cached the clusters and returns
    /// its RSS (KiB) then.
    pub(super) fn bulk_caches(&self, ray: &Server, fixtures: &Fixtures, started: Instant) -> u64 {
        let Fixtures {
            stored_cluster,
            volcano_pod,
            worker_pod,
            ..
        } = fixtures;
        let s = &self.settings;
        let (bulk_ns, bulk_rc, bulk_pods) = (s.bulk_namespaces, s.bulk_clusters, s.bulk_pods);
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
                stored_cluster,
                &format!("bulk-rc-{i:04}"),
                &format!("bulk-{:02}", i % bulk_ns),
            );
            rayshare::domain::labels::set(
                &mut c,
                rayshare::domain::labels::Meta::Annotations,
                rayshare::domain::labels::CONFIG_DIGEST,
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
            self.wait_until(ray, "the bulk clusters are cached", &kind, |a| {
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
        ray_large
    }
}
