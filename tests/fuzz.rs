//! Fuzzing on stable Rust: proptest mutates real inputs (the samples, the RayJobs Flyte's own
//! code builds, KubeRay worker pods, the hostile runtime envs) and drives each through the
//! whole request path, review bytes -> parse -> triage -> admit -> answer, and through the
//! runtime-env reader and writer. What must hold for every input: no panic, no abort; the
//! answer is an AdmissionReview echoing the uid; a patch applies to the object it was made
//! for; whatever the reader reads, the writer writes back so that it reads the same.
//!
//! `cargo fuzz` needs a nightly toolchain, which this project's machines do not promise, so
//! the engine is proptest (random, seeded from the corpus, shrinking). Cases per target:
//! `RAYSHARE_FUZZ_CASES` (default 1000; `bash tests/run.sh` runs the default). A failing
//! input is kept by proptest in `proptest-regressions/fuzz.txt` and replayed first on
//! every later run.

use std::sync::LazyLock;

use proptest::prelude::*;
use proptest::test_runner::Config as ProptestConfig;
use serde_json::{Value, json};

use rayshare::admission;
use rayshare::config::Config;
use rayshare::shared_cluster::kuberay_yaml;
use rayshare::world::MemoryWorld;

fn cases() -> u32 {
    std::env::var("RAYSHARE_FUZZ_CASES")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(1000)
}

fn config() -> ProptestConfig {
    ProptestConfig {
        cases: cases(),
        // Shrinking a large review is slow; the first failing input is already useful.
        max_shrink_iters: 200,
        ..ProptestConfig::default()
    }
}

fn yaml_docs(text: &str) -> Vec<Value> {
    use serde::Deserialize;
    serde_norway::Deserializer::from_str(text)
        .filter_map(|d| Value::deserialize(d).ok())
        .filter(Value::is_object)
        .collect()
}

/// Every object the corpus holds.
static SEEDS: LazyLock<Vec<Value>> = LazyLock::new(|| {
    let root = env!("CARGO_MANIFEST_DIR");
    let mut seeds = Vec::new();
    for dir in ["deploy/samples", "tests/bench"] {
        for entry in std::fs::read_dir(format!("{root}/{dir}")).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_some_and(|e| e == "yaml") {
                let text = std::fs::read_to_string(&path).unwrap();
                seeds.extend(yaml_docs(&text.replace("{{", "x").replace("}}", "x")));
            }
        }
    }
    for generation in ["v1", "v2"] {
        let dir = format!("{root}/tests/fixtures/flyte/{generation}");
        for entry in std::fs::read_dir(dir).unwrap() {
            let text = std::fs::read_to_string(entry.unwrap().path()).unwrap();
            let fixture: Value = serde_json::from_str(&text).unwrap();
            let jobs = fixture["rayJobs"].as_array().cloned().unwrap_or_default();
            seeds.extend(jobs.into_iter().chain([fixture["rayJob"].clone()]));
        }
    }
    seeds.retain(|s| s.get("kind").is_some());
    let job = seeds
        .iter()
        .find(|s| s["kind"] == "RayJob")
        .unwrap()
        .clone();
    for (_, text) in kuberay_yaml::hostile::runtime_envs() {
        let mut hostile = job.clone();
        hostile["spec"]["runtimeEnvYAML"] = json!(text);
        seeds.push(hostile);
    }
    assert!(seeds.len() > 10, "the corpus is there: {}", seeds.len());
    seeds
});

fn review(object: &Value, dry_run: bool) -> Value {
    let api_version = object["apiVersion"].as_str().unwrap_or("v1");
    let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
    json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
        "uid": "fuzz-uid", "kind": {"group": group, "version": version, "kind": object["kind"]},
        "resource": {"group": group, "version": version, "resource": "x"},
        "operation": "CREATE", "namespace": "team", "name": object["metadata"]["name"],
        "dryRun": dry_run, "object": object}})
}

/// One JSON edit: a value anywhere in the tree replaced by something odd.
#[derive(Debug, Clone)]
enum Edit {
    Replace(usize, Value),
    Remove(usize),
    Nest(usize, usize),
    LongString(usize, usize),
}

fn odd_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<f64>()
            .prop_filter("finite", |f| f.is_finite())
            .prop_map(Value::from),
        any::<String>().prop_map(Value::from),
        prop::sample::select(vec![
            "",
            "on",
            "worker",
            "head",
            "volcano",
            "ray.io/cluster",
            "RayJob",
            "K8sJobMode",
            "SidecarMode",
            "4096",
            "-1",
            "99999999999",
            "<<",
            "&a",
            "*a",
            "- - - x",
        ])
        .prop_map(Value::from),
    ];
    leaf.prop_recursive(3, 16, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::btree_map("[a-zA-Z./]{0,12}", inner, 0..4)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

fn edit() -> impl Strategy<Value = Edit> {
    prop_oneof![
        4 => (any::<usize>(), odd_value()).prop_map(|(i, v)| Edit::Replace(i, v)),
        2 => any::<usize>().prop_map(Edit::Remove),
        1 => (any::<usize>(), 1usize..400).prop_map(|(i, d)| Edit::Nest(i, d)),
        1 => (any::<usize>(), 1usize..200_000).prop_map(|(i, n)| Edit::LongString(i, n)),
    ]
}

/// The n-th node of a pre-order walk, modulo the tree's size.
fn node_mut(root: &mut Value, n: usize) -> &mut Value {
    fn count(v: &Value) -> usize {
        1 + match v {
            Value::Array(a) => a.iter().map(count).sum(),
            Value::Object(m) => m.values().map(count).sum(),
            _ => 0,
        }
    }
    fn walk<'a>(v: &'a mut Value, n: &mut usize) -> Option<&'a mut Value> {
        if *n == 0 {
            return Some(v);
        }
        *n -= 1;
        match v {
            Value::Array(a) => a.iter_mut().find_map(|c| walk(c, n)),
            Value::Object(m) => m.values_mut().find_map(|c| walk(c, n)),
            _ => None,
        }
    }
    let mut n = n % count(root);
    walk(root, &mut n).expect("n is within the tree")
}

fn apply(object: &mut Value, edit: &Edit) {
    match edit {
        Edit::Replace(i, v) => *node_mut(object, *i) = v.clone(),
        Edit::Remove(i) => *node_mut(object, *i) = Value::Null,
        Edit::Nest(i, depth) => {
            let node = node_mut(object, *i);
            let inner = node.take();
            *node = (0..*depth).fold(inner, |v, _| json!([v]));
        }
        Edit::LongString(i, len) => *node_mut(object, *i) = json!("x".repeat(*len)),
    }
}

/// Byte-level damage to the serialised review: the parser's own input space.
#[derive(Debug, Clone)]
enum Damage {
    None,
    Truncate(usize),
    Flip(usize, u8),
    Insert(usize, Vec<u8>),
}

fn damage() -> impl Strategy<Value = Damage> {
    prop_oneof![
        6 => Just(Damage::None),
        1 => any::<usize>().prop_map(Damage::Truncate),
        2 => (any::<usize>(), any::<u8>()).prop_map(|(i, b)| Damage::Flip(i, b)),
        2 => (any::<usize>(), prop::collection::vec(
            prop::sample::select(b"{}[]\",:\\0ue-. ".to_vec()), 1..64))
            .prop_map(|(i, b)| Damage::Insert(i, b)),
    ]
}

fn damaged(mut body: Vec<u8>, damage: &Damage) -> Vec<u8> {
    let len = body.len().max(1);
    match damage {
        Damage::None => {}
        Damage::Truncate(i) => body.truncate(i % len),
        Damage::Flip(i, b) => body[i % len] ^= b | 1,
        Damage::Insert(i, bytes) => {
            let at = i % len;
            body.splice(at..at, bytes.iter().copied());
        }
    }
    body
}

/// The property of the whole path, for one body.
fn check_request_path(body: Vec<u8>, world: &MemoryWorld) -> Result<(), TestCaseError> {
    let Ok(req) = admission::parse_review(bytes::Bytes::from(body)) else {
        return Ok(()); // answered 400 by the handler
    };
    let cfg = Config::default();
    let a = futures::executor::block_on(admission::admit(&req, &cfg, world, None));
    let answer: Value = serde_json::from_slice(&a.verdict.review_bytes(&req.uid))
        .map_err(|e| TestCaseError::fail(format!("the answer is not JSON: {e}")))?;
    prop_assert_eq!(&answer["response"]["uid"], &json!(req.uid));
    prop_assert_eq!(answer["kind"].as_str(), Some("AdmissionReview"));
    if let Some(patch) = &a.verdict.patch {
        let mut object = req
            .parse_object()
            .map_err(TestCaseError::fail)?
            .ok_or_else(|| TestCaseError::fail("a patch for no object"))?;
        json_patch::patch(&mut object, patch)
            .map_err(|e| TestCaseError::fail(format!("the patch does not apply: {e}")))?;
    }
    Ok(())
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
        check_request_path(damaged(body, &damage), &MemoryWorld::default())?;
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
