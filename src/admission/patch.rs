//! The JSON patch from an admitted object to what rayshare made of it.

use json_patch::jsonptr::PointerBuf;
use json_patch::{AddOperation, Patch, PatchOperation, RemoveOperation};
use serde_json::{Map, Value};

/// Exactly `json_patch::diff(left, right)`, but subtrees that compare equal are passed
/// over without building their paths: a mutation touches a few fields of a large
/// object, and walking all of it was a tenth of a mutated pod's cost.
pub fn diff(left: &Value, right: &Value) -> Patch {
    let mut patch = Patch::default();
    diff_at(left, right, &mut PointerBuf::new(), &mut patch);
    patch
}

fn diff_at(left: &Value, right: &Value, at: &mut PointerBuf, patch: &mut Patch) {
    match (left, right) {
        (Value::Object(l), Value::Object(r)) => diff_maps(l, r, at, patch),
        _ if left == right => {}
        _ => patch
            .0
            .extend(json_patch::diff(left, right).0.into_iter().map(|mut op| {
                let path = match &mut op {
                    PatchOperation::Add(o) => &mut o.path,
                    PatchOperation::Remove(o) => &mut o.path,
                    PatchOperation::Replace(o) => &mut o.path,
                    PatchOperation::Move(o) => &mut o.path,
                    PatchOperation::Copy(o) => &mut o.path,
                    PatchOperation::Test(o) => &mut o.path,
                };
                *path = at.concat(&*path);
                op
            })),
    }
}

/// In `json_patch`'s order: changes and additions by the right map's keys, then removals.
fn diff_maps(
    l: &Map<String, Value>,
    r: &Map<String, Value>,
    at: &mut PointerBuf,
    patch: &mut Patch,
) {
    for (key, right) in r {
        match l.get(key) {
            Some(left) if left == right => {}
            Some(left) => {
                at.push_back(key);
                diff_at(left, right, at, patch);
                at.pop_back();
            }
            None => {
                at.push_back(key);
                patch.0.push(PatchOperation::Add(AddOperation {
                    path: at.clone(),
                    value: right.clone(),
                }));
                at.pop_back();
            }
        }
    }
    for key in l.keys().filter(|k| !r.contains_key(*k)) {
        at.push_back(key);
        patch
            .0
            .push(PatchOperation::Remove(RemoveOperation { path: at.clone() }));
        at.pop_back();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;

    fn json_value() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            (-3i64..3).prop_map(|n| json!(n)),
            "[a-c~/]{0,2}".prop_map(Value::String),
        ];
        leaf.prop_recursive(4, 48, 5, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
                prop::collection::btree_map("[a-d~/]{0,2}", inner, 0..5)
                    .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
    }

    /// Two related documents: the second is the first with a few subtrees replaced.
    fn related() -> impl Strategy<Value = (Value, Value)> {
        (json_value(), json_value(), json_value()).prop_map(|(a, b, c)| {
            let mut changed = a.clone();
            if let (Some(map), Value::Object(other)) = (changed.as_object_mut(), &b) {
                for (k, v) in other.iter().take(2) {
                    map.insert(k.clone(), v.clone());
                }
                if let Some(k) = map.keys().next().cloned() {
                    map.insert(k, c);
                }
            }
            (a, changed)
        })
    }

    proptest! {
        #[test]
        fn same_patch_as_json_patch((left, right) in related()) {
            prop_assert_eq!(diff(&left, &right), json_patch::diff(&left, &right));
        }

        #[test]
        fn same_patch_for_unrelated_documents(left in json_value(), right in json_value()) {
            prop_assert_eq!(diff(&left, &right), json_patch::diff(&left, &right));
        }
    }

    #[test]
    fn only_the_changed_field() {
        let left = json!({"metadata": {"name": "p", "annotations": {"a": "1"}},
                          "spec": {"containers": [{"name": "c"}]}});
        let mut right = left.clone();
        right["metadata"]["annotations"]["g/n"] = json!("x");
        right["spec"]["containers"][0]["env"] = json!([]);
        let ops = serde_json::to_value(diff(&left, &right)).unwrap();
        assert_eq!(
            ops,
            json!([
                {"op": "add", "path": "/metadata/annotations/g~1n", "value": "x"},
                {"op": "add", "path": "/spec/containers/0/env", "value": []},
            ])
        );
    }
}
