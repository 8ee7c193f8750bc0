//! Long calls: actions whose answer is the start of work that goes on after it (a durable job),
//! and how to read that work's progress, so the MCP face can offer it as a task.
//!
//! An action like that answers at once with an object that has an id and a state (`queued`), and
//! two other actions read it (`get`) and stop it (`cancel`) by that id. The domain says which
//! three actions belong together with [`mcp_task!`](crate::mcp_task), and gives a `view`
//! function that reads their common output as a [`TaskView`]: the id, a state the runtime
//! understands, progress, times. That is all the runtime learns: it never names the domain's
//! objects or statuses, and the work's state stays where the domain keeps it, in the database,
//! so any instance answers for any task and nothing lives in a process's memory.
//!
//! The MCP face (`mcp/tasks.rs`) uses a registration three ways: a `tools/call` of the action
//! from a client that declared the tasks extension (SEP-2663) is answered with a task whose id
//! is the output's id; `tasks/get` and `tasks/cancel` find the registration by the id's prefix
//! and dispatch `get` or `cancel` with `{"id": ...}` for the caller, so auth, scope and
//! workspace isolation are dispatch's as for any call; and a call from a client without the
//! extension that asked for progress is held open while the view says the work goes on.
//!
//! The registry checks registrations at start-up (see [`validate`]): the three actions exist,
//! `get` and `cancel` take an `id`, one registration per action and per prefix.

use serde_json::Value;

/// One registered long call. Made by [`mcp_task!`](crate::mcp_task); fields are public for the
/// macro only.
#[derive(Debug)]
pub struct TaskDef {
    /// The action that starts the work and answers with its first state.
    pub tool: &'static str,
    /// The action that reads the work by id (`{"id": ...}`): the same output as `tool`'s.
    pub get: &'static str,
    /// The action that stops the work by id (`{"id": ...}`).
    pub cancel: &'static str,
    /// What every id of this work starts with (`run_`): how a task id finds its registration.
    pub id_prefix: &'static str,
    /// Reads the output of `tool` and `get`; `None` when the output is not the work (an
    /// estimate of a priced call, say), which is then answered as an ordinary result.
    pub view: fn(&Value) -> Option<TaskView>,
}

inventory::collect!(TaskDef);

/// Registers a long call (see the module header):
///
/// ```ignore
/// outreach_runtime::prelude::mcp_task! {
///     tool: "run_agent", get: "get_run", cancel: "cancel_run", id_prefix: "run_", view: run_task_view,
/// }
/// ```
#[macro_export]
macro_rules! mcp_task {
    (
        tool: $tool:literal,
        get: $get:literal,
        cancel: $cancel:literal,
        id_prefix: $prefix:literal,
        view: $view:path $(,)?
    ) => {
        $crate::__private::inventory::submit! {
            $crate::tasks::TaskDef {
                tool: $tool,
                get: $get,
                cancel: $cancel,
                id_prefix: $prefix,
                view: $view,
            }
        }
    };
}

/// The work as the runtime sees it, read from the domain's output by the registration's `view`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskView {
    /// The object's id, which becomes the task id; it starts with the registration's prefix.
    pub id: String,
    pub state: TaskState,
    /// A sentence on where the work stands, for a person or a model; when `None`, the runtime
    /// says "processed N of M" from `progress`.
    pub message: Option<String>,
    pub progress: Option<TaskProgress>,
    /// RFC 3339 times, as the output shows them.
    pub created_at: String,
    pub updated_at: String,
}

/// Where the work is, in the four states a task can show.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TaskState {
    /// Waiting to run or running.
    Working,
    /// Done, with its result in the output.
    Completed,
    /// Ended by a failure of the work itself, with its error code and sentence.
    Failed { code: String, message: String },
    /// Stopped by a person before it finished.
    Cancelled,
}

/// How much of the work is done: items processed, of a total when it is known.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TaskProgress {
    pub processed: u64,
    pub total: Option<u64>,
}

impl TaskView {
    /// The view's message, or one made from its progress ("processed 12 of 50").
    pub fn status_message(&self) -> Option<String> {
        if let Some(message) = &self.message {
            return Some(message.clone());
        }
        if let TaskState::Failed { code, message } = &self.state {
            return Some(format!("{message} ({code})"));
        }
        self.progress.map(|progress| match progress.total {
            Some(total) => format!("processed {} of {total}", progress.processed),
            None => format!("processed {}", progress.processed),
        })
    }
}

/// What [`validate`] needs to know of an action: whether it exists and its input's fields.
pub trait Actions {
    fn input_fields(&self, action: &str) -> Option<Vec<&str>>;
}

/// Checks the registrations against the actions; every problem, each naming the registration.
pub fn validate(defs: &[&'static TaskDef], actions: &impl Actions) -> Vec<String> {
    let mut problems = Vec::new();
    for (index, def) in defs.iter().enumerate() {
        let name = format!("the MCP task of `{}`", def.tool);
        if actions.input_fields(def.tool).is_none() {
            problems.push(format!(
                "{name} names `{}`, which is not an action",
                def.tool
            ));
        }
        for (role, action) in [("get", def.get), ("cancel", def.cancel)] {
            match actions.input_fields(action) {
                None => problems.push(format!(
                    "{name} names `{action}` as its `{role}`, which is not an action"
                )),
                Some(fields) if !fields.contains(&"id") => problems.push(format!(
                    "{name}: its `{role}` action `{action}` must take an `id` (it is called with {{\"id\": <task id>}})"
                )),
                Some(_) => {}
            }
        }
        if def.id_prefix.is_empty() {
            problems.push(format!(
                "{name} has an empty `id_prefix`; give the prefix its ids start with, such as \"run_\""
            ));
        }
        for other in &defs[..index] {
            if other.tool == def.tool {
                problems.push(format!("{name} is registered twice"));
            }
            if !def.id_prefix.is_empty()
                && !other.id_prefix.is_empty()
                && (other.id_prefix.starts_with(def.id_prefix)
                    || def.id_prefix.starts_with(other.id_prefix))
            {
                problems.push(format!(
                    "the MCP tasks of `{}` and `{}` have overlapping id prefixes `{}` and `{}`, so a task id could not tell them apart",
                    other.tool, def.tool, other.id_prefix, def.id_prefix
                ));
            }
        }
    }
    problems
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    struct Fake(BTreeMap<&'static str, Vec<&'static str>>);

    impl Actions for Fake {
        fn input_fields(&self, action: &str) -> Option<Vec<&str>> {
            self.0.get(action).cloned()
        }
    }

    fn view(_: &Value) -> Option<TaskView> {
        None
    }

    static GOOD: TaskDef = TaskDef {
        tool: "start",
        get: "read",
        cancel: "stop",
        id_prefix: "job_",
        view,
    };
    static MISSING: TaskDef = TaskDef {
        tool: "begin",
        get: "peek",
        cancel: "stop",
        id_prefix: "jo",
        view,
    };

    fn actions() -> Fake {
        Fake(BTreeMap::from([
            ("start", vec!["size"]),
            ("read", vec!["id"]),
            ("stop", vec!["id"]),
        ]))
    }

    #[test]
    fn a_registration_of_existing_actions_passes() {
        assert!(validate(&[&GOOD], &actions()).is_empty());
    }

    #[test]
    fn a_registration_naming_missing_actions_is_refused_naming_them() {
        let problems = validate(&[&GOOD, &MISSING], &actions());
        assert_eq!(
            problems,
            [
                "the MCP task of `begin` names `begin`, which is not an action",
                "the MCP task of `begin` names `peek` as its `get`, which is not an action",
                "the MCP tasks of `start` and `begin` have overlapping id prefixes `job_` and `jo`, so a task id could not tell them apart",
            ]
        );
    }

    #[test]
    fn the_status_message_says_the_progress_when_the_view_has_none() {
        let mut view = TaskView {
            id: "job_1".into(),
            state: TaskState::Working,
            message: None,
            progress: Some(TaskProgress {
                processed: 12,
                total: Some(50),
            }),
            created_at: String::new(),
            updated_at: String::new(),
        };
        assert_eq!(view.status_message().as_deref(), Some("processed 12 of 50"));
        view.progress = None;
        assert_eq!(view.status_message(), None);
        view.message = Some("waiting".into());
        assert_eq!(view.status_message().as_deref(), Some("waiting"));
    }
}
