//! A page acting as the signed-in person: the pages that change domain objects (the webhook
//! endpoints, the approval queue) call the actions through the one [`Dispatcher`], as a
//! [`CredentialKind::WebSession`](crate::principal::CredentialKind) principal with the person's
//! role's scope, read afresh on every request ([`auth::session_principal`]). The actions keep
//! their rules, so a page cannot drift from the API: a refusal is shown with its own sentence and
//! status. Answers are read into each page's own structs, so a renamed field is a fault, not a
//! wrong page.

use std::sync::Arc;

use axum::Extension;
use axum::extract::FromRef;
use serde::de::DeserializeOwned;
use serde_json::Value;

use super::{PageError, SignedIn};
use crate::auth::{self, Principal};
use crate::dispatch::Dispatcher;
use crate::error::ApiError;
use crate::request_id::RequestId;
use crate::state::AppState;

/// What one page request needs to call actions: the person as a principal (read once per
/// request) and the request's id.
pub(super) struct Caller<'a> {
    pub state: &'a Arc<AppState>,
    pub signed: &'a SignedIn,
    principal: Arc<Principal>,
    request_id: Arc<str>,
}

impl<'a> Caller<'a> {
    pub async fn new(
        state: &'a Arc<AppState>,
        signed: &'a SignedIn,
        id: Option<Extension<RequestId>>,
    ) -> Result<Self, PageError> {
        let principal = auth::session_principal(state, &signed.session, &signed.workspace_id)
            .await?
            .ok_or_else(|| PageError::forbidden("You are no longer a member of this workspace."))?;
        Ok(Self {
            state,
            signed,
            principal: Arc::new(principal),
            request_id: id.map_or_else(|| Arc::from("web"), |Extension(RequestId(id))| id),
        })
    }

    /// Runs `action` on `input` as the signed-in person and reads its answer as `T`. The outer
    /// error is a page (a fault, an answer of another shape); the inner one the action's own
    /// refusal, to show.
    pub async fn call<T: DeserializeOwned>(
        &self,
        action: &str,
        input: Value,
    ) -> Result<Result<T, ApiError>, PageError> {
        let Some(action_def) = self.state.registry.get(action) else {
            return Err(
                ApiError::internal(format!("the action `{action}` is not registered")).into(),
            );
        };
        let reply = Dispatcher::from_ref(self.state)
            .dispatch(
                self.principal.clone(),
                action_def,
                input,
                None,
                self.request_id.clone(),
            )
            .await;
        match reply {
            Ok(reply) => serde_json::from_slice(reply.body.bytes())
                .map(Ok)
                .map_err(|error| {
                    ApiError::internal(format!("`{action}` answered an unexpected shape: {error}"))
                        .into()
                }),
            Err(error) if error.status().is_client_error() => Ok(Err(error)),
            Err(error) => Err(error.into()),
        }
    }

    /// Like [`Self::call`], with a refusal shown as a message page that leads back to `page`.
    pub async fn call_or_refuse<T: DeserializeOwned>(
        &self,
        page: &str,
        action: &str,
        input: Value,
    ) -> Result<T, PageError> {
        self.call(action, input).await?.map_err(|error| {
            PageError::message(error.status(), "Not done", error.message).back_to(page)
        })
    }
}
