//! The docs held to the code. The generated references must match what the code renders
//! now (`RAYSHARE_UPDATE_DOCS=1 cargo test --lib docs::` rewrites them), and no page may
//! name a metric, flag, key, config key, Event reason or link target that does not exist.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use clap::CommandFactory;

use super::check::{self, cells, read};

fn updating() -> bool {
    std::env::var_os("RAYSHARE_UPDATE_DOCS").is_some()
}

/// Compares (or, updating, rewrites) the part of `page` between the `name` markers.
fn generated(page: &str, name: &str, text: &str) {
    let path = Path::new(page);
    let doc = read(path);
    let (_, now) = check::between(&doc, name)
        .unwrap_or_else(|| panic!("{page} has no <!-- {name}:start/end --> markers"));
    if now == text {
        return;
    }
    if updating() {
        let new = check::replace_between(&doc, name, text).expect("markers found above");
        std::fs::write(check::root().join(path), new).expect("the page is writable");
        return;
    }
    panic!(
        "{page} is out of date with the code (run RAYSHARE_UPDATE_DOCS=1 cargo test --lib docs::)\n\
         --- expected ---\n{text}--- in {page} ---\n{now}"
    );
}

#[test]
fn the_cli_reference_is_what_clap_says() {
    generated("docs/reference/cli.md", "cli", &super::cli_reference());
}

#[test]
fn the_metrics_reference_is_what_the_registry_exports() {
    generated(
        "docs/reference/metrics.md",
        "metrics",
        &super::metrics_reference(),
    );
}

#[test]
fn every_registered_metric_is_in_the_reference() {
    // The scrape leaves out a family without a child: `metrics()` must touch each one.
    let source = read(Path::new("src/metrics.rs"));
    let registered = source.matches("registry.register(").count()
        + source.matches("encoder.encode_descriptor(").count();
    let ours: Vec<_> = super::metrics()
        .into_iter()
        .filter(|m| m.name.starts_with("rayshare_"))
        .collect();
    assert!(registered > 20, "{registered}");
    assert_eq!(
        ours.len(),
        registered,
        "src/metrics.rs registers {registered} metrics, the reference shows {}: touch the \
         new family in docs::metrics()",
        ours.len()
    );
    assert!(ours.iter().all(|m| m.samples > 0));
}

/// The config table: key -> (default cell, meaning).
fn config_rows(doc: &str) -> BTreeMap<String, (String, String)> {
    let (_, table) = check::between(doc, "config-keys").expect("config-keys markers");
    table
        .lines()
        .skip(2)
        .filter_map(cells)
        .map(|c| {
            let key = c[0].trim_matches('`').to_string();
            (key, (c[1].clone(), c.get(2).cloned().unwrap_or_default()))
        })
        .collect()
}

#[test]
fn the_config_reference_names_every_key_with_its_default() {
    let page = "docs/reference/config.md";
    let doc = read(Path::new(page));
    let rows = config_rows(&doc);
    let keys = super::config_keys();
    let mut problems = Vec::new();
    for (key, default) in &keys {
        match rows.get(key) {
            None => problems.push(format!("{key}: no row")),
            Some((cell, _)) if *cell != format!("`{default}`") => {
                problems.push(format!("{key}: default {cell}, the code's `{default}`"))
            }
            Some((_, meaning)) if meaning.is_empty() => problems.push(format!("{key}: no meaning")),
            Some(_) => {}
        }
    }
    let known: BTreeSet<_> = keys.iter().map(|(k, _)| k.as_str()).collect();
    for key in rows.keys().filter(|k| !known.contains(k.as_str())) {
        problems.push(format!("{key}: no such key in the code"));
    }
    if !problems.is_empty() && updating() {
        let mut table = String::from("| key | default | meaning |\n|---|---|---|\n");
        for (key, default) in &keys {
            let meaning = rows.get(key).map(|(_, m)| m.as_str()).unwrap_or("");
            table += &format!("| `{key}` | `{default}` | {meaning} |\n");
        }
        let new = check::replace_between(&doc, "config-keys", &table).expect("markers");
        std::fs::write(check::root().join(page), new).expect("writable");
        return;
    }
    assert!(problems.is_empty(), "{page}:\n{}", problems.join("\n"));
}

/// What exists, for the doc-to-code check.
struct Known {
    metrics: BTreeSet<String>,
    flags: BTreeSet<String>,
    keys: BTreeSet<String>,
    config: BTreeSet<String>,
    /// The source and chart files, where `rayshare.io/` keys and Event reasons are looked up.
    code: String,
}

/// Flags of other tools the docs show (helm, kubectl, cargo, docker, KubeRay, Volcano,
/// promtool, curl, git, the test scripts). A flag named here is not rayshare's.
const FOREIGN_FLAGS: &[&str] = &[
    // helm, kubectl, docker, git
    "--set",
    "--reuse-values",
    "--create-namespace",
    "--dry-run",
    "--show-only",
    "--show-labels",
    "--since",
    "--previous",
    "--prefix",
    "--raw",
    "--as",
    "--follow",
    "--build-arg",
    "--head",
    "--short",
    "--wait",
    "--server-side",
    "--timeout",
    "--image",
    "--restart",
    "--overrides",
    "--version",
    // cargo, the benchmarks, valgrind, the chart check
    "--lib",
    "--test",
    "--bench",
    "--release",
    "--all-targets",
    "--quick",
    "--compare",
    "--instructions",
    "--flood",
    "--profile",
    "--report",
    "--toggle-collect",
    "--update",
    // KubeRay's and Volcano's controllers, Ray, Flyte's entrypoints
    "--batch-scheduler",
    "--feature-gates",
    "--inherit-owner-annotations",
    "--address",
    "--dest-dir",
    "--dest",
    "--tgz",
    "--pkl",
];

fn known() -> Known {
    let mut metrics = BTreeSet::new();
    for m in super::metrics() {
        if m.kind == "histogram" {
            for suffix in ["_bucket", "_sum", "_count"] {
                metrics.insert(format!("{}{suffix}", m.name));
            }
        }
        metrics.insert(m.name);
    }
    let mut flags: BTreeSet<String> = ["--help", "--version"].map(String::from).into();
    for sub in crate::cli::Cli::command().get_subcommands() {
        flags.extend(
            sub.get_arguments()
                .filter_map(|a| Some(format!("--{}", a.get_long()?))),
        );
    }
    let mut config: BTreeSet<String> = BTreeSet::new();
    for (key, _) in super::config_keys() {
        let mut prefix = String::new();
        for part in key.split('.') {
            prefix = if prefix.is_empty() {
                part.into()
            } else {
                format!("{prefix}.{part}")
            };
            config.insert(prefix.clone());
        }
    }
    let mut code = String::new();
    let mut dirs = vec![
        check::root().join("src"),
        check::root().join("charts/rayshare"),
    ];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).expect("readable") {
            let path = entry.expect("an entry").path();
            if path.is_dir() {
                dirs.push(path);
            } else if !path.starts_with(check::root().join("src/docs"))
                && path
                    .extension()
                    .is_some_and(|e| e == "rs" || e == "yaml" || e == "tpl")
            {
                code += &std::fs::read_to_string(&path).expect("readable");
            }
        }
    }
    let keys = check::rayshare_keys(&code)
        .into_iter()
        .map(String::from)
        .collect();
    Known {
        metrics,
        flags,
        keys,
        config,
        code,
    }
}

/// What `text` (of `page`) names that does not exist.
fn problems(page: &Path, text: &str, known: &Known) -> Vec<String> {
    let mut out = Vec::new();
    let mut say = |what: &str, name: &str| out.push(format!("{}: {what} {name}", page.display()));
    for name in check::metric_names(text) {
        if !known.metrics.contains(name) {
            say("no such metric", name);
        }
    }
    for flag in check::long_flags(text) {
        if !known.flags.contains(flag) && !FOREIGN_FLAGS.contains(&flag) {
            say("no such flag", flag);
        }
    }
    for key in check::rayshare_keys(text) {
        if !known.keys.contains(key) {
            say("no label or annotation", key);
        }
    }
    for path in check::config_paths(text) {
        let exists = match path.strip_suffix('*') {
            Some(prefix) => known.config.iter().any(|k| k.starts_with(prefix)),
            None => known.config.contains(path),
        };
        if !exists {
            say("no config key", path);
        }
    }
    let dir = page.parent().unwrap_or(Path::new(""));
    for link in check::links(text) {
        let (file, anchor) = link.split_once('#').unwrap_or((link, ""));
        let target = if file.is_empty() {
            page.to_path_buf()
        } else {
            dir.join(file)
        };
        let full = check::root().join(&target);
        if !full.exists() {
            say("broken link", link);
        } else if !anchor.is_empty() && target.extension().is_some_and(|e| e == "md") {
            let doc = std::fs::read_to_string(&full).expect("readable");
            if !check::anchors(&doc).iter().any(|a| a == anchor) {
                say("no such anchor", link);
            }
        }
    }
    out
}

#[test]
fn the_docs_name_only_what_exists() {
    let known = known();
    let problems: Vec<String> = check::pages()
        .iter()
        .flat_map(|page| problems(page, &read(page), &known))
        .collect();
    assert!(problems.is_empty(), "\n{}", problems.join("\n"));
}

#[test]
fn a_planted_mismatch_fails_the_check() {
    let known = known();
    let page = Path::new("docs/operating.md");
    let text = "Watch `rayshare_admission_requests_total` and `rayshare_admision_requests_total`; \
        run `rayshare serve --max-in-flight 8 --max-inflight 8`; label `rayshare.io/cluster` \
        and `rayshare.io/clutser`; set `reclaim.idleTtlSeconds`, not `admission.maxInFlight`; \
        see [ops](operating.md#upgrade) and [gone](operating.md#no-such-section), [x](nope.md).";
    let found = problems(page, text, &known);
    let expected = [
        "no such metric rayshare_admision_requests_total",
        "no such flag --max-inflight",
        "no label or annotation rayshare.io/clutser",
        "no config key admission.maxInFlight",
        "no such anchor operating.md#no-such-section",
        "broken link nope.md",
    ];
    let expected: Vec<String> = expected
        .iter()
        .map(|e| format!("docs/operating.md: {e}"))
        .collect();
    assert_eq!(found, expected);
}

#[test]
fn every_page_is_reachable_from_the_readme() {
    let mut seen: BTreeSet<std::path::PathBuf> = BTreeSet::new();
    let mut todo = vec![std::path::PathBuf::from("README.md")];
    while let Some(page) = todo.pop() {
        if !seen.insert(page.clone()) {
            continue;
        }
        let dir = page.parent().unwrap_or(Path::new("")).to_path_buf();
        for link in check::links(&read(&page)) {
            let file = link.split('#').next().unwrap_or("");
            let target = normalize(&dir.join(file));
            if file.ends_with(".md") && check::root().join(&target).exists() {
                todo.push(target);
            }
        }
    }
    let unreached: Vec<_> = check::pages()
        .into_iter()
        .filter(|p| !seen.contains(p))
        .collect();
    assert!(
        unreached.is_empty(),
        "not linked from the README or a page it links: {unreached:?}"
    );
}

/// `a/../b` as `b`.
fn normalize(path: &Path) -> std::path::PathBuf {
    let mut out = std::path::PathBuf::new();
    for part in path.components() {
        match part {
            std::path::Component::ParentDir => {
                out.pop();
            }
            std::path::Component::CurDir => {}
            other => out.push(other),
        }
    }
    out
}

#[test]
fn the_event_reasons_in_the_docs_are_recorded_by_the_code() {
    let page = "docs/reference/events.md";
    let doc = read(Path::new(page));
    let code = known().code;
    let mut reasons = Vec::new();
    for row in doc.lines().filter_map(cells).filter(|c| c.len() == 3) {
        if matches!(row[0].as_str(), "RayJob" | "RayCluster" | "Pod") {
            reasons.extend(row[1].split('`').skip(1).step_by(2).map(String::from));
        }
    }
    assert!(reasons.len() >= 10, "{reasons:?}");
    for reason in reasons {
        assert!(
            code.contains(&format!("\"{reason}\"")),
            "{page}: no Event reason {reason} in src/"
        );
    }
}
