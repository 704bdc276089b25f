use rstest::rstest;
use serde_json::{Value, json};

use super::*;

fn sub(status: &str, token: Option<&str>) -> Submission {
    Submission {
        id: "job-a-x1".into(),
        status: status.into(),
        tie: token.map(|t| Tie {
            instance: "rs".into(),
            namespace: Some("team".into()),
            token: t.into(),
        }),
        end_time: None,
    }
}

fn job(status: Value, deleting: bool) -> Vec<Value> {
    let mut j = json!({ "metadata": { "name": "a" }, "status": status });
    if deleting {
        j["metadata"]["deletionTimestamp"] = json!("2026-01-01T00:00:00Z");
    }
    vec![j]
}

#[rstest]
#[case::foreign_job(sub("RUNNING", None), vec![], Verdict::Unattributed)]
#[case::foreign_and_over(sub("SUCCEEDED", None), vec![], Verdict::Unattributed)]
#[case::deleted(
    sub("RUNNING", Some("t")),
    vec![],
    Verdict::Stop(StopReason::Deleted)
)]
#[case::deleted_pending(
    sub("PENDING", Some("t")),
    vec![],
    Verdict::Stop(StopReason::Deleted)
)]
#[case::deleted_but_over(sub("STOPPED", Some("t")), vec![], Verdict::Leave)]
#[case::deleted_and_failed(sub("FAILED", Some("t")), vec![], Verdict::Leave)]
#[case::being_deleted(
    sub("RUNNING", Some("t")),
    job(json!({"jobDeploymentStatus": "Running"}), true),
    Verdict::Stop(StopReason::Deleted)
)]
#[case::running(
    sub("RUNNING", Some("t")),
    job(json!({"jobDeploymentStatus": "Running", "jobId": "job-a-x1"}), false),
    Verdict::Leave
)]
#[case::not_started_yet(sub("PENDING", Some("t")), job(json!({}), false), Verdict::Leave)]
#[case::failed_on_kuberay(
    sub("RUNNING", Some("t")),
    job(json!({"jobDeploymentStatus": "Failed", "reason": "DeadlineExceeded"}), false),
    Verdict::Stop(StopReason::Finished)
)]
#[case::complete(
    sub("RUNNING", Some("t")),
    job(json!({"jobDeploymentStatus": "Complete"}), false),
    Verdict::Stop(StopReason::Finished)
)]
#[case::retried(
    sub("RUNNING", Some("t")),
    job(json!({"jobDeploymentStatus": "Running", "jobId": "job-a-y2"}), false),
    Verdict::Stop(StopReason::Superseded)
)]
#[case::retrying(
    sub("RUNNING", Some("t")),
    job(json!({"jobDeploymentStatus": "Retrying", "jobId": ""}), false),
    Verdict::Leave
)]
fn verdicts(#[case] s: Submission, #[case] owners: Vec<Value>, #[case] expected: Verdict) {
    assert_eq!(verdict_of_all(&s, &owners, "rs", "team"), expected);
    // Another installation's submission is never this one's to stop.
    assert_eq!(
        verdict_of_all(&s, &owners, "other", "team"),
        Verdict::Unattributed
    );
    // Nor one admitted in another namespace, whatever cluster it was found on.
    assert_eq!(
        verdict_of_all(&s, &owners, "rs", "elsewhere"),
        Verdict::Unattributed
    );
    // A token written before tokens named their namespace is judged as before.
    let mut legacy = s.clone();
    if let Some(tie) = legacy.tie.as_mut() {
        tie.namespace = None;
    }
    assert_eq!(
        verdict_of_all(&legacy, &owners, "rs", "elsewhere"),
        expected
    );
}

/// A copy of a rewritten RayJob carries its original's token: the submission runs on
/// while any of them still wants it.
#[rstest]
#[case::original_done_copy_running(
    [json!({"jobDeploymentStatus": "Complete", "jobId": "job-a-x0"}), json!({"jobDeploymentStatus": "Running", "jobId": "job-a-x1"})],
    Verdict::Leave
)]
#[case::both_running_this_is_the_copys(
    [json!({"jobDeploymentStatus": "Running", "jobId": "job-a-x0"}), json!({"jobDeploymentStatus": "Running", "jobId": "job-a-x1"})],
    Verdict::Leave
)]
#[case::both_over(
    [json!({"jobDeploymentStatus": "Complete"}), json!({"jobDeploymentStatus": "Failed"})],
    Verdict::Stop(StopReason::Finished)
)]
fn copies_of_a_rewritten_job(#[case] statuses: [Value; 2], #[case] expected: Verdict) {
    for order in [[0, 1], [1, 0]] {
        let owners: Vec<Value> = order
            .iter()
            .flat_map(|&i| job(statuses[i].clone(), false))
            .collect();
        let s = sub("RUNNING", Some("t"));
        assert_eq!(
            verdict_of_all(&s, &owners, "rs", "team"),
            expected,
            "{order:?}"
        );
    }
}

#[test]
fn parses_the_dashboards_job_list() {
    // Shapes as Ray 2.x's `GET /api/jobs/` answers (JobDetails).
    let body = json!([
        {"type": "SUBMISSION", "submission_id": "a-1", "status": "RUNNING",
         "runtime_env": {"env_vars": {TOKEN_ENV: "rs/team/uid-a", "RUN_NAME": "r1"}}, "metadata": {}},
        {"type": "SUBMISSION", "submission_id": "e-1", "status": "RUNNING",
         "runtime_env": {"env_vars": {TOKEN_ENV: "rs/uid-e"}}},
        {"type": "SUBMISSION", "submission_id": "f-1", "status": "RUNNING",
         "runtime_env": {"env_vars": {TOKEN_ENV: "rs/a/b/c"}}},
        {"type": "SUBMISSION", "submission_id": "d-1", "status": "RUNNING",
         "runtime_env": {"env_vars": {TOKEN_ENV: "no-instance"}}},
        {"type": "SUBMISSION", "submission_id": "b-1", "status": "SUCCEEDED", "runtime_env": {}},
        {"type": "SUBMISSION", "submission_id": "c-1", "status": "PENDING", "runtime_env": null},
        {"type": "DRIVER", "submission_id": null, "status": "RUNNING", "job_id": "01000000"},
    ]);
    let subs = parse_submissions(&body).unwrap();
    let tie = |i: &str, n: Option<&str>, t: &str| {
        Some(Tie {
            instance: i.into(),
            namespace: n.map(str::to_string),
            token: t.into(),
        })
    };
    let got: Vec<_> = subs
        .iter()
        .map(|s| (s.id.as_str(), s.status.as_str(), s.tie.clone()))
        .collect();
    assert_eq!(
        got,
        vec![
            ("a-1", "RUNNING", tie("rs", Some("team"), "uid-a")),
            ("e-1", "RUNNING", tie("rs", None, "uid-e")),
            ("f-1", "RUNNING", None),
            ("d-1", "RUNNING", None),
            ("b-1", "SUCCEEDED", None),
            ("c-1", "PENDING", None),
        ]
    );
    assert!(parse_submissions(&json!({"jobs": []})).is_err());
}

#[test]
fn keeps_when_a_job_ended() {
    let body = json!([
        {"type": "SUBMISSION", "submission_id": "a-1", "status": "SUCCEEDED",
         "start_time": 1767225600000u64, "end_time": 1767225605000u64},
        {"type": "SUBMISSION", "submission_id": "b-1", "status": "RUNNING",
         "start_time": 1767225600000u64, "end_time": null},
    ]);
    let ends: Vec<_> = parse_submissions(&body)
        .unwrap()
        .into_iter()
        .map(|s| s.end_time)
        .collect();
    assert_eq!(ends, vec![Some(1_767_225_605_000), None]);
}

/// A submission `id` with `status`, tied to `tie` (`instance/namespace/token`, as
/// [`TOKEN_ENV`] says it), ended at `end`.
fn ended(id: &str, status: &str, tie: Option<&str>, end: Option<u64>) -> Submission {
    Submission {
        id: id.into(),
        status: status.into(),
        tie: tie.and_then(Tie::parse),
        end_time: end,
    }
}

/// Tokens some RayJob of namespace `team` still carries.
const HELD: [&str; 2] = ["kept", "copied"];

#[rstest]
#[case::succeeded(ended("a-x1", "SUCCEEDED", Some("rs/team/t1"), Some(5)), true)]
#[case::failed(ended("a-x1", "FAILED", Some("rs/team/t1"), Some(5)), true)]
#[case::stopped(ended("a-x1", "STOPPED", Some("rs/team/t1"), Some(5)), true)]
#[case::no_end_time(ended("a-x1", "STOPPED", Some("rs/team/t1"), None), true)]
#[case::legacy_token(ended("a-x1", "SUCCEEDED", Some("rs/t1"), Some(5)), true)]
#[case::running(ended("a-x1", "RUNNING", Some("rs/team/t1"), None), false)]
#[case::pending(ended("a-x1", "PENDING", Some("rs/team/t1"), None), false)]
#[case::status_unknown(ended("a-x1", "", Some("rs/team/t1"), Some(5)), false)]
#[case::its_rayjob_is_there(ended("a-x1", "SUCCEEDED", Some("rs/team/kept"), Some(5)), false)]
#[case::a_copy_is_there(ended("a-x1", "FAILED", Some("rs/team/copied"), Some(5)), false)]
#[case::someone_elses(ended("a-x1", "SUCCEEDED", None, Some(5)), false)]
#[case::another_installations(ended("a-x1", "SUCCEEDED", Some("other/team/t1"), Some(5)), false)]
#[case::another_namespaces(ended("a-x1", "SUCCEEDED", Some("rs/elsewhere/t1"), Some(5)), false)]
#[case::an_id_ray_reads_as_a_job_id(
    ended("0a000000", "SUCCEEDED", Some("rs/team/t1"), Some(5)),
    false
)]
#[case::a_chosen_id_that_is_not(ended("0a00000g", "SUCCEEDED", Some("rs/team/t1"), Some(5)), true)]
fn deletes_only_finished_records_of_its_own_gone_rayjobs(
    #[case] s: Submission,
    #[case] expected: bool,
) {
    let subs = [s];
    let held = |t: &str| HELD.contains(&t);
    let got = deletable(&subs, held, "rs", "team", DELETIONS_PER_PASS);
    assert_eq!(!got.is_empty(), expected, "{subs:?}");
    // No bound, no deletion.
    assert!(deletable(&subs, held, "rs", "team", 0).is_empty());
}

#[rstest]
#[case::oldest_first(&[("c", Some(30)), ("a", Some(10)), ("b", Some(20))], 2, &["a", "b"])]
#[case::no_end_time_last(&[("x", None), ("b", Some(20)), ("a", Some(10))], 3, &["a", "b", "x"])]
#[case::same_end_by_id(&[("b", Some(10)), ("a", Some(10)), ("c", None), ("d", None)], 4, &["a", "b", "c", "d"])]
#[case::fewer_than_the_bound(&[("a", Some(10))], DELETIONS_PER_PASS, &["a"])]
fn deletes_the_oldest_first_within_the_bound(
    #[case] jobs: &[(&str, Option<u64>)],
    #[case] limit: usize,
    #[case] expected: &[&str],
) {
    let subs: Vec<Submission> = jobs
        .iter()
        .map(|(id, end)| ended(&format!("{id}-job"), "SUCCEEDED", Some("rs/team/t1"), *end))
        .collect();
    let got: Vec<String> = deletable(&subs, |_| false, "rs", "team", limit)
        .into_iter()
        .map(|s| s.id.trim_end_matches("-job").to_string())
        .collect();
    assert_eq!(got, expected);
}

/// A long-lived head's table: one pass deletes at most [`DELETIONS_PER_PASS`], and what is
/// not its to delete never takes a place in the bound.
#[test]
fn a_large_table_is_cleared_a_bounded_slice_at_a_time() {
    let mut subs: Vec<Submission> = (0..100u64)
        .map(|i| {
            ended(
                &format!("j-{i:03}"),
                "SUCCEEDED",
                Some("rs/team/t1"),
                Some(1_000 + i),
            )
        })
        .collect();
    // Older than all of them, but not this installation's, or its RayJob is there.
    subs.push(ended("foreign", "SUCCEEDED", None, Some(1)));
    subs.push(ended("kept-x", "SUCCEEDED", Some("rs/team/kept"), Some(2)));
    subs.push(ended("running", "RUNNING", Some("rs/team/t1"), None));
    let held = |t: &str| HELD.contains(&t);
    let got = deletable(&subs, held, "rs", "team", DELETIONS_PER_PASS);
    assert_eq!(got.len(), DELETIONS_PER_PASS);
    let expected: Vec<String> = (0..DELETIONS_PER_PASS)
        .map(|i| format!("j-{i:03}"))
        .collect();
    let ids: Vec<&str> = got.iter().map(|s| s.id.as_str()).collect();
    assert_eq!(ids, expected);
}

#[rstest]
#[case(
    "pyflyte-fast-execute --additional-distribution s3://b/x.tar.gz --dest-dir . -- pyflyte-execute --inputs s3://i",
    true
)]
#[case(
    "pyflyte-fast-execute --additional-distribution s3://b/x.tar.gz -- pyflyte-execute",
    true
)]
#[case(
    "pyflyte-fast-execute --additional-distribution s3://b/x.tar.gz --dest-dir code -- pyflyte-execute",
    true
)]
#[case(
    "pyflyte-fast-execute --additional-distribution s3://b/x.tar.gz --dest-dir /opt/code -- pyflyte-execute",
    false
)]
#[case("/usr/bin/pyflyte-fast-execute --dest-dir . -- pyflyte-execute", true)]
#[case(
    "a0 --inputs s3://i --outputs-path s3://o --version v1 --tgz s3://b/c.tgz --dest . --resolver r mod m",
    true
)]
#[case("a0 --inputs s3://i --pkl s3://b/c.pkl --dest ./ --resolver r", true)]
#[case(
    "a0 --inputs s3://i --tgz s3://b/c.tgz --dest /root --resolver r",
    false
)]
#[case(
    "a0 --inputs s3://i --outputs-path s3://o --resolver r mod ray_example instance ray_task",
    false
)]
#[case("pyflyte-execute --inputs s3://i --resolver r -- task-module m", false)]
#[case("python train.py --epochs 3", false)]
#[case("", false)]
fn finds_entrypoints_that_download_into_cwd(#[case] entrypoint: &str, #[case] expected: bool) {
    assert_eq!(downloads_code_into_cwd(entrypoint), expected);
}

#[test]
fn own_directory_wraps_the_entrypoint_in_one_shell_word() {
    let e = in_own_directory("a0 --dest . --name 'x y'", "/tmp/rayshare-jobs/", "uid-1");
    let expected = r#"sh -c 'mkdir -p /tmp/rayshare-jobs && d=$(mktemp -d /tmp/rayshare-jobs/uid-1.XXXXXXXXXX) && cd $d || exit 1; trap "cd / && rm -rf $d" EXIT; trap "exit 143" TERM INT; export PYTHONPATH="$d${PYTHONPATH:+:$PYTHONPATH}"; a0 --dest . --name '\''x y'\'''"#;
    assert_eq!(e, expected);
}

/// Run by a shell as KubeRay's submitter does (pasted into a bash command line): the
/// driver starts in a fresh directory of mode 0700 that no other job could have made
/// first (a directory named after the public token is not used), first on the Python
/// path, and the directory goes with the driver.
#[test]
fn a_driver_starts_in_a_fresh_private_directory() {
    let root = tempfile::tempdir().unwrap();
    let planted = root.path().join("uid-1");
    std::fs::create_dir(&planted).unwrap();
    std::fs::write(planted.join("sitecustomize.py"), "raise SystemExit(9)").unwrap();
    let probe = r#"pwd; stat -c %a .; echo "PP=$PYTHONPATH""#;
    let command = in_own_directory(probe, &root.path().display().to_string(), "uid-1");
    let out = std::process::Command::new("bash")
        .arg("-c")
        .arg(&command)
        .env_remove("PYTHONPATH")
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let text = String::from_utf8(out.stdout).unwrap();
    let mut lines = text.lines();
    let dir = lines.next().unwrap();
    let prefix = format!("{}/uid-1.", root.path().display());
    assert!(
        dir.starts_with(&prefix) && dir.len() == prefix.len() + 10,
        "{dir}"
    );
    assert_eq!(lines.next(), Some("700"));
    assert_eq!(lines.next(), Some(format!("PP={dir}").as_str()));
    assert!(
        !std::path::Path::new(dir).exists(),
        "removed with the driver"
    );
    assert!(planted.exists(), "another job's directory is left alone");
}

#[rstest]
#[case(
    "3f1c2b6e-7a8d-4e1f-9b0a-2c4d6e8f0a1b",
    Some("3f1c2b6e-7a8d-4e1f-9b0a-2c4d6e8f0a1b")
)]
#[case("", None)]
#[case("a b", None)]
#[case("-x", None)]
fn tokens_are_label_values(#[case] uid: &str, #[case] expected: Option<&str>) {
    assert_eq!(token(uid), expected);
}

fn stored(ns: &str, token: Option<&str>, state: &str) -> Value {
    let mut j = json!({
        "metadata": { "namespace": ns, "name": "a", "labels": {} },
        "status": { "jobDeploymentStatus": state },
    });
    if let Some(t) = token {
        j["metadata"]["labels"][TOKEN_LABEL] = json!(t);
    }
    j
}

#[test]
fn stored_jobs_are_known_by_token_in_their_namespace_only() {
    let jobs = [
        stored("team", Some("t1"), "Running"),
        stored("team", Some("t1"), "Complete"),
        stored("team", None, "Running"),
        stored("other", Some("t2"), "Running"),
    ];
    let known = by_token(jobs, "team");
    assert_eq!(known.len(), 1);
    assert_eq!(known["t1"].len(), 2);
}

fn with_id(mut s: Submission, id: &str) -> Submission {
    s.id = id.into();
    s
}

#[test]
fn triage_suspects_only_its_own_active_submissions_the_cache_says_to_stop() {
    let subs = [
        // No RayJob carries its token: a suspect.
        with_id(sub("RUNNING", Some("gone")), "j-gone"),
        // Its RayJob runs: left.
        with_id(sub("RUNNING", Some("live")), "j-live"),
        // Its RayJob is over on KubeRay's side: a suspect.
        with_id(sub("PENDING", Some("over")), "j-over"),
        // Over already: nothing to stop.
        with_id(sub("STOPPED", Some("gone")), "j-stopped"),
        // Someone else's: counted, never a suspect.
        with_id(sub("RUNNING", None), "j-foreign"),
        // Asked to stop a moment ago: not asked again.
        with_id(sub("RUNNING", Some("gone")), "j-asked"),
        // Reads as a driver's job id: never touched.
        with_id(sub("RUNNING", Some("gone")), "02000000"),
    ];
    let known = by_token(
        [
            stored("team", Some("live"), "Running"),
            stored("team", Some("over"), "Complete"),
        ],
        "team",
    );
    let triage = triage(&subs, &known, |id| id == "j-asked", "rs", "team");
    let ids: Vec<_> = triage
        .suspects
        .iter()
        .map(|(s, t)| (s.id.as_str(), *t))
        .collect();
    assert_eq!(ids, [("j-gone", "gone"), ("j-over", "over")]);
    assert_eq!(triage.unattributed, 1);
}

#[test]
fn another_namespaces_submission_is_unattributed() {
    let subs = [sub("RUNNING", Some("t"))];
    let triage = triage(&subs, &HashMap::new(), |_| false, "rs", "elsewhere");
    assert!(triage.suspects.is_empty());
    assert_eq!(triage.unattributed, 1);
}
