//! The stylesheets, the icon and the one script, compiled into the binary so a deployment is one file and
//! the pages load nothing from another origin.
//!
//! The names carry no content hash, so the cache lifetime is an hour: long enough to spare
//! repeated downloads while someone works through the settings, short enough that a new release's
//! styles arrive the same day.

use axum::http::header;
use axum::response::{IntoResponse, Response};

const STYLESHEET: &str = include_str!("../../assets/app.css");
const SCRIPT: &str = include_str!("../../assets/app.js");
const FAVICON: &str = include_str!("../../assets/favicon.svg");
/// The API reference's stylesheet, served here so the docs page needs no inline style.
const DOCS_STYLESHEET: &str = include_str!("../docs.css");
const CACHE: &str = "public, max-age=3600";

pub async fn stylesheet() -> Response {
    (
        [
            (header::CONTENT_TYPE, "text/css; charset=utf-8"),
            (header::CACHE_CONTROL, CACHE),
            (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
        ],
        STYLESHEET,
    )
        .into_response()
}

pub async fn script() -> Response {
    (
        [
            (header::CONTENT_TYPE, "text/javascript; charset=utf-8"),
            (header::CACHE_CONTROL, CACHE),
            (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
        ],
        SCRIPT,
    )
        .into_response()
}

pub async fn docs_stylesheet() -> Response {
    (
        [
            (header::CONTENT_TYPE, "text/css; charset=utf-8"),
            (header::CACHE_CONTROL, CACHE),
            (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
        ],
        DOCS_STYLESHEET,
    )
        .into_response()
}

/// The icon, also at `/favicon.ico` for the browsers that ask there before reading the page.
pub async fn favicon() -> Response {
    (
        [
            (header::CONTENT_TYPE, "image/svg+xml"),
            (header::CACHE_CONTROL, CACHE),
            (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
        ],
        FAVICON,
    )
        .into_response()
}
