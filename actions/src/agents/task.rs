//! Agent runs as MCP tasks: `run_agent` answers at once with a `queued` run that a job then
//! executes, so the MCP face may offer it as a task (or hold the call open with progress) and
//! follow it with `get_run` and `cancel_run`.
//!
//! The runtime only needs to read a run as a task: which of its statuses mean the work goes on,
//! ended well, failed or was canceled, and how far it got. A run whose work is done and whose
//! proposals wait for a person (`awaiting_approval`) is a completed task: what the call was for
//! has happened, and the rest is the approval queue's. An estimate (`estimate_only`) is not a
//! run, so it is answered as an ordinary result.

use outreach_runtime::prelude::{TaskProgress, TaskState, TaskView};
use serde::Deserialize;
use serde_json::Value;

use super::runs::AgentRunStatus;

outreach_runtime::prelude::mcp_task! {
    tool: "run_agent", get: "get_run", cancel: "cancel_run", id_prefix: "run_", view: run_task_view,
}

/// The fields of a run (`runs::Run` as JSON) a task view needs.
#[derive(Deserialize)]
struct RunJson {
    id: String,
    status: AgentRunStatus,
    processed: i64,
    total: i64,
    #[serde(default)]
    approvals_pending: i64,
    error: Option<RunErrorJson>,
    created_at: String,
    updated_at: String,
}

#[derive(Deserialize)]
struct RunErrorJson {
    code: String,
    message: String,
}

/// Reads a run (the output of `run_agent` and `get_run`) as a task; `None` for anything else.
pub fn run_task_view(output: &Value) -> Option<TaskView> {
    let run = RunJson::deserialize(output).ok()?;
    let mut message = None;
    let state = match run.status {
        AgentRunStatus::Queued | AgentRunStatus::Running => TaskState::Working,
        AgentRunStatus::AwaitingApproval => {
            message = Some(format!(
                "processed {} of {}; {} proposals wait for a person in the approval queue",
                run.processed, run.total, run.approvals_pending
            ));
            TaskState::Completed
        }
        AgentRunStatus::Succeeded => TaskState::Completed,
        AgentRunStatus::Failed => {
            let error = run.error.unwrap_or(RunErrorJson {
                code: "internal_error".into(),
                message: "The run failed.".into(),
            });
            TaskState::Failed {
                code: error.code,
                message: error.message,
            }
        }
        AgentRunStatus::Canceled => TaskState::Cancelled,
    };
    Some(TaskView {
        id: run.id,
        state,
        message,
        progress: Some(TaskProgress {
            processed: u64::try_from(run.processed).unwrap_or(0),
            total: u64::try_from(run.total).ok(),
        }),
        created_at: run.created_at,
        updated_at: run.updated_at,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn run(status: &str) -> Value {
        json!({
            "id": "run_1", "agent_id": "agt_1", "kind": "prospector", "status": status,
            "processed": 12, "total": 50, "approvals_pending": 3, "credits_reserved": 50,
            "credits_charged": 12, "error": null, "log": [],
            "created_at": "2026-11-21T10:00:00.000Z", "updated_at": "2026-11-21T10:01:00.000Z",
        })
    }

    #[test]
    fn live_runs_are_working_and_finished_runs_completed() {
        for (status, state) in [
            ("queued", TaskState::Working),
            ("running", TaskState::Working),
            ("awaiting_approval", TaskState::Completed),
            ("succeeded", TaskState::Completed),
            ("canceled", TaskState::Cancelled),
        ] {
            let view = run_task_view(&run(status)).expect("a run");
            assert_eq!(view.state, state, "{status}");
            assert_eq!(view.id, "run_1");
            assert_eq!(
                view.progress,
                Some(TaskProgress {
                    processed: 12,
                    total: Some(50)
                })
            );
        }
        let waiting = run_task_view(&run("awaiting_approval")).expect("a run");
        assert_eq!(
            waiting.status_message().as_deref(),
            Some("processed 12 of 50; 3 proposals wait for a person in the approval queue")
        );
    }

    #[test]
    fn a_failed_run_carries_its_error_and_an_estimate_is_not_a_run() {
        let mut failed = run("failed");
        failed["error"] = json!({"code": "not_found", "message": "The targeting is gone."});
        assert_eq!(
            run_task_view(&failed).expect("a run").state,
            TaskState::Failed {
                code: "not_found".into(),
                message: "The targeting is gone.".into()
            }
        );
        let estimate = json!({"estimate": true, "price": 50, "balance": 1000, "sufficient": true});
        assert_eq!(run_task_view(&estimate), None);
    }
}
