//! Fuzzing on stable Rust: proptest mutates real inputs (the samples, the RayJobs Flyte's own
//! code builds, KubeRay worker pods of the world's clusters, the hostile runtime envs) and
//! drives each through the whole request path, review bytes -> parse -> triage -> admit ->
//! answer, against an in-memory world with shared clusters, multi-host worker groups and
//! claims (`fuzz/corpus.rs`); and through the runtime-env reader and writer. What must hold
//! for every input is in `fuzz/oracle.rs`: no panic, fail-open, a patch that applies,
//! idempotence, dry runs that make nothing, a bounded time; and whatever the reader reads,
//! the writer writes back so that it reads the same.
//!
//! `cargo fuzz` needs a nightly toolchain, which this project's machines do not promise, so
//! the engine is proptest (seeded from the corpus, shrinking). Cases per target:
//! `RAYSHARE_FUZZ_CASES` (default 1000; `bash tests/run.sh` runs the default). The seed is
//! fixed, so a run is reproducible and CI is not flaky on a newly found input;
//! `RAYSHARE_FUZZ_SEED` sets another (a number) or `random` to explore. A failing input is
//! kept by proptest in `proptest-regressions/fuzz.txt` and replayed first on every later
//! run (proptest's default place for a file outside `src/` would be beside it instead).

#[path = "fuzz/corpus.rs"]
mod corpus;
#[path = "fuzz/edits.rs"]
mod edits;
#[path = "fuzz/oracle.rs"]
mod oracle;

use proptest::prelude::*;
use proptest::test_runner::{Config as ProptestConfig, FileFailurePersistence, RngSeed};
use serde_json::json;

use corpus::{SEEDS, review};
use edits::{apply, damage, damaged, edit};
use rayshare::admission;
use rayshare::config::Config;
use rayshare::domain::shared_cluster::kuberay_yaml;
use rayshare::world::MemoryWorld;

/// The seed of every run unless `RAYSHARE_FUZZ_SEED` says otherwise.
const SEED: u64 = 0x7261_7973_6861_7265;

fn cases() -> u32 {
    std::env::var("RAYSHARE_FUZZ_CASES")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(1000)
}

fn seed() -> RngSeed {
    match std::env::var("RAYSHARE_FUZZ_SEED").as_deref() {
        Ok("random") => RngSeed::Random,
        Ok(n) => RngSeed::Fixed(n.parse().expect("RAYSHARE_FUZZ_SEED: a number or random")),
        Err(_) => RngSeed::Fixed(SEED),
    }
}

fn config() -> ProptestConfig {
    ProptestConfig {
        cases: cases(),
        rng_seed: seed(),
        failure_persistence: Some(Box::new(FileFailurePersistence::Direct(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/proptest-regressions/fuzz.txt"
        )))),
        // Shrinking a large review is slow; the first failing input is already useful.
        max_shrink_iters: 200,
        // A case that hangs fails after the admission budget; shrinking it is bounded too.
        max_shrink_time: 120_000,
        ..ProptestConfig::default()
    }
}

proptest! {
    #![proptest_config(config())]

    /// Review bytes -> answer, for edited and damaged corpus objects.
    #[test]
    fn fuzz_the_request_path(
        seed in any::<prop::sample::Index>(),
        edits in prop::collection::vec(edit(), 0..4),
        damage in damage(),
        dry_run in any::<bool>(),
    ) {
        let mut object = seed.get(&SEEDS).clone();
        for e in &edits {
            apply(&mut object, e);
        }
        let body = serde_json::to_vec(&review(&object, dry_run)).unwrap();
        oracle::check_request_path(damaged(body, &damage))?;
    }

    /// The runtime-env reader on any text, and on corpus texts with bytes inserted: it
    /// answers (Ok or Err) without panicking, and what it reads, the writer writes back
    /// so that it reads the same.
    #[test]
    fn fuzz_the_runtime_env_reader(
        text in prop_oneof![
            any::<String>(),
            "[-:&*<>!|{}\\[\\], \n#'\"a-z0-9]{0,300}",
            (any::<prop::sample::Index>(), any::<usize>(), "[-:&*<>{}\\[\\], \n]{1,20}")
                .prop_map(|(i, at, insert)| {
                    let (_, mut text) = i.get(&kuberay_yaml::hostile::runtime_envs()).clone();
                    text.truncate(4096);
                    let at = (0..=at % (text.len() + 1)).rev().find(|&i| text.is_char_boundary(i)).unwrap();
                    text.insert_str(at, &insert);
                    text
                }),
        ],
    ) {
        if let Ok(value) = kuberay_yaml::read(&text) {
            let written = kuberay_yaml::write(&value);
            prop_assert_eq!(kuberay_yaml::read(&written).ok(), Some(value));
        }
    }
}

/// Every hostile runtime env, through the whole path: the job passes unchanged with a
/// warning (not a crash, not minutes of CPU).
#[test]
fn hostile_runtime_envs_pass_unchanged_with_a_warning() {
    let job = SEEDS.iter().find(|s| s["kind"] == "RayJob").unwrap();
    for (name, text) in kuberay_yaml::hostile::runtime_envs() {
        let mut hostile = job.clone();
        hostile["spec"]["runtimeEnvYAML"] = json!(text);
        let body = serde_json::to_vec(&review(&hostile, false)).unwrap();
        let req = admission::parse_review(bytes::Bytes::from(body)).unwrap();
        let a = futures::executor::block_on(admission::admit(
            &req,
            &Config::default(),
            &MemoryWorld::default(),
            None,
        ));
        assert!(a.verdict.allowed && a.verdict.patch.is_none(), "{name}");
        assert!(
            a.verdict
                .warnings
                .iter()
                .any(|w| w.contains("past rayshare's bounds")),
            "{name}: {:?}",
            a.verdict.warnings
        );
    }
}

/// The fuzzed world is not empty: the corpus's unedited worker pods of multi-host groups
/// get a slot past those claimed already, and its RayJobs land on existing clusters.
#[test]
fn the_corpus_reaches_indexing_claims_and_existing_clusters() {
    let cfg = Config::default();
    let world = corpus::world();
    let mut indexed = 0;
    for seed in SEEDS.iter() {
        let body = serde_json::to_vec(&review(seed, false)).unwrap();
        let req = admission::parse_review(bytes::Bytes::from(body)).unwrap();
        let a = futures::executor::block_on(admission::admit(&req, &cfg, &world, None));
        let patch = serde_json::to_string(&a.verdict.patch).unwrap();
        if patch.contains("replica-index") {
            indexed += 1;
        }
    }
    let events = world.events.lock().unwrap();
    let reused = events.iter().filter(|e| e.note.contains("(warm;")).count();
    let claims = world.claims.lock().unwrap();
    let group = &claims[&(
        corpus::NAMESPACE.into(),
        "xclusterx".into(),
        "xgroupx".into(),
    )];
    // Taken before: (0, 0) and (1, 3); the bench pod's twin and the worker pod of the
    // group took the next free ones.
    assert_eq!(group.len(), 4, "{group:?}");
    assert!(indexed >= corpus::CLUSTERS.len(), "{indexed} pods indexed");
    assert!(reused > 0, "no RayJob went to an existing cluster");
}
