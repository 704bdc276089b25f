//! What the docs name, read out of their text: metric names, flags, rayshare's label and
//! annotation keys, config keys, links; and the parts of a page between markers.

use std::path::{Path, PathBuf};

/// The repository's root (where Cargo.toml is).
pub fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The pages an operator reads: README.md, ARCHITECTURE.md, docs/**/*.md and the chart's
/// README, as paths relative to the root.
pub fn pages() -> Vec<PathBuf> {
    let mut out = vec![
        PathBuf::from("README.md"),
        PathBuf::from("ARCHITECTURE.md"),
        PathBuf::from("charts/rayshare/README.md"),
    ];
    let mut dirs = vec![PathBuf::from("docs")];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(root().join(&dir)).expect("docs/ is readable") {
            let name = entry.expect("a directory entry").file_name();
            let path = dir.join(name);
            if root().join(&path).is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "md") {
                out.push(path);
            }
        }
    }
    out.sort();
    out
}

pub fn read(path: &Path) -> String {
    std::fs::read_to_string(root().join(path)).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn is_word(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// Each occurrence of a word starting with `prefix` (not inside a longer word), extended
/// while `more` holds.
fn words<'a>(text: &'a str, prefix: &str, more: fn(char) -> bool) -> Vec<&'a str> {
    let mut out = Vec::new();
    for (at, _) in text.match_indices(prefix) {
        let before = text[..at].chars().next_back();
        if before.is_some_and(|c| is_word(c) || c == '-' || c == '.' || c == '/') {
            continue;
        }
        let rest = &text[at + prefix.len()..];
        let len = rest.find(|c: char| !more(c)).unwrap_or(rest.len());
        out.push(&text[at..at + prefix.len() + len]);
    }
    out
}

/// `rayshare_*` and `process_*` metric names; not a bare prefix (`process_*`) nor a
/// file (`process_metrics.rs`).
pub fn metric_names(text: &str) -> Vec<&str> {
    let mut out = words(text, "rayshare_", is_word);
    out.extend(words(text, "process_", is_word));
    out.retain(|name| {
        let at = name.as_ptr() as usize - text.as_ptr() as usize + name.len();
        !name.ends_with('_') && !text[at..].starts_with(".rs")
    });
    out
}

/// `--long-flag`s.
pub fn long_flags(text: &str) -> Vec<&str> {
    words(text, "--", |c| {
        c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-'
    })
    .into_iter()
    .filter(|f| f.len() > 2 && f.as_bytes()[2].is_ascii_lowercase())
    .map(|f| f.trim_end_matches('-'))
    .collect()
}

/// `rayshare.io/...` label and annotation keys.
pub fn rayshare_keys(text: &str) -> Vec<&str> {
    words(text, "rayshare.io/", |c| {
        c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-'
    })
    .into_iter()
    .map(|k| k.trim_end_matches('-'))
    .filter(|k| k.len() > "rayshare.io/".len())
    .collect()
}

/// Config keys as the docs write them (`reclaim.idleTtlSeconds`,
/// `config.sharedClusters.stopJobs`), without `config.`; file names (`indices.rs`) skipped;
/// a key followed by `*` (`sharedClusters.runScoped*`) keeps the `*`.
pub fn config_paths(text: &str) -> Vec<&str> {
    let mut out = Vec::new();
    for section in [
        "sharedClusters.",
        "podGroups.",
        "indices.",
        "reclaim.",
        "admission.",
    ] {
        for path in words(text, section, |c| c.is_ascii_alphanumeric() || c == '.') {
            let path = path.trim_end_matches('.');
            let last = path.rsplit('.').next().unwrap_or(path);
            let file = ["rs", "md", "yaml", "json", "go", "sh"].contains(&last);
            let at = path.as_ptr() as usize - text.as_ptr() as usize + path.len();
            let glob = text[at..].starts_with('*');
            if path.len() > section.len() && !file && last.starts_with(|c: char| c.is_lowercase()) {
                out.push(if glob {
                    &text[at - path.len()..=at]
                } else {
                    path
                });
            }
        }
    }
    out
}

/// Relative links of a page (`[text](target)`), without web and mail links.
pub fn links(text: &str) -> Vec<&str> {
    text.match_indices("](")
        .filter_map(|(at, _)| {
            let rest = &text[at + 2..];
            let target = &rest[..rest.find(')')?];
            let web = ["http://", "https://", "mailto:"]
                .iter()
                .any(|s| target.starts_with(s));
            (!web && !target.contains(' ')).then_some(target)
        })
        .collect()
}

/// The anchors of a page's headings, as GitHub makes them.
pub fn anchors(text: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut fenced = false;
    for line in text.lines() {
        if line.starts_with("```") {
            fenced = !fenced;
        }
        let Some(heading) = line.strip_prefix('#') else {
            continue;
        };
        if fenced {
            continue;
        }
        let heading = heading.trim_start_matches('#').trim();
        let slug: String = heading
            .to_lowercase()
            .chars()
            .filter(|&c| c.is_alphanumeric() || c == ' ' || c == '-' || c == '_')
            .map(|c| if c == ' ' { '-' } else { c })
            .collect();
        let seen = out.iter().filter(|a| **a == slug).count();
        out.push(if seen == 0 {
            slug
        } else {
            format!("{slug}-{seen}")
        });
    }
    out
}

/// The text between `<!-- NAME:start -->` and `<!-- NAME:end -->`, and where it starts.
pub fn between<'a>(text: &'a str, name: &str) -> Option<(usize, &'a str)> {
    let start = format!("<!-- {name}:start -->\n");
    let end = format!("<!-- {name}:end -->");
    let from = text.find(&start)? + start.len();
    let to = from + text[from..].find(&end)?;
    Some((from, &text[from..to]))
}

/// `text` with what is between the markers replaced by `generated`.
pub fn replace_between(text: &str, name: &str, generated: &str) -> Option<String> {
    let (from, old) = between(text, name)?;
    Some(format!(
        "{}{generated}{}",
        &text[..from],
        &text[from + old.len()..]
    ))
}

/// The cells of a markdown table row.
pub fn cells(row: &str) -> Option<Vec<String>> {
    let inner = row.trim().strip_prefix('|')?.strip_suffix('|')?;
    let mut out = vec![String::new()];
    let mut chars = inner.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\\' if chars.peek() == Some(&'|') => {
                out.last_mut().unwrap().push(chars.next().unwrap())
            }
            '|' => out.push(String::new()),
            c => out.last_mut().unwrap().push(c),
        }
    }
    Some(out.into_iter().map(|c| c.trim().to_string()).collect())
}
