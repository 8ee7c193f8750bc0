//! Small types and helpers every resource module shares.

use schemars::JsonSchema;
use serde::{Deserialize, Deserializer, Serialize};

use outreach_runtime::prelude::{ApiError, ids};

/// What a `delete_*` action returns.
#[derive(Debug, Serialize, JsonSchema)]
pub struct Deleted {
    pub id: String,
    pub deleted: bool,
}

/// The kinds of object an id names. Every lookup of a kind answers a malformed id and an id that
/// names nothing in the workspace with the same 404 sentence, so a caller cannot tell them apart
/// (nor another workspace's id from a typo).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IdKind {
    Prospect,
    List,
    Targeting,
    Import,
    ScoringRun,
    Conversation,
    Sequence,
    Enrollment,
    Approval,
    Sender,
    Agent,
    Run,
}

impl IdKind {
    /// The id prefix (`prs`, `lst`, ...).
    pub fn prefix(self) -> &'static str {
        match self {
            IdKind::Prospect => "prs",
            IdKind::List => "lst",
            IdKind::Targeting => "tgt",
            IdKind::Import => "imp",
            IdKind::ScoringRun => "scr",
            IdKind::Conversation => "cnv",
            IdKind::Sequence => "seq",
            IdKind::Enrollment => "enr",
            IdKind::Approval => "apr",
            IdKind::Sender => "snd",
            IdKind::Agent => "agt",
            IdKind::Run => "run",
        }
    }

    /// The kind as a sentence names it.
    pub fn noun(self) -> &'static str {
        match self {
            IdKind::Prospect => "prospect",
            IdKind::List => "list",
            IdKind::Targeting => "targeting",
            IdKind::Import => "import",
            IdKind::ScoringRun => "scoring run",
            IdKind::Conversation => "conversation",
            IdKind::Sequence => "sequence",
            IdKind::Enrollment => "enrollment",
            IdKind::Approval => "approval item",
            IdKind::Sender => "sender",
            IdKind::Agent => "agent",
            IdKind::Run => "run",
        }
    }

    /// The 404 for `id`: `No list with id `lst_x` in this workspace.`
    pub fn not_found(self, id: &str) -> ApiError {
        ApiError::not_found(self.noun(), id)
    }

    /// Whether `id` has this kind's shape: worth a lookup.
    pub fn is_id(self, id: &str) -> bool {
        ids::is_id(self.prefix(), id)
    }

    /// The same 404 as a lookup that finds nothing, for an id without this kind's shape.
    pub fn check(self, id: &str) -> Result<(), ApiError> {
        if self.is_id(id) {
            Ok(())
        } else {
            Err(self.not_found(id))
        }
    }
}

/// Serialises a value stored as JSON text (tags, custom fields, criteria).
pub fn json_text<T: Serialize>(value: &T) -> Result<String, ApiError> {
    serde_json::to_string(value).map_err(ApiError::internal)
}

/// For `#[serde(default, deserialize_with = "crate::common::patch")]` on an `Option<Option<T>>`
/// field of an update input: absent keeps the value, `null` clears it, a value sets it.
pub fn patch<'de, D: Deserializer<'de>, T: Deserialize<'de>>(
    deserializer: D,
) -> Result<Option<Option<T>>, D::Error> {
    Option::<T>::deserialize(deserializer).map(Some)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every `text_enum!` of the actions sends the same text it stores.
    #[test]
    fn text_enums_send_what_they_store() {
        fn check<T: Serialize + Copy>(all: &[T], as_str: fn(T) -> &'static str) {
            for value in all {
                assert_eq!(
                    serde_json::to_value(value).ok(),
                    Some(serde_json::Value::from(as_str(*value)))
                );
            }
        }
        use crate::conversations::{Direction, MessageStatus};
        use crate::imports::{ImportStatus, SourceFormat};
        use crate::lists::ProcessingStatus;
        use crate::prospects::ProspectSource;
        use crate::scoring::RunStatus;
        use outreach_runtime::prelude::credits::TransactionKind;
        check(ProspectSource::ALL, ProspectSource::as_str);
        check(ProcessingStatus::ALL, ProcessingStatus::as_str);
        check(ImportStatus::ALL, ImportStatus::as_str);
        check(SourceFormat::ALL, SourceFormat::as_str);
        check(RunStatus::ALL, RunStatus::as_str);
        check(TransactionKind::ALL, TransactionKind::as_str);
        check(Direction::ALL, Direction::as_str);
        check(MessageStatus::ALL, MessageStatus::as_str);
        use crate::senders::{QuotaKind, SenderStatus, SendingState};
        check(SenderStatus::ALL, SenderStatus::as_str);
        check(SendingState::ALL, SendingState::as_str);
        check(QuotaKind::ALL, QuotaKind::as_str);
        use crate::agents::runs::AgentRunStatus;
        use crate::agents::triage::Classification;
        use crate::approvals::{ApprovalKind, ApprovalStatus};
        use crate::drafting::DraftedBy;
        check(AgentRunStatus::ALL, AgentRunStatus::as_str);
        check(Classification::ALL, Classification::as_str);
        check(DraftedBy::ALL, DraftedBy::as_str);
        use crate::enrollments::{EnrollmentStatus, ExitReason};
        use crate::sequences::enroll::SkipReason;
        use crate::sequences::{SequenceStatus, StepType};
        check(SequenceStatus::ALL, SequenceStatus::as_str);
        check(StepType::ALL, StepType::as_str);
        check(EnrollmentStatus::ALL, EnrollmentStatus::as_str);
        check(ExitReason::ALL, ExitReason::as_str);
        check(SkipReason::ALL, SkipReason::as_str);
        check(ApprovalKind::ALL, ApprovalKind::as_str);
        check(ApprovalStatus::ALL, ApprovalStatus::as_str);
    }

    #[test]
    fn malformed_and_missing_ids_get_one_sentence() {
        assert_eq!(
            IdKind::List.check("lst_x").err().map(|error| error.message),
            Some("No list with id `lst_x` in this workspace.".to_owned())
        );
        assert_eq!(
            IdKind::ScoringRun.not_found("scr_x").message,
            "No scoring run with id `scr_x` in this workspace."
        );
    }
}
