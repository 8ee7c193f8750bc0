//! The stylesheet and the one script, compiled into the binary so a deployment is one file and
//! the pages load nothing from another origin.
//!
//! The names carry no content hash, so the cache lifetime is an hour: long enough to spare
//! repeated downloads while someone works through the settings, short enough that a new release's
//! styles arrive the same day.

use axum::http::header;
use axum::response::{IntoResponse, Response};

const STYLESHEET: &str = include_str!("../../assets/app.css");
const SCRIPT: &str = include_str!("../../assets/app.js");
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
