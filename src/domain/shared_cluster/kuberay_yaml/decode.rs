//! A tree to the JSON KubeRay makes of it (go-yaml v2's `decoder`, then sigs.k8s.io/yaml's
//! `convertToJSONableObject`), with aliases and merge keys expanded under a work budget.

use std::collections::{BTreeMap, HashMap};

use serde_json::{Map, Value};

use super::scalar::{Key, map_key, resolve, scalar_value};
use super::tree::{Node, Raw};
use super::{MAX_DEPTH, MAX_EXPANDED_BYTES, MAX_EXPANDED_NODES, ReadError};

pub(super) struct Decoder<'a> {
    anchors: &'a HashMap<usize, Node>,
    /// Every value, map entry, merged mapping and alias visited: what the expansion costs.
    nodes: usize,
    /// Scalar text copied into the result.
    bytes: usize,
}

impl<'a> Decoder<'a> {
    pub fn new(anchors: &'a HashMap<usize, Node>) -> Self {
        Self {
            anchors,
            nodes: 0,
            bytes: 0,
        }
    }

    fn count(&mut self, depth: usize, bytes: usize) -> Result<(), ReadError> {
        self.nodes += 1;
        self.bytes += bytes;
        if self.nodes > MAX_EXPANDED_NODES {
            return Err(ReadError::Bound(format!(
                "more than {MAX_EXPANDED_NODES} nodes once aliases and merges are expanded"
            )));
        }
        if self.bytes > MAX_EXPANDED_BYTES {
            return Err(ReadError::Bound(format!(
                "more than {MAX_EXPANDED_BYTES} bytes of text once aliases are expanded"
            )));
        }
        if depth > MAX_DEPTH {
            return Err(ReadError::Bound(format!(
                "nested deeper than {MAX_DEPTH} levels once aliases are expanded"
            )));
        }
        Ok(())
    }

    fn deref(&mut self, node: &'a Node, depth: usize) -> Result<&'a Node, ReadError> {
        match &**node {
            Raw::Alias(id) => {
                self.count(depth, 0)?;
                self.anchors.get(id).ok_or_else(unknown_anchor)
            }
            _ => Ok(node),
        }
    }

    pub fn value(&mut self, node: &'a Node, depth: usize) -> Result<Value, ReadError> {
        let node = self.deref(node, depth)?;
        let text_len = match &**node {
            Raw::Scalar { text, .. } => text.len(),
            _ => 0,
        };
        self.count(depth, text_len)?;
        match &**node {
            Raw::Alias(_) => Err(unknown_anchor()),
            Raw::Scalar { text, plain, tag } => {
                scalar_value(resolve(text, *plain, tag.as_deref())?)
            }
            Raw::Seq(items) => items
                .iter()
                .map(|item| self.value(item, depth + 1))
                .collect::<Result<Vec<_>, _>>()
                .map(Value::Array),
            Raw::Map(pairs) => {
                let mut map = BTreeMap::new();
                self.map_into(pairs, &mut map, depth)?;
                json_object(map)
            }
        }
    }

    /// go-yaml v2 `decoder.mapping`: pairs in order, a later key overwriting an earlier
    /// equal one; `<<` merges a mapping (or a list of them, the first winning) in place.
    /// Each merged mapping counts against the budget, empty or not.
    fn map_into(
        &mut self,
        pairs: &'a [(Node, Node)],
        out: &mut BTreeMap<Key, Value>,
        depth: usize,
    ) -> Result<(), ReadError> {
        for (key, value) in pairs {
            if is_merge(key) {
                let merged = self.deref(value, depth + 1)?;
                match &**merged {
                    Raw::Map(inner) => self.merge(inner, out, depth + 1)?,
                    Raw::Seq(items) => {
                        for item in items.iter().rev() {
                            match &**self.deref(item, depth + 1)? {
                                Raw::Map(inner) => self.merge(inner, out, depth + 1)?,
                                _ => return Err(invalid("a merge key needs mappings")),
                            }
                        }
                    }
                    _ => return Err(invalid("a merge key needs a mapping")),
                }
                continue;
            }
            let key = match &**self.deref(key, depth)? {
                Raw::Scalar { text, plain, tag } => {
                    self.count(depth, text.len())?;
                    map_key(resolve(text, *plain, tag.as_deref())?)
                }
                _ => return Err(invalid("a map key is a collection")),
            };
            let value = self.value(value, depth + 1)?;
            out.insert(key, value);
        }
        Ok(())
    }

    fn merge(
        &mut self,
        pairs: &'a [(Node, Node)],
        out: &mut BTreeMap<Key, Value>,
        depth: usize,
    ) -> Result<(), ReadError> {
        self.count(depth, 0)?;
        self.map_into(pairs, out, depth)
    }
}

fn invalid(why: &str) -> ReadError {
    ReadError::Invalid(why.into())
}

fn unknown_anchor() -> ReadError {
    invalid("an alias refers to an unknown anchor")
}

fn is_merge(key: &Raw) -> bool {
    matches!(key, Raw::Scalar { text, plain, tag } if text == "<<"
        && ((*plain && tag.is_none()) || tag.as_deref() == Some("tag:yaml.org,2002:merge")))
}

/// sigs.k8s.io/yaml `convertToJSONableObject`: keys become strings. Two keys that become
/// the same string would be kept in Go's random map order, so they are refused.
fn json_object(map: BTreeMap<Key, Value>) -> Result<Value, ReadError> {
    let mut out = Map::new();
    for (key, value) in map {
        let name = match key {
            Key::Str(s) => s,
            Key::Int(i) => i.to_string(),
            Key::Bool(b) => b.to_string(),
            Key::Unsupported(text) => {
                return Err(ReadError::Invalid(format!("unsupported map key {text:?}")));
            }
        };
        if out.insert(name.clone(), value).is_some() {
            return Err(ReadError::Invalid(format!(
                "two map keys both read as {name:?}"
            )));
        }
    }
    Ok(Value::Object(out))
}
