//! What a JSON body would cost as a `serde_json::Value` tree, read off its bytes before
//! any tree is built.
//!
//! A body's size does not bound its tree: `{"a":0}` is 7 bytes and about 700 as a map
//! (a B-tree leaf node for its first key), so 3 MB of tiny objects become hundreds of MB.
//! One scan counts what the tree would allocate, so a review whose object would grow the
//! process past its share is answered (unchanged, with a warning) without being built.

/// Heap bytes of a map's first B-tree node (11 keys of `String` and values of `Value`).
const MAP_NODE: u64 = 11 * (24 + 32) + 48;
/// Each member beyond the first node's share, amortised over half-full nodes.
const MAP_MEMBER: u64 = 2 * (24 + 32);
/// Each array element: a `Value`, and as much again while the `Vec` grows.
const ARRAY_ELEMENT: u64 = 2 * 32;
/// Nesting deeper than this is refused by serde_json anyway (it stops at 128).
const MAX_DEPTH: usize = 256;

/// The estimated heap bytes of the tree `body` parses into; `u64::MAX` when it nests
/// deeper than any parser here would follow. Invalid JSON gets an estimate too (the
/// parser refuses it later).
pub fn tree_cost(body: &[u8]) -> u64 {
    // Per open container: is it a map, and has it a member yet.
    let mut stack: Vec<(bool, bool)> = Vec::with_capacity(16);
    let mut cost: u64 = 32;
    let mut in_string = false;
    let mut escaped = false;
    for &b in body {
        if in_string {
            // A string's text, as its own allocation.
            cost += 1;
            match (escaped, b) {
                (true, _) => escaped = false,
                (false, b'\\') => escaped = true,
                (false, b'"') => in_string = false,
                _ => {}
            }
            continue;
        }
        match b {
            b'"' => in_string = true,
            b'{' | b'[' => {
                if stack.len() >= MAX_DEPTH {
                    return u64::MAX;
                }
                note_value(&mut stack, &mut cost);
                stack.push((b == b'{', false));
            }
            b'}' | b']' => {
                stack.pop();
            }
            b',' => {
                if let Some(&(is_map, _)) = stack.last() {
                    cost += if is_map { MAP_MEMBER } else { ARRAY_ELEMENT };
                }
            }
            _ => {
                // The first scalar byte of a value (or of a key: counted with the map).
                if let Some(top) = stack.last_mut()
                    && !top.1
                    && !b.is_ascii_whitespace()
                    && b != b':'
                {
                    top.1 = true;
                    cost += if top.0 { MAP_NODE } else { ARRAY_ELEMENT };
                }
            }
        }
        // A key's opening quote also marks its map as not empty.
        if b == b'"'
            && let Some(top) = stack.last_mut()
            && !top.1
        {
            top.1 = true;
            cost += if top.0 { MAP_NODE } else { ARRAY_ELEMENT };
        }
    }
    cost
}

/// A container opened as a member or element: its parent is not empty.
fn note_value(stack: &mut [(bool, bool)], cost: &mut u64) {
    *cost += 32;
    if let Some(top) = stack.last_mut()
        && !top.1
    {
        top.1 = true;
        *cost += if top.0 { MAP_NODE } else { ARRAY_ELEMENT };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tiny_objects(n: usize) -> Vec<u8> {
        let mut body = b"{\"items\":[".to_vec();
        for i in 0..n {
            if i > 0 {
                body.push(b',');
            }
            body.extend_from_slice(b"{\"a\":0}");
        }
        body.extend_from_slice(b"]}");
        body
    }

    #[test]
    fn tiny_objects_cost_far_more_than_their_bytes() {
        let body = tiny_objects(10_000);
        let cost = tree_cost(&body);
        assert!(
            cost > 60 * body.len() as u64,
            "{cost} for {} bytes",
            body.len()
        );
        // Each map at least its node.
        assert!(cost >= 10_000 * MAP_NODE);
    }

    #[test]
    fn one_long_string_costs_about_its_length() {
        let text = "x".repeat(1 << 20);
        let body = format!("{{\"a\":\"{text}\"}}");
        let cost = tree_cost(body.as_bytes());
        assert!(cost < 2 * body.len() as u64, "{cost}");
        assert!(cost >= body.len() as u64 - 8);
    }

    #[test]
    fn braces_inside_strings_are_text() {
        let plain = tree_cost(br#"{"a":"xxxxxxxx"}"#);
        let braces = tree_cost(br#"{"a":"{[{[{[{["}"#);
        assert_eq!(plain, braces);
        let escaped = tree_cost(br#"{"a":"\"{[{[{["}"#);
        assert_eq!(plain, escaped);
    }

    #[test]
    fn empty_containers_cost_no_node() {
        assert_eq!(tree_cost(b"{}"), 64);
        assert_eq!(tree_cost(b"[]"), 64);
        assert!(tree_cost(b"{\"a\":1}") > MAP_NODE);
    }

    #[test]
    fn members_and_elements_add_up() {
        let one = tree_cost(br#"{"a":[1]}"#);
        let three = tree_cost(br#"{"a":[1,2,3],"b":1,"c":2}"#);
        assert_eq!(three - one, 2 * ARRAY_ELEMENT + 2 * MAP_MEMBER + 4);
    }

    #[test]
    fn nesting_past_any_parser_is_refused() {
        let deep = "[".repeat(MAX_DEPTH + 1);
        assert_eq!(tree_cost(deep.as_bytes()), u64::MAX);
        let fine = format!("{}{}", "[".repeat(100), "]".repeat(100));
        assert!(tree_cost(fine.as_bytes()) < 100 * 200);
    }

    #[test]
    fn a_real_rayjob_costs_little() {
        let pod = include_str!("../../deploy/samples/rayjob-run-a.yaml");
        let value: serde_json::Value = serde_norway::from_str(pod).unwrap();
        let body = serde_json::to_vec(&value).unwrap();
        let cost = tree_cost(&body);
        assert!(cost < 64 * 1024, "{cost}");
    }
}
