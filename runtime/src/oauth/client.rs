//! What a client is, wherever its metadata came from.
//!
//! A client is either registered here (RFC 7591, a `cli_...` id and a row in `oauth_clients`) or
//! identified by the https URL of its metadata document (fetched by `cimd.rs`). Both kinds of
//! metadata go through the one [`validate_metadata`], so a document cannot get away with what a
//! registration could not: public clients only (`token_endpoint_auth_method` `none`), the code
//! grant, and redirect URIs that pass `redirect::check_registrable`.

use serde_json::{Map, Value, json};
use sqlx::Row;

use super::cimd::Fetcher;
use super::redirect;
use crate::error::ApiError;
use crate::ids;
use crate::scope::Scope;
use crate::state::AppState;

/// At most this many redirect URIs per client; real clients have one or two.
const MAX_REDIRECT_URIS: usize = 20;
/// The longest client name shown on the consent page.
const MAX_NAME_CHARS: usize = 200;

/// Where a client's metadata came from; stored on the grant as `client_source`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    Registration,
    MetadataDocument,
}

impl Source {
    pub fn as_str(self) -> &'static str {
        match self {
            Source::Registration => "registration",
            Source::MetadataDocument => "metadata_document",
        }
    }
}

/// A client as the authorization endpoint needs it.
#[derive(Debug, Clone)]
pub struct Client {
    pub client_id: String,
    pub name: String,
    pub redirect_uris: Vec<String>,
    pub source: Source,
}

/// Metadata that passed validation, with the defaults RFC 7591 section 2 names filled in.
#[derive(Debug, Clone)]
pub struct Validated {
    pub metadata: Map<String, Value>,
    pub client_name: Option<String>,
    pub redirect_uris: Vec<String>,
}

/// Why metadata was refused: `invalid_redirect_uri` or `invalid_client_metadata` (RFC 7591 3.2.2).
#[derive(Debug, Clone)]
pub struct MetadataError {
    pub error: &'static str,
    pub description: String,
}

fn invalid(description: impl Into<String>) -> MetadataError {
    MetadataError {
        error: "invalid_client_metadata",
        description: description.into(),
    }
}

fn invalid_redirect(description: impl Into<String>) -> MetadataError {
    MetadataError {
        error: "invalid_redirect_uri",
        description: description.into(),
    }
}

/// A list of strings, or the sentence saying why the field is not one.
fn string_list(value: &Value, field: &str) -> Result<Vec<String>, String> {
    let Some(items) = value.as_array() else {
        return Err(format!("`{field}` must be an array of strings"));
    };
    items
        .iter()
        .map(|item| {
            item.as_str()
                .map(str::to_owned)
                .ok_or_else(|| format!("`{field}` must be an array of strings"))
        })
        .collect()
}

/// Checks client metadata, from a registration request or a metadata document.
pub fn validate_metadata(document: &Value) -> Result<Validated, MetadataError> {
    let Some(object) = document.as_object() else {
        return Err(invalid("the client metadata must be a JSON object"));
    };
    let mut metadata = object.clone();

    let Some(redirect_uris) = object.get("redirect_uris") else {
        return Err(invalid_redirect("`redirect_uris` is required"));
    };
    let redirect_uris = string_list(redirect_uris, "redirect_uris").map_err(invalid_redirect)?;
    if redirect_uris.is_empty() {
        return Err(invalid_redirect(
            "`redirect_uris` must name at least one URI",
        ));
    }
    if redirect_uris.len() > MAX_REDIRECT_URIS {
        return Err(invalid_redirect(format!(
            "`redirect_uris` may name at most {MAX_REDIRECT_URIS} URIs"
        )));
    }
    for uri in &redirect_uris {
        redirect::check_registrable(uri).map_err(invalid_redirect)?;
    }

    match object.get("token_endpoint_auth_method") {
        None => {
            metadata.insert("token_endpoint_auth_method".into(), json!("none"));
        }
        Some(Value::String(method)) if method == "none" => {}
        Some(other) => {
            return Err(invalid(format!(
                "`token_endpoint_auth_method` {other} is not supported: only public clients (`none`) are, with PKCE"
            )));
        }
    }

    match object.get("grant_types") {
        None => {
            metadata.insert("grant_types".into(), json!(["authorization_code"]));
        }
        Some(value) => {
            let grant_types = string_list(value, "grant_types").map_err(invalid)?;
            if let Some(other) = grant_types
                .iter()
                .find(|grant| !matches!(grant.as_str(), "authorization_code" | "refresh_token"))
            {
                return Err(invalid(format!(
                    "grant type `{other}` is not supported: expected `authorization_code` and optionally `refresh_token`"
                )));
            }
            if !grant_types
                .iter()
                .any(|grant| grant == "authorization_code")
            {
                return Err(invalid("`grant_types` must include `authorization_code`"));
            }
        }
    }

    match object.get("response_types") {
        None => {
            metadata.insert("response_types".into(), json!(["code"]));
        }
        Some(value) => {
            let response_types = string_list(value, "response_types").map_err(invalid)?;
            if response_types.is_empty() || response_types.iter().any(|kind| kind != "code") {
                return Err(invalid("`response_types` must be `[\"code\"]`"));
            }
        }
    }

    // OpenID Connect Registration's `application_type`, which the MCP specification asks clients
    // to send: `native` apps (desktop, CLI, anything on this computer) may receive the code on a
    // loopback address; a `web` app runs on a remote host and cannot, so its loopback redirect URI
    // is a mistake or an attempt to catch codes meant for a local app. Absent: no constraint
    // beyond the redirect rules above (this server is not an OpenID provider).
    match object.get("application_type") {
        None => {}
        Some(Value::String(kind)) if kind == "native" => {}
        Some(Value::String(kind)) if kind == "web" => {
            if let Some(uri) = redirect_uris
                .iter()
                .find(|uri| redirect::is_loopback_uri(uri))
            {
                return Err(invalid_redirect(format!(
                    "`{uri}` is a loopback address, which a `web` application cannot receive on; register it as `\"application_type\": \"native\"`"
                )));
            }
        }
        Some(other) => {
            return Err(invalid(format!(
                "`application_type` {other} is not one of `native` and `web`"
            )));
        }
    }

    let client_name = match object.get("client_name") {
        None => None,
        Some(Value::String(name)) => {
            let name = name.trim();
            if name.is_empty() || name.chars().count() > MAX_NAME_CHARS {
                return Err(invalid(format!(
                    "`client_name` must be 1 to {MAX_NAME_CHARS} characters"
                )));
            }
            Some(name.to_owned())
        }
        Some(_) => return Err(invalid("`client_name` must be a string")),
    };

    if let Some(scope) = object.get("scope") {
        let Some(scope) = scope.as_str() else {
            return Err(invalid("`scope` must be a space-separated string"));
        };
        if let Some(unknown) = scope
            .split(' ')
            .find(|s| !s.is_empty() && Scope::parse(s).is_none())
        {
            return Err(invalid(format!(
                "unknown scope `{unknown}`: expected some of `read`, `write`, `send`"
            )));
        }
    }

    for field in [
        "client_uri",
        "logo_uri",
        "tos_uri",
        "policy_uri",
        "software_id",
        "software_version",
    ] {
        if object.get(field).is_some_and(|value| !value.is_string()) {
            return Err(invalid(format!("`{field}` must be a string")));
        }
    }

    Ok(Validated {
        metadata,
        client_name,
        redirect_uris,
    })
}

/// Whether a `client_id` names a metadata document rather than a registration.
pub fn is_document_url(client_id: &str) -> bool {
    client_id.starts_with("https://") || client_id.starts_with("http://")
}

/// Finds a client by id. The outer error is a fault on our side; the inner one a sentence saying
/// why this client id cannot be used.
pub async fn resolve(
    state: &AppState,
    fetcher: &Fetcher,
    client_id: &str,
) -> Result<Result<Client, String>, ApiError> {
    if is_document_url(client_id) {
        return Ok(fetcher.fetch(state, client_id).await);
    }
    if !ids::is_id("cli", client_id) {
        return Ok(Err(format!(
            "`{client_id}` is not a client of this server: register with POST /oauth/register, or use the https URL of a client metadata document"
        )));
    }
    let row =
        sqlx::query("select client_name, redirect_uris from oauth_clients where client_id = $1")
            .bind(client_id)
            .fetch_optional(state.db.pool())
            .await?;
    let Some(row) = row else {
        return Ok(Err(format!(
            "no client `{client_id}` is registered with this server"
        )));
    };
    let redirect_uris: Vec<String> =
        serde_json::from_str(&row.try_get::<String, _>("redirect_uris")?)
            .map_err(ApiError::internal)?;
    Ok(Ok(Client {
        client_id: client_id.to_owned(),
        name: row.try_get("client_name")?,
        redirect_uris,
        source: Source::Registration,
    }))
}

/// What the sign-in page calls the app behind an authorization request, before anyone is signed
/// in: a registered client's name from our database, or the host of a metadata document URL. The
/// document itself is not fetched (no request leaves this server for a browser without a session,
/// RFC 9700 section 4.11.2); the consent page after sign-in shows the name it declares. `None`
/// when the id names no client.
pub async fn name_before_sign_in(
    state: &AppState,
    client_id: &str,
) -> Result<Option<String>, ApiError> {
    if is_document_url(client_id) {
        return Ok(url::Url::parse(client_id)
            .ok()
            .and_then(|url| url.host_str().map(|host| format!("the app at {host}"))));
    }
    if !ids::is_id("cli", client_id) {
        return Ok(None);
    }
    Ok(
        sqlx::query_scalar("select client_name from oauth_clients where client_id = $1")
            .bind(client_id)
            .fetch_optional(state.db.pool())
            .await?,
    )
}

/// Whether a registered client id exists (the token and revocation endpoints' client check).
pub async fn is_registered(state: &AppState, client_id: &str) -> Result<bool, ApiError> {
    if !ids::is_id("cli", client_id) {
        return Ok(false);
    }
    let found: Option<String> =
        sqlx::query_scalar("select client_id from oauth_clients where client_id = $1")
            .bind(client_id)
            .fetch_optional(state.db.pool())
            .await?;
    Ok(found.is_some())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_filled_and_public_clients_only() {
        let valid =
            validate_metadata(&json!({"redirect_uris": ["https://a.example/cb"]})).expect("valid");
        assert_eq!(valid.metadata["token_endpoint_auth_method"], json!("none"));
        assert_eq!(valid.metadata["grant_types"], json!(["authorization_code"]));
        let secret = validate_metadata(&json!({
            "redirect_uris": ["https://a.example/cb"],
            "token_endpoint_auth_method": "client_secret_basic"
        }));
        assert_eq!(
            secret.map(|_| ()).unwrap_err().error,
            "invalid_client_metadata"
        );
        let missing = validate_metadata(&json!({"client_name": "x"}));
        assert_eq!(
            missing.map(|_| ()).unwrap_err().error,
            "invalid_redirect_uri"
        );
    }
}
