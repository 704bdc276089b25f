//! The image this replica runs under (`serve --image`, which the chart sets), judged once
//! at start by `domain::build`: logged there, exported as `rayshare_image_placeholder`.

use std::sync::OnceLock;

use crate::domain::build::{self, Image};

/// The version the release workflow built this binary as (`RAYSHARE_RELEASE` at build
/// time), if it did.
pub const RELEASE: Option<&str> = option_env!("RAYSHARE_RELEASE");

static NOTED: OnceLock<(String, bool)> = OnceLock::new();

/// Judges `image` against this binary, remembers it for the metric, and logs a warning
/// when it is a placeholder. Call once, before the metrics are made.
pub fn note(image: Option<&str>) -> Image {
    let verdict = build::judge(image, crate::version::VERSION, RELEASE);
    let shown = image.unwrap_or("unknown").to_string();
    match &verdict {
        Image::Placeholder(why) => tracing::warn!(
            image = %shown,
            reason = %why,
            "placeholder image: this build runs under the release's image name; the version's upgrade notes and rollbacks do not describe it (build your own image under your own name: image.repository, image.tag)"
        ),
        Image::Unknown => {}
        Image::Own | Image::Release => tracing::info!(image = %shown, "image"),
    }
    let _ = NOTED.set((shown, matches!(verdict, Image::Placeholder(_))));
    verdict
}

/// The image as noted (`unknown` when not told) and whether it is a placeholder.
pub fn noted() -> (String, bool) {
    NOTED
        .get()
        .cloned()
        .unwrap_or_else(|| ("unknown".into(), false))
}
