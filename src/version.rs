//! What this binary is: its version and the commit it was built from (read by the CLI's
//! `--version`, `rayshare_build_info` and the log).

/// rayshare's version, from Cargo.toml.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");

/// The git commit this binary was built from (12 hex digits), or `unknown` when it was built
/// without git, without `.git`, or without build.rs (see build.rs).
pub const REVISION: &str = match option_env!("RAYSHARE_REVISION") {
    Some(revision) => revision,
    None => "unknown",
};
