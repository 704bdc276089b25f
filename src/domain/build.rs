//! Whether the image a replica runs under is a placeholder (pure; `serve` logs it and
//! exports `rayshare_image_placeholder`, `rayshare check` reports it).
//!
//! The chart's (and the plain manifests') default image is the release's:
//! [`RELEASE_REPOSITORY`] at the chart's version, pushed by the release workflow, which
//! builds the binary with `RAYSHARE_RELEASE=<version>`. That name is a placeholder, not
//! the image that runs, when something else runs under it: a build from a checkout
//! (loaded or pushed under the release's name, as `kind load` invites), or a binary of
//! another version than the tag says. Then the version's upgrade notes and rollbacks do
//! not describe what runs. A pod whose image cannot be pulled runs no binary at all: only
//! `rayshare check` (the pods' waiting reasons) can tell that one.

/// Where the release workflow pushes the image (`.github/workflows/release.yml`).
pub const RELEASE_REPOSITORY: &str = "ghcr.io/rayshare/rayshare";

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Image {
    /// Not told which image (run outside the chart): nothing to compare.
    Unknown,
    /// An image of the operator's own naming.
    Own,
    /// The release's image, and this binary is that release's build.
    Release,
    /// The release's name on something else; why.
    Placeholder(String),
}

/// `image`: the reference the replica was deployed from (the chart's `RAYSHARE_IMAGE`);
/// `version`: this binary's; `release`: the version the release workflow built it as, if
/// it did.
pub fn judge(image: Option<&str>, version: &str, release: Option<&str>) -> Image {
    let Some(image) = image.map(str::trim).filter(|i| !i.is_empty()) else {
        return Image::Unknown;
    };
    let (named, digest) = match image.split_once('@') {
        Some((named, digest)) => (named, Some(digest)),
        None => (image, None),
    };
    // A tag follows the last ':' after the last '/' (a registry's port comes before it).
    let slash = named.rfind('/').map_or(0, |i| i + 1);
    let (repository, tag) = match named[slash..].rfind(':') {
        Some(colon) => (&named[..slash + colon], Some(&named[slash + colon + 1..])),
        None => (named, None),
    };
    if repository != RELEASE_REPOSITORY {
        return Image::Own;
    }
    if let Some(tag) = tag.filter(|_| digest.is_none())
        && tag != version
    {
        return Image::Placeholder(format!(
            "the tag says {tag} but the binary is version {version}"
        ));
    }
    if release != Some(version) {
        return Image::Placeholder(format!(
            "the binary (version {version}) was built from a checkout, not by the release workflow"
        ));
    }
    Image::Release
}

#[cfg(test)]
mod tests {
    use rstest::rstest;

    use super::*;

    #[rstest]
    #[case::not_told(None, Some("0.1.0"), "unknown")]
    #[case::empty(Some(" "), Some("0.1.0"), "unknown")]
    #[case::own_image(Some("registry.example/rayshare:dev"), None, "own")]
    #[case::own_with_port(Some("localhost:5000/rayshare:0.1.0"), None, "own")]
    #[case::lookalike(Some("ghcr.io/rayshare/rayshare-fork:0.1.0"), None, "own")]
    #[case::the_release(Some("ghcr.io/rayshare/rayshare:0.1.0"), Some("0.1.0"), "release")]
    #[case::release_by_digest(
        Some("ghcr.io/rayshare/rayshare@sha256:abc"),
        Some("0.1.0"),
        "release"
    )]
    #[case::checkout_build(
        Some("ghcr.io/rayshare/rayshare:0.1.0"),
        None,
        "placeholder: the binary (version 0.1.0) was built from a checkout"
    )]
    #[case::checkout_by_digest(
        Some("ghcr.io/rayshare/rayshare@sha256:abc"),
        None,
        "placeholder: the binary (version 0.1.0) was built from a checkout"
    )]
    #[case::other_version(
        Some("ghcr.io/rayshare/rayshare:0.2.0"),
        Some("0.1.0"),
        "placeholder: the tag says 0.2.0"
    )]
    #[case::latest(
        Some("ghcr.io/rayshare/rayshare:latest"),
        Some("0.1.0"),
        "placeholder: the tag says latest"
    )]
    #[case::release_of_another_version(
        Some("ghcr.io/rayshare/rayshare:0.1.0"),
        Some("0.0.9"),
        "placeholder: the binary (version 0.1.0) was built from a checkout"
    )]
    fn judges_the_image(
        #[case] image: Option<&str>,
        #[case] release: Option<&str>,
        #[case] expected: &str,
    ) {
        let said = match judge(image, "0.1.0", release) {
            Image::Unknown => "unknown".to_string(),
            Image::Own => "own".into(),
            Image::Release => "release".into(),
            Image::Placeholder(why) => format!("placeholder: {why}"),
        };
        assert!(said.starts_with(expected), "{said}");
    }
}
