//! Which tools a connection is offered: the toolsets it asks for, and whether it is read-only.
//!
//! A client names toolsets with `?toolsets=prospecting,outreach` on the MCP URL or an
//! `X-MCP-Toolsets` header (both count when both are sent; `all` names every toolset), and gets
//! the default ones when it names none. `/api/mcp/readonly` or `?readonly=true` offers only the
//! tools that change nothing, and refuses a call of any other. The guard reads the selection once
//! per request and refuses a bad one with 400 naming the valid names, before any JSON-RPC.
//!
//! Toolsets shape what a model is shown, not what a credential may do: a tool left out of the
//! selection can still be called by name, within the credential's scopes. Read-only is a promise
//! of the connection, so it is kept on calls too.

use std::sync::OnceLock;

use axum::http::request::Parts;

use crate::error::ApiError;
use crate::registry::Action;
use crate::toolsets::{self, Toolset};

/// The header a client names its toolsets in.
const TOOLSETS_HEADER: &str = "x-mcp-toolsets";

/// The path, under the MCP endpoint, of the read-only connection.
const READONLY_PATH: &str = "/readonly";

/// What a request asked to be offered. Small and `Copy`, so it keys the cache of `tools/list`
/// answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Selection {
    /// One bit per toolset, in the order of [`toolsets::toolsets`].
    toolsets: u64,
    pub readonly: bool,
}

impl Selection {
    /// The default toolsets, read-write: what a request that names nothing gets.
    pub fn default_set() -> Self {
        static DEFAULT: OnceLock<Selection> = OnceLock::new();
        *DEFAULT.get_or_init(|| Self::of_names(|toolset| toolset.default, false))
    }

    fn of_names(wanted: impl Fn(&Toolset) -> bool, readonly: bool) -> Self {
        let toolsets = toolsets::toolsets()
            .iter()
            .enumerate()
            .filter(|(index, toolset)| *index < 64 && wanted(toolset))
            .fold(0, |bits, (index, _)| bits | (1u64 << index));
        Self { toolsets, readonly }
    }

    /// The selection a request's URL and headers ask for, or a 400 naming what is wrong.
    pub fn of_request(parts: &Parts) -> Result<Self, ApiError> {
        let mut names: Vec<String> = Vec::new();
        let mut named = false;
        let mut readonly = parts.uri.path() == READONLY_PATH;
        for (key, value) in parts
            .uri
            .query()
            .map(|query| url::form_urlencoded::parse(query.as_bytes()).collect::<Vec<_>>())
            .unwrap_or_default()
        {
            match key.as_ref() {
                "toolsets" => {
                    named = true;
                    names.extend(split(&value));
                }
                "readonly" => {
                    readonly |= match value.as_ref() {
                        "true" | "1" => true,
                        "false" | "0" => false,
                        other => {
                            return Err(ApiError::invalid_request(format!(
                                "Invalid query parameter `readonly`: expected `true` or `false`, got `{other}`."
                            )));
                        }
                    }
                }
                _ => {}
            }
        }
        for value in parts.headers.get_all(TOOLSETS_HEADER) {
            let Ok(value) = value.to_str() else {
                return Err(ApiError::invalid_request(format!(
                    "The `X-MCP-Toolsets` header must be toolset names separated by commas; {}.",
                    valid_names()
                )));
            };
            named = true;
            names.extend(split(value));
        }
        if !named {
            return Ok(Self {
                readonly,
                ..Self::default_set()
            });
        }
        if names.is_empty() {
            return Err(ApiError::invalid_request(format!(
                "`toolsets` names no toolset; {}.",
                valid_names()
            )));
        }
        let all = toolsets::toolsets();
        if let Some(unknown) = names
            .iter()
            .find(|name| *name != "all" && !all.iter().any(|toolset| toolset.name == *name))
        {
            return Err(ApiError::invalid_request(format!(
                "Unknown toolset `{unknown}`; {}.",
                valid_names()
            )));
        }
        let every = names.iter().any(|name| name == "all");
        Ok(Self::of_names(
            |toolset| every || names.iter().any(|name| name == toolset.name),
            readonly,
        ))
    }

    /// Whether `action`'s tool is in this selection (its credential's scopes aside).
    pub fn includes(&self, action: &Action) -> bool {
        if self.readonly && !action.is_read_only() {
            return false;
        }
        let Some(name) = toolsets::toolset_of(action) else {
            return false;
        };
        toolsets::toolsets()
            .iter()
            .position(|toolset| toolset.name == name)
            .is_some_and(|index| index < 64 && self.toolsets & (1u64 << index) != 0)
    }
}

fn split(text: &str) -> impl Iterator<Item = String> + '_ {
    text.split(',')
        .map(str::trim)
        .filter(|name| !name.is_empty())
        .map(str::to_ascii_lowercase)
}

/// "the toolsets are `agents`, ... and `all`".
fn valid_names() -> String {
    let names: Vec<String> = toolsets::toolsets()
        .iter()
        .map(|toolset| format!("`{}`", toolset.name))
        .collect();
    format!(
        "the toolsets are {} (or `all` for every one)",
        names.join(", ")
    )
}
