//! Prospects: create, read, list, update and delete the people a workspace may reach out to.
//!
//! Field names are part of the public contract (DESIGN.md section 10). The profile URL is stored
//! normalised and is unique per workspace, so a second create of the same person is a 409 naming
//! the prospect that already has it. Tags live twice: as a JSON array on the row (what is read)
//! and in `prospect_tags` (what the `tag` filter looks up), written in one transaction.

pub mod bulk;
pub mod do_not_contact;
pub(crate) mod normalize;
pub mod scores;
pub mod totals;

use std::collections::BTreeMap;
use std::sync::LazyLock;

use crate::common::{Deleted, IdKind, json_text};
use outreach_runtime::prelude::is_unique_violation;
use outreach_runtime::prelude::{AnyQuery, Bind, OrderTerm, SortedQuery, Total, paged_sorted};
use outreach_runtime::prelude::{ApiError, Ctx, Page, PageParams, Timestamp, action, ids};
use outreach_runtime::prelude::{Columns, Cursor, FromColumns};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use sqlx::any::AnyRow;
use sqlx::{AssertSqlSafe, Row};

outreach_runtime::prelude::resource_tag!(
    "prospects",
    toolset = "prospecting",
    "People you may reach out to: company, contact details, tags, custom fields and score."
);

/// A scored prospect's tier.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum Tier {
    A,
    B,
    C,
    D,
    Disqualified,
}

impl Tier {
    pub const ALL: [Tier; 5] = [Tier::A, Tier::B, Tier::C, Tier::D, Tier::Disqualified];

    pub fn as_str(self) -> &'static str {
        match self {
            Tier::A => "a",
            Tier::B => "b",
            Tier::C => "c",
            Tier::D => "d",
            Tier::Disqualified => "disqualified",
        }
    }

    pub fn parse(text: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|tier| tier.as_str() == text)
    }
}

// The fields are in alphabetical order: the order every answer writes an object's keys in (see
// `runtime/src/json.rs`), so a page of prospects is written as it comes, with no object to put in
// order (the test `prospect_fields_are_written_in_key_order` keeps it so).
/// A prospect as the API shows it.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct Prospect {
    pub company_domain: Option<String>,
    pub company_industry: Option<String>,
    pub company_name: Option<String>,
    /// Employees.
    pub company_size: Option<i64>,
    /// What the network last said of the connection with this person (set by outreach).
    pub connection_state: Option<String>,
    pub country: Option<String>,
    pub created_at: Timestamp,
    pub custom_fields: BTreeMap<String, Value>,
    pub department: Option<String>,
    /// Never contact this person.
    pub do_not_contact: bool,
    pub email: Option<String>,
    pub first_name: Option<String>,
    /// `first_name last_name`, derived.
    pub full_name: Option<String>,
    pub headline: Option<String>,
    pub id: String,
    /// When outreach last sent this person something (an invitation or a message).
    pub last_contacted_at: Option<Timestamp>,
    pub last_name: Option<String>,
    /// When this person last replied.
    pub last_replied_at: Option<Timestamp>,
    pub location: Option<String>,
    pub phone: Option<String>,
    /// The person's page on the network, normalised to `host/path` (e.g. `linkedin.com/in/jane-doe`).
    pub profile_url: Option<String>,
    /// The latest score (0 to 100), set by scoring runs.
    pub score: Option<i64>,
    /// When the prospect was last scored.
    pub scored_at: Option<Timestamp>,
    pub seniority: Option<String>,
    /// Where the prospect came from: `api` for this endpoint, `import` for imports.
    pub source: ProspectSource,
    pub tags: Vec<String>,
    /// The targeting the latest score was computed against.
    pub targeting_id: Option<String>,
    /// The version of that targeting.
    pub targeting_version: Option<i64>,
    /// The latest tier (`a`, `b`, `c`, `d`, `disqualified`), set by scoring runs.
    pub tier: Option<Tier>,
    pub timezone: Option<String>,
    pub title: Option<String>,
    pub updated_at: Timestamp,
}

outreach_runtime::prelude::text_enum! {
    /// Where a prospect came from.
    pub enum ProspectSource {
        /// Created by `create_prospect`.
        Api => "api",
        /// Created by `import_prospects`.
        Import => "import",
    }
}

// ----- the column table -----
//
// Every SQL statement that names a prospect's columns is made from these two lists: the SELECT
// list of every read, the INSERT column list and placeholders of create and import, and the SET
// clause of update and import. A new column is added here (and bound in `Fields::bind_columns`,
// read in `Prospect::from_columns`), nowhere else.

/// The columns a write sets from [`Fields`], in the order [`Fields::bind_columns`] binds them.
pub(crate) const FIELDS: &[&str] = &[
    "first_name",
    "last_name",
    "headline",
    "title",
    "seniority",
    "department",
    "company_name",
    "company_domain",
    "company_industry",
    "company_size",
    "location",
    "country",
    "timezone",
    "profile_url",
    "email",
    "phone",
    "tags",
    "custom_fields",
    "do_not_contact",
    "search_text",
];

/// Written only by the filter's index, never read back into a [`Prospect`].
const WRITE_ONLY: &[&str] = &["search_text"];

/// The columns a read adds to [`FIELDS`]: set on insert or by scoring runs.
const READ_ONLY: &[&str] = &[
    "id",
    "score",
    "tier",
    "targeting_id",
    "targeting_version",
    "scored_at",
    "source",
    "connection_state",
    "last_contacted_at",
    "last_replied_at",
    "created_at",
    "updated_at",
];

/// The SELECT list of a prospect, each column prefixed with `qualifier` (e.g. `p.`).
fn select_list(qualifier: &str) -> String {
    READ_ONLY
        .iter()
        .chain(FIELDS.iter().filter(|column| !WRITE_ONLY.contains(column)))
        .map(|column| format!("{qualifier}{column}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// What [`Prospect::from_row`] reads: `select {COLUMNS} from prospects ...`.
pub(crate) static COLUMNS: LazyLock<String> = LazyLock::new(|| select_list(""));

/// [`COLUMNS`] qualified with `p.`, for joins.
pub(crate) static JOINED_COLUMNS: LazyLock<String> = LazyLock::new(|| select_list("p."));

/// [`FIELDS`] as an INSERT column list.
pub(crate) static FIELD_COLUMNS: LazyLock<String> = LazyLock::new(|| FIELDS.join(", "));

/// How many values [`Fields::bind_columns`] binds.
pub(crate) const FIELD_COUNT: usize = FIELDS.len();

/// `$first, $first+1, ...`: one placeholder per field.
fn field_placeholders(first: usize) -> String {
    (first..first + FIELD_COUNT)
        .map(|n| format!("${n}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// `first_name = $first, ...`: the SET clause of a write of every field.
fn field_set_clause(first: usize) -> String {
    FIELDS
        .iter()
        .zip(first..)
        .map(|(column, n)| format!("{column} = ${n}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Inserts a prospect: `$1` id, `$2` workspace, the fields, then source and time.
static INSERT_SQL: LazyLock<String> = LazyLock::new(|| {
    format!(
        "insert into prospects (id, workspace_id, {}, source, created_at, updated_at) values ($1, $2, {}, ${}, ${}, ${})",
        *FIELD_COLUMNS,
        field_placeholders(3),
        FIELD_COUNT + 3,
        FIELD_COUNT + 4,
        FIELD_COUNT + 4,
    )
});

/// Rewrites the fields of `$2` in workspace `$1`, then `updated_at`.
static UPDATE_SQL: LazyLock<String> = LazyLock::new(|| {
    format!(
        "update prospects set {}, updated_at = ${} where workspace_id = $1 and id = $2",
        field_set_clause(3),
        FIELD_COUNT + 3,
    )
});

/// Rewrites the writable columns of one prospect (the caller writes its tags).
pub(crate) async fn write_fields(
    conn: &mut sqlx::AnyConnection,
    workspace_id: &str,
    id: &str,
    fields: &Fields,
    now: i64,
) -> Result<Result<sqlx::any::AnyQueryResult, sqlx::Error>, ApiError> {
    let query = sqlx::query(UPDATE_SQL.as_str()).bind(workspace_id).bind(id);
    Ok(fields
        .clone()
        .bind_columns(query)?
        .bind(now)
        .execute(conn)
        .await)
}

impl Prospect {
    /// Reads a row whose first columns are [`COLUMNS`] (or [`JOINED_COLUMNS`]), by position;
    /// columns after them are the caller's to read by name.
    pub(crate) fn from_row(row: &AnyRow) -> Result<Self, ApiError> {
        Self::from_columns(&mut Cursor::new(row))
    }
}

impl FromColumns for Prospect {
    /// Reads [`COLUMNS`]: [`READ_ONLY`], then [`FIELDS`] without [`WRITE_ONLY`].
    fn from_columns<R: Columns + ?Sized>(row: &mut Cursor<'_, R>) -> Result<Self, ApiError> {
        let id = row.required_text("id")?;
        let score = row.int("score")?;
        let tier = row
            .text("tier")?
            .map(|tier| {
                Tier::parse(&tier)
                    .ok_or_else(|| ApiError::internal(format!("stored tier `{tier}`")))
            })
            .transpose()?;
        let targeting_id = row.text("targeting_id")?;
        let targeting_version = row.int("targeting_version")?;
        let scored_at = row.int("scored_at")?.map(Timestamp);
        let source = ProspectSource::from_db(&row.required_text("source")?)?;
        let connection_state = row.text("connection_state")?;
        let last_contacted_at = row.int("last_contacted_at")?.map(Timestamp);
        let last_replied_at = row.int("last_replied_at")?.map(Timestamp);
        let created_at = Timestamp(row.required_int("created_at")?);
        let updated_at = Timestamp(row.required_int("updated_at")?);
        let first_name = row.text("first_name")?;
        let last_name = row.text("last_name")?;
        Ok(Self {
            full_name: normalize::full_name(first_name.as_deref(), last_name.as_deref()),
            first_name,
            last_name,
            headline: row.text("headline")?,
            title: row.text("title")?,
            seniority: row.text("seniority")?,
            department: row.text("department")?,
            company_name: row.text("company_name")?,
            company_domain: row.text("company_domain")?,
            company_industry: row.text("company_industry")?,
            company_size: row.int("company_size")?,
            location: row.text("location")?,
            country: row.text("country")?,
            timezone: row.text("timezone")?,
            profile_url: row.text("profile_url")?,
            email: row.text("email")?,
            phone: row.text("phone")?,
            tags: serde_json::from_str(&row.required_text("tags")?).map_err(ApiError::internal)?,
            custom_fields: serde_json::from_str(&row.required_text("custom_fields")?)
                .map_err(ApiError::internal)?,
            do_not_contact: row.required_int("do_not_contact")? != 0,
            id,
            score,
            tier,
            targeting_id,
            targeting_version,
            scored_at,
            connection_state,
            last_contacted_at,
            last_replied_at,
            source,
            created_at,
            updated_at,
        })
    }
}

/// The writable fields of a prospect, validated and normalised.
#[derive(Debug, Default, Clone, PartialEq)]
pub(crate) struct Fields {
    pub(crate) first_name: Option<String>,
    pub(crate) last_name: Option<String>,
    pub(crate) headline: Option<String>,
    pub(crate) title: Option<String>,
    pub(crate) seniority: Option<String>,
    pub(crate) department: Option<String>,
    pub(crate) company_name: Option<String>,
    pub(crate) company_domain: Option<String>,
    pub(crate) company_industry: Option<String>,
    pub(crate) company_size: Option<i64>,
    pub(crate) location: Option<String>,
    pub(crate) country: Option<String>,
    pub(crate) timezone: Option<String>,
    pub(crate) profile_url: Option<String>,
    pub(crate) email: Option<String>,
    pub(crate) phone: Option<String>,
    pub(crate) tags: Vec<String>,
    pub(crate) custom_fields: BTreeMap<String, Value>,
    pub(crate) do_not_contact: bool,
}

impl Fields {
    /// A prospect must be findable: by a name, a profile URL or an email.
    pub(crate) fn check_identifiable(&self) -> Result<(), ApiError> {
        if self.first_name.is_none()
            && self.last_name.is_none()
            && self.profile_url.is_none()
            && self.email.is_none()
        {
            return Err(ApiError::invalid_request(
                "A prospect needs at least a name (`first_name` or `last_name`), a `profile_url` or an `email`.",
            ));
        }
        Ok(())
    }

    /// Binds the writable columns, in the order of [`FIELDS`]. It takes the fields by value: the
    /// `Any` driver copies every borrowed value it is given, and a query that owns its values
    /// can be bound ahead of the statement before it (an import's batches).
    pub(crate) fn bind_columns<'q>(self, query: AnyQuery<'q>) -> Result<AnyQuery<'q>, ApiError> {
        let tags = json_text(&self.tags)?;
        let custom_fields = json_text(&self.custom_fields)?;
        let search_text = self.search_text();
        Ok(query
            .bind(self.first_name)
            .bind(self.last_name)
            .bind(self.headline)
            .bind(self.title)
            .bind(self.seniority)
            .bind(self.department)
            .bind(self.company_name)
            .bind(self.company_domain)
            .bind(self.company_industry)
            .bind(self.company_size)
            .bind(self.location)
            .bind(self.country)
            .bind(self.timezone)
            .bind(self.profile_url)
            .bind(self.email)
            .bind(self.phone)
            .bind(tags)
            .bind(custom_fields)
            .bind(i64::from(self.do_not_contact))
            .bind(search_text))
    }

    pub(crate) fn search_text(&self) -> String {
        let full_name = normalize::full_name(self.first_name.as_deref(), self.last_name.as_deref());
        normalize::search_text(
            full_name.as_deref(),
            self.company_name.as_deref(),
            self.title.as_deref(),
        )
    }
}

pub(crate) fn from_row_fields(prospect: &Prospect) -> Fields {
    Fields {
        first_name: prospect.first_name.clone(),
        last_name: prospect.last_name.clone(),
        headline: prospect.headline.clone(),
        title: prospect.title.clone(),
        seniority: prospect.seniority.clone(),
        department: prospect.department.clone(),
        company_name: prospect.company_name.clone(),
        company_domain: prospect.company_domain.clone(),
        company_industry: prospect.company_industry.clone(),
        company_size: prospect.company_size,
        location: prospect.location.clone(),
        country: prospect.country.clone(),
        timezone: prospect.timezone.clone(),
        profile_url: prospect.profile_url.clone(),
        email: prospect.email.clone(),
        phone: prospect.phone.clone(),
        tags: prospect.tags.clone(),
        custom_fields: prospect.custom_fields.clone(),
        do_not_contact: prospect.do_not_contact,
    }
}

/// The input of `create_prospect`. At least a name, a `profile_url` or an `email` is required.
#[derive(Debug, Deserialize, JsonSchema)]
#[schemars(extend("not" = {"properties": {"first_name": {"not": {"type": "string", "pattern": crate::common::NOT_BLANK}}, "last_name": {"not": {"type": "string", "pattern": crate::common::NOT_BLANK}}, "profile_url": {"not": {"type": "string", "pattern": crate::common::NOT_BLANK}}, "email": {"not": {"type": "string", "pattern": crate::common::NOT_BLANK}}}}))]
pub struct CreateProspectInput {
    #[schemars(length(max = 500))]
    pub first_name: Option<String>,
    #[schemars(length(max = 500))]
    pub last_name: Option<String>,
    #[schemars(length(max = 500))]
    pub headline: Option<String>,
    #[schemars(length(max = 500))]
    pub title: Option<String>,
    #[schemars(length(max = 500))]
    pub seniority: Option<String>,
    #[schemars(length(max = 500))]
    pub department: Option<String>,
    #[schemars(length(max = 500))]
    pub company_name: Option<String>,
    /// E.g. `acme.com`; a URL is reduced to its host.
    #[schemars(regex(pattern = crate::common::OPTIONAL_DOMAIN), length(max = 500))]
    pub company_domain: Option<String>,
    #[schemars(length(max = 500))]
    pub company_industry: Option<String>,
    /// Employees.
    pub company_size: Option<u32>,
    #[schemars(length(max = 500))]
    pub location: Option<String>,
    #[schemars(length(max = 500))]
    pub country: Option<String>,
    #[schemars(length(max = 500))]
    pub timezone: Option<String>,
    /// The person's profile page (e.g. on LinkedIn), stored normalised.
    #[schemars(regex(pattern = crate::common::PROFILE_URL), length(max = 500))]
    pub profile_url: Option<String>,
    #[schemars(regex(pattern = crate::common::EMAIL), length(max = 500))]
    pub email: Option<String>,
    #[schemars(length(max = 500))]
    pub phone: Option<String>,
    #[serde(default)]
    #[schemars(length(max = 50), inner(length(min = 1, max = 64), regex(pattern = crate::common::NOT_BLANK)))]
    pub tags: Vec<String>,
    /// Each value at most 10,000 characters of JSON text, 64 KB in all.
    ///
    /// At most 50 keys of 1 to 100 characters; more is a 400 naming the field.
    #[serde(default)]
    #[schemars(extend("maxProperties" = 50, "propertyNames" = {"minLength": 1, "maxLength": 100, "pattern": crate::common::NOT_BLANK}))]
    pub custom_fields: BTreeMap<String, Value>,
    #[serde(default)]
    pub do_not_contact: bool,
}

impl CreateProspectInput {
    fn into_fields(self) -> Result<Fields, ApiError> {
        let fields = Fields {
            first_name: normalize::text("first_name", self.first_name)?,
            last_name: normalize::text("last_name", self.last_name)?,
            headline: normalize::text("headline", self.headline)?,
            title: normalize::text("title", self.title)?,
            seniority: normalize::text("seniority", self.seniority)?,
            department: normalize::text("department", self.department)?,
            company_name: normalize::text("company_name", self.company_name)?,
            company_domain: normalize::company_domain(self.company_domain)?,
            company_industry: normalize::text("company_industry", self.company_industry)?,
            company_size: self.company_size.map(i64::from),
            location: normalize::text("location", self.location)?,
            country: normalize::text("country", self.country)?,
            timezone: normalize::text("timezone", self.timezone)?,
            profile_url: normalize::profile_url(self.profile_url)?,
            email: normalize::email(self.email)?,
            phone: normalize::text("phone", self.phone)?,
            tags: normalize::tags(self.tags)?,
            custom_fields: normalize::custom_fields(self.custom_fields)?,
            do_not_contact: self.do_not_contact,
        };
        fields.check_identifiable()?;
        Ok(fields)
    }
}

/// Create a prospect.
///
/// Needs a name, a `profile_url` or an `email`. A `profile_url` or `email` another prospect has
/// is a 409 `conflict` whose `existing_id` names it.
///
/// The profile URL is normalised (scheme, `www.`, query and trailing slash removed, lowercased)
/// before it is compared; emails are unique too, as imports match prospects by them.
#[action(scope = "write", idempotent, http = "POST /prospects")]
pub async fn create_prospect(ctx: Ctx, input: CreateProspectInput) -> Result<Prospect, ApiError> {
    let fields = input.into_fields()?;
    let id = ids::new_id("prs");
    let now = ctx.now_ms();
    let mut tx = ctx.tx().await?;
    email_conflict(&mut tx, ctx.workspace_id(), fields.email.as_deref(), None).await?;
    let insert = sqlx::query(INSERT_SQL.as_str())
        .bind(&id)
        .bind(ctx.workspace_id());
    let inserted = fields
        .clone()
        .bind_columns(insert)?
        .bind(ProspectSource::Api.as_str())
        .bind(now)
        .execute(&mut *tx)
        .await;
    if let Err(error) = inserted {
        drop(tx);
        return Err(profile_url_conflict(&ctx, error, fields.profile_url.as_deref()).await);
    }
    write_tags(&mut tx, ctx.workspace_id(), &id, &fields.tags).await?;
    totals::add(&mut tx, ctx.workspace_id(), 1).await?;
    do_not_contact::flag_listed(&mut tx, ctx.workspace_id(), &[id.as_str()], now).await?;
    if fields.do_not_contact {
        let by = Some(ctx.principal().person_id.as_str());
        do_not_contact_added(&mut tx, ctx.workspace_id(), &[id.as_str()], by, now).await?;
    }
    fetch_in(&mut tx, ctx.workspace_id(), &id).await
}

outreach_runtime::prelude::example!(create_prospect,
    request: {
        "company_domain": "analytical-engines.example",
        "company_industry": "Computer Software",
        "company_name": "Analytical Engines GmbH",
        "company_size": 120,
        "country": "DE",
        "custom_fields": {"met_at": "SaaStr"},
        "email": "ada@analytical-engines.example",
        "first_name": "Ada",
        "last_name": "Lovelace",
        "location": "Berlin, Germany",
        "profile_url": "https://www.linkedin.com/in/ada-lovelace-example",
        "tags": ["conference-2026"],
        "title": "Head of Sales"
    },
    response: {
        "company_domain": "analytical-engines.example",
        "company_industry": "Computer Software",
        "company_name": "Analytical Engines GmbH",
        "company_size": 120,
        "country": "DE",
        "created_at": "2026-11-23T18:22:30.054Z",
        "custom_fields": {"met_at": "SaaStr"},
        "department": null,
        "do_not_contact": false,
        "email": "ada@analytical-engines.example",
        "first_name": "Ada",
        "full_name": "Ada Lovelace",
        "headline": null,
        "id": "prs_FU1sf4YwPhIYhWi6JHan",
        "last_name": "Lovelace",
        "location": "Berlin, Germany",
        "phone": null,
        "profile_url": "linkedin.com/in/ada-lovelace-example",
        "score": null,
        "scored_at": null,
        "seniority": null,
        "source": "api",
        "tags": ["conference-2026"],
        "targeting_id": null,
        "targeting_version": null,
        "tier": null,
        "timezone": null,
        "title": "Head of Sales",
        "updated_at": "2026-11-23T18:22:30.054Z"
    }
);

outreach_runtime::prelude::parity!(create_prospect, write,
    ok: {
        "company_domain": "engines.test",
        "company_name": "Analytical Engines",
        "custom_fields": {"met_at": "conference", "rank": 3},
        "first_name": "Ada",
        "headline": "Poet of numbers",
        "last_name": "Lovelace",
        "seniority": "senior",
        "tags": ["vip"],
        "title": "Engineer"
    },
    fails: {
        "company_name": "Nameless",
        "title": "CTO"
    } => INVALID_REQUEST
);

/// Maps a unique violation on the profile URL to a 409 naming the prospect that has it.
async fn profile_url_conflict(
    ctx: &Ctx,
    error: sqlx::Error,
    profile_url: Option<&str>,
) -> ApiError {
    let Some(profile_url) =
        profile_url.filter(|_| is_unique_violation(&error, "prospects_profile_url_key"))
    else {
        return error.into();
    };
    let existing =
        sqlx::query("select id from prospects where workspace_id = $1 and profile_url = $2")
            .bind(ctx.workspace_id())
            .bind(profile_url)
            .fetch_optional(ctx.db().pool())
            .await;
    match existing {
        Ok(Some(row)) => {
            let existing_id: String = row.try_get("id").unwrap_or_default();
            ApiError::conflict(format!(
                "A prospect with the profile URL `{profile_url}` already exists: `{existing_id}`."
            ))
            .with_extra("existing_id", existing_id)
        }
        Ok(None) => ApiError::conflict(format!(
            "A prospect with the profile URL `{profile_url}` already exists."
        )),
        Err(error) => error.into(),
    }
}

async fn write_tags(
    tx: &mut sqlx::AnyConnection,
    workspace_id: &str,
    prospect_id: &str,
    tags: &[String],
) -> Result<(), ApiError> {
    sqlx::query("delete from prospect_tags where prospect_id = $1")
        .bind(prospect_id)
        .execute(&mut *tx)
        .await?;
    for tag in tags {
        sqlx::query(
            "insert into prospect_tags (prospect_id, workspace_id, tag) values ($1, $2, $3)",
        )
        .bind(prospect_id)
        .bind(workspace_id)
        .bind(tag)
        .execute(&mut *tx)
        .await?;
    }
    Ok(())
}

// SQL built with format! here interpolates only constants and `$n` placeholders; values are bound.

/// Reads one prospect of the caller's workspace, or 404.
async fn fetch(ctx: &Ctx, id: &str) -> Result<Prospect, ApiError> {
    fetch_in(
        &mut *ctx.db().pool().acquire().await?,
        ctx.workspace_id(),
        id,
    )
    .await
}

/// Like [`fetch`], on a given connection: inside the call's transaction, it sees its writes.
pub(crate) async fn fetch_in(
    conn: &mut sqlx::AnyConnection,
    workspace_id: &str,
    id: &str,
) -> Result<Prospect, ApiError> {
    IdKind::Prospect.check(id)?;
    let row = sqlx::query(AssertSqlSafe(format!(
        "select {} from prospects where workspace_id = $1 and id = $2",
        *COLUMNS
    )))
    .bind(workspace_id)
    .bind(id)
    .fetch_optional(conn)
    .await?
    .ok_or_else(|| IdKind::Prospect.not_found(id))?;
    Prospect::from_row(&row)
}

/// The input of `get_prospect` and `delete_prospect`.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct ProspectId {
    /// `prs_...`
    pub id: String,
}

/// Get a prospect by id.
#[action(scope = "read", http = "GET /prospects/{id}")]
pub async fn get_prospect(ctx: Ctx, input: ProspectId) -> Result<Prospect, ApiError> {
    fetch(&ctx, &input.id).await
}

outreach_runtime::prelude::example!(get_prospect,
    request: {"id": "prs_FU1sf4YwPhIYhWi6JHan"},
    response: {
        "company_domain": "analytical-engines.example",
        "company_industry": "Computer Software",
        "company_name": "Analytical Engines GmbH",
        "company_size": 120,
        "country": "DE",
        "created_at": "2026-11-23T18:22:30.054Z",
        "custom_fields": {"met_at": "SaaStr"},
        "department": null,
        "do_not_contact": false,
        "email": "ada@analytical-engines.example",
        "first_name": "Ada",
        "full_name": "Ada Lovelace",
        "headline": null,
        "id": "prs_FU1sf4YwPhIYhWi6JHan",
        "last_name": "Lovelace",
        "location": "Berlin, Germany",
        "phone": null,
        "profile_url": "linkedin.com/in/ada-lovelace-example",
        "score": null,
        "scored_at": null,
        "seniority": null,
        "source": "api",
        "tags": ["conference-2026"],
        "targeting_id": null,
        "targeting_version": null,
        "tier": null,
        "timezone": null,
        "title": "Head of Sales",
        "updated_at": "2026-11-23T18:22:30.054Z"
    }
);

outreach_runtime::prelude::parity!(get_prospect, read,
    ok: {"id": "$prospect"},
    fails: {"id": "$missing:prs"} => NOT_FOUND
);

/// The input of `list_prospects`.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct ListProspectsInput {
    /// Text in the name, company, title, email or profile URL (any case).
    pub q: Option<String>,
    /// An exact tag.
    pub tag: Option<String>,
    /// Exact lookup (any case).
    #[schemars(regex(pattern = crate::common::EMAIL))]
    pub email: Option<String>,
    /// Exact lookup, normalised as on create.
    ///
    /// `https://www.linkedin.com/in/Jane-Doe/` finds `linkedin.com/in/jane-doe`.
    #[schemars(regex(pattern = crate::common::PROFILE_URL))]
    pub profile_url: Option<String>,
    /// Unscored prospects have none.
    pub tier: Option<Tier>,
    /// The lowest score; leaves out the unscored.
    #[schemars(range(min = 0, max = 100))]
    pub min_score: Option<i64>,
    /// The highest score; leaves out the unscored.
    #[schemars(range(min = 0, max = 100))]
    pub max_score: Option<i64>,
    /// Members of this list (`lst_...`).
    pub list_id: Option<String>,
    /// Default `created_at`; `score` puts the unscored last.
    ///
    /// The id breaks ties.
    #[serde(default)]
    pub sort: ProspectSort,
    /// Default `desc`: newest or highest first.
    #[serde(default)]
    pub order: SortOrder,
    #[serde(flatten)]
    pub page: PageParams,
}

/// What `list_prospects` sorts by.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ProspectSort {
    #[default]
    CreatedAt,
    UpdatedAt,
    Score,
}

/// A sort direction.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum SortOrder {
    Asc,
    #[default]
    Desc,
}

/// List and find prospects, newest first.
///
/// Find one person with `email` or `profile_url`; the filters combine.
///
/// Paged with `limit` and `offset`; follow `next_offset` while `has_more`. Filter with `q` (name,
/// company, title, email or profile URL contains), `tag`, `tier`, `min_score` and `max_score` (0
/// to 100), and `list_id`. Sort with `sort` (`created_at`, `updated_at`, `score`) and `order`
/// (`desc` or `asc`).
#[action(scope = "read", http = "GET /prospects")]
pub async fn list_prospects(
    ctx: Ctx,
    input: ListProspectsInput,
) -> Result<Page<Prospect>, ApiError> {
    let mut filter = String::from("workspace_id = $1");
    let mut binds: Vec<Bind> = vec![Bind::Text(ctx.workspace_id().to_owned())];
    let mut add = |binds: &mut Vec<Bind>, condition: &str, bind: Bind| {
        binds.push(bind);
        filter.push_str(&condition.replace("$n", &format!("${}", binds.len())));
    };
    if let Some(q) = input.q.as_deref().map(str::trim).filter(|q| !q.is_empty()) {
        // Email and profile URL are stored lowercased, like the pattern.
        add(
            &mut binds,
            " and (search_text like $n escape '\\' or email like $n escape '\\' or profile_url like $n escape '\\')",
            Bind::Text(normalize::like_pattern(q)),
        );
    }
    if let Some(tag) = input
        .tag
        .as_deref()
        .map(str::trim)
        .filter(|tag| !tag.is_empty())
    {
        add(
            &mut binds,
            " and exists (select 1 from prospect_tags t where t.workspace_id = $1 and t.tag = $n and t.prospect_id = prospects.id)",
            Bind::Text(tag.to_owned()),
        );
    }
    if let Some(email) = normalize::email(input.email)? {
        add(&mut binds, " and email = $n", Bind::Text(email));
    }
    if let Some(profile_url) = normalize::profile_url(input.profile_url)? {
        add(&mut binds, " and profile_url = $n", Bind::Text(profile_url));
    }
    if let Some(tier) = input.tier {
        add(
            &mut binds,
            " and tier = $n",
            Bind::Text(tier.as_str().to_owned()),
        );
    }
    for (field, value) in [
        ("min_score", input.min_score),
        ("max_score", input.max_score),
    ] {
        if let Some(value) = value
            && !(0..=100).contains(&value)
        {
            return Err(ApiError::invalid_request(format!(
                "`{field}` must be a score from 0 to 100; got {value}."
            )));
        }
    }
    if let (Some(min), Some(max)) = (input.min_score, input.max_score)
        && min > max
    {
        return Err(ApiError::invalid_request(format!(
            "`min_score` ({min}) is above `max_score` ({max}); no prospect could match."
        )));
    }
    if let Some(min) = input.min_score {
        add(&mut binds, " and score >= $n", Bind::Int(min));
    }
    if let Some(max) = input.max_score {
        add(&mut binds, " and score <= $n", Bind::Int(max));
    }
    if let Some(list_id) = &input.list_id {
        IdKind::List.check(list_id)?;
        let exists = sqlx::query("select 1 from lists where workspace_id = $1 and id = $2")
            .bind(ctx.workspace_id())
            .bind(list_id)
            .fetch_optional(ctx.db().pool())
            .await?;
        if exists.is_none() {
            return Err(IdKind::List.not_found(list_id));
        }
        add(
            &mut binds,
            " and exists (select 1 from list_members m where m.list_id = $n and m.prospect_id = prospects.id)",
            Bind::Text(list_id.clone()),
        );
    }
    let descending = input.order == SortOrder::Desc;
    // Unscored prospects come last either way (`false` sorts before `true` on both backends).
    let order = match input.sort {
        ProspectSort::CreatedAt => vec![
            OrderTerm::new("created_at", descending),
            OrderTerm::new("id", descending),
        ],
        ProspectSort::UpdatedAt => vec![
            OrderTerm::new("updated_at", descending),
            OrderTerm::new("id", descending),
        ],
        ProspectSort::Score => vec![
            OrderTerm::new("(score is null)", false),
            OrderTerm::new("score", descending),
            OrderTerm::new("id", descending),
        ],
    };
    // Only the workspace filters: its kept total replaces counting it.
    let total = if binds.len() == 1 {
        Total::Kept(totals::READ_SQL)
    } else {
        Total::Count
    };
    let query = SortedQuery {
        table: "prospects",
        columns: COLUMNS.as_str(),
        filter: &filter,
        order: &order,
    };
    paged_sorted(ctx.db(), input.page, query, total, binds).await
}

outreach_runtime::prelude::example!(list_prospects,
    request: {"limit": 25, "q": "ada"},
    response: {
        "count": 1,
        "has_more": false,
        "items": [
            {
                "company_domain": "analytical-engines.example",
                "company_industry": "Computer Software",
                "company_name": "Analytical Engines GmbH",
                "company_size": 120,
                "country": "DE",
                "created_at": "2026-11-23T18:22:30.054Z",
                "custom_fields": {"met_at": "SaaStr"},
                "department": null,
                "do_not_contact": false,
                "email": "ada@analytical-engines.example",
                "first_name": "Ada",
                "full_name": "Ada Lovelace",
                "headline": null,
                "id": "prs_FU1sf4YwPhIYhWi6JHan",
                "last_name": "Lovelace",
                "location": "Berlin, Germany",
                "phone": "+49 30 1234567",
                "profile_url": "linkedin.com/in/ada-lovelace-example",
                "score": null,
                "scored_at": null,
                "seniority": null,
                "source": "api",
                "tags": ["conference-2026"],
                "targeting_id": null,
                "targeting_version": null,
                "tier": null,
                "timezone": null,
                "title": "Head of Sales",
                "updated_at": "2026-11-23T18:22:30.062Z"
            }
        ],
        "next_offset": null,
        "offset": 0,
        "total": 1
    }
);

outreach_runtime::prelude::parity!(list_prospects, read,
    ok: {"limit": 5, "offset": 1, "q": "lovelace", "tag": "vip"},
    fails: {"limit": 0} => INVALID_REQUEST
);

/// Refuses an email another prospect of the workspace has (imports match rows by email too), with
/// its id in `existing_id`.
async fn email_conflict(
    conn: &mut sqlx::AnyConnection,
    workspace_id: &str,
    email: Option<&str>,
    except_id: Option<&str>,
) -> Result<(), ApiError> {
    let Some(email) = email else { return Ok(()) };
    let existing = sqlx::query(
        "select id from prospects where workspace_id = $1 and email = $2 and id <> $3 order by created_at, id limit 1",
    )
    .bind(workspace_id)
    .bind(email)
    .bind(except_id.unwrap_or(""))
    .fetch_optional(conn)
    .await?;
    match existing {
        Some(row) => {
            let existing_id: String = row.try_get("id")?;
            Err(ApiError::conflict(format!(
                "A prospect with the email `{email}` already exists: `{existing_id}`."
            ))
            .with_extra("existing_id", existing_id))
        }
        None => Ok(()),
    }
}

/// The input of `update_prospect`: only the fields given change; `null` clears a field.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct UpdateProspectInput {
    /// `prs_...`
    pub id: String,
    #[serde(default, deserialize_with = "crate::common::patch")]
    #[schemars(extend("x-null-clears" = true))]
    #[schemars(length(max = 500))]
    pub first_name: Option<Option<String>>,
    #[serde(default, deserialize_with = "crate::common::patch")]
    #[schemars(extend("x-null-clears" = true))]
    #[schemars(length(max = 500))]
    pub last_name: Option<Option<String>>,
    #[serde(default, deserialize_with = "crate::common::patch")]
    #[schemars(extend("x-null-clears" = true))]
    #[schemars(length(max = 500))]
    pub headline: Option<Option<String>>,
    #[serde(default, deserialize_with = "crate::common::patch")]
    #[schemars(extend("x-null-clears" = true))]
    #[schemars(length(max = 500))]
    pub title: Option<Option<String>>,
    #[serde(default, deserialize_with = "crate::common::patch")]
    #[schemars(extend("x-null-clears" = true))]
    #[schemars(length(max = 500))]
    pub seniority: Option<Option<String>>,
    #[serde(default, deserialize_with = "crate::common::patch")]
    #[schemars(extend("x-null-clears" = true))]
    #[schemars(length(max = 500))]
    pub department: Option<Option<String>>,
    #[serde(default, deserialize_with = "crate::common::patch")]
    #[schemars(extend("x-null-clears" = true))]
    #[schemars(length(max = 500))]
    pub company_name: Option<Option<String>>,
    #[serde(default, deserialize_with = "crate::common::patch")]
    #[schemars(extend("x-null-clears" = true))]
    #[schemars(regex(pattern = crate::common::OPTIONAL_DOMAIN), length(max = 500))]
    pub company_domain: Option<Option<String>>,
    #[serde(default, deserialize_with = "crate::common::patch")]
    #[schemars(extend("x-null-clears" = true))]
    #[schemars(length(max = 500))]
    pub company_industry: Option<Option<String>>,
    #[serde(default, deserialize_with = "crate::common::patch")]
    #[schemars(extend("x-null-clears" = true))]
    pub company_size: Option<Option<u32>>,
    #[serde(default, deserialize_with = "crate::common::patch")]
    #[schemars(extend("x-null-clears" = true))]
    #[schemars(length(max = 500))]
    pub location: Option<Option<String>>,
    #[serde(default, deserialize_with = "crate::common::patch")]
    #[schemars(extend("x-null-clears" = true))]
    #[schemars(length(max = 500))]
    pub country: Option<Option<String>>,
    #[serde(default, deserialize_with = "crate::common::patch")]
    #[schemars(extend("x-null-clears" = true))]
    #[schemars(length(max = 500))]
    pub timezone: Option<Option<String>>,
    #[serde(default, deserialize_with = "crate::common::patch")]
    #[schemars(extend("x-null-clears" = true))]
    #[schemars(regex(pattern = crate::common::PROFILE_URL), length(max = 500))]
    pub profile_url: Option<Option<String>>,
    #[serde(default, deserialize_with = "crate::common::patch")]
    #[schemars(extend("x-null-clears" = true))]
    #[schemars(regex(pattern = crate::common::EMAIL), length(max = 500))]
    pub email: Option<Option<String>>,
    #[serde(default, deserialize_with = "crate::common::patch")]
    #[schemars(extend("x-null-clears" = true))]
    #[schemars(length(max = 500))]
    pub phone: Option<Option<String>>,
    /// Replaces every tag.
    #[schemars(length(max = 50), inner(length(min = 1, max = 64), regex(pattern = crate::common::NOT_BLANK)))]
    pub tags: Option<Vec<String>>,
    /// Replaces them all; each value at most 10,000 characters of JSON, 64 KB in all.
    ///
    /// At most 50 keys of 1 to 100 characters; more is a 400 naming the field.
    #[schemars(extend("maxProperties" = 50, "propertyNames" = {"minLength": 1, "maxLength": 100, "pattern": crate::common::NOT_BLANK}))]
    pub custom_fields: Option<BTreeMap<String, Value>>,
    pub do_not_contact: Option<bool>,
}

/// Applies a text patch: absent keeps, `null` clears, a value is normalised and set.
fn apply(
    current: &mut Option<String>,
    patch: Option<Option<String>>,
    normalise: impl FnOnce(Option<String>) -> Result<Option<String>, ApiError>,
) -> Result<(), ApiError> {
    if let Some(value) = patch {
        *current = normalise(value)?;
    }
    Ok(())
}

/// Update a prospect.
///
/// Fields left out keep their value; `null` clears one. It must keep a name, a `profile_url` or an
/// `email`; one another prospect has is a 409 `conflict`.
#[action(scope = "write", idempotent, http = "PATCH /prospects/{id}")]
pub async fn update_prospect(ctx: Ctx, input: UpdateProspectInput) -> Result<Prospect, ApiError> {
    // The person is locked and read in the transaction that writes: two updates at once take
    // turns, each applying its own fields to what the other wrote (none undoes the other's, a
    // do-not-contact mark included), and marking do-not-contact is told once.
    let mut tx = ctx.tx().await?;
    crate::person_lock::lock(&mut tx, ctx.workspace_id(), [input.id.as_str()]).await?;
    let current = fetch_in(&mut tx, ctx.workspace_id(), &input.id).await?;
    let mut fields = from_row_fields(&current);
    let text = |field: &'static str| move |value| normalize::text(field, value);
    apply(&mut fields.first_name, input.first_name, text("first_name"))?;
    apply(&mut fields.last_name, input.last_name, text("last_name"))?;
    apply(&mut fields.headline, input.headline, text("headline"))?;
    apply(&mut fields.title, input.title, text("title"))?;
    apply(&mut fields.seniority, input.seniority, text("seniority"))?;
    apply(&mut fields.department, input.department, text("department"))?;
    apply(
        &mut fields.company_name,
        input.company_name,
        text("company_name"),
    )?;
    apply(
        &mut fields.company_domain,
        input.company_domain,
        normalize::company_domain,
    )?;
    apply(
        &mut fields.company_industry,
        input.company_industry,
        text("company_industry"),
    )?;
    apply(&mut fields.location, input.location, text("location"))?;
    apply(&mut fields.country, input.country, text("country"))?;
    apply(&mut fields.timezone, input.timezone, text("timezone"))?;
    apply(
        &mut fields.profile_url,
        input.profile_url,
        normalize::profile_url,
    )?;
    apply(&mut fields.email, input.email, normalize::email)?;
    apply(&mut fields.phone, input.phone, text("phone"))?;
    if let Some(size) = input.company_size {
        fields.company_size = size.map(i64::from);
    }
    if let Some(tags) = input.tags {
        fields.tags = normalize::tags(tags)?;
    }
    if let Some(custom_fields) = input.custom_fields {
        fields.custom_fields = normalize::custom_fields(custom_fields)?;
    }
    let input_marks = input.do_not_contact == Some(true);
    if let Some(do_not_contact) = input.do_not_contact {
        fields.do_not_contact = do_not_contact;
    }
    fields.check_identifiable()?;

    if fields.email != current.email {
        email_conflict(
            &mut tx,
            ctx.workspace_id(),
            fields.email.as_deref(),
            Some(&current.id),
        )
        .await?;
    }
    let updated = write_fields(
        &mut tx,
        ctx.workspace_id(),
        &current.id,
        &fields,
        ctx.now_ms(),
    )
    .await?;
    match updated {
        Ok(result) if result.rows_affected() == 0 => {
            return Err(IdKind::Prospect.not_found(&current.id));
        }
        Ok(_) => {}
        Err(error) => {
            drop(tx);
            return Err(profile_url_conflict(&ctx, error, fields.profile_url.as_deref()).await);
        }
    }
    if fields.tags != current.tags {
        write_tags(&mut tx, ctx.workspace_id(), &current.id, &fields.tags).await?;
    }
    if !fields.do_not_contact && current.do_not_contact {
        // The flag and the list are one rule: clearing one clears the other.
        do_not_contact::unlist_prospect(&mut tx, ctx.workspace_id(), &current.id).await?;
    }
    let written = [current.id.as_str()];
    do_not_contact::flag_listed(&mut tx, ctx.workspace_id(), &written, ctx.now_ms()).await?;
    let by = Some(ctx.principal().person_id.as_str());
    if fields.do_not_contact && !current.do_not_contact {
        let marked = [current.id.as_str()];
        do_not_contact_added(&mut tx, ctx.workspace_id(), &marked, by, ctx.now_ms()).await?;
    } else if input_marks && current.do_not_contact {
        // Marked already (by a domain entry, say), and now by a person: their own entry keeps
        // them marked when that entry goes.
        let marked = [current.id.as_str()];
        do_not_contact::list_flagged(&mut tx, ctx.workspace_id(), &marked, by, ctx.now_ms())
            .await?;
    }
    fetch_in(&mut tx, ctx.workspace_id(), &current.id).await
}

outreach_runtime::prelude::example!(update_prospect,
    request: {"id": "prs_FU1sf4YwPhIYhWi6JHan", "phone": "+49 30 1234567"},
    response: {
        "company_domain": "analytical-engines.example",
        "company_industry": "Computer Software",
        "company_name": "Analytical Engines GmbH",
        "company_size": 120,
        "country": "DE",
        "created_at": "2026-11-23T18:22:30.054Z",
        "custom_fields": {"met_at": "SaaStr"},
        "department": null,
        "do_not_contact": false,
        "email": "ada@analytical-engines.example",
        "first_name": "Ada",
        "full_name": "Ada Lovelace",
        "headline": null,
        "id": "prs_FU1sf4YwPhIYhWi6JHan",
        "last_name": "Lovelace",
        "location": "Berlin, Germany",
        "phone": "+49 30 1234567",
        "profile_url": "linkedin.com/in/ada-lovelace-example",
        "score": null,
        "scored_at": null,
        "seniority": null,
        "source": "api",
        "tags": ["conference-2026"],
        "targeting_id": null,
        "targeting_version": null,
        "tier": null,
        "timezone": null,
        "title": "Head of Sales",
        "updated_at": "2026-11-23T18:22:30.062Z"
    }
);

outreach_runtime::prelude::parity!(update_prospect, write,
    ok: {
        "company_size": 40,
        "headline": null,
        "id": "$prospect",
        "tags": ["vip", "met"],
        "title": "Chief Engineer"
    },
    fails: {
        "id": "$missing:prs",
        "title": "Nobody"
    } => NOT_FOUND
);

/// Delete a prospect.
#[action(scope = "write", idempotent, http = "DELETE /prospects/{id}")]
pub async fn delete_prospect(ctx: Ctx, input: ProspectId) -> Result<Deleted, ApiError> {
    let prospect = fetch(&ctx, &input.id).await?;
    let mut tx = ctx.tx().await?;
    // The delete cascades to the prospect's enrollments, approval items and conversations: the
    // person is locked first, as every writer of them does (see `person_lock`).
    let mut tx =
        crate::person_lock::lock(&mut tx, ctx.workspace_id(), [prospect.id.as_str()]).await?;
    sqlx::query("delete from prospect_tags where prospect_id = $1")
        .bind(&prospect.id)
        .execute(&mut *tx)
        .await?;
    let result = sqlx::query("delete from prospects where workspace_id = $1 and id = $2")
        .bind(ctx.workspace_id())
        .bind(&prospect.id)
        .execute(&mut *tx)
        .await?;

    if result.rows_affected() == 0 {
        return Err(IdKind::Prospect.not_found(&prospect.id));
    }
    totals::add(&mut tx, ctx.workspace_id(), -1).await?;
    Ok(Deleted {
        id: prospect.id,
        deleted: true,
    })
}

outreach_runtime::prelude::example!(delete_prospect,
    request: {"id": "prs_FU1sf4YwPhIYhWi6JHan"},
    response: {"deleted": true, "id": "prs_FU1sf4YwPhIYhWi6JHan"}
);

outreach_runtime::prelude::parity!(delete_prospect, write,
    ok: {"id": "$prospect"},
    fails: {"id": "$missing:prs"} => NOT_FOUND
);

// ----- The verbs other modules change a prospect through -------------------------------------

/// Stores a prospect's latest score and tier, by the targeting (and its version) that gave them.
#[allow(clippy::too_many_arguments)]
pub(crate) async fn set_score(
    conn: &mut sqlx::AnyConnection,
    workspace_id: &str,
    id: &str,
    score: Option<i64>,
    tier: Option<Tier>,
    targeting_id: &str,
    targeting_version: i64,
    at: i64,
) -> Result<(), ApiError> {
    sqlx::query(
        "update prospects set score = $3, tier = $4, targeting_id = $5, targeting_version = $6, scored_at = $7 \
         where workspace_id = $1 and id = $2",
    )
    .bind(workspace_id)
    .bind(id)
    .bind(score)
    .bind(tier.map(Tier::as_str))
    .bind(targeting_id)
    .bind(targeting_version)
    .bind(at)
    .execute(conn)
    .await?;
    Ok(())
}

/// Marks a prospect do-not-contact (they asked not to be contacted again).
pub(crate) async fn mark_do_not_contact(
    conn: &mut sqlx::AnyConnection,
    workspace_id: &str,
    id: &str,
    now: i64,
) -> Result<(), ApiError> {
    let marked = sqlx::query(
        "update prospects set do_not_contact = 1, updated_at = $3 \
         where workspace_id = $1 and id = $2 and do_not_contact = 0",
    )
    .bind(workspace_id)
    .bind(id)
    .bind(now)
    .execute(&mut *conn)
    .await?;
    if marked.rows_affected() == 1 {
        do_not_contact_added(conn, workspace_id, &[id], None, now).await
    } else {
        // Already marked (by a domain entry, say): the person's own entry keeps them marked
        // when that entry goes.
        do_not_contact::list_flagged(conn, workspace_id, &[id], None, now).await
    }
}

/// The `prospect.do_not_contact_added` events of prospects just marked do-not-contact, and
/// their entries on the list (`added_by`: the person who marked them, when one did).
pub(crate) async fn do_not_contact_added(
    conn: &mut sqlx::AnyConnection,
    workspace_id: &str,
    ids: &[&str],
    added_by: Option<&str>,
    now: i64,
) -> Result<(), ApiError> {
    let data: Vec<Value> = ids
        .iter()
        .map(|id| serde_json::json!({"prospect_id": id}))
        .collect();
    let kind = crate::events::EventType::ProspectDoNotContactAdded;
    crate::events::record_many(conn, workspace_id, now, kind, &data).await?;
    // The flag and the list are one rule: a flagged prospect is on the list.
    do_not_contact::list_flagged(conn, workspace_id, ids, added_by, now).await
}

/// Notes that the prospect is now a connection of one of the workspace's senders.
pub(crate) async fn mark_connected(
    conn: &mut sqlx::AnyConnection,
    id: &str,
) -> Result<(), ApiError> {
    sqlx::query("update prospects set connection_state = 'connected' where id = $1")
        .bind(id)
        .execute(conn)
        .await?;
    Ok(())
}

/// Notes that the invitation of `enrollment_id` to the prospect is pending, unless they are
/// already connected, or the network reported it withdrawn while the call was being recorded
/// (the enrollment then ended as `invitation_withdrawn`).
pub(crate) async fn mark_invitation_pending(
    conn: &mut sqlx::AnyConnection,
    id: &str,
    enrollment_id: &str,
) -> Result<(), ApiError> {
    sqlx::query(
        "update prospects set connection_state = 'pending' where id = $1 \
         and (connection_state is null or connection_state = 'not_connected') \
         and not exists (select 1 from enrollments where id = $2 and exit_reason = 'invitation_withdrawn')",
    )
    .bind(id)
    .bind(enrollment_id)
    .execute(conn)
    .await?;
    Ok(())
}

/// Whether an invitation to the prospect is pending, as the service last heard.
pub(crate) async fn is_pending(conn: &mut sqlx::AnyConnection, id: &str) -> Result<bool, ApiError> {
    let state: Option<Option<String>> =
        sqlx::query_scalar("select connection_state from prospects where id = $1")
            .bind(id)
            .fetch_optional(conn)
            .await?;
    Ok(state.flatten().as_deref() == Some("pending"))
}

/// Notes that no invitation to the prospect is pending any more (it was withdrawn), unless they
/// are connected.
pub(crate) async fn mark_invitation_gone(
    conn: &mut sqlx::AnyConnection,
    id: &str,
) -> Result<(), ApiError> {
    sqlx::query(
        "update prospects set connection_state = 'not_connected' where id = $1 \
         and connection_state = 'pending'",
    )
    .bind(id)
    .execute(conn)
    .await?;
    Ok(())
}

/// Notes when something was last sent to the prospect.
pub(crate) async fn note_contacted(
    conn: &mut sqlx::AnyConnection,
    id: &str,
    at_ms: i64,
) -> Result<(), ApiError> {
    sqlx::query("update prospects set last_contacted_at = $2 where id = $1")
        .bind(id)
        .bind(at_ms)
        .execute(conn)
        .await?;
    Ok(())
}

/// Notes when the prospect last replied.
pub(crate) async fn note_replied(
    conn: &mut sqlx::AnyConnection,
    id: &str,
    at_ms: i64,
) -> Result<(), ApiError> {
    sqlx::query("update prospects set last_replied_at = $2 where id = $1")
        .bind(id)
        .bind(at_ms)
        .execute(conn)
        .await?;
    Ok(())
}

/// Stores a prospect's email and company domain as cleaned by a list's processing.
pub(crate) async fn set_contact(
    conn: &mut sqlx::AnyConnection,
    workspace_id: &str,
    id: &str,
    email: Option<&str>,
    company_domain: Option<&str>,
    now: i64,
) -> Result<(), ApiError> {
    sqlx::query(
        "update prospects set email = $3, company_domain = $4, updated_at = $5 where workspace_id = $1 and id = $2",
    )
    .bind(workspace_id)
    .bind(id)
    .bind(email)
    .bind(company_domain)
    .bind(now)
    .execute(&mut *conn)
    .await?;
    do_not_contact::flag_listed(conn, workspace_id, &[id], now).await
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A prospect's fields come in key order, so the answer writer never reorders a page's
    /// objects (serde_json writes a struct's fields in their declared order).
    #[test]
    fn prospect_fields_are_written_in_key_order() {
        let prospect = Prospect {
            company_domain: None,
            company_industry: None,
            company_name: None,
            company_size: None,
            connection_state: None,
            country: None,
            created_at: Timestamp(0),
            custom_fields: BTreeMap::new(),
            department: None,
            do_not_contact: false,
            email: None,
            first_name: None,
            full_name: None,
            headline: None,
            id: "prs_1".into(),
            last_contacted_at: None,
            last_name: None,
            last_replied_at: None,
            location: None,
            phone: None,
            profile_url: None,
            score: None,
            scored_at: None,
            seniority: None,
            source: ProspectSource::Api,
            tags: Vec::new(),
            targeting_id: None,
            targeting_version: None,
            tier: None,
            timezone: None,
            title: None,
            updated_at: Timestamp(0),
        };
        let written = serde_json::to_string(&prospect).unwrap();
        let keys: Vec<String> = serde_json::from_str::<serde_json::Map<String, Value>>(&written)
            .unwrap()
            .keys()
            .cloned()
            .collect();
        assert_eq!(keys.len(), 32);
        // Keys in the order written: the map keeps them sorted, so compare against the text.
        let mut at = 0;
        for key in &keys {
            let found = written[at..].find(&format!("\"{key}\":")).unwrap();
            at += found + 1;
        }
    }

    /// The statements made from the column table are the ones written out by hand before it.
    #[test]
    fn column_table_makes_the_same_sql() {
        assert_eq!(
            *INSERT_SQL,
            "insert into prospects (id, workspace_id, first_name, last_name, headline, title, seniority, department, \
             company_name, company_domain, company_industry, company_size, location, country, timezone, profile_url, \
             email, phone, tags, custom_fields, do_not_contact, search_text, source, created_at, updated_at) values \
             ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21, $22, \
             $23, $24, $24)"
        );
        assert_eq!(
            *UPDATE_SQL,
            "update prospects set first_name = $3, last_name = $4, headline = $5, title = $6, seniority = $7, \
             department = $8, company_name = $9, company_domain = $10, company_industry = $11, company_size = $12, \
             location = $13, country = $14, timezone = $15, profile_url = $16, email = $17, phone = $18, tags = $19, \
             custom_fields = $20, do_not_contact = $21, search_text = $22, updated_at = $23 \
             where workspace_id = $1 and id = $2"
        );
        let mut read: Vec<&str> = COLUMNS.split(", ").collect();
        read.sort_unstable();
        assert_eq!(
            read,
            [
                "company_domain",
                "company_industry",
                "company_name",
                "company_size",
                "connection_state",
                "country",
                "created_at",
                "custom_fields",
                "department",
                "do_not_contact",
                "email",
                "first_name",
                "headline",
                "id",
                "last_contacted_at",
                "last_name",
                "last_replied_at",
                "location",
                "phone",
                "profile_url",
                "score",
                "scored_at",
                "seniority",
                "source",
                "tags",
                "targeting_id",
                "targeting_version",
                "tier",
                "timezone",
                "title",
                "updated_at",
            ]
        );
    }
}
