//! The `prospector`: find prospects worth contacting and propose them for the agent's sequence.
//!
//! Selection (free) takes the workspace's candidates: not do-not-contact, reachable (a profile
//! URL), in no live sequence and never in this one, not contacted within the sequence's
//! `skip_if_contacted_within_days`. It scores them with the scoring engine against the agent's
//! targeting, keeps those at `min_tier` or better (never one a gate disqualified), best first, up to
//! the run's limit, and remembers for each why it was chosen: its score, tier and the criteria that
//! matched. Processing (charged per prospect) checks each again as `add_to_sequence` would,
//! records its score on the prospect, adds it to the agent's list and proposes it for the sequence
//! with its rendered texts and those reasons. Everything is a pure function of the inputs and the
//! workspace: the same workspace gives the same selection, in the same order.

use std::borrow::Cow;

use sqlx::{AnyConnection, AssertSqlSafe, Row};

use super::execute::{NewItem, Outcome, Selection, Work, WorkItem};
use super::{Agent, list_of, proposer, sequence_locked, sequence_of, targeting_of};
use crate::approvals::ProposalReasons;
use crate::approvals::propose::{self, Proposal, ProposalSource};
use crate::common::json_text;
use crate::prospects::Tier;
use crate::scoring::engine::{MatchedCriterion, Scorer, Scratch};
use crate::scoring::run::{Packed, packed_prospect};
use crate::sequences::DraftedBy;
use crate::step_jobs::LIVE_SQL;
use outreach_runtime::prelude::ApiError;

const DAY_MS: i64 = 24 * 3_600_000;

/// The candidates' filter, `p` the prospect: `$1` the workspace, `$2` the time before which the
/// last contact must be, `$3` the agent's sequence.
fn candidates_where() -> String {
    format!(
        "p.workspace_id = $1 and p.do_not_contact = 0 and p.profile_url is not null \
         and (p.last_contacted_at is null or p.last_contacted_at < $2) \
         and not exists (select 1 from enrollments e where e.workspace_id = $1 and e.prospect_id = p.id \
         and (e.sequence_id = $3 or e.status in {LIVE_SQL}))"
    )
}

/// Last contacts at or after this time exclude a prospect.
fn contacted_since(days: u32, now: i64) -> i64 {
    if days == 0 {
        i64::MAX
    } else {
        now - i64::from(days) * DAY_MS
    }
}

/// How many candidates there are (before scoring): the most a run could process.
pub(crate) async fn count(
    conn: &mut AnyConnection,
    workspace_id: &str,
    agent: &Agent,
    now: i64,
) -> Result<i64, ApiError> {
    targeting_of(conn, workspace_id, agent).await?;
    list_of(conn, workspace_id, agent).await?;
    let sequence = sequence_of(conn, workspace_id, agent).await?;
    let sql = format!(
        "select count(*) as n from prospects p where {}",
        candidates_where()
    );
    Ok(sqlx::query(AssertSqlSafe(sql))
        .bind(workspace_id)
        .bind(contacted_since(
            sequence.settings.skip_if_contacted_within_days,
            now,
        ))
        .bind(&sequence.id)
        .fetch_one(conn)
        .await?
        .try_get("n")?)
}

/// One scored candidate.
struct Scored {
    id: String,
    score: i64,
    tier: Tier,
    matched: Vec<MatchedCriterion<'static>>,
}

fn owned(criterion: &MatchedCriterion<'_>) -> MatchedCriterion<'static> {
    MatchedCriterion {
        criterion: Cow::Owned(criterion.criterion.clone().into_owned()),
        value: Cow::Owned(criterion.value.clone().into_owned()),
        field: Cow::Owned(criterion.field.clone().into_owned()),
        points: criterion.points,
    }
}

pub(crate) async fn select(
    conn: &mut AnyConnection,
    work: &Work<'_>,
) -> Result<Selection, ApiError> {
    let run = work.run;
    let agent = &run.agent;
    let workspace_id = run.workspace_id.as_str();
    let targeting = targeting_of(conn, workspace_id, agent).await?;
    list_of(conn, workspace_id, agent).await?;
    let sequence = sequence_of(conn, workspace_id, agent).await?;
    let days = sequence.settings.skip_if_contacted_within_days;
    let sql = format!(
        "select {} from prospects p where {} order by p.id",
        packed_prospect(work.db.backend()),
        candidates_where()
    );
    let rows = sqlx::query(AssertSqlSafe(sql))
        .bind(workspace_id)
        .bind(contacted_since(days, work.now))
        .bind(&sequence.id)
        .fetch_all(&mut *conn)
        .await?;
    let scorer = Scorer::new(&targeting.criteria, &targeting.gates, targeting.tiers);
    let mut scratch = Scratch::default();
    let mut kept = Vec::new();
    let (mut below, mut gated) = (0, 0);
    for row in &rows {
        let text: &str = row.try_get(0)?;
        let packed: Packed<'_> = serde_json::from_str(text).map_err(ApiError::internal)?;
        let outcome = scorer.score(&packed.fields(), &mut scratch);
        if outcome.tier == Tier::Disqualified {
            gated += 1;
        } else if outcome.tier > agent.min_tier {
            below += 1;
        } else {
            kept.push(Scored {
                id: packed.id.into_owned(),
                score: outcome.score,
                tier: outcome.tier,
                matched: outcome.matched.iter().map(owned).collect(),
            });
        }
    }
    let candidates = rows.len();
    drop(rows);
    kept.sort_by(|a, b| b.score.cmp(&a.score).then_with(|| a.id.cmp(&b.id)));
    let qualified = kept.len();
    kept.truncate(run.input.capacity());
    let capped = if qualified > kept.len() {
        format!(
            " (a run takes at most {}: its limit of {}, and the {} its reservation covers; the others wait for the next run)",
            kept.len(),
            run.input.limit,
            run.input.reserved
        )
    } else {
        String::new()
    };
    let within = if days == 0 {
        String::new()
    } else {
        format!(", not contacted within {days} days")
    };
    let mut log = vec![format!(
        "Selected {} of {candidates} candidates (not do-not-contact, reachable, in no live sequence and never in \
         sequence `{}`{within}): {qualified} scored tier {} or better against targeting `{}` (version {}), {below} \
         scored lower and {gated} were disqualified by a gate; the best {} by score are kept{capped}.",
        kept.len(),
        sequence.id,
        agent.min_tier.as_str(),
        targeting.name,
        targeting.version,
        kept.len()
    )];
    if let (Some(best), Some(worst)) = (kept.first(), kept.last()) {
        log.push(format!(
            "Scores from {} (`{}`) down to {} (`{}`).",
            best.score, best.id, worst.score, worst.id
        ));
    }
    let items = kept
        .into_iter()
        .map(|scored| {
            let summary = reasons_sentence(&scored, &targeting.name);
            let reasons = ProposalReasons {
                summary,
                score: Some(scored.score),
                tier: Some(scored.tier),
                targeting_id: Some(targeting.id.clone()),
                matched: scored.matched,
                ..ProposalReasons::default()
            };
            Ok(NewItem {
                prospect_id: scored.id,
                conversation_id: None,
                reasons: Some(json_text(&reasons)?),
            })
        })
        .collect::<Result<_, ApiError>>()?;
    Ok(Selection { items, log })
}

/// "Score 72 (tier b) against `ICP`: `titles` `VP Sales` in title (+30), ...".
fn reasons_sentence(scored: &Scored, targeting_name: &str) -> String {
    let matched: Vec<String> = scored
        .matched
        .iter()
        .map(|m| {
            format!(
                "{} `{}` in {} ({:+})",
                m.criterion, m.value, m.field, m.points
            )
        })
        .collect();
    let matched = if matched.is_empty() {
        "no criterion matched".to_owned()
    } else {
        matched.join(", ")
    };
    format!(
        "Score {} (tier {}) against targeting `{targeting_name}`: {matched}.",
        scored.score,
        scored.tier.as_str()
    )
}

pub(crate) async fn process(
    conn: &mut AnyConnection,
    work: &Work<'_>,
    items: &[WorkItem],
) -> Result<Vec<Outcome>, ApiError> {
    let run = work.run;
    let agent = &run.agent;
    let workspace_id = run.workspace_id.as_str();
    let targeting = targeting_of(conn, workspace_id, agent).await?;
    let list = list_of(conn, workspace_id, agent).await?;
    // The batch's people are locked before the sequence (see `person_lock`): their enrollments
    // and approval items are written below.
    let people = items.iter().map(|item| item.prospect_id.as_str());
    let conn = &mut crate::person_lock::lock(conn, workspace_id, people).await?;
    let sequence = sequence_locked(conn, workspace_id, agent, work.now).await?;
    let asked: Vec<String> = items.iter().map(|item| item.prospect_id.clone()).collect();
    let checked = propose::check_prospects(conn, workspace_id, &sequence, &asked, work.now).await?;

    let mut reasons_of = std::collections::HashMap::new();
    for item in items {
        let reasons: Option<ProposalReasons> = item
            .reasons
            .as_deref()
            .map(serde_json::from_str)
            .transpose()
            .map_err(ApiError::internal)?;
        reasons_of.insert(
            item.prospect_id.as_str(),
            (item.reasons.as_deref(), reasons),
        );
    }
    // The scores the selection computed become the prospects' latest, as a scoring run's do, and
    // the kept prospects join the agent's list.
    for eligible in &checked.eligible {
        let Some((_, Some(reasons))) = reasons_of.get(eligible.prospect.id.as_str()) else {
            continue;
        };
        crate::prospects::set_score(
            conn,
            workspace_id,
            &eligible.prospect.id,
            reasons.score,
            reasons.tier,
            &targeting.id,
            targeting.version,
            work.now,
        )
        .await?;
        crate::lists::add_member(
            conn,
            workspace_id,
            &list.id,
            &eligible.prospect.id,
            work.now,
        )
        .await?;
    }
    let texts: Vec<Vec<crate::sequences::RenderedText>> = checked
        .eligible
        .iter()
        .map(|eligible| {
            eligible
                .texts
                .iter()
                .cloned()
                .map(|mut text| {
                    text.drafted_by = Some(DraftedBy::Template);
                    text
                })
                .collect()
        })
        .collect();
    let proposals: Vec<Proposal<'_>> = checked
        .eligible
        .iter()
        .zip(&texts)
        .map(|(eligible, texts)| Proposal {
            prospect_id: &eligible.prospect.id,
            texts,
            drafted_by: Some(DraftedBy::Template),
            reasons: reasons_of
                .get(eligible.prospect.id.as_str())
                .and_then(|(text, _)| text.map(str::to_owned)),
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
            if let Some(added) = added.iter().find(|a| a.prospect_id == item.prospect_id) {
                let score = reasons_of
                    .get(item.prospect_id.as_str())
                    .and_then(|(_, reasons)| reasons.as_ref())
                    .and_then(|r| r.score.zip(r.tier))
                    .map(|(score, tier)| format!(" (score {score}, tier {})", tier.as_str()))
                    .unwrap_or_default();
                Outcome::Proposed(
                    vec![added.approval_id.clone()],
                    format!(
                        "added to list `{}` and proposed for sequence `{}`{score} as `{}`.",
                        list.name, sequence.name, added.approval_id
                    ),
                )
            } else {
                let why = checked
                    .skipped
                    .iter()
                    .find(|s| s.prospect_id == item.prospect_id)
                    .map_or_else(
                        || "not proposed.".to_owned(),
                        |s| format!("not proposed ({}): {}", s.reason, s.detail),
                    );
                Outcome::Done(why)
            }
        })
        .collect())
}
