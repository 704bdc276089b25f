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

#[test]
fn warm_ahead_is_off_unless_asked_for() {
    assert!(!Config::default().warm_ahead.enabled);
    let c = Config::parse("warmAhead:\n  enabled: true\n  namespaces: [team-a]\n").unwrap();
    assert!(c.warm_ahead.enabled);
    assert_eq!(c.warm_ahead.namespaces, vec!["team-a"]);
    assert_eq!(c.warm_ahead.period_seconds, 86400);
    let none = Config::parse("warmAhead:\n  periodSeconds: 0\n").unwrap();
    assert_eq!(none.warm_ahead.period_seconds, 0);
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
#[case("warmAhead:\n  optInAnnotation: ''\n", "warmAhead.optInAnnotation")]
#[case(
    "warmAhead:\n  minWarm: 3\n  maxPerConfig: 2\n",
    "warmAhead.maxPerConfig"
)]
#[case("warmAhead:\n  halfLifeSeconds: 0\n", "warmAhead.halfLifeSeconds")]
#[case(
    "warmAhead:\n  halfLifeSeconds: 60\n  burstWindowSeconds: 60\n",
    "warmAhead.burstWindowSeconds"
)]
#[case("warmAhead:\n  periodSeconds: 95\n", "warmAhead.periodSeconds")]
#[case("warmAhead:\n  maxConfigs: 0\n", "warmAhead.maxConfigs")]
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
