//! The objects and request kinds every scenario sends, built once from the samples.

use super::*;

/// What the scenarios are built from: the stored objects and the kinds of request.
pub(super) struct Fixtures {
    pub(super) rayjob_a: Value,
    pub(super) volcano_pod: Value,
    pub(super) worker_pod: Value,
    pub(super) stored_cluster: Value,
    pub(super) kinds: Vec<Kind>,
    pub(super) separate: Vec<Kind>,
}

/// The object under a name of its own per request.
pub(super) fn with_n(object: &Value) -> Value {
    let mut o = object.clone();
    let name = o["metadata"]["name"].as_str().unwrap_or("job").to_string();
    o["metadata"]["name"] = json!(format!("{name}-{N}"));
    o
}

impl Bench {
    /// The shared and multi-host clusters made, their pods and the kinds of request, once
    /// rayshare's cache has both clusters.
    pub(super) fn fixtures(&self, ray: &Server) -> Fixtures {
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
        let answer = self.probe(ray, create_job.render(u64::MAX >> 1));
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
        // KubeRay names the stored cluster's uid as the pod's owner; rayshare claims slots
        // only for the uid the API server has.
        let worker = |cluster: &Value, group: &str, namespace: &str| -> Value {
            let name = cluster["metadata"]["name"]
                .as_str()
                .expect("a cluster name");
            let text = worker_text
                .replace("{{cluster}}", name)
                .replace("{{group}}", group)
                .replace("{{namespace}}", namespace);
            let mut object =
                rayshare::offline::documents(&text).expect("worker pod YAML")[0].clone();
            object["metadata"]["ownerReferences"][0]["uid"] = cluster["metadata"]["uid"].clone();
            let mut pod = bodies::as_admitted(
                self.rt
                    .block_on(cluster::create(&self.kube, namespace, &object, true)),
            );
            pod["metadata"]["name"] = json!(format!("{name}-{group}-worker-{N}"));
            pod
        };
        let worker_pod = worker(&stored_cluster, "cpu", "bench");

        // A multi-host group (4 hosts per replica) for the claim path.
        let mut tpu = clean_cluster(&stored_cluster, "bench-tpu", "bench");
        tpu["spec"]["workerGroupSpecs"][0]["groupName"] = json!("tpu");
        tpu["spec"]["workerGroupSpecs"][0]["numOfHosts"] = json!(4);
        let tpu = self
            .rt
            .block_on(cluster::create(&self.kube, "bench", &tpu, false));
        let multihost_pod = worker(&tpu, "tpu", "bench");

        let template = |object: &Value, resource: &str, dry_run: bool| {
            Arc::new(Template::new(
                &bodies::review(object, resource, "bench", dry_run),
                self.seed,
            ))
        };
        let mut grouped_pod = volcano_pod.clone();
        rayshare::domain::labels::set(
            &mut grouped_pod,
            rayshare::domain::labels::Meta::Annotations,
            rayshare::domain::labels::GROUP_NAME,
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
        self.wait_until(ray, "the fixture clusters are cached", &kinds[2], |a| {
            warnings(a).is_empty()
        });
        self.wait_until(ray, "bench-tpu is cached", &separate[1], has_patch);
        Fixtures {
            rayjob_a,
            volcano_pod,
            worker_pod,
            stored_cluster,
            kinds,
            separate,
        }
    }
}
