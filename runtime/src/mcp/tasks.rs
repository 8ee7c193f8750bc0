//! Long calls on the MCP face: the Tasks extension (SEP-2663, `io.modelcontextprotocol/tasks`)
//! for clients that declare it, and progress notifications for clients that ask for them.
//!
//! The domain registers which actions start work that outlives the call (`crate::tasks`); this
//! module answers for them in three ways, none of which keeps anything in memory, because the
//! server is stateless and runs as several instances on one database:
//!
//! - **A task.** A `tools/call` of a registered action from a client whose request declares the
//!   extension (`_meta` `io.modelcontextprotocol/clientCapabilities`) is dispatched as usual
//!   (credits, idempotency and scope are dispatch's, as on REST) and answered with a
//!   `CreateTaskResult` whose `taskId` is the output's id. The task's state is the domain's
//!   object, so `tasks/get` dispatches the registration's `get` action with `{"id": taskId}` for
//!   the same principal, and `tasks/cancel` its `cancel` action: another workspace's id is
//!   dispatch's `not_found`, which is the spec's "invalid or nonexistent taskId" (`-32602`).
//!   `ttlMs` is null: the objects are kept, so a task does not expire.
//! - **Progress.** A client without the extension that sends `_meta.progressToken` (and accepts
//!   an event stream) has its call held open: the `get` action is read every
//!   [`PROGRESS_POLL`], each advance is a `notifications/progress`, and the answer is the
//!   output once the work leaves `working`, or as it stands after [`PROGRESS_BOUND`] or when the
//!   server begins to shut down (so a deploy does not wait on a long run). rmcp's
//!   stateless transport answers in JSON when the handler's first message is the response and
//!   turns to an event stream when it is a notification, so the first notification, sent at
//!   once, is what makes this one answer `text/event-stream`. The fast path hands such calls to
//!   rmcp, so there is one implementation for both the `initialize` and the 2026-07-28
//!   per-request lifecycle.
//! - **The ordinary result** otherwise: the output at once; the client polls the `get` tool.
//!
//! How the work's end maps onto task statuses, from the spec: `failed` is only for a JSON-RPC
//! error of the request itself, and "a tool call that returned `isError: true`" is
//! `completed`. The call that started the work succeeded; work that failed later is a tool
//! result flagged `isError` (its `structuredContent` is still the output, which matches the
//! operation's response schema and names the error), under `completed`. Work stopped by a person is
//! `cancelled`, with no result. A `tasks/cancel` that the domain refuses (the work already
//! ended: `invalid_state`) is a `-32602` error carrying the sentence: the 2025-11-25 tasks spec
//! required exactly that for a task in a terminal status, and SEP-2663 names `-32602` as the
//! code for a task id the server cannot act on. Every error of these methods carries the REST
//! error body (`{error, code}`) as its `data`.

use std::time::Duration;

use rmcp::model::{
    CallToolResult, CreateTaskResult, DetailedTask, ErrorCode as RpcCode, GetTaskResult,
    ProgressNotificationParam, ProgressToken, Task, TaskPayload, TaskStatus,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData as McpError, RoleServer};
use serde_json::{Value, json};

use crate::error::ApiError;
use crate::tasks::{TaskDef, TaskState, TaskView};

use super::McpFace;

/// The polling interval a task suggests: a run moves in steps of about a second.
pub const POLL_INTERVAL_MS: u64 = 1000;

/// How often a held call reads the work.
pub const PROGRESS_POLL: Duration = Duration::from_millis(500);

/// How long a call is held at most. The event stream carries a keep-alive comment every
/// [`super::SSE_KEEP_ALIVE`], so a connection's idle timeout does not end it first.
pub const PROGRESS_BOUND: Duration = Duration::from_secs(120);

/// Where progress goes: rmcp's peer for this request (its notifications travel on the
/// request's own event stream) and the token the client chose.
pub(super) struct ProgressSink {
    pub token: ProgressToken,
    pub context: RequestContext<RoleServer>,
}

/// How the caller asked for a long call to be answered.
pub(super) struct Asked {
    /// The request declared the tasks extension.
    pub tasks: bool,
    /// The request asked for progress and can read an event stream.
    pub progress: Option<ProgressSink>,
}

/// The view of a long call's output, when it is one (`None` for an estimate, say), checked to
/// carry an id the registration can find again.
pub(super) fn view_of(def: &TaskDef, output: &Value) -> Option<TaskView> {
    let view = (def.view)(output)?;
    if view.id.starts_with(def.id_prefix) {
        Some(view)
    } else {
        tracing::warn!(
            action = def.tool,
            id = view.id,
            prefix = def.id_prefix,
            "a long call's id lacks its registered prefix; answered as an ordinary result"
        );
        None
    }
}

fn task(view: &TaskView, status: TaskStatus) -> Task {
    let mut task = Task::new(
        view.id.clone(),
        status,
        view.created_at.clone(),
        view.updated_at.clone(),
    )
    .with_poll_interval_ms(POLL_INTERVAL_MS);
    task.status_message = view.status_message();
    task
}

fn status(state: &TaskState) -> TaskStatus {
    match state {
        TaskState::Working => TaskStatus::Working,
        TaskState::Completed | TaskState::Failed { .. } => TaskStatus::Completed,
        TaskState::Cancelled => TaskStatus::Cancelled,
    }
}

/// The answer to a `tools/call` that made a task: its seed state, from the output.
pub(super) fn created(view: &TaskView) -> CreateTaskResult {
    CreateTaskResult::new(task(view, status(&view.state)))
}

/// The tool result that ends a long call (see the module header): the output, flagged
/// `isError` when the work failed.
pub(super) fn final_result(view: &TaskView, output: Value) -> CallToolResult {
    match view.state {
        TaskState::Failed { .. } => CallToolResult::structured_error(output),
        _ => CallToolResult::structured(output),
    }
}

/// `tasks/get`'s answer from the view and output of the `get` action.
fn detailed(view: &TaskView, output: Value) -> Result<DetailedTask, McpError> {
    let payload = match view.state {
        TaskState::Working => TaskPayload::Working,
        TaskState::Cancelled => TaskPayload::Cancelled,
        TaskState::Completed | TaskState::Failed { .. } => {
            let result = serde_json::to_value(final_result(view, output))
                .map_err(|error| McpError::internal_error(error.to_string(), None))?;
            let Value::Object(result) = result else {
                return Err(McpError::internal_error(
                    "a tool result is not an object",
                    None,
                ));
            };
            TaskPayload::Completed { result }
        }
    };
    Ok(DetailedTask::new(task(view, status(&view.state)), payload))
}

/// A task method's error: the spec's `-32602` for what the caller can fix or cannot see (an
/// unknown id, another workspace's, a task that can no longer be cancelled), `-32603` for our
/// faults; the REST error body as `data` either way.
fn rpc_error(error: ApiError, request_id: &str) -> McpError {
    let error = error.log(request_id);
    let body = error.body();
    if error.status().is_server_error() {
        McpError::new(RpcCode::INTERNAL_ERROR, error.message, Some(body))
    } else {
        McpError::new(RpcCode::INVALID_PARAMS, error.message, Some(body))
    }
}

fn unknown_task(task_id: &str) -> McpError {
    let error = ApiError::invalid_request(format!(
        "Failed to retrieve task: no task has the id `{}`.",
        super::guard::truncate(task_id, 100)
    ));
    McpError::new(
        RpcCode::INVALID_PARAMS,
        error.message.clone(),
        Some(error.body()),
    )
}

impl McpFace {
    /// Reads a task for the caller: the registration's `get`, dispatched with `{"id": task_id}`.
    async fn read_task(
        &self,
        task_id: &str,
        parts: Option<&http::request::Parts>,
    ) -> Result<(TaskView, Value), McpError> {
        let def = self
            .state
            .registry
            .task_by_id(task_id)
            .ok_or_else(|| unknown_task(task_id))?;
        let caller = self.caller(parts)?;
        let output = self
            .dispatch_by_name(&caller, def.get, json!({"id": task_id}))
            .await
            .map_err(|error| rpc_error(error, &caller.request_id))?;
        let view = view_of(def, &output).filter(|view| view.id == task_id);
        let Some(view) = view else {
            let error = ApiError::internal(format!(
                "`{}` answered for `{task_id}` with something its task view does not read",
                def.get
            ));
            return Err(rpc_error(error, &caller.request_id));
        };
        Ok((view, output))
    }

    /// `tasks/get`.
    pub(super) async fn get_task_for(
        &self,
        task_id: &str,
        parts: Option<&http::request::Parts>,
    ) -> Result<GetTaskResult, McpError> {
        let (view, output) = self.read_task(task_id, parts).await?;
        Ok(GetTaskResult::new(detailed(&view, output)?))
    }

    /// `tasks/cancel`: the registration's `cancel`, dispatched with `{"id": task_id}`.
    pub(super) async fn cancel_task_for(
        &self,
        task_id: &str,
        parts: Option<&http::request::Parts>,
    ) -> Result<(), McpError> {
        let def = self
            .state
            .registry
            .task_by_id(task_id)
            .ok_or_else(|| unknown_task(task_id))?;
        let caller = self.caller(parts)?;
        self.dispatch_by_name(&caller, def.cancel, json!({"id": task_id}))
            .await
            .map(drop)
            .map_err(|error| rpc_error(error, &caller.request_id))
    }

    /// `tasks/update`: no registered work ever waits for input, so there is nothing to answer;
    /// the spec has the server ignore responses to requests it did not make, and acknowledge
    /// them once it knows the task.
    pub(super) async fn update_task_for(
        &self,
        task_id: &str,
        parts: Option<&http::request::Parts>,
    ) -> Result<(), McpError> {
        self.read_task(task_id, parts).await.map(drop)
    }

    /// Holds a call open while its work goes on, sending progress as it advances (see the
    /// module header); the work's view and output as they then stand.
    pub(super) async fn hold(
        &self,
        def: &TaskDef,
        caller: &super::Caller,
        mut view: TaskView,
        mut output: Value,
        sink: ProgressSink,
    ) -> (TaskView, Value) {
        let deadline = tokio::time::Instant::now() + PROGRESS_BOUND;
        let mut sent: Option<u64> = None;
        loop {
            let processed = view.progress.map_or(0, |progress| progress.processed);
            // Progress must increase from one notification to the next.
            if sent.is_none_or(|sent| processed > sent) {
                let mut param =
                    ProgressNotificationParam::new(sink.token.clone(), processed as f64);
                if let Some(total) = view.progress.and_then(|progress| progress.total) {
                    param = param.with_total(total as f64);
                }
                if let Some(message) = view.status_message() {
                    param = param.with_message(message);
                }
                if sink.context.peer.notify_progress(param).await.is_err() {
                    break;
                }
                sent = Some(processed);
            }
            if view.state != TaskState::Working || tokio::time::Instant::now() >= deadline {
                break;
            }
            tokio::select! {
                () = tokio::time::sleep(PROGRESS_POLL) => {}
                () = sink.context.ct.cancelled() => break,
                // The client gets the work as it stands and can poll it; a shutdown does not wait.
                () = self.state.shutdown.begun() => break,
            }
            match self
                .dispatch_by_name(caller, def.get, json!({"id": view.id}))
                .await
            {
                Ok(next) => match view_of(def, &next) {
                    Some(next_view) => (view, output) = (next_view, next),
                    None => break,
                },
                Err(error) => {
                    tracing::warn!(request_id = %caller.request_id, error = %error.message,
                        "could not read a held call's work; answering with what it last showed");
                    break;
                }
            }
        }
        (view, output)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ErrorCode;
    use crate::tasks::TaskProgress;
    use serde_json::Map;

    /// The `{error, code}` body of a task method's error.
    fn data(error: &McpError) -> Option<&Map<String, Value>> {
        error.data.as_ref().and_then(Value::as_object)
    }

    fn view(state: TaskState) -> TaskView {
        TaskView {
            id: "run_1".into(),
            state,
            message: None,
            progress: Some(TaskProgress {
                processed: 12,
                total: Some(50),
            }),
            created_at: "2026-11-21T10:00:00Z".into(),
            updated_at: "2026-11-21T10:00:05Z".into(),
        }
    }

    #[test]
    fn a_created_task_is_the_seed_state_with_a_poll_interval_and_no_ttl() {
        let created = serde_json::to_value(created(&view(TaskState::Working))).unwrap();
        assert_eq!(
            created,
            json!({
                "resultType": "task",
                "taskId": "run_1",
                "status": "working",
                "statusMessage": "processed 12 of 50",
                "createdAt": "2026-11-21T10:00:00Z",
                "lastUpdatedAt": "2026-11-21T10:00:05Z",
                "ttlMs": null,
                "pollIntervalMs": 1000,
            })
        );
    }

    #[test]
    fn failed_work_is_a_completed_task_whose_result_is_flagged_is_error() {
        let failed = view(TaskState::Failed {
            code: "network_unavailable".into(),
            message: "The network failed.".into(),
        });
        let output = json!({"id": "run_1", "status": "failed"});
        let task = serde_json::to_value(detailed(&failed, output.clone()).unwrap()).unwrap();
        assert_eq!(task["status"], json!("completed"));
        assert_eq!(task["result"]["isError"], json!(true));
        assert_eq!(task["result"]["structuredContent"], output);
        assert_eq!(
            task["statusMessage"],
            json!("The network failed. (network_unavailable)")
        );
        let cancelled =
            serde_json::to_value(detailed(&view(TaskState::Cancelled), output).unwrap()).unwrap();
        assert_eq!(cancelled["status"], json!("cancelled"));
        assert!(cancelled.get("result").is_none());
    }

    #[test]
    fn refusals_are_invalid_params_and_faults_internal_errors_with_the_rest_body() {
        let refused = rpc_error(
            ApiError::new(ErrorCode::INVALID_STATE, "The run already ended."),
            "req_1",
        );
        assert_eq!(refused.code, RpcCode::INVALID_PARAMS);
        assert_eq!(data(&refused).unwrap()["code"], json!("invalid_state"));
        let fault = rpc_error(ApiError::internal("boom"), "req_1");
        assert_eq!(fault.code, RpcCode::INTERNAL_ERROR);
        assert!(fault.message.contains("req_1"), "{}", fault.message);
        assert_eq!(unknown_task("nope").code, RpcCode::INVALID_PARAMS);
    }
}
