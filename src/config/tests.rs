use super::*;
use rstest::rstest;

#[test]
fn empty_file_is_the_default() {
    assert_eq!(Config::parse("").unwrap(), Config::default());
    assert_eq!(Config::parse("{}").unwrap(), Config::default());
}

#[test]
fn partial_sections_keep_other_defaults() {
    let c = Config::parse("podGroups:\n  defaultQueue: gpu\n").unwrap();
    assert_eq!(c.pod_groups.default_queue, "gpu");
    assert_eq!(c.pod_groups.scheduler_names, vec!["volcano"]);
    assert!(c.shared_clusters.enabled);
}

#[rstest]
#[case("sharedClusters:\n  enabld: true\n", "sharedClusters")]
#[case(
    "podGroups:\n  defaultQueue: 3\n  schedulerNames: yes\n",
    "podGroups.schedulerNames"
)]
#[case("instance: \"team a\"\n", "instance")]
#[case("instance: \"\"\n", "instance")]
#[case("indices:\n  claimTimeoutMs: 0\n", "indices.claimTimeoutMs")]
#[case("podGroups:\n  schedulerNames: []\n", "podGroups.schedulerNames")]
#[case(
    "sharedClusters:\n  runScopedEnvPrefixes: ['']\n",
    "sharedClusters.runScopedEnvPrefixes"
)]
#[case("bogus: 1\n", "bogus")]
#[case("servedNamespaces:\n  labelKey: ''\n", "servedNamespaces.labelKey")]
#[case(
    "sharedClusters:\n  jobWorkdirRoot: tmp/x\n",
    "sharedClusters.jobWorkdirRoot"
)]
#[case(
    "sharedClusters:\n  jobWorkdirRoot: \"/tmp/a b\"\n",
    "sharedClusters.jobWorkdirRoot"
)]
#[case(
    "sharedClusters:\n  stopJobs:\n    dashboardUrl: ftp://x\n",
    "sharedClusters.stopJobs.dashboardUrl"
)]
#[case::tenant_chosen_service(
    "sharedClusters:\n  stopJobs:\n    dashboardUrl: \"http://{service}.{namespace}.svc:{port}\"\n",
    "sharedClusters.stopJobs.dashboardUrl"
)]
#[case::unknown_placeholder(
    "sharedClusters:\n  stopJobs:\n    dashboardUrl: \"http://{host}:8265\"\n",
    "sharedClusters.stopJobs.dashboardUrl"
)]
#[case(
    "sharedClusters:\n  stopJobs:\n    intervalSeconds: 0\n",
    "sharedClusters.stopJobs.intervalSeconds"
)]
#[case(
    "indices:\n  claimInFlightSeconds: 0\n",
    "indices.claimInFlightSeconds"
)]
#[case(
    "indices:\n  claimGraceSeconds: 2\n  claimInFlightSeconds: 10\n",
    "indices.claimGraceSeconds"
)]
#[case("reclaim:\n  quietSeconds: 0\n", "reclaim.quietSeconds")]
fn invalid_config_names_the_field(#[case] text: &str, #[case] field: &str) {
    let err = Config::parse(text).unwrap_err().to_string();
    assert!(err.contains(field), "{err} should name {field}");
}

#[rstest]
#[case("team-a", &[("rayshare.io/enabled", "true")], true)]
#[case("team-a", &[("rayshare.io/enabled", "false")], false)]
#[case("team-a", &[("other", "true")], false)]
#[case("team-a", &[], false)]
#[case("kube-system", &[("rayshare.io/enabled", "true")], false)]
fn served_namespaces_are_the_webhooks(
    #[case] name: &str,
    #[case] labels: &[(&str, &str)],
    #[case] served: bool,
) {
    let rule = ServedNamespaces::default();
    assert_eq!(rule.serves(name, labels.iter().copied()), served);
}
