//! What the fuzzer does to an input: JSON edits of a corpus object, then byte-level damage
//! to the serialised review.

use proptest::prelude::*;
use serde_json::{Value, json};

/// One JSON edit: a value anywhere in the tree replaced by something odd.
#[derive(Debug, Clone)]
pub enum Edit {
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

pub fn edit() -> impl Strategy<Value = Edit> {
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

pub fn apply(object: &mut Value, edit: &Edit) {
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
pub enum Damage {
    None,
    Truncate(usize),
    Flip(usize, u8),
    Insert(usize, Vec<u8>),
}

pub fn damage() -> impl Strategy<Value = Damage> {
    prop_oneof![
        6 => Just(Damage::None),
        1 => any::<usize>().prop_map(Damage::Truncate),
        2 => (any::<usize>(), any::<u8>()).prop_map(|(i, b)| Damage::Flip(i, b)),
        2 => (any::<usize>(), prop::collection::vec(
            prop::sample::select(b"{}[]\",:\\0ue-. ".to_vec()), 1..64))
            .prop_map(|(i, b)| Damage::Insert(i, b)),
    ]
}

pub fn damaged(mut body: Vec<u8>, damage: &Damage) -> Vec<u8> {
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
