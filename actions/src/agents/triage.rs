//! `inbox_triage`: read new replies, act on the clear cases, draft answers for a person to approve.
//!
//! Selection (free) takes the conversations with inbound messages no run has triaged yet, oldest
//! first, up to the run's limit. Processing (charged per conversation) classifies those messages
//! by rules (`reply_reading::classify`, a pure function: the same text always reads the same) and
//! acts:
//!
//! - `unsubscribe`: the prospect is marked do-not-contact, every live enrollment of theirs stops
//!   (`unsubscribed`) and anything of theirs waiting for approval expires. Nobody needs to approve
//!   *not* writing to someone.
//! - `not_interested`: their live enrollments stop (`not_interested`).
//! - `out_of_office`: nothing more changes: its enrollments were held when the reply arrived (see
//!   `delivery::inbound`), until the return date it names.
//! - `positive`, `question`: their live enrollments stop (`replied`: a person answers now) and a
//!   reply is drafted from the agent's templates and proposed for approval. It is never sent by the
//!   run: `approve_outreach` sends it.
//! - `unclear`: left for a person.
//!
//! Each message is marked with its classification and the run, so the next run does not read it
//! again, and `list_messages` shows it.

use sqlx::{AnyConnection, AssertSqlSafe, Row};

use super::execute::{NewItem, Outcome, Selection, Work, WorkItem};
use super::{ReplyTemplates, proposer};
use crate::approvals::{self, ApprovalKind, NewApproval, ProposalReasons};
use crate::common::json_text;
use crate::conversations::Classification;
use crate::enrollments;
use crate::person_lock::PersonTx;
use crate::reply_reading::classify;
use crate::sequences::DraftedBy;
use crate::sequences::templates::Template;
use crate::sequences::{MAX_MESSAGE_CHARS, RenderedText, StepType};
use crate::step_jobs::LIVE_SQL;
use outreach_runtime::prelude::{ApiError, ids};

/// The default reply to a positive answer.
pub const DEFAULT_POSITIVE: &str =
    "Thanks, {{first_name|there}}! Glad to hear it. Would a short call next week work for you?";
/// The default reply to a question.
pub const DEFAULT_QUESTION: &str = "Thanks for asking, {{first_name|there}}. Happy to explain: would a short call be easiest, or shall I answer here?";

/// Checks an agent's reply templates as a sequence's are checked: each must parse.
pub(crate) fn check_templates(templates: &ReplyTemplates) -> Result<(), ApiError> {
    for (field, text) in [
        ("templates.positive", &templates.positive),
        ("templates.question", &templates.question),
    ] {
        let Some(text) = text else { continue };
        if text.trim().is_empty() || text.chars().count() > MAX_MESSAGE_CHARS {
            return Err(ApiError::invalid_request(format!(
                "`{field}` must be 1 to {MAX_MESSAGE_CHARS} characters."
            )));
        }
        Template::parse(text)
            .map_err(|error| ApiError::invalid_request(error.sentence(&format!("`{field}`"))))?;
    }
    Ok(())
}

/// How many conversations have replies no run has triaged.
pub(crate) async fn count(conn: &mut AnyConnection, workspace_id: &str) -> Result<i64, ApiError> {
    Ok(sqlx::query(
        "select count(distinct conversation_id) as n from messages \
         where workspace_id = $1 and direction = 'inbound' and triaged_at is null",
    )
    .bind(workspace_id)
    .fetch_one(conn)
    .await?
    .try_get("n")?)
}

pub(crate) async fn select(
    conn: &mut AnyConnection,
    work: &Work<'_>,
) -> Result<Selection, ApiError> {
    let run = work.run;
    let rows = sqlx::query(
        "select m.conversation_id, c.prospect_id, min(m.at) as first_at, count(*) as n from messages m \
         join conversations c on c.id = m.conversation_id \
         where m.workspace_id = $1 and m.direction = 'inbound' and m.triaged_at is null \
         group by m.conversation_id, c.prospect_id order by min(m.at), m.conversation_id",
    )
    .bind(&run.workspace_id)
    .fetch_all(&mut *conn)
    .await?;
    let waiting = rows.len();
    let limit = run.input.capacity();
    let mut messages = 0;
    let mut items = Vec::new();
    for row in rows.iter().take(limit) {
        messages += row.try_get::<i64, _>("n")?;
        items.push(NewItem {
            prospect_id: row.try_get("prospect_id")?,
            conversation_id: Some(row.try_get("conversation_id")?),
            reasons: None,
        });
    }
    let log = vec![format!(
        "Selected {} of the {waiting} conversations with replies not triaged yet ({messages} messages), oldest first.",
        items.len()
    )];
    Ok(Selection { items, log })
}

pub(crate) async fn process(
    conn: &mut AnyConnection,
    work: &Work<'_>,
    items: &[WorkItem],
) -> Result<Vec<Outcome>, ApiError> {
    // A triage may stop the people's enrollments and expire their items: the batch's people are
    // locked first, all at once (see `person_lock`).
    let people = items.iter().map(|item| item.prospect_id.as_str());
    let workspace_id = work.run.workspace_id.as_str();
    let mut conn = crate::person_lock::lock(conn, workspace_id, people).await?;
    let mut outcomes = Vec::with_capacity(items.len());
    for item in items {
        outcomes.push(triage_one(&mut conn, work, item).await?);
    }
    Ok(outcomes)
}

async fn triage_one(
    conn: &mut PersonTx<'_>,
    work: &Work<'_>,
    item: &WorkItem,
) -> Result<Outcome, ApiError> {
    let run = work.run;
    let workspace_id = run.workspace_id.as_str();
    let Some(conversation_id) = &item.conversation_id else {
        return Ok(Outcome::Done("no conversation.".to_owned()));
    };
    let messages = sqlx::query(
        "select id, text from messages where workspace_id = $1 and conversation_id = $2 \
         and direction = 'inbound' and triaged_at is null order by at, id",
    )
    .bind(workspace_id)
    .bind(conversation_id)
    .fetch_all(&mut **conn)
    .await?;
    if messages.is_empty() {
        return Ok(Outcome::Done(
            "its replies were triaged by another run meanwhile.".to_owned(),
        ));
    }
    // Every new message is marked; the conversation reads as its last message says, unless any
    // of them asked to unsubscribe or declined, which stand.
    let mut decided: Option<(Classification, &'static str, String, String)> = None;
    for row in &messages {
        let id: String = row.try_get("id")?;
        let text: String = row.try_get("text")?;
        let (classification, phrase) = classify(&text);
        // Claimed by this update: another run triaging the same conversation at the same time
        // (another triage agent) waits for this one's commit and then claims nothing.
        let claimed =
            crate::conversations::claim_for_triage(conn, &id, classification, work.now, &run.id)
                .await?;
        if !claimed {
            continue;
        }
        let stands = |c: Classification| {
            matches!(
                c,
                Classification::Unsubscribe | Classification::NotInterested
            )
        };
        let keep = decided.as_ref().is_some_and(|(c, ..)| {
            stands(*c) && (*c == Classification::Unsubscribe || !stands(classification))
        });
        if !keep {
            decided = Some((classification, phrase, id, text));
        }
    }
    let Some((classification, phrase, message_id, text)) = decided else {
        return Ok(Outcome::Done(
            "its replies were triaged by another run meanwhile.".to_owned(),
        ));
    };
    let matched = if phrase.is_empty() {
        String::new()
    } else {
        format!(" (matched “{phrase}”)")
    };
    let read_as = format!("read as `{classification}`{matched}");
    let prospect_id = item.prospect_id.as_str();
    crate::conversations::classified(
        conn,
        workspace_id,
        conversation_id,
        prospect_id,
        classification,
        work.now,
    )
    .await?;
    match classification {
        Classification::Unsubscribe => {
            crate::prospects::mark_do_not_contact(conn, workspace_id, prospect_id, work.now)
                .await?;
            let stopped = stop_enrollments(
                conn,
                work.clock,
                workspace_id,
                prospect_id,
                "unsubscribed",
                work.now,
            )
            .await?;
            Ok(Outcome::Done(format!(
                "{read_as}: marked do-not-contact, {stopped} live enrollments stopped."
            )))
        }
        Classification::NotInterested => {
            let stopped = stop_enrollments(
                conn,
                work.clock,
                workspace_id,
                prospect_id,
                "not_interested",
                work.now,
            )
            .await?;
            Ok(Outcome::Done(format!(
                "{read_as}: {stopped} live enrollments stopped."
            )))
        }
        Classification::OutOfOffice => Ok(Outcome::Done(format!(
            "{read_as}: left in its sequences, held until the person is back."
        ))),
        Classification::Unclear => Ok(Outcome::Done(format!(
            "{read_as}: left for a person to read."
        ))),
        Classification::Positive | Classification::Question => {
            let stopped = stop_enrollments(
                conn,
                work.clock,
                workspace_id,
                prospect_id,
                "replied",
                work.now,
            )
            .await?;
            let proposed = propose_reply(
                conn,
                work,
                conversation_id,
                prospect_id,
                classification,
                &message_id,
                &text,
            )
            .await?;
            Ok(match proposed {
                Some(approval_id) => Outcome::Proposed(
                    vec![approval_id.clone()],
                    format!(
                        "{read_as}: {stopped} live enrollments stopped, a reply drafted for approval as `{approval_id}`."
                    ),
                ),
                None => Outcome::Done(format!(
                    "{read_as}: {stopped} live enrollments stopped; a reply draft already waits for approval (or the prospect is do-not-contact)."
                )),
            })
        }
    }
}

/// Finishes the prospect's live enrollments with `exit_reason` and expires what of them waits
/// for approval; returns how many.
async fn stop_enrollments(
    conn: &mut PersonTx<'_>,
    clock: &outreach_runtime::prelude::Clock,
    workspace_id: &str,
    prospect_id: &str,
    exit_reason: &str,
    now: i64,
) -> Result<usize, ApiError> {
    let live: Vec<String> = sqlx::query(AssertSqlSafe(format!(
        "select id from enrollments where workspace_id = $1 and prospect_id = $2 and status in {LIVE_SQL}"
    )))
    .bind(workspace_id)
    .bind(prospect_id)
    .fetch_all(&mut **conn)
    .await?
    .iter()
    .map(|row| row.try_get::<String, _>("id"))
    .collect::<Result<_, _>>()?;
    enrollments::finish(conn, clock, workspace_id, &live, exit_reason, now).await?;
    if matches!(exit_reason, "unsubscribed" | "not_interested") {
        let of = crate::approval_items::PendingOf::Prospect(prospect_id);
        crate::approval_items::expire_pending(conn, workspace_id, of, now).await?;
    }
    enrollments::record_events(
        conn,
        workspace_id,
        &live,
        now,
        enrollments::EnrollmentEventKind::Stopped,
        Some(exit_reason),
    )
    .await?;
    super::runs::proposals_decided(conn, workspace_id, now).await?;
    Ok(live.len())
}

/// Drafts the reply from the agent's template and proposes it; `None` when a draft for this
/// conversation already waits, or the prospect may not be contacted.
async fn propose_reply(
    conn: &mut PersonTx<'_>,
    work: &Work<'_>,
    conversation_id: &str,
    prospect_id: &str,
    classification: Classification,
    message_id: &str,
    message_text: &str,
) -> Result<Option<String>, ApiError> {
    let run = work.run;
    let workspace_id = run.workspace_id.as_str();
    let waiting = sqlx::query(
        "select 1 as found from approvals where workspace_id = $1 and kind = 'reply' and subject_id = $2 \
         and status = 'pending'",
    )
    .bind(workspace_id)
    .bind(conversation_id)
    .fetch_optional(&mut **conn)
    .await?;
    let prospect = crate::prospects::fetch_in(conn, workspace_id, prospect_id).await?;
    if waiting.is_some() || prospect.do_not_contact {
        return Ok(None);
    }
    let templates = run.agent.templates.clone().unwrap_or_default();
    let template = match classification {
        Classification::Question => templates.question.as_deref().unwrap_or(DEFAULT_QUESTION),
        _ => templates.positive.as_deref().unwrap_or(DEFAULT_POSITIVE),
    };
    let text = Template::parse(template)
        .ok()
        .and_then(|template| template.render_for(&prospect).ok())
        .map(|text| text.trim().to_owned())
        .filter(|text| !text.is_empty() && text.chars().count() <= MAX_MESSAGE_CHARS);
    let Some(text) = text else {
        // A template with a variable this prospect has no value for: the default always renders.
        return Ok(None);
    };
    let sender_id: String =
        sqlx::query("select sender_id from conversations where workspace_id = $1 and id = $2")
            .bind(workspace_id)
            .bind(conversation_id)
            .fetch_one(&mut **conn)
            .await?
            .try_get("sender_id")?;
    let excerpt: String = message_text.chars().take(140).collect();
    let reasons = ProposalReasons {
        summary: format!("Their reply (`{message_id}`) reads as `{classification}`: “{excerpt}”."),
        classification: Some(classification),
        message_id: Some(message_id.to_owned()),
        ..ProposalReasons::default()
    };
    let reasons = json_text(&reasons)?;
    let texts = [RenderedText {
        step_index: 0,
        kind: StepType::Message,
        variant: None,
        subject: None,
        text,
        drafted_by: Some(DraftedBy::Template),
        fallback_reason: None,
    }];
    let approval_id = ids::new_id("apr");
    approvals::insert_pending(
        conn,
        workspace_id,
        &proposer(&run.agent, &run.person_id),
        work.now,
        &[NewApproval {
            id: &approval_id,
            kind: ApprovalKind::Reply,
            subject_id: conversation_id,
            sequence_id: None,
            prospect_id,
            sender_id: Some(&sender_id),
            texts: &texts,
            run: Some((&run.id, &run.agent.id)),
            drafted_by: Some(DraftedBy::Template),
            reasons: Some(&reasons),
            expires_at: Some(work.expires_at),
        }],
    )
    .await?;
    Ok(Some(approval_id))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replies_are_classified_by_their_phrases() {
        let cases = [
            (
                "Please unsubscribe me from this.",
                Classification::Unsubscribe,
            ),
            (
                "Remove me from your list, not interested",
                Classification::Unsubscribe,
            ),
            ("Not interested, thanks.", Classification::NotInterested),
            ("No thanks — we're all set.", Classification::NotInterested),
            (
                "I am out of the office until Monday with limited access to email.",
                Classification::OutOfOffice,
            ),
            (
                "Automatic reply: away until the 3rd. Questions? Ask Bob.",
                Classification::OutOfOffice,
            ),
            (
                "Sounds good, let's talk next week",
                Classification::Positive,
            ),
            ("Yes, I'd love to see a demo.", Classification::Positive),
            ("What does it cost?", Classification::Question),
            (
                "Could we set up a call next week?",
                Classification::Question,
            ),
            ("Thanks for reaching out.", Classification::Unclear),
            ("Not sure we need this.", Classification::NotInterested),
            ("Not really interested.", Classification::NotInterested),
            (
                "We don't want a demo, thanks",
                Classification::NotInterested,
            ),
            ("Yes! Not a problem, let's talk", Classification::Positive),
        ];
        for (text, expected) in cases {
            assert_eq!(classify(text).0, expected, "{text}");
        }
    }

    #[test]
    fn phrases_match_whole_words_only() {
        // "yesterday" is not "yes", "demographics" not "demo".
        assert_eq!(
            classify("I read your note yesterday about demographics.").0,
            Classification::Unclear
        );
        assert_eq!(classify("yes").0, Classification::Positive);
    }

    #[test]
    fn the_default_templates_parse() {
        check_templates(&ReplyTemplates {
            positive: Some(DEFAULT_POSITIVE.to_owned()),
            question: Some(DEFAULT_QUESTION.to_owned()),
        })
        .expect("the defaults are valid templates");
        assert!(
            check_templates(&ReplyTemplates {
                positive: Some("Hi {{nickname}}".to_owned()),
                question: None,
            })
            .is_err()
        );
    }
}
