//! Routes a provider calls back: not actions, because no person's credential comes with them.
//!
//! A network provider tells us what happened by calling a URL of ours (a webhook, the end of a
//! hosted sign-in). Such a call carries no bearer credential, so it is not an action: it has no
//! scope, no MCP tool and no OpenAPI entry, and each route checks its own proof (a shared secret
//! in a header, a per-link token). The domain declares each one beside the code it feeds with
//! [`callback!`](crate::callback); the server mounts every declared route, outside the bearer
//! check, and hands it the database, the clock and the configuration: nothing of the request but
//! its headers, its query string and its body, read whole up to the server's body limit.

use crate::clock::Clock;
use crate::config::Config;
use crate::db::Db;
use crate::registry::BoxFuture;

/// What a callback route receives.
#[derive(Clone)]
pub struct CallbackCtx {
    pub db: Db,
    pub clock: Clock,
    pub config: std::sync::Arc<Config>,
}

/// One call to a callback route, read whole.
pub struct CallbackRequest {
    pub headers: http::HeaderMap,
    /// The query string, without its `?` (empty when there is none).
    pub query: String,
    pub body: axum::body::Bytes,
}

/// What a callback route answers: a status and a JSON body.
pub struct CallbackReply {
    pub status: u16,
    pub body: serde_json::Value,
}

impl CallbackReply {
    /// `{"error": {"code", "message"}}` with `status`: the shape of every error of the API.
    pub fn error(status: u16, code: &str, message: impl Into<String>) -> Self {
        Self {
            status,
            body: serde_json::json!({"error": {"code": code, "message": message.into()}}),
        }
    }

    pub fn ok(body: serde_json::Value) -> Self {
        Self { status: 200, body }
    }
}

/// A callback route: `POST` at `path`, answered by `handle`.
pub struct Callback {
    /// The full path (`/api/v1/network/webhooks/unipile`).
    pub path: &'static str,
    pub handle: fn(CallbackCtx, CallbackRequest) -> BoxFuture<'static, CallbackReply>,
}

inventory::collect!(Callback);

/// Every declared callback route.
pub fn all() -> impl Iterator<Item = &'static Callback> {
    inventory::iter::<Callback>.into_iter()
}

/// Declares a callback route: `callback!("/api/v1/...", handler)` with
/// `async fn handler(CallbackCtx, CallbackRequest) -> CallbackReply`.
#[macro_export]
macro_rules! callback {
    ($path:literal, $handler:path) => {
        $crate::__private::inventory::submit! {
            $crate::callbacks::Callback {
                path: $path,
                handle: |ctx, request| ::std::boxed::Box::pin($handler(ctx, request)),
            }
        }
    };
}
