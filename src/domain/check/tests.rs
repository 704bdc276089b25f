use rstest::rstest;
use serde_json::{Value, json};

use super::dry_run::{self, DryRun};
use super::operators::{self, Served};
use super::registration::{self, Target};
use super::service::{self, Proxied};
use super::*;

fn levels(lines: &[Line]) -> Vec<(&'static str, Level)> {
    lines.iter().map(|l| (l.check, l.level)).collect()
}

fn configuration(name: &str, labels: Value, webhook: &str) -> Value {
    json!({"metadata": {"name": name, "labels": labels}, "webhooks": [{
        "name": webhook,
        "clientConfig": {"service": {"namespace": "rayshare-system", "name": name, "port": 443}, "caBundle": "Y2E="},
        "rules": [{"resources": ["rayjobs"]}, {"resources": ["pods"]}],
        "failurePolicy": "Ignore",
        "namespaceSelector": {"matchExpressions": [
            {"key": "rayshare.io/enabled", "operator": "In", "values": ["true"]},
            {"key": "kubernetes.io/metadata.name", "operator": "NotIn", "values": ["rayshare-system", "kube-system"]}]},
    }]})
}

fn installed() -> Vec<Value> {
    vec![
        configuration("rayshare", json!({}), "rayshare.rayshare.io"),
        configuration(
            "team-b",
            json!({"rayshare.io/instance": "b"}),
            "rayshare.rayshare.io",
        ),
        configuration("e2e", json!({}), "i0.e2e.rayshare.rayshare.io"),
        configuration("volcano-admission", json!({}), "mutatepod.volcano.sh"),
    ]
}

#[rstest]
#[case::by_label(&installed(), Some("b"), Ok("team-b"))]
#[case::by_name(&installed(), Some("rayshare"), Ok("rayshare"))]
#[case::a_suffixed_webhook(&installed(), Some("e2e"), Ok("e2e"))]
#[case::not_rayshares(&installed(), Some("volcano-admission"), Err("no MutatingWebhookConfiguration of instance \"volcano-admission\""))]
#[case::several_unnamed(&installed(), None, Err("several installations: rayshare, team-b, e2e"))]
#[case::the_only_one(&installed()[..1], None, Ok("rayshare"))]
#[case::none(&installed()[3..], None, Err("no MutatingWebhookConfiguration has a rayshare.rayshare.io webhook"))]
#[case::none_of_that_instance(&installed()[3..], Some("rayshare"), Err("(rayshare's: none)"))]
fn picks_the_installations_registration(
    #[case] configurations: &[Value],
    #[case] instance: Option<&str>,
    #[case] expected: Result<&str, &str>,
) {
    match (registration::pick(configurations, instance), expected) {
        (Ok(found), Ok(name)) => assert_eq!(found["metadata"]["name"], name),
        (Err(line), Err(said)) => {
            assert_eq!(line.level, Level::Fail);
            assert!(line.said.contains(said), "{}", line.said);
        }
        (got, expected) => panic!("{got:?} but {expected:?}"),
    }
}

fn edited(edit: fn(&mut Value)) -> Value {
    let mut c = configuration("rayshare", json!({}), "rayshare.rayshare.io");
    edit(&mut c["webhooks"][0]);
    c
}

#[rstest]
#[case::as_installed(edited(|_| {}), [Level::Ok, Level::Ok, Level::Ok, Level::Ok])]
#[case::no_ca(edited(|w| w["clientConfig"]["caBundle"] = json!("")), [Level::Ok, Level::Fail, Level::Ok, Level::Ok])]
#[case::no_rules(edited(|w| w["rules"] = json!([])), [Level::Fail, Level::Ok, Level::Ok, Level::Ok])]
#[case::fail_policy(edited(|w| w["failurePolicy"] = json!("Fail")), [Level::Ok, Level::Ok, Level::Ok, Level::Ok])]
#[case::every_namespace(edited(|w| w["namespaceSelector"] = json!({})), [Level::Ok, Level::Ok, Level::Ok, Level::Warn])]
#[case::plain_http_url(edited(|w| w["clientConfig"] = json!({"url": "http://x/mutate"})), [Level::Ok, Level::Fail, Level::Ok, Level::Ok])]
fn judges_the_registration(#[case] configuration: Value, #[case] expected: [Level; 4]) {
    let lines = registration::lines(&configuration);
    let got: Vec<Level> = lines.iter().map(|l| l.level).collect();
    assert_eq!(got, expected, "{lines:#?}");
    assert_eq!(
        levels(&lines).iter().map(|(c, _)| *c).collect::<Vec<_>>(),
        ["webhook", "caBundle", "failurePolicy", "namespaceSelector"]
    );
}

#[test]
fn the_registration_says_where_it_sends_what() {
    let c = configuration("rayshare", json!({}), "rayshare.rayshare.io");
    let webhook = registration::webhook(&c);
    assert_eq!(registration::resources(webhook), ["rayjobs", "pods"]);
    assert_eq!(
        registration::target(webhook),
        Target::Service {
            namespace: "rayshare-system".into(),
            name: "rayshare".into(),
            port: 443
        }
    );
    assert_eq!(
        registration::lines(&c)[0].said,
        "rayshare (rayshare.rayshare.io) sends rayjobs, pods to service rayshare-system/rayshare:443"
    );
}

#[rstest]
#[case::chart(json!({"matchExpressions": [
    {"key": "rayshare.io/enabled", "operator": "In", "values": ["true"]},
    {"key": "kubernetes.io/metadata.name", "operator": "NotIn", "values": ["a", "b"]}]}),
    Ok("rayshare.io/enabled in (true),kubernetes.io/metadata.name notin (a,b)"))]
#[case::labels_and_existence(json!({"matchLabels": {"team": "ml"}, "matchExpressions": [
    {"key": "x", "operator": "Exists"}, {"key": "y", "operator": "DoesNotExist"}]}),
    Ok("team=ml,x,!y"))]
#[case::everything(json!({}), Ok(""))]
#[case::absent(Value::Null, Ok(""))]
#[case::unknown_operator(json!({"matchExpressions": [{"key": "x", "operator": "Gt"}]}), Err("unknown selector operator \"Gt\""))]
fn turns_the_namespace_selector_into_a_query(
    #[case] selector: Value,
    #[case] expected: Result<&str, &str>,
) {
    assert_eq!(
        registration::selector_query(&selector),
        expected.map(str::to_string).map_err(str::to_string)
    );
}

#[rstest]
#[case::none(&[], Level::Warn, "none opted in")]
#[case::two(&["a", "b"], Level::Ok, "2 opted in: a, b")]
#[case::many(&["n0", "n1", "n2", "n3", "n4", "n5", "n6", "n7", "n8", "n9", "n10", "n11"], Level::Ok, "n9 and 2 more")]
fn names_the_opted_in_namespaces(#[case] names: &[&str], #[case] level: Level, #[case] said: &str) {
    let names: Vec<String> = names.iter().map(|n| n.to_string()).collect();
    let line = registration::namespaces_line(&names, "hint");
    assert_eq!(line.level, level);
    assert!(line.said.contains(said), "{}", line.said);
}

#[rstest]
#[case::expression(json!({"matchExpressions": [{"key": "rayshare.io/enabled", "operator": "In", "values": ["true"]}]}), "kubectl label namespace NAME rayshare.io/enabled=true")]
#[case::labels_first(json!({"matchLabels": {"team": "ml"}, "matchExpressions": [{"key": "k", "operator": "In", "values": ["v"]}]}), "kubectl label namespace NAME team=ml")]
#[case::nothing_to_say(json!({"matchExpressions": [{"key": "k", "operator": "NotIn", "values": ["v"]}]}), "label a namespace")]
fn says_how_to_opt_a_namespace_in(#[case] selector: Value, #[case] hint: &str) {
    assert!(registration::enable_hint(&selector).starts_with(hint));
}

fn slice(ready: &[Option<bool>]) -> Value {
    let endpoints: Vec<Value> = ready
        .iter()
        .map(|r| match r {
            Some(r) => json!({"conditions": {"ready": r}}),
            None => json!({"conditions": {}}),
        })
        .collect();
    json!({"endpoints": endpoints})
}

#[rstest]
#[case::ready(vec![slice(&[Some(true), Some(false)])], Level::Ok, "1 of 2 ready")]
#[case::unknown_counts_as_ready(vec![slice(&[None])], Level::Ok, "1 of 1 ready")]
#[case::over_slices(vec![slice(&[Some(false)]), slice(&[Some(true)])], Level::Ok, "1 of 2 ready")]
#[case::none_ready(vec![slice(&[Some(false)])], Level::Fail, "none ready (1 not ready)")]
#[case::no_slice(vec![], Level::Fail, "none ready (0 not ready)")]
fn counts_ready_endpoints(#[case] slices: Vec<Value>, #[case] level: Level, #[case] said: &str) {
    let line = service::endpoints_line("ns/rayshare", &slices);
    assert_eq!(line.level, level);
    assert!(line.said.ends_with(said), "{}", line.said);
}

fn pod(ready: bool, waiting: Option<&str>) -> Value {
    let state = match waiting {
        Some(reason) => json!({"waiting": {"reason": reason}}),
        None => json!({"running": {}}),
    };
    json!({"metadata": {"name": "rayshare-1"}, "status": {
        "conditions": [{"type": "Ready", "status": if ready { "True" } else { "False" }}],
        "containerStatuses": [{"image": "ghcr.io/rayshare/rayshare:0.1.0", "state": state}]}})
}

#[rstest]
#[case::ready(vec![pod(true, None), pod(true, None)], Level::Ok, "2 of 2 Ready")]
#[case::image_pull(vec![pod(false, Some("ImagePullBackOff"))], Level::Fail, "cannot pull the image: rayshare-1 (ghcr.io/rayshare/rayshare:0.1.0)")]
#[case::err_image_pull(vec![pod(true, None), pod(false, Some("ErrImagePull"))], Level::Fail, "cannot pull the image")]
#[case::crash(vec![pod(false, Some("CrashLoopBackOff"))], Level::Fail, "0 of 1 Ready; waiting: rayshare-1 (CrashLoopBackOff)")]
#[case::running_not_ready(vec![pod(false, None)], Level::Fail, "none of 1 Ready")]
#[case::no_pods(vec![], Level::Fail, "the Service selects no pod")]
fn says_why_pods_do_not_serve(#[case] pods: Vec<Value>, #[case] level: Level, #[case] said: &str) {
    let line = service::pods_line(&pods);
    assert_eq!(line.level, level);
    assert!(line.said.contains(said), "{}", line.said);
}

#[rstest]
#[case::ready(Proxied::Answered { status: 200, body: "ok".into() }, Level::Ok)]
#[case::not_ready(Proxied::Answered { status: 503, body: "not ready".into() }, Level::Fail)]
#[case::rbac(Proxied::Forbidden, Level::Warn)]
#[case::no_route(Proxied::Failed("dial tcp".into()), Level::Warn)]
fn reads_readyz(#[case] readyz: Proxied, #[case] level: Level) {
    assert_eq!(service::readyz_line(&readyz).level, level);
}

#[rstest]
#[case::rbac(
    403,
    "Forbidden",
    "services \"rayshare\" is forbidden: User \"me\" cannot get resource \"services/proxy\"",
    Proxied::Forbidden
)]
#[case::no_route(503, "ServiceUnavailable", "no endpoints available for service \"rayshare\"", Proxied::Failed("no endpoints available for service \"rayshare\"".into()))]
#[case::no_endpoints_object(404, "NotFound", "services \"rayshare\" not found", Proxied::Failed("services \"rayshare\" not found".into()))]
#[case::pods_answer(503, service::NOT_A_STATUS, "not ready", Proxied::Answered { status: 503, body: "not ready".into() })]
#[case::pods_refusal(403, service::NOT_A_STATUS, "no", Proxied::Answered { status: 403, body: "no".into() })]
fn tells_the_proxy_from_the_pod(
    #[case] code: u16,
    #[case] reason: &str,
    #[case] message: &str,
    #[case] expected: Proxied,
) {
    assert_eq!(service::proxied_error(code, reason, message), expected);
}

const METRICS: &str = "rayshare_build_info{version=\"0.1.0\",revision=\"abc\"} 1\n";

#[rstest]
#[case::placeholder(format!("{METRICS}rayshare_image_placeholder{{image=\"ghcr.io/rayshare/rayshare:0.1.0\"}} 1\n"), Some(Level::Warn))]
#[case::not(format!("{METRICS}rayshare_image_placeholder{{image=\"me/rayshare:1\"}} 0\n"), Some(Level::Ok))]
#[case::older_build(METRICS.to_string(), Some(Level::Ok))]
fn reports_the_image_from_metrics(#[case] body: String, #[case] level: Option<Level>) {
    let line = service::image_line(&Proxied::Answered { status: 200, body });
    assert_eq!(line.as_ref().map(|l| l.level), level);
    assert!(line.unwrap().said.contains("rayshare 0.1.0"));
}

#[test]
fn no_image_line_without_metrics() {
    assert_eq!(service::image_line(&Proxied::Forbidden), None);
}

fn deployment(image: &str, args: &[&str]) -> Value {
    json!({"metadata": {"namespace": "ray-system", "name": "kuberay-operator"},
        "spec": {"template": {"spec": {"containers": [{"image": image, "args": args}]}}}})
}

#[rstest]
#[case::helm_chart(deployment("quay.io/kuberay/operator:v1.6.1", &["--batch-scheduler=volcano", "--feature-gates=RayMultiHostIndexing=true"]), Some(("v1.6.1", Some("volcano"), Some("RayMultiHostIndexing=true"))))]
#[case::split_flag(deployment("kuberay/operator:v1.5.1", &["--batch-scheduler", "yunikorn"]), Some(("v1.5.1", Some("yunikorn"), None)))]
#[case::older_flag(deployment("quay.io/kuberay/operator:v1.4.2", &["--enable-batch-scheduler=true"]), Some(("v1.4.2", Some("volcano"), None)))]
#[case::older_bare_flag(deployment("quay.io/kuberay/operator:v1.4.2", &["--enable-batch-scheduler"]), Some(("v1.4.2", Some("volcano"), None)))]
#[case::none(deployment("registry:5000/mirror/kuberay-operator:v1.6.1", &[]), Some(("v1.6.1", None, None)))]
#[case::not_kuberay(deployment("quay.io/jetstack/cert-manager-controller:v1", &[]), None)]
fn finds_kuberays_operator(
    #[case] deployment: Value,
    #[case] expected: Option<(&str, Option<&str>, Option<&str>)>,
) {
    let found = operators::operators(&[deployment]);
    let got = found.first().map(|o| {
        (
            o.version.as_deref().unwrap(),
            o.batch_scheduler.as_deref(),
            o.feature_gates.as_deref(),
        )
    });
    assert_eq!(got, expected);
}

#[rstest]
#[case::tested(Served::Yes, Ok(vec![deployment("quay.io/kuberay/operator:v1.6.1", &[])]), [Level::Ok, Level::Ok])]
#[case::untested(Served::Yes, Ok(vec![deployment("quay.io/kuberay/operator:v1.7.0", &[])]), [Level::Ok, Level::Warn])]
#[case::no_operator(Served::Yes, Ok(vec![]), [Level::Ok, Level::Warn])]
#[case::two(Served::Yes, Ok(vec![deployment("kuberay/operator:v1.6.1", &[]), deployment("kuberay/operator:v1.5.1", &[])]), [Level::Ok, Level::Warn])]
#[case::no_crds(Served::No, Ok(vec![]), [Level::Fail, Level::Warn])]
#[case::rbac(Served::Yes, Err("forbidden".to_string()), [Level::Ok, Level::Warn])]
fn judges_kuberay(
    #[case] ray_jobs: Served,
    #[case] deployments: Result<Vec<Value>, String>,
    #[case] expected: [Level; 2],
) {
    let found = deployments.map(|d| operators::operators(&d));
    let lines = operators::kuberay_lines(&ray_jobs, &found);
    assert_eq!(
        lines.iter().map(|l| l.level).collect::<Vec<_>>(),
        expected,
        "{lines:#?}"
    );
}

#[rstest]
#[case::present(Served::Yes, true, true, Level::Ok)]
#[case::kuberay_needs_it(Served::No, true, true, Level::Fail)]
#[case::pods_sent(Served::No, true, false, Level::Warn)]
#[case::not_needed(Served::No, false, false, Level::Ok)]
#[case::unknown(Served::Unknown("timeout".into()), false, false, Level::Warn)]
fn judges_volcano(
    #[case] served: Served,
    #[case] pods_sent: bool,
    #[case] kuberay_volcano: bool,
    #[case] level: Level,
) {
    assert_eq!(
        operators::volcano_line(&served, pods_sent, kuberay_volcano).level,
        level
    );
}

fn returned(spec: Value) -> DryRun {
    DryRun::Returned {
        namespace: "team".into(),
        object: json!({"spec": spec}),
    }
}

#[rstest]
#[case::rewritten(returned(json!({"clusterSelector": {"ray.io/cluster": "ray-abc"}})), false, vec![("dry-run", Level::Ok)])]
#[case::unchanged(returned(json!({"rayClusterSpec": {}})), false, vec![("dry-run", Level::Fail)])]
#[case::volcano_without_stand_in(returned(json!({"clusterSelector": {"ray.io/cluster": "ray-abc"}})), true, vec![("dry-run", Level::Ok), ("batch scheduler", Level::Fail)])]
#[case::volcano_with_stand_in(returned(json!({"clusterSelector": {"ray.io/cluster": "ray-abc"}, "rayClusterSpec": {}})), true, vec![("dry-run", Level::Ok)])]
#[case::refused(DryRun::Refused { namespace: "team".into(), message: "denied".into() }, false, vec![("dry-run", Level::Fail)])]
#[case::rbac(DryRun::Forbidden { namespace: "team".into() }, false, vec![("dry-run", Level::Warn)])]
#[case::nowhere(DryRun::NotRun("no opted-in namespace".into()), false, vec![("dry-run", Level::Warn)])]
fn judges_the_dry_run(
    #[case] dry_run: DryRun,
    #[case] kuberay_volcano: bool,
    #[case] expected: Vec<(&str, Level)>,
) {
    assert_eq!(levels(&dry_run::lines(&dry_run, kuberay_volcano)), expected);
}

#[test]
fn the_report_fails_on_a_fail_and_renders_hints() {
    let report = Report::new(vec![
        Line::ok("webhook", "registered"),
        Line::warn("namespaces", "none opted in", "label one"),
    ]);
    assert_eq!((report.ok, report.exit_code()), (true, 0));
    assert_eq!(
        render_table(&report),
        "ok    webhook     registered\nwarn  namespaces  none opted in\n                  hint: label one\n"
    );
    let failed = Report::new(vec![Line::fail("dry-run", "unchanged", "see logs")]);
    assert_eq!((failed.ok, failed.exit_code()), (false, 1));
    let json = serde_json::to_value(&failed).unwrap();
    assert_eq!(
        json,
        json!({"ok": false, "checks": [{"check": "dry-run", "level": "fail", "said": "unchanged", "hint": "see logs"}]})
    );
}

#[rstest]
#[case::served(Ok(vec!["ray.io".to_string(), "kueue.x-k8s.io".to_string()]), Served::Yes)]
#[case::absent(Ok(vec!["ray.io".to_string()]), Served::No)]
#[case::unknown(Err("timeout".to_string()), Served::Unknown("timeout".into()))]
fn finds_a_group_in_discovery(#[case] groups: Result<Vec<String>, String>, #[case] served: Served) {
    assert_eq!(operators::served_group(&groups, "kueue.x-k8s.io"), served);
}

#[rstest]
#[case::volcano(Ok(vec![deployment("kuberay/operator:v1.6.1", &[]), deployment("kuberay/operator:v1.6.1", &["--batch-scheduler=volcano"])]), true)]
#[case::another(Ok(vec![deployment("kuberay/operator:v1.6.1", &["--batch-scheduler=yunikorn"])]), false)]
#[case::none(Ok(vec![]), false)]
#[case::unread(Err("forbidden".to_string()), false)]
fn tells_kuberay_scheduling_with_volcano(
    #[case] deployments: Result<Vec<Value>, String>,
    #[case] volcano: bool,
) {
    let found = deployments.map(|d| operators::operators(&d));
    assert_eq!(operators::schedules_with_volcano(&found), volcano);
}
