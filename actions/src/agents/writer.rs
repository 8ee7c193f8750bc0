//! The `writer`: draft the sequence's texts for a list (or given prospects) and propose them.
//!
//! Selection (free) runs the checks `add_to_sequence` runs on the agent's list, or on the run's
//! `prospect_ids`, in list order (oldest member first) or the order given, and keeps the eligible
//! ones up to the run's limit: do-not-contact, unreachable, busy elsewhere, contacted lately,
//! already enrolled, a template that does not render (a missing value, too long) are all left out
//! with their reason counted in the log. Processing (charged per prospect) drafts each step's text:
//! the rendered template, or, with a drafting model configured, the model's text under the same
//! checks with the template as its fallback ([`crate::drafting`]), each text marked with who wrote
//! it; then proposes the enrollment with those drafts for approval.

use std::collections::{BTreeMap, HashMap};

use sqlx::{AnyConnection, Row};

use super::execute::{NewItem, Outcome, Selection, Work, WorkItem};
use super::{Agent, list_of, proposer, sequence_locked, sequence_of};
use crate::approvals::propose::{self, Proposal, ProposalSource};
use crate::drafting::{Draft, DraftRequest};
use crate::sequences::DraftedBy;
use crate::sequences::RenderedText;
use outreach_runtime::prelude::ApiError;

/// How many prospects a run could draft for: the run's ids, or the list's members.
pub(crate) async fn count(
    conn: &mut AnyConnection,
    workspace_id: &str,
    agent: &Agent,
    input: &super::runs::RunInput,
) -> Result<i64, ApiError> {
    sequence_of(conn, workspace_id, agent).await?;
    if let Some(ids) = &input.prospect_ids {
        return Ok(i64::try_from(ids.len()).unwrap_or(i64::MAX));
    }
    let list = list_of(conn, workspace_id, agent).await?;
    Ok(sqlx::query(
        "select count(*) as n from list_members m join prospects p on p.id = m.prospect_id \
         where m.list_id = $1 and p.workspace_id = $2",
    )
    .bind(&list.id)
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
    let agent = &run.agent;
    let workspace_id = run.workspace_id.as_str();
    let sequence = sequence_of(conn, workspace_id, agent).await?;
    let (asked, source) = match &run.input.prospect_ids {
        Some(ids) => (ids.clone(), "the prospects the run was given".to_owned()),
        None => {
            let list = list_of(conn, workspace_id, agent).await?;
            let ids = sqlx::query(
                "select m.prospect_id from list_members m join prospects p on p.id = m.prospect_id \
                 where m.list_id = $1 and p.workspace_id = $2 order by m.added_at, m.prospect_id",
            )
            .bind(&list.id)
            .bind(workspace_id)
            .fetch_all(&mut *conn)
            .await?
            .iter()
            .map(|row| row.try_get::<String, _>("prospect_id"))
            .collect::<Result<Vec<_>, _>>()?;
            (ids, format!("list `{}`", list.name))
        }
    };
    let checked = propose::check_prospects(conn, workspace_id, &sequence, &asked, work.now).await?;
    let eligible = checked.eligible.len();
    let limit = run.input.capacity();
    let mut reasons: BTreeMap<String, usize> = BTreeMap::new();
    for skipped in &checked.skipped {
        *reasons
            .entry(skipped.reason.as_str().to_owned())
            .or_default() += 1;
    }
    let left_out = if reasons.is_empty() {
        "none left out".to_owned()
    } else {
        format!(
            "left out: {}",
            reasons
                .iter()
                .map(|(reason, n)| format!("{n} {reason}"))
                .collect::<Vec<_>>()
                .join(", ")
        )
    };
    let items: Vec<NewItem> = checked
        .eligible
        .into_iter()
        .take(limit)
        .map(|eligible| NewItem {
            prospect_id: eligible.prospect.id,
            conversation_id: None,
            reasons: None,
        })
        .collect();
    let log = vec![format!(
        "Selected {} of the {} prospects of {source} for sequence `{}` ({eligible} eligible; {left_out}).",
        items.len(),
        asked.len(),
        sequence.name
    )];
    Ok(Selection { items, log })
}

/// A text drafted ahead of the batch's transaction, with the rendered template it was drafted
/// from (the fallback, and the check that nothing changed meanwhile).
pub(crate) struct DraftedAhead {
    pub step_index: u32,
    pub rendered: String,
    pub draft: Draft,
}

/// Texts drafted ahead, by prospect.
pub(crate) type Drafted = HashMap<String, Vec<DraftedAhead>>;

/// Drafts the next batch's texts with the drafting model, outside any transaction: the model may
/// take seconds per text, and no write (on SQLite, no writer at all) may wait on it. The batch's
/// transaction then takes these drafts for the texts that still render the same.
pub(crate) async fn draft_ahead(
    conn: &mut AnyConnection,
    work: &Work<'_>,
) -> Result<Drafted, ApiError> {
    let run = work.run;
    let workspace_id = run.workspace_id.as_str();
    let Ok(sequence) = sequence_of(conn, workspace_id, &run.agent).await else {
        return Ok(Drafted::new());
    };
    let asked: Vec<String> = sqlx::query(
        "select prospect_id from agent_run_items where run_id = $1 and state = 'pending' order by position limit $2",
    )
    .bind(&run.id)
    .bind(i64::try_from(super::execute::BATCH).unwrap_or(10))
    .fetch_all(&mut *conn)
    .await?
    .iter()
    .map(|row| row.try_get::<String, _>("prospect_id"))
    .collect::<Result<_, _>>()?;
    let checked = propose::check_prospects(conn, workspace_id, &sequence, &asked, work.now).await?;
    let mut drafted = Drafted::new();
    for eligible in &checked.eligible {
        let mut drafts = Vec::with_capacity(eligible.texts.len());
        for rendered in &eligible.texts {
            let step = usize::try_from(rendered.step_index)
                .ok()
                .and_then(|index| sequence.steps.get(index));
            // A/B variants are the author's words, compared as written: the model drafts only
            // steps without variants.
            if rendered.variant.is_some() {
                continue;
            }
            let Some((template, limit)) =
                step.and_then(|step| step.template_of(rendered.variant.as_deref()))
            else {
                continue;
            };
            let draft = work
                .drafter
                .draft(&DraftRequest {
                    prospect: &eligible.prospect,
                    step_kind: rendered.kind,
                    template,
                    rendered: &rendered.text,
                    limit,
                    sequence_name: &sequence.name,
                })
                .await;
            drafts.push(DraftedAhead {
                step_index: rendered.step_index,
                rendered: rendered.text.clone(),
                draft,
            });
        }
        drafted.insert(eligible.prospect.id.clone(), drafts);
    }
    Ok(drafted)
}

pub(crate) async fn process(
    conn: &mut AnyConnection,
    work: &Work<'_>,
    items: &[WorkItem],
) -> Result<Vec<Outcome>, ApiError> {
    let run = work.run;
    let agent = &run.agent;
    let workspace_id = run.workspace_id.as_str();
    // The batch's people are locked before the sequence (see `person_lock`): their enrollments
    // and approval items are written below.
    let people = items.iter().map(|item| item.prospect_id.as_str());
    let conn = &mut crate::person_lock::lock(conn, workspace_id, people).await?;
    let sequence = sequence_locked(conn, workspace_id, agent, work.now).await?;
    let asked: Vec<String> = items.iter().map(|item| item.prospect_id.clone()).collect();
    let checked = propose::check_prospects(conn, workspace_id, &sequence, &asked, work.now).await?;

    let mut drafts: Vec<(Vec<RenderedText>, DraftedBy, usize)> =
        Vec::with_capacity(checked.eligible.len());
    for eligible in &checked.eligible {
        let ahead = work.drafted.get(&eligible.prospect.id);
        let mut texts = Vec::with_capacity(eligible.texts.len());
        let mut by_model = 0;
        for rendered in &eligible.texts {
            // The draft made ahead of this transaction, if the text it was made from is still
            // the one that renders now.
            let draft = ahead.and_then(|drafts| {
                drafts
                    .iter()
                    .find(|d| d.step_index == rendered.step_index && d.rendered == rendered.text)
            });
            let text = match draft {
                Some(drafted) => RenderedText {
                    text: drafted.draft.text.clone(),
                    drafted_by: Some(drafted.draft.drafted_by),
                    fallback_reason: drafted.draft.fallback_reason.clone(),
                    ..rendered.clone()
                },
                None => RenderedText {
                    drafted_by: Some(DraftedBy::Template),
                    fallback_reason: (work.drafter.is_configured() && rendered.variant.is_none()).then(|| {
                        "the model's draft was not ready for this batch (the sequence or the prospect changed while it was drafted, or drafting ahead failed); the template was used"
                            .to_owned()
                    }),
                    ..rendered.clone()
                },
            };
            if text.drafted_by == Some(DraftedBy::Llm) {
                by_model += 1;
            }
            texts.push(text);
        }
        let drafted_by = if by_model > 0 && by_model == texts.len() {
            DraftedBy::Llm
        } else {
            DraftedBy::Template
        };
        drafts.push((texts, drafted_by, by_model));
    }
    let proposals: Vec<Proposal<'_>> = checked
        .eligible
        .iter()
        .zip(&drafts)
        .map(|(eligible, (texts, drafted_by, _))| Proposal {
            prospect_id: &eligible.prospect.id,
            texts,
            drafted_by: Some(*drafted_by),
            reasons: None,
        })
        .collect();
    let source = ProposalSource {
        proposed_by: proposer(agent, &run.person_id),
        run: Some((&run.id, &agent.id)),
        expires_at: Some(work.expires_at),
    };
    let added =
        propose::propose(conn, workspace_id, &sequence, &proposals, &source, work.now).await?;
    Ok(items
        .iter()
        .map(|item| {
            let drafted = checked
                .eligible
                .iter()
                .zip(&drafts)
                .find(|(eligible, _)| eligible.prospect.id == item.prospect_id);
            match (
                added.iter().find(|a| a.prospect_id == item.prospect_id),
                drafted,
            ) {
                (Some(added), Some((_, (texts, _, by_model)))) => Outcome::Proposed(
                    vec![added.approval_id.clone()],
                    format!(
                        "drafted {} texts ({by_model} by the drafting model, {} from the template) and proposed them as `{}`.",
                        texts.len(),
                        texts.len() - by_model,
                        added.approval_id
                    ),
                ),
                _ => Outcome::Done(
                    checked
                        .skipped
                        .iter()
                        .find(|s| s.prospect_id == item.prospect_id)
                        .map_or_else(
                            || "not proposed.".to_owned(),
                            |s| format!("not proposed ({}): {}", s.reason, s.detail),
                        ),
                ),
            }
        })
        .collect())
}
