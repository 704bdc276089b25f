//! Merging run-scoped env vars into a RayJob's `runtimeEnvYAML`.

use serde_json::{Map, Value};

/// Adds `vars` under `env_vars`, keeping every key the user set (theirs win).
/// Returns the new YAML and the names the user had already set.
pub fn merge_env_vars(
    runtime_env_yaml: Option<&str>,
    vars: &[(String, String)],
) -> Result<(String, Vec<String>), String> {
    let mut env: Value = match runtime_env_yaml.map(str::trim) {
        None | Some("") => Value::Object(Map::new()),
        Some(text) => serde_norway::from_str(text)
            .map_err(|e| format!("runtimeEnvYAML is not valid YAML: {e}"))?,
    };
    let Some(root) = env.as_object_mut() else {
        return Err("runtimeEnvYAML is not a YAML mapping".into());
    };
    let env_vars = root
        .entry("env_vars")
        .or_insert_with(|| Value::Object(Map::new()));
    if env_vars.is_null() {
        *env_vars = Value::Object(Map::new());
    }
    let Some(env_vars) = env_vars.as_object_mut() else {
        return Err("runtimeEnvYAML env_vars is not a mapping".into());
    };
    let mut kept = Vec::new();
    for (name, value) in vars {
        if env_vars.contains_key(name) {
            kept.push(name.clone());
        } else {
            env_vars.insert(name.clone(), Value::String(value.clone()));
        }
    }
    let yaml = serde_norway::to_string(&env).map_err(|e| e.to_string())?;
    Ok((yaml, kept))
}

#[cfg(test)]
mod tests {
    use super::*;
    use rstest::rstest;

    fn vars() -> Vec<(String, String)> {
        vec![
            ("RUN_NAME".into(), "r1".into()),
            ("ACTION_NAME".into(), "a0".into()),
        ]
    }

    fn parse(yaml: &str) -> Value {
        serde_norway::from_str(yaml).unwrap()
    }

    #[rstest]
    #[case(None)]
    #[case(Some(""))]
    #[case(Some("  \n"))]
    #[case(Some("env_vars:\n"))]
    fn creates_env_vars_when_absent(#[case] input: Option<&str>) {
        let (yaml, kept) = merge_env_vars(input, &vars()).unwrap();
        assert!(kept.is_empty());
        assert_eq!(parse(&yaml)["env_vars"]["RUN_NAME"], "r1");
    }

    #[test]
    fn user_values_and_other_keys_survive() {
        let input = "pip:\n  - numpy==2.0\nworking_dir: s3://b/x.zip\nenv_vars:\n  RUN_NAME: mine\n  OTHER: '1'\n";
        let (yaml, kept) = merge_env_vars(Some(input), &vars()).unwrap();
        let v = parse(&yaml);
        assert_eq!(kept, vec!["RUN_NAME"]);
        assert_eq!(v["env_vars"]["RUN_NAME"], "mine");
        assert_eq!(v["env_vars"]["OTHER"], "1");
        assert_eq!(v["env_vars"]["ACTION_NAME"], "a0");
        assert_eq!(v["pip"][0], "numpy==2.0");
        assert_eq!(v["working_dir"], "s3://b/x.zip");
    }

    #[rstest]
    #[case("- a\n- b\n")]
    #[case("env_vars: [1, 2]\n")]
    #[case("env_vars: {a: [unclosed\n")]
    fn odd_runtime_env_is_an_error(#[case] input: &str) {
        assert!(merge_env_vars(Some(input), &vars()).is_err());
    }
}
