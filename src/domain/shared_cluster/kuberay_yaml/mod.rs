//! `runtimeEnvYAML` as KubeRay reads it, and written so that every reader agrees.
//!
//! KubeRay converts the text with `sigs.k8s.io/yaml.YAMLToJSON`: go-yaml v2, whose plain
//! scalars follow YAML 1.1 (`on`, `yes`, `n` are booleans; `1_000`, `0x1F`, `017` are
//! integers), then map keys turned into strings. [`read`] reproduces that (go-yaml v2's
//! `resolve.go`, `decode.go`; sigs.k8s.io/yaml's `convertToJSONableObject`), so rayshare
//! sees the types KubeRay would; [`write`] emits JSON, which YAML 1.1, YAML 1.2 and JSON
//! readers all read alike (strings are always quoted). The golden file
//! `tests/fixtures/flyte/kuberay-yaml.json` holds the real YAMLToJSON's answers.
//!
//! The text is a tenant's: it is read under the bounds below, each far above what a real
//! runtime env reaches and each checked before the work it bounds, so no text can overflow
//! the stack or hold a worker for more than a few milliseconds (go-yaml v2 itself stops
//! at 10,000 levels and at an alias-expansion ratio; these are tighter).

mod decode;
pub mod hostile;
mod scalar;
mod tree;

use serde_json::Value;

/// Longest text read at all (real runtime envs are a few KiB).
pub const MAX_TEXT_BYTES: usize = 64 * 1024;
/// Deepest nesting of collections, in the text or once aliases are expanded.
pub const MAX_DEPTH: usize = 64;
/// Nodes (scalars, collections, aliases) in the text.
pub const MAX_TEXT_NODES: usize = 5_000;
/// Values, map entries, merged mappings and alias uses visited while expanding.
pub const MAX_EXPANDED_NODES: usize = 5_000;
/// Scalar text in the expanded result.
pub const MAX_EXPANDED_BYTES: usize = 1024 * 1024;

/// Why a text was not read.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ReadError {
    /// KubeRay would refuse it too, or rayshare cannot mirror KubeRay's reading exactly.
    #[error("{0}")]
    Invalid(String),
    /// Past one of rayshare's bounds: refused before the work it would take.
    #[error("too large: {0}")]
    Bound(String),
}

/// The JSON KubeRay makes of `text` (the first YAML document; `null` for none), or why
/// it would fail, cannot be mirrored exactly, or is past rayshare's bounds.
pub fn read(text: &str) -> Result<Value, ReadError> {
    if text.len() > MAX_TEXT_BYTES {
        return Err(ReadError::Bound(format!(
            "{} bytes, more than {MAX_TEXT_BYTES}",
            text.len()
        )));
    }
    let tree = tree::read(text)?;
    match &tree.root {
        None => Ok(Value::Null),
        Some(root) => decode::Decoder::new(&tree.anchors).value(root, 0),
    }
}

/// JSON text of `value`, with the characters a YAML reader would not keep as they are
/// (C1 controls, NEL, line/paragraph separators, BOM) escaped; still valid JSON.
pub fn write(value: &Value) -> String {
    let json = serde_json::to_string(value).expect("JSON values serialise");
    // Every character a YAML reader would not keep is at or above DEL.
    if json.bytes().all(|b| b < 0x7f) {
        return json;
    }
    let mut out = String::with_capacity(json.len());
    for c in json.chars() {
        if matches!(
            c,
            '\u{7f}'..='\u{9f}' | '\u{2028}' | '\u{2029}' | '\u{feff}' | '\u{fffe}' | '\u{ffff}'
        ) {
            out.push_str(&format!("\\u{:04x}", c as u32));
        } else {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests;
