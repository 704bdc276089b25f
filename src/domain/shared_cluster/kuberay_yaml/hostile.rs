//! Runtime envs a hostile tenant may write, each past one of [`read`](super::read)'s
//! bounds: the unit tests, the fuzzer's seeds, the benchmark's worst cases and the
//! end-to-end test all use these.

use super::{MAX_TEXT_BYTES, MAX_TEXT_NODES};

/// `(name, text)` pairs.
pub fn runtime_envs() -> Vec<(&'static str, String)> {
    vec![
        // Overflowed yaml-rust2's recursive loader (a stack overflow aborts the process).
        (
            "deep block sequence",
            format!("pip:\n  {}x\n", "- ".repeat(40_000)),
        ),
        (
            "deep block mapping",
            (0..2_000)
                .map(|i| format!("{}k:\n", " ".repeat(i)))
                .collect(),
        ),
        (
            "deep flow sequence",
            format!("a: {}{}\n", "[".repeat(120), "]".repeat(120)),
        ),
        // Merged empty mappings were not counted: 16^9 merges from about 1 KiB.
        ("merge bomb", merge_bomb(9, 16)),
        ("alias bomb", alias_bomb(9, 10, "x")),
        ("string bomb", alias_bomb(4, 10, &"y".repeat(10_000))),
        (
            "alias chain",
            (1..70).fold("a0: &a0 x\n".to_string(), |t, i| {
                format!("{t}a{i}: &a{i} [*a{}]\n", i - 1)
            }),
        ),
        (
            "long text",
            format!("pip: [{}]\n", "p,".repeat(MAX_TEXT_BYTES / 2)),
        ),
        (
            "many nodes",
            format!("pip: [{}]\n", "p,".repeat(MAX_TEXT_NODES)),
        ),
    ]
}

/// The costliest texts still within every bound: the benchmark's worst accepted cases.
pub fn largest_accepted() -> Vec<(&'static str, String)> {
    let most_nodes = MAX_TEXT_NODES - 10;
    vec![
        (
            "most nodes",
            format!("pip:\n{}", "- p\n".repeat(most_nodes)),
        ),
        (
            "longest scalar",
            format!("pip: {}\n", "word ".repeat((MAX_TEXT_BYTES - 64) / 5)),
        ),
        // 7 x 7 x 7 x 7 leaves, with their lists and aliases: near the expansion bound.
        ("widest expansion", alias_bomb(3, 7, "x")),
    ]
}

/// `<<: [*prev x width]` over `levels` levels of (empty) mappings.
fn merge_bomb(levels: usize, width: usize) -> String {
    let mut text = String::from("a0: &a0 {}\n");
    for i in 1..=levels {
        let prev = vec![format!("*a{}", i - 1); width].join(", ");
        text.push_str(&format!("a{i}: &a{i} {{<<: [{prev}]}}\n"));
    }
    text + "env_vars: {}\n"
}

/// `levels` levels of lists of `width` aliases to the level below; `leaf` at the bottom.
fn alias_bomb(levels: usize, width: usize, leaf: &str) -> String {
    let mut text = format!("a0: &a0 [{}]\n", vec![leaf; width].join(", "));
    for i in 1..=levels {
        let prev = vec![format!("*a{}", i - 1); width].join(", ");
        text.push_str(&format!("a{i}: &a{i} [{prev}]\n"));
    }
    text
}
