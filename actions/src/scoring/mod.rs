//! Scoring runs: score prospects against a targeting, keep every result, and give each prospect
//! its latest score and tier.
//!
//! The rule lives in [`engine`] (pure and unit-tested); writing a run lives in [`run`], which list
//! processing reuses. A run is synchronous: it finishes inside the request that starts it, in one
//! transaction with its spend. Scoring is cheap (well over 50,000 prospects a second end to end on
//! SQLite), so even a 100,000-prospect list answers in a few seconds, and a caller gets the
//! counts, or an error with nothing written and nothing spent, without polling. Runs are
//! therefore only ever seen `completed`.

pub mod engine;
pub mod run;

use outreach_runtime::prelude::paged;
use outreach_runtime::prelude::{
    ApiError, Ctx, Page, PageParams, Priced, Timestamp, action, price_item,
};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use sqlx::any::AnyRow;
use sqlx::{AssertSqlSafe, Row};

use crate::common::IdKind;
use crate::prospects::Tier;
use crate::targeting::{self, Targeting};
use engine::{FailedGate, MatchedCriterion};
pub use run::{Subject, score_prospects};

outreach_runtime::prelude::resource_tag!(
    "scoring-runs",
    toolset = "prospecting",
    "Scoring prospects against a targeting: score, tier, matched criteria and gaps."
);

price_item! {
    /// A prospect scored by a scoring run.
    pub SCORING_PROSPECT = "scoring.prospect", 1;
}

/// How many prospects of a run fell in each tier.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, JsonSchema)]
pub struct TierCounts {
    pub a: i64,
    pub b: i64,
    pub c: i64,
    pub d: i64,
    pub disqualified: i64,
}

impl TierCounts {
    pub fn add(&mut self, tier: Tier) {
        match tier {
            Tier::A => self.a += 1,
            Tier::B => self.b += 1,
            Tier::C => self.c += 1,
            Tier::D => self.d += 1,
            Tier::Disqualified => self.disqualified += 1,
        }
    }

    pub fn total(&self) -> i64 {
        self.a + self.b + self.c + self.d + self.disqualified
    }
}

/// A scoring run as the API shows it.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct ScoringRun {
    pub id: String,
    /// Always `completed`: a run finishes inside the request that starts it.
    pub status: RunStatus,
    /// The targeting the prospects were scored against.
    pub targeting_id: String,
    /// The targeting's version at the time of the run.
    pub targeting_version: i64,
    /// The list scored, when the run was over a list.
    pub list_id: Option<String>,
    /// Prospects scored.
    pub total: i64,
    /// Prospects scored, by tier.
    pub by_tier: TierCounts,
    /// Credits the run spent: one unit price per prospect scored.
    pub credits_spent: i64,
    pub created_at: Timestamp,
    pub completed_at: Option<Timestamp>,
}

outreach_runtime::prelude::text_enum! {
    /// Where a scoring run stands.
    pub enum RunStatus {
        /// Scoring inside the request that started it (never seen by a caller).
        Running => "running",
        /// Finished: results, scores and spend are written.
        Completed => "completed",
    }
}

const RUN_COLUMNS: &str = "id, status, targeting_id, targeting_version, list_id, total, tier_a, tier_b, tier_c, tier_d, \
    disqualified, credits_spent, created_at, completed_at";

impl ScoringRun {
    fn from_row(row: &AnyRow) -> Result<Self, ApiError> {
        Ok(Self {
            id: row.try_get("id")?,
            status: RunStatus::from_db(&row.try_get::<String, _>("status")?)?,
            targeting_id: row.try_get("targeting_id")?,
            targeting_version: row.try_get("targeting_version")?,
            list_id: row.try_get("list_id")?,
            total: row.try_get("total")?,
            by_tier: TierCounts {
                a: row.try_get("tier_a")?,
                b: row.try_get("tier_b")?,
                c: row.try_get("tier_c")?,
                d: row.try_get("tier_d")?,
                disqualified: row.try_get("disqualified")?,
            },
            credits_spent: row.try_get("credits_spent")?,
            created_at: Timestamp(row.try_get("created_at")?),
            completed_at: row
                .try_get::<Option<i64>, _>("completed_at")?
                .map(Timestamp),
        })
    }
}

/// The input of `start_scoring_run`: a list or prospect ids (exactly one), and a targeting.
#[derive(Debug, Deserialize, JsonSchema)]
#[schemars(extend("not" = {"anyOf": [{"required": ["list_id", "prospect_ids"], "properties": {"list_id": {"not": {"type": "null"}}, "prospect_ids": {"not": {"type": "null"}}}}, {"properties": {"list_id": {"type": "null"}, "prospect_ids": {"type": "null"}}}]}))]
pub struct StartScoringRunInput {
    /// `lst_...`; or `prospect_ids`, not both.
    pub list_id: Option<String>,
    /// `prs_...`
    ///
    /// A repeated id is scored once.
    #[schemars(length(min = 1, max = 10000))]
    pub prospect_ids: Option<Vec<String>>,
    /// `tgt_...`
    pub targeting_id: String,
}

/// The checked subject of a run, owning its deduplicated ids.
enum Checked {
    List(String),
    Prospects(Vec<String>),
}

impl Checked {
    fn subject(&self) -> Subject<'_> {
        match self {
            Checked::List(id) => Subject::List(id),
            Checked::Prospects(ids) => Subject::Prospects(ids),
        }
    }
}

impl StartScoringRunInput {
    fn check(&self) -> Result<Checked, ApiError> {
        match (&self.list_id, &self.prospect_ids) {
            (Some(_), Some(_)) => Err(ApiError::invalid_request(
                "Give `list_id` or `prospect_ids`, not both.",
            )),
            (None, None) => Err(ApiError::invalid_request(
                "Give the prospects to score: `list_id` or `prospect_ids`.",
            )),
            (Some(list_id), None) => Ok(Checked::List(list_id.trim().to_owned())),
            (None, Some(prospect_ids)) => {
                if prospect_ids.is_empty() {
                    return Err(ApiError::invalid_request(
                        "`prospect_ids` must name at least one prospect.",
                    ));
                }
                let mut distinct: Vec<String> =
                    prospect_ids.iter().map(|id| id.trim().to_owned()).collect();
                distinct.sort_unstable();
                distinct.dedup();
                if distinct.len() > run::MAX_PROSPECT_IDS {
                    return Err(ApiError::invalid_request(format!(
                        "`prospect_ids` holds at most {} ids; got {}. Put larger sets in a list and score the list.",
                        run::MAX_PROSPECT_IDS,
                        distinct.len()
                    )));
                }
                Ok(Checked::Prospects(distinct))
            }
        }
    }
}

/// What a run will score, worked out by its price function.
pub struct ScoringPlan {
    checked: Checked,
    targeting: Targeting,
}

/// The price of a run: one `scoring.prospect` per prospect it would score.
async fn price_scoring(
    ctx: &Ctx,
    input: &StartScoringRunInput,
) -> Result<Priced<ScoringPlan>, ApiError> {
    let checked = input.check()?;
    let targeting =
        targeting::fetch(ctx.db().pool(), ctx.workspace_id(), &input.targeting_id).await?;
    let prospects = run::count(ctx, checked.subject()).await?;
    Ok(ctx
        .price(SCORING_PROSPECT, prospects)
        .detail("prospects", prospects)
        .plan(ScoringPlan { checked, targeting }))
}

/// Score prospects against a targeting.
///
/// Scores a list's members or `prospect_ids`; each keeps its score and tier as its latest. Costs
/// one `scoring.prospect` unit (1 credit by default) per prospect; `estimate_only` prices it.
///
/// Returns the run with its counts by tier. Each score (0 to 100) comes with what matched and
/// what was missing (`list_scoring_results`). The run, the scores and the spend are written
/// together within the request. Honours `Idempotency-Key`.
#[action(scope = "write", credits = price_scoring, idempotent, http = "POST /scoring-runs")]
pub async fn start_scoring_run(
    ctx: Ctx,
    _input: StartScoringRunInput,
    plan: ScoringPlan,
) -> Result<ScoringRun, ApiError> {
    // The transaction's reservation takes the workspace row first, as every priced transaction
    // does: one lock order, so two of them cannot deadlock on PostgreSQL.
    let mut tx = ctx.tx().await?;
    let run = score_prospects(
        &ctx,
        &mut tx,
        &plan.targeting,
        plan.checked.subject(),
        ctx.unit_price(SCORING_PROSPECT),
    )
    .await?;
    // A list that grew since it was priced costs more than was reserved: a 409, and the run
    // rolls back whole.
    ctx.settle(&mut tx, run.credits_spent, &run.id).await?;
    crate::credits::spent(&mut tx, ctx.workspace_id(), run.credits_spent, ctx.now_ms()).await?;
    Ok(run)
}

outreach_runtime::prelude::example!(start_scoring_run,
    request: {"list_id": "lst_R4d0zhECHdJUnPY7RrLC", "targeting_id": "tgt_vGZf5Xhp2UaJ5CH2dq84"},
    response: {
        "by_tier": {"a": 1, "b": 0, "c": 1, "d": 0, "disqualified": 0},
        "completed_at": "2026-11-23T18:22:30.092Z",
        "created_at": "2026-11-23T18:22:30.091Z",
        "credits_spent": 2,
        "id": "scr_mWmJJ8SkWmMn4SLpe7Ec",
        "list_id": "lst_R4d0zhECHdJUnPY7RrLC",
        "status": "completed",
        "targeting_id": "tgt_vGZf5Xhp2UaJ5CH2dq84",
        "targeting_version": 2,
        "total": 2
    }
);

outreach_runtime::prelude::parity!(start_scoring_run, write,
    ok: {"list_id": "$list", "targeting_id": "$targeting"},
    fails: {"targeting_id": "$targeting"} => INVALID_REQUEST
);

async fn fetch_run(ctx: &Ctx, id: &str) -> Result<ScoringRun, ApiError> {
    IdKind::ScoringRun.check(id)?;
    let row = sqlx::query(AssertSqlSafe(format!(
        "select {RUN_COLUMNS} from scoring_runs where workspace_id = $1 and id = $2"
    )))
    .bind(ctx.workspace_id())
    .bind(id)
    .fetch_optional(ctx.db().pool())
    .await?
    .ok_or_else(|| IdKind::ScoringRun.not_found(id))?;
    ScoringRun::from_row(&row)
}

/// The input of `get_scoring_run`.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct ScoringRunId {
    /// `scr_...`
    pub id: String,
}

/// Get a scoring run by id.
#[action(scope = "read", http = "GET /scoring-runs/{id}")]
pub async fn get_scoring_run(ctx: Ctx, input: ScoringRunId) -> Result<ScoringRun, ApiError> {
    fetch_run(&ctx, &input.id).await
}

outreach_runtime::prelude::example!(get_scoring_run,
    request: {"id": "scr_mWmJJ8SkWmMn4SLpe7Ec"},
    response: {
        "by_tier": {"a": 1, "b": 0, "c": 1, "d": 0, "disqualified": 0},
        "completed_at": "2026-11-23T18:22:30.092Z",
        "created_at": "2026-11-23T18:22:30.091Z",
        "credits_spent": 2,
        "id": "scr_mWmJJ8SkWmMn4SLpe7Ec",
        "list_id": "lst_R4d0zhECHdJUnPY7RrLC",
        "status": "completed",
        "targeting_id": "tgt_vGZf5Xhp2UaJ5CH2dq84",
        "targeting_version": 2,
        "total": 2
    }
);

outreach_runtime::prelude::parity!(get_scoring_run, read,
    ok: {"id": "$run"},
    fails: {"id": "$missing:scr"} => NOT_FOUND
);

/// The input of `list_scoring_runs`.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct ListScoringRunsInput {
    /// `tgt_...`
    pub targeting_id: Option<String>,
    /// `lst_...`
    pub list_id: Option<String>,
    #[serde(flatten)]
    pub page: PageParams,
}

/// List scoring runs, newest first.
#[action(scope = "read", http = "GET /scoring-runs")]
pub async fn list_scoring_runs(
    ctx: Ctx,
    input: ListScoringRunsInput,
) -> Result<Page<ScoringRun>, ApiError> {
    let mut filter = String::from("workspace_id = $1");
    let mut binds: Vec<&str> = vec![ctx.workspace_id()];
    for (column, value) in [
        ("targeting_id", &input.targeting_id),
        ("list_id", &input.list_id),
    ] {
        if let Some(value) = value
            .as_deref()
            .map(str::trim)
            .filter(|value| !value.is_empty())
        {
            binds.push(value);
            filter.push_str(&format!(" and {column} = ${}", binds.len()));
        }
    }
    let sql = format!(
        "select {RUN_COLUMNS} from scoring_runs where {filter} order by created_at desc, id desc limit ${} offset ${}",
        binds.len() + 1,
        binds.len() + 2
    );
    paged(
        ctx.db().pool(),
        input.page,
        format!("select count(*) from scoring_runs where {filter}"),
        sql,
        |query| binds.iter().fold(query, |query, bind| query.bind(*bind)),
        ScoringRun::from_row,
    )
    .await
}

outreach_runtime::prelude::example!(list_scoring_runs,
    request: {"limit": 25, "list_id": "lst_R4d0zhECHdJUnPY7RrLC"},
    response: {
        "count": 1,
        "has_more": false,
        "items": [
            {
                "by_tier": {"a": 1, "b": 0, "c": 1, "d": 0, "disqualified": 0},
                "completed_at": "2026-11-23T18:22:30.092Z",
                "created_at": "2026-11-23T18:22:30.091Z",
                "credits_spent": 2,
                "id": "scr_mWmJJ8SkWmMn4SLpe7Ec",
                "list_id": "lst_R4d0zhECHdJUnPY7RrLC",
                "status": "completed",
                "targeting_id": "tgt_vGZf5Xhp2UaJ5CH2dq84",
                "targeting_version": 2,
                "total": 2
            }
        ],
        "next_offset": null,
        "offset": 0,
        "total": 1
    }
);

outreach_runtime::prelude::parity!(list_scoring_runs, read,
    ok: {"limit": 5, "targeting_id": "$targeting"},
    fails: {"limit": 0} => INVALID_REQUEST
);

/// One prospect's result in a scoring run.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct ScoringResult {
    pub prospect_id: String,
    /// The prospect's name, title and company now, to read the results without a lookup each.
    pub full_name: Option<String>,
    pub title: Option<String>,
    pub company_name: Option<String>,
    /// 0 to 100: the points earned over the points available, rounded half up.
    pub score: i64,
    pub tier: Tier,
    /// The criteria that earned points: each group's best match.
    pub matched: Vec<MatchedCriterion<'static>>,
    /// The gates that disqualified the prospect (then `score` is 0 and nothing is matched).
    pub gates_failed: Vec<FailedGate<'static>>,
    /// The prospect fields the targeting reads that the prospect lacked.
    pub missing: Vec<String>,
}

impl ScoringResult {
    fn from_row(row: &AnyRow) -> Result<Self, ApiError> {
        let json =
            |column: &str| -> Result<String, ApiError> { Ok(row.try_get::<String, _>(column)?) };
        let tier: String = row.try_get("tier")?;
        let first: Option<String> = row.try_get("first_name")?;
        let last: Option<String> = row.try_get("last_name")?;
        let full_name = match (first, last) {
            (Some(first), Some(last)) => Some(format!("{first} {last}")),
            (one, None) | (None, one) => one,
        };
        Ok(Self {
            prospect_id: row.try_get("prospect_id")?,
            full_name,
            title: row.try_get("title")?,
            company_name: row.try_get("company_name")?,
            score: row.try_get("score")?,
            tier: Tier::parse(&tier)
                .ok_or_else(|| ApiError::internal(format!("stored tier `{tier}`")))?,
            matched: serde_json::from_str(&json("matched")?).map_err(ApiError::internal)?,
            gates_failed: serde_json::from_str(&json("gates_failed")?)
                .map_err(ApiError::internal)?,
            missing: serde_json::from_str(&json("missing")?).map_err(ApiError::internal)?,
        })
    }
}

/// The input of `list_scoring_results`.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct ListScoringResultsInput {
    /// `scr_...`
    pub id: String,
    pub tier: Option<Tier>,
    #[serde(flatten)]
    pub page: PageParams,
}

/// List the results of a scoring run, best first.
///
/// Per prospect: score, tier, criteria matched, gates failed, data missing.
///
/// Ordered by score (highest first), then prospect id. A prospect deleted since the run has no
/// result.
#[action(scope = "read", http = "GET /scoring-runs/{id}/results")]
pub async fn list_scoring_results(
    ctx: Ctx,
    input: ListScoringResultsInput,
) -> Result<Page<ScoringResult>, ApiError> {
    let run = fetch_run(&ctx, &input.id).await?;
    let tier = input.tier.map(Tier::as_str);
    let filter = if tier.is_some() {
        "r.run_id = $1 and r.tier = $2"
    } else {
        "r.run_id = $1"
    };
    let next = if tier.is_some() { 3 } else { 2 };
    let sql = format!(
        "select r.prospect_id, p.first_name, p.last_name, p.title, p.company_name, r.score, r.tier, r.matched, r.gates_failed, \
         r.missing from scoring_results r join prospects p on p.id = r.prospect_id where {filter} \
         order by r.score desc, r.prospect_id limit ${next} offset ${}",
        next + 1
    );
    paged(
        ctx.db().pool(),
        input.page,
        format!("select count(*) from scoring_results r where {filter}"),
        sql,
        |query| {
            let query = query.bind(&run.id);
            match tier {
                Some(tier) => query.bind(tier),
                None => query,
            }
        },
        ScoringResult::from_row,
    )
    .await
}

outreach_runtime::prelude::example!(list_scoring_results,
    request: {"id": "scr_mWmJJ8SkWmMn4SLpe7Ec", "limit": 25},
    response: {
        "count": 2,
        "has_more": false,
        "items": [
            {
                "company_name": "Analytical Engines GmbH",
                "full_name": "Ada Lovelace",
                "gates_failed": [],
                "matched": [
                    {
                        "criterion": "titles",
                        "field": "title",
                        "points": 40,
                        "value": "head of sales"
                    },
                    {
                        "criterion": "industries",
                        "field": "company_industry",
                        "points": 30,
                        "value": "software"
                    },
                    {
                        "criterion": "company_sizes",
                        "field": "company_size",
                        "points": 20,
                        "value": "50-500"
                    },
                    {
                        "criterion": "locations",
                        "field": "location",
                        "points": 10,
                        "value": "germany"
                    }
                ],
                "missing": [],
                "prospect_id": "prs_FU1sf4YwPhIYhWi6JHan",
                "score": 100,
                "tier": "a",
                "title": "Head of Sales"
            },
            {
                "company_name": "Compilers Inc",
                "full_name": "Grace Hopper",
                "gates_failed": [],
                "matched": [{"criterion": "titles", "field": "title", "points": 40, "value": "vp sales"}],
                "missing": ["company_industry", "company_size", "location", "country"],
                "prospect_id": "prs_EQ24XQ4HBGP11McdHhtE",
                "score": 40,
                "tier": "c",
                "title": "VP Sales"
            }
        ],
        "next_offset": null,
        "offset": 0,
        "total": 2
    }
);

outreach_runtime::prelude::parity!(list_scoring_results, read,
    ok: {"id": "$run", "limit": 5},
    fails: {"id": "$missing:scr"} => NOT_FOUND
);
