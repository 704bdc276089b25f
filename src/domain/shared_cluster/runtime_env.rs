//! Merging run-scoped env vars into a RayJob's `runtimeEnvYAML`.
//!
//! The text is read the way KubeRay reads it (YAML 1.1, see [`kuberay_yaml`]) and written
//! back as JSON, so every value keeps the type and text KubeRay would have given it, and
//! the added values are strings for any reader (a run named `on` stays `"on"`).

use serde_json::{Map, Value};

use super::kuberay_yaml::{self, ReadError};

#[derive(Debug, Clone, PartialEq)]
pub struct Merged {
    /// The new `runtimeEnvYAML` (JSON text).
    pub text: String,
    /// Names the user had already set (theirs win).
    pub kept: Vec<String>,
    /// Reserved names the user had set to something else (rayshare's win).
    pub replaced: Vec<String>,
    /// The user's `env_vars` that KubeRay reads as something other than a string (an
    /// unquoted `on` is a boolean in YAML 1.1): Ray rejects those, with or without rayshare.
    pub not_strings: Vec<String>,
}

/// Adds `vars` under `env_vars`, keeping every key the user set, and sets `reserved`
/// over whatever the user set.
pub fn merge_env_vars(
    runtime_env_yaml: Option<&str>,
    vars: &[(String, String)],
    reserved: &[(String, String)],
) -> Result<Merged, ReadError> {
    let mut env = match runtime_env_yaml {
        None => Value::Null,
        Some(text) => kuberay_yaml::read(text)?,
    };
    if env.is_null() {
        env = Value::Object(Map::new());
    }
    let Some(root) = env.as_object_mut() else {
        return Err(ReadError::Invalid("not a YAML mapping".into()));
    };
    let env_vars = root
        .entry("env_vars")
        .or_insert_with(|| Value::Object(Map::new()));
    if env_vars.is_null() {
        *env_vars = Value::Object(Map::new());
    }
    let Some(env_vars) = env_vars.as_object_mut() else {
        return Err(ReadError::Invalid("env_vars is not a mapping".into()));
    };
    let not_strings = env_vars
        .iter()
        .filter(|(_, v)| !v.is_string())
        .map(|(k, _)| k.clone())
        .collect();
    let mut kept = Vec::new();
    for (name, value) in vars {
        if env_vars.contains_key(name) {
            kept.push(name.clone());
        } else {
            env_vars.insert(name.clone(), Value::String(value.clone()));
        }
    }
    let mut replaced = Vec::new();
    for (name, value) in reserved {
        let new = Value::String(value.clone());
        if env_vars
            .insert(name.clone(), new.clone())
            .is_some_and(|old| old != new)
        {
            replaced.push(name.clone());
        }
    }
    Ok(Merged {
        text: kuberay_yaml::write(&env),
        kept,
        replaced,
        not_strings,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use rstest::rstest;
    use serde_json::json;

    fn vars() -> Vec<(String, String)> {
        vec![
            ("RUN_NAME".into(), "r1".into()),
            ("ACTION_NAME".into(), "a0".into()),
        ]
    }

    /// What KubeRay reads from the text (YAML 1.1, then JSON).
    fn kuberay(text: &str) -> Value {
        kuberay_yaml::read(text).unwrap()
    }

    #[rstest]
    #[case(None)]
    #[case(Some(""))]
    #[case(Some("  \n"))]
    #[case(Some("# nothing\n"))]
    #[case(Some("env_vars:\n"))]
    #[case(Some("env_vars: ~\n"))]
    fn creates_env_vars_when_absent(#[case] input: Option<&str>) {
        let merged = merge_env_vars(input, &vars(), &[]).unwrap();
        assert!(merged.kept.is_empty());
        assert_eq!(kuberay(&merged.text)["env_vars"]["RUN_NAME"], "r1");
    }

    #[test]
    fn user_values_and_other_keys_survive() {
        let input = "pip:\n  - numpy==2.0\nworking_dir: s3://b/x.zip\nenv_vars:\n  RUN_NAME: mine\n  OTHER: '1'\n";
        let merged = merge_env_vars(Some(input), &vars(), &[]).unwrap();
        let v = kuberay(&merged.text);
        assert_eq!(merged.kept, vec!["RUN_NAME"]);
        assert_eq!(v["env_vars"]["RUN_NAME"], "mine");
        assert_eq!(v["env_vars"]["OTHER"], "1");
        assert_eq!(v["env_vars"]["ACTION_NAME"], "a0");
        assert_eq!(v["pip"][0], "numpy==2.0");
        assert_eq!(v["working_dir"], "s3://b/x.zip");
    }

    #[rstest]
    #[case("env_vars:\n  T: copied\n", vec!["T"])]
    #[case("env_vars:\n  T: mine\n", vec![])]
    #[case("pip: [x]\n", vec![])]
    fn reserved_values_are_rayshares(#[case] input: &str, #[case] replaced: Vec<&str>) {
        let reserved = [("T".to_string(), "mine".to_string())];
        let merged = merge_env_vars(Some(input), &vars(), &reserved).unwrap();
        assert_eq!(merged.replaced, replaced);
        assert_eq!(kuberay(&merged.text)["env_vars"]["T"], "mine");
    }

    /// The scalars, as a user (or flytekit's yaml.dump) writes them: what KubeRay
    /// reads after the rewrite is exactly what it read before, and the text is JSON.
    #[rstest]
    #[case("'on'", json!("on"))]
    #[case("'yes'", json!("yes"))]
    #[case("'n'", json!("n"))]
    #[case("\"off\"", json!("off"))]
    #[case("'~'", json!("~"))]
    #[case("'1_000'", json!("1_000"))]
    #[case("'0x1F'", json!("0x1F"))]
    #[case("\"3\"", json!("3"))]
    #[case("'017'", json!("017"))]
    #[case("'0o17'", json!("0o17"))]
    #[case("''", json!(""))]
    #[case("'null'", json!("null"))]
    #[case("|\n    on\n", json!("on\n"))]
    // Unquoted, KubeRay reads them as YAML 1.1 booleans, numbers and null: kept so.
    #[case("on", json!(true))]
    #[case("n", json!(false))]
    #[case("~", json!(null))]
    #[case("1_000", json!(1000))]
    #[case("0x1F", json!(31))]
    #[case("0o17", json!(15))]
    fn kuberay_reads_the_users_value_unchanged(#[case] yaml: &str, #[case] expected: Value) {
        let input = format!("env_vars:\n  FLAG: {yaml}\n");
        let before = kuberay(&input)["env_vars"]["FLAG"].clone();
        assert_eq!(before, expected);
        let merged = merge_env_vars(Some(&input), &vars(), &[]).unwrap();
        let after: Value = serde_json::from_str(&merged.text).expect("JSON");
        assert_eq!(after["env_vars"]["FLAG"], expected, "JSON reader");
        assert_eq!(
            kuberay(&merged.text)["env_vars"]["FLAG"],
            expected,
            "YAML 1.1 reader"
        );
        let yaml12: Value = serde_norway::from_str(&merged.text).unwrap();
        assert_eq!(yaml12["env_vars"]["FLAG"], expected, "YAML 1.2 reader");
        assert_eq!(merged.not_strings.is_empty(), expected.is_string());
    }

    /// The user's other keys keep their types too: the same ambiguous scalars under
    /// `config`, nested maps, lists, numbers and booleans.
    #[test]
    fn non_env_keys_keep_type_and_text() {
        let input = "pip: [numpy==2.1.0, 'yes']\nworking_dir: s3://b/x.zip\nconfig:\n  setup_timeout_seconds: 1_000\n  eager_install: on\n  ratio: 0.5\n  name: 'off'\n  nested: {a: [1, '2', ~]}\n";
        let before = kuberay(input);
        let merged = merge_env_vars(Some(input), &vars(), &[]).unwrap();
        let mut after = kuberay(&merged.text);
        assert_eq!(
            after["env_vars"],
            json!({"RUN_NAME": "r1", "ACTION_NAME": "a0"})
        );
        after.as_object_mut().unwrap().remove("env_vars");
        assert_eq!(after, before);
        assert_eq!(before["config"]["setup_timeout_seconds"], json!(1000));
        assert_eq!(before["config"]["name"], json!("off"));
        assert_eq!(before["pip"][1], json!("yes"));
    }

    /// Run and action names that YAML 1.1 would read as booleans stay strings.
    #[rstest]
    #[case("on")]
    #[case("no")]
    #[case("y")]
    #[case("1e3")]
    #[case("0x1F")]
    #[case("~")]
    #[case("")]
    fn added_values_are_strings_for_every_reader(#[case] name: &str) {
        let vars = vec![("RUN_NAME".to_string(), name.to_string())];
        let merged = merge_env_vars(Some("pip: [x]\n"), &vars, &[]).unwrap();
        assert_eq!(kuberay(&merged.text)["env_vars"]["RUN_NAME"], json!(name));
        let yaml12: Value = serde_norway::from_str(&merged.text).unwrap();
        assert_eq!(yaml12["env_vars"]["RUN_NAME"], json!(name));
    }

    /// flyteplugins converts the legacy base64 `runtime_env` with gopkg.in/yaml.v2 (ray.go
    /// convertBase64RuntimeEnvToYaml): that YAML reads back unchanged too.
    #[test]
    fn legacy_base64_runtime_env_as_flyte_converts_it() {
        let input = "config:\n  setup_timeout_seconds: 600\nenv_vars:\n  FEATURE_FLAG: \"on\"\n  RETRIES: \"3\"\npip:\n- numpy==2.1.0\n";
        let merged = merge_env_vars(Some(input), &vars(), &[]).unwrap();
        let v = kuberay(&merged.text);
        assert_eq!(v["env_vars"]["FEATURE_FLAG"], "on");
        assert_eq!(v["env_vars"]["RETRIES"], "3");
        assert_eq!(v["config"]["setup_timeout_seconds"], 600);
    }

    #[rstest]
    #[case("- a\n- b\n")]
    #[case("env_vars: [1, 2]\n")]
    #[case("env_vars: {a: [unclosed\n")]
    #[case("env_vars:\n  A: .inf\n")]
    #[case("3\n")]
    fn odd_runtime_env_is_an_error(#[case] input: &str) {
        assert!(merge_env_vars(Some(input), &vars(), &[]).is_err());
    }

    #[test]
    fn values_kuberay_would_not_read_as_strings_are_reported() {
        let merged = merge_env_vars(Some("env_vars:\n  A: on\n  B: 'on'\n"), &vars(), &[]).unwrap();
        assert_eq!(merged.not_strings, vec!["A"]);
    }

    proptest! {
        /// For any string values, KubeRay reads exactly the strings that were merged.
        #[test]
        fn merged_strings_read_back_exactly(
            user in prop::collection::btree_map("[A-Z_]{1,6}", any::<String>(), 0..4),
            run in any::<String>(),
        ) {
            let input = kuberay_yaml::write(&json!({"env_vars": user}));
            let vars = vec![("RUN_NAME".to_string(), run.clone())];
            let merged = merge_env_vars(Some(&input), &vars, &[]).unwrap();
            let v = kuberay(&merged.text);
            for (k, val) in &user {
                prop_assert_eq!(&v["env_vars"][k], &json!(val));
            }
            let expected_run = user.get("RUN_NAME").cloned().unwrap_or(run);
            prop_assert_eq!(&v["env_vars"]["RUN_NAME"], &json!(expected_run));
        }
    }
}
