//! One test's world: its namespaces, rayshare instances and webhook registration.

use k8s_openapi::api::admissionregistration::v1::MutatingWebhookConfiguration;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DynamicObject, PostParams};
use kube::core::ApiResource;
use kube::{Client, ResourceExt};
use serde_json::{Value, json};

use super::*;

/// One test's world: namespaces, rayshare instance(s), and a webhook registration.
pub struct TestEnv {
    pub name: String,
    /// Enabled namespace.
    pub ns: String,
    /// Namespace without the enable label.
    pub ns_off: String,
    pub admin: Client,
    /// Before `_dir`: fields drop in order, and the instances print their logs on failure.
    pub instances: Vec<Rayshare>,
    _dir: tempfile::TempDir,
    pub ca: String,
    /// The webhook's `timeoutSeconds` when the config's admission budget needs more than
    /// the chart's default (as an operator raising the one must raise the other).
    webhook_timeout_seconds: Option<u64>,
}

pub const DEFAULT_CONFIG: &str = "";

impl TestEnv {
    /// Starts `replicas` rayshare instances with `config_yaml`, and registers the chart's
    /// webhook pointing at them (one entry per instance: the API server calls each in
    /// turn, so with two instances both really serve).
    pub async fn new(name: &str, config_yaml: &str, replicas: usize) -> Self {
        Self::with_args(name, config_yaml, replicas, &[]).await
    }

    /// [`TestEnv::new`] with extra `rayshare serve` arguments for every instance.
    pub async fn with_args(
        name: &str,
        config_yaml: &str,
        replicas: usize,
        extra_args: &[String],
    ) -> Self {
        let cp = &*CONTROL_PLANE;
        let admin = client(&cp.admin_kubeconfig).await;
        let ns = format!("e2e-{name}");
        let ns_off = format!("e2e-{name}-off");
        create_namespace(&admin, &ns, &[(ENABLE_LABEL, "true"), (TEST_LABEL, name)]).await;
        create_namespace(&admin, &ns_off, &[(TEST_LABEL, name)]).await;
        leader_role_in(&admin, &ns).await;
        let dir = tempfile::tempdir().unwrap();
        let certs = rayshare::http::certs::generate(&["127.0.0.1".into()]).unwrap();
        rayshare::http::certs::write(dir.path(), &certs).unwrap();
        // Tests share one API server: keep each test's reclaimer to its own namespace (a
        // shared cluster carries its TTL, so any reclaimer would honour another test's).
        let config = if config_yaml.contains("reclaim:") {
            config_yaml.to_string()
        } else {
            format!("{config_yaml}\nreclaim:\n  namespaces: [{ns}]\n")
        };
        // Each test is its own installation: its provisioners act on its objects only.
        let mut parsed: Value = serde_norway::from_str(&config).unwrap();
        if !parsed.is_object() {
            parsed = json!({});
        }
        let predates = OTHER_BUILD
            .lock()
            .unwrap()
            .as_ref()
            .is_some_and(|b| b.predates_instance);
        if !predates {
            parsed["instance"] = json!(name);
        }
        let webhook_timeout_seconds = parsed["admissionTimeoutMs"]
            .as_u64()
            .map(|ms| ms.div_ceil(1000) + 1);
        let config = serde_norway::to_string(&parsed).unwrap();
        let instances: Vec<Rayshare> = (0..replicas)
            .map(|i| {
                let name = format!("{name}-{i}");
                Rayshare::start(dir.path(), &name, &config, &ns, extra_args)
            })
            .collect();
        for r in &instances {
            r.wait_ready().await;
        }
        let env = Self {
            name: name.into(),
            ns,
            ns_off,
            admin,
            _dir: dir,
            instances,
            ca: certs.ca_pem,
            webhook_timeout_seconds,
        };
        env.register_webhook().await;
        env
    }

    /// The chart's MutatingWebhookConfiguration, rewritten to call this test's instances
    /// by URL, and to select only this test's namespaces.
    pub fn webhook_configuration(&self) -> Value {
        let timeout = self
            .webhook_timeout_seconds
            .map(|t| format!("webhook.timeoutSeconds={t}"));
        let rendered = helm_template(
            "templates/webhook.yaml",
            &Vec::from_iter(timeout.as_deref()),
        );
        let mut mwc = rendered
            .into_iter()
            .find(|o| o["kind"] == "MutatingWebhookConfiguration")
            .expect("the chart renders a MutatingWebhookConfiguration");
        let template = mwc["webhooks"][0].clone();
        let ca_bundle = data_encoding::BASE64.encode(self.ca.as_bytes());
        let webhooks: Vec<Value> = self
            .instances
            .iter()
            .enumerate()
            .map(|(i, r)| {
                let mut w = template.clone();
                w["name"] = json!(self.webhook_name(i, template["name"].as_str().unwrap()));
                w["clientConfig"] = json!({"url": r.url, "caBundle": ca_bundle});
                let selector = &mut w["namespaceSelector"];
                if !selector["matchLabels"].is_object() {
                    selector["matchLabels"] = json!({});
                }
                selector["matchLabels"][TEST_LABEL] = json!(self.name);
                if self.instances.len() > 1 {
                    // Pods choose their instance by label, so a test can alternate them.
                    let objects = &mut w["objectSelector"];
                    if !objects["matchExpressions"].is_array() {
                        objects["matchExpressions"] = json!([]);
                    }
                    objects["matchExpressions"]
                        .as_array_mut()
                        .unwrap()
                        .push(json!(
                            {"key": SHARD_LABEL, "operator": "In", "values": [i.to_string()]}
                        ));
                }
                w
            })
            .collect();
        mwc["webhooks"] = json!(webhooks);
        mwc["metadata"] = json!({"name": format!("rayshare-e2e-{}", self.name)});
        mwc
    }

    /// Instance `i`'s webhook: named after this test, so what the API server counts per
    /// webhook (fail-opens above all) is this test's alone, not any test's with "rayshare"
    /// in the name.
    fn webhook_name(&self, i: usize, chart_name: &str) -> String {
        format!("i{i}.{}.{chart_name}", self.name)
    }

    /// Calls to this test's webhooks that failed and that the API server let through
    /// (`apiserver_admission_webhook_fail_open_count`, by each webhook's exact name).
    pub async fn api_server_fail_opens(&self) -> f64 {
        let request = http::Request::get("/metrics").body(Vec::new()).unwrap();
        let metrics = self.admin.request_text(request).await.unwrap();
        let configuration = self.webhook_configuration();
        let webhooks = configuration["webhooks"].as_array().unwrap();
        let names = webhooks.iter().map(|w| w["name"].as_str().unwrap());
        names
            .map(|name| {
                let label = format!("name=\"{name}\"");
                metric_sum(
                    &metrics,
                    "apiserver_admission_webhook_fail_open_count{",
                    &[&label],
                )
            })
            .sum()
    }

    async fn register_webhook(&self) {
        let mwc: MutatingWebhookConfiguration =
            serde_json::from_value(self.webhook_configuration()).unwrap();
        Api::<MutatingWebhookConfiguration>::all(self.admin.clone())
            .create(&PostParams::default(), &mwc)
            .await
            .expect("registering the webhook");
        // Really being called: a dry-run volcano pod comes back with a group annotation.
        // Under Volcano's own webhook (tests/volcano) it is refused instead: a dry run makes
        // no group, and `validatepod.volcano.sh` refuses a pod naming a group that does not
        // exist. Only rayshare names a group on the probe, so that refusal, naming the
        // probe's group, proves rayshare was called too.
        const PROBE: &str = "webhook-probe";
        let pods: Api<Pod> = Api::namespaced(self.admin.clone(), &self.ns);
        let probe: Pod = serde_json::from_value(json!({
            "metadata": {"name": PROBE, "labels": {SHARD_LABEL: "0"}},
            "spec": {"schedulerName": "volcano", "containers": [{"name": "c", "image": "busybox"}]}
        }))
        .unwrap();
        let dry_run = PostParams {
            dry_run: true,
            ..Default::default()
        };
        wait_for("the webhook to be called", || async {
            match pods.create(&dry_run, &probe).await {
                Ok(created) => created
                    .annotations()
                    .contains_key("scheduling.k8s.io/group-name")
                    .then_some(()),
                // `... "validatepod.volcano.sh" denied the request: failed to get PodGroup
                // for pod <ns/webhook-probe>: podgroups.scheduling.volcano.sh
                // "webhook-probe" not found`: the quoted name is the group's.
                Err(kube::Error::Api(e)) => (e.message.contains("validatepod.volcano.sh")
                    && e.message.contains(&format!("\"{PROBE}\"")))
                .then_some(()),
                Err(_) => None,
            }
        })
        .await;
    }

    /// Every instance's `/metrics`, one after another: `metric_sum` over it sums the
    /// replicas.
    pub async fn metrics(&self) -> String {
        let mut all = String::new();
        for instance in &self.instances {
            all += &instance.metrics().await;
        }
        all
    }

    /// Every instance's log, one after another.
    pub fn log_text(&self) -> String {
        self.instances.iter().map(|i| i.log_text()).collect()
    }

    pub fn api(&self, ar: &ApiResource, namespace: &str) -> Api<DynamicObject> {
        Api::namespaced_with(self.admin.clone(), namespace, ar)
    }
}

/// The uid of a RayCluster that exists and is not being deleted.
pub async fn cluster_uid(env: &TestEnv, name: &str) -> Option<String> {
    let c = env
        .api(&ray_cluster_resource(), &env.ns)
        .get_opt(name)
        .await
        .unwrap()?;
    c.metadata
        .deletion_timestamp
        .is_none()
        .then(|| c.metadata.uid.unwrap())
}

/// Why warm-ahead keeps RayCluster `name` (its `rayshare.io/kept-warm` note), if it does.
pub async fn kept_warm(env: &TestEnv, name: &str) -> Option<String> {
    let c = env
        .api(&ray_cluster_resource(), &env.ns)
        .get_opt(name)
        .await
        .ok()??;
    c.metadata
        .annotations?
        .get(rayshare::domain::labels::KEPT_WARM)
        .cloned()
}

/// What KubeRay would do when a job ends (there is no operator in these tests).
pub async fn finish(env: &TestEnv, name: &str) {
    let patch = serde_json::json!({"status": {"jobDeploymentStatus": "Complete", "endTime": k8s_openapi::jiff::Timestamp::now().to_string()}});
    env.api(&ray_job_resource(), &env.ns)
        .patch_status(
            name,
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(&patch),
        )
        .await
        .unwrap();
}

/// Waits until the API server refuses a RayCluster in the test's namespace (a dry-run
/// create): `what` (a policy, a quota) is in force once the API server's informer has it.
pub async fn wait_until_ray_clusters_refused(env: &TestEnv, what: &str) {
    let probe: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "ray.io/v1", "kind": "RayCluster",
        "metadata": {"name": "probe", "namespace": env.ns},
        "spec": {"headGroupSpec": {"rayStartParams": {}, "template": {"spec": {
            "containers": [{"name": "ray-head", "image": "rayproject/ray"}]}}}}}))
    .unwrap();
    let dry_run = PostParams {
        dry_run: true,
        ..Default::default()
    };
    let clusters = env.api(&ray_cluster_resource(), &env.ns);
    wait_for(&format!("{what} to be in force"), || async {
        clusters
            .create(&dry_run, &probe)
            .await
            .is_err()
            .then_some(())
    })
    .await;
}
