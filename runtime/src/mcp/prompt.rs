//! The declared prompts ([`crate::prompts`]) in rmcp's types: `prompts/list` entries, and a
//! `prompts/get` rendered for the caller's scope. A refusal (an unknown prompt, a missing,
//! unknown or non-text argument) is a JSON-RPC -32602 whose message names what to send instead.

use std::collections::BTreeMap;

use rmcp::ErrorData as McpError;
use rmcp::model::{
    GetPromptRequestParams, GetPromptResult, Prompt, PromptArgument, PromptMessage, Role,
};
use serde_json::Value;

use crate::prompts;
use crate::scope::Scope;

/// A declared prompt as `prompts/list` shows it.
pub(super) fn listed(prompt: &prompts::Prompt) -> Prompt {
    let arguments = prompt
        .arguments
        .iter()
        .map(|argument| {
            PromptArgument::new(argument.name)
                .with_description(argument.description)
                .with_required(argument.required())
        })
        .collect();
    Prompt::new(prompt.name, Some(prompt.description), Some(arguments)).with_title(prompt.title)
}

/// `prompts/get`: the prompt's text with the request's arguments, as one user message.
pub(super) fn rendered(
    scope: Scope,
    request: &GetPromptRequestParams,
) -> Result<GetPromptResult, McpError> {
    let refused = |error: crate::error::ApiError| McpError::invalid_params(error.message, None);
    let prompt = prompts::find(&request.name, scope).map_err(refused)?;
    let mut given = BTreeMap::new();
    for (name, value) in request.arguments.iter().flatten() {
        let Value::String(text) = value else {
            return Err(McpError::invalid_params(
                format!(
                    "The prompt argument `{name}` must be text (prompt arguments are strings), \
                     got {value}."
                ),
                None,
            ));
        };
        given.insert(name.clone(), text.clone());
    }
    let text = prompt.render(&given).map_err(refused)?;
    Ok(
        GetPromptResult::new(vec![PromptMessage::new_text(Role::User, text)])
            .with_description(prompt.description),
    )
}
