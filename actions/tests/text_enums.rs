//! Every `text_enum!` of the actions sends the same text it stores: its serde name and its
//! `as_str` (the text in the database and in SQL filters) are one word, for every variant.
//!
//! An integration test, so that naming every module's enums makes no module import the others
//! (`tests/layers.rs`).

use serde::Serialize;

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
    use outreach_actions::conversations::{Direction, MessageStatus};
    use outreach_actions::imports::{ImportStatus, SourceFormat};
    use outreach_actions::lists::ProcessingStatus;
    use outreach_actions::prospects::ProspectSource;
    use outreach_actions::scoring::RunStatus;
    use outreach_runtime::prelude::credits::TransactionKind;
    check(ProspectSource::ALL, ProspectSource::as_str);
    check(ProcessingStatus::ALL, ProcessingStatus::as_str);
    check(ImportStatus::ALL, ImportStatus::as_str);
    check(SourceFormat::ALL, SourceFormat::as_str);
    check(RunStatus::ALL, RunStatus::as_str);
    check(TransactionKind::ALL, TransactionKind::as_str);
    check(Direction::ALL, Direction::as_str);
    check(MessageStatus::ALL, MessageStatus::as_str);
    use outreach_actions::senders::{QuotaKind, SenderStatus, SendingState};
    check(SenderStatus::ALL, SenderStatus::as_str);
    check(SendingState::ALL, SendingState::as_str);
    check(QuotaKind::ALL, QuotaKind::as_str);
    use outreach_actions::enrollments::EnrollmentEventKind;
    check(EnrollmentEventKind::ALL, EnrollmentEventKind::as_str);
    use outreach_actions::agents::runs::AgentRunStatus;
    use outreach_actions::approvals::{ApprovalKind, ApprovalStatus};
    use outreach_actions::conversations::Classification;
    use outreach_actions::sequences::DraftedBy;
    check(AgentRunStatus::ALL, AgentRunStatus::as_str);
    check(Classification::ALL, Classification::as_str);
    check(DraftedBy::ALL, DraftedBy::as_str);
    use outreach_actions::approvals::propose::SkipReason;
    use outreach_actions::enrollments::{EnrollmentStatus, ExitReason};
    use outreach_actions::sequences::{SequenceStatus, StepType};
    check(SequenceStatus::ALL, SequenceStatus::as_str);
    check(StepType::ALL, StepType::as_str);
    check(EnrollmentStatus::ALL, EnrollmentStatus::as_str);
    check(ExitReason::ALL, ExitReason::as_str);
    check(SkipReason::ALL, SkipReason::as_str);
    check(ApprovalKind::ALL, ApprovalKind::as_str);
    check(ApprovalStatus::ALL, ApprovalStatus::as_str);
}
