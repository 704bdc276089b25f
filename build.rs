//! Exports the git commit rayshare is built from as `RAYSHARE_REVISION` (12 hex digits), for
//! `rayshare --version` and the `rayshare_build_info` metric. A build without git or without
//! a `.git` (a source tarball, a container build context) gets `unknown`: this never fails
//! the build. `RAYSHARE_REVISION` set in the build's environment wins (e.g. an image build
//! that knows its commit but has no `.git`).

use std::path::Path;
use std::process::Command;

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed=RAYSHARE_REVISION");
    // Rebuild when HEAD moves: a checkout changes HEAD, a commit changes a ref.
    for path in [".git/HEAD", ".git/refs", ".git/packed-refs"] {
        if Path::new(path).exists() {
            println!("cargo:rerun-if-changed={path}");
        }
    }
    let revision = std::env::var("RAYSHARE_REVISION")
        .ok()
        .map(|r| r.trim().to_string())
        .filter(|r| !r.is_empty() && !r.chars().any(char::is_control))
        .or_else(git_revision)
        .unwrap_or_else(|| "unknown".to_string());
    println!("cargo:rustc-env=RAYSHARE_REVISION={revision}");
}

/// HEAD of the repository this package is the root of; not that of a repository that
/// merely contains an unpacked source tree.
fn git_revision() -> Option<String> {
    if !Path::new(".git").exists() {
        return None;
    }
    let out = Command::new("git")
        .args(["rev-parse", "--short=12", "HEAD"])
        .output()
        .ok()?;
    let text = String::from_utf8(out.stdout).ok()?;
    let revision = text.trim();
    let hex = !revision.is_empty() && revision.chars().all(|c| c.is_ascii_hexdigit());
    (out.status.success() && hex).then(|| revision.to_string())
}
