//! The workspace's do-not-contact list: people by profile URL or email, whole companies by
//! domain, each with a reason and who added it.
//!
//! The list and a prospect's `do_not_contact` flag are one rule. The flag is what every place a
//! person could be reached reads (`add_to_sequence` skips, approval refuses, a step that comes
//! due finishes its enrollment without sending, a reply is refused, agents leave them out), and
//! it says whether the prospect matches an entry:
//!
//! - adding an entry flags every prospect it matches (with the `prospect.do_not_contact_added`
//!   event), and a prospect written later (created, imported, edited, processed) is flagged when
//!   it matches one ([`flag_listed`]);
//! - flagging a prospect adds an entry for them (their profile URL, else their email;
//!   [`list_flagged`]);
//! - removing an entry clears the flag of the prospects it matched that match no other entry;
//!   clearing a prospect's flag removes their own entries, and is refused while a domain entry
//!   still matches them.
//!
//! A domain matches the prospect's `company_domain` and the domain of their email.

use std::collections::{BTreeSet, HashSet};

use outreach_runtime::prelude::{
    ApiError, Ctx, ErrorCode, Page, PageParams, Timestamp, action, ids, paged,
};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use sqlx::any::AnyRow;
use sqlx::{AnyConnection, Row};

use super::normalize;
use crate::events::{self, EventType};

outreach_runtime::prelude::resource_tag!(
    "do-not-contact",
    toolset = "prospecting",
    "The workspace's do-not-contact list: people by profile URL or email, companies by domain; nobody on it is enrolled, approved or sent anything."
);

outreach_runtime::prelude::text_enum! {
    /// What a do-not-contact entry names.
    pub enum EntryKind {
        /// One person, by profile URL (normalised as prospects' are: `linkedin.com/in/jane`).
        ProfileUrl => "profile_url",
        /// One person, by email address.
        Email => "email",
        /// Everyone at a company: its domain matches a prospect's `company_domain` and the domain
        /// of their email.
        Domain => "domain",
    }
}

outreach_runtime::prelude::text_enum! {
    /// How an entry came onto the list.
    pub enum EntrySource {
        /// `add_do_not_contact`.
        Manual => "manual",
        /// `import_do_not_contact`.
        Import => "import",
        /// A prospect marked do-not-contact (by a person, an import, or a reply asking to stop).
        Prospect => "prospect",
    }
}

/// The most entries one `add_do_not_contact` takes.
pub const MAX_ENTRIES: usize = 1000;
/// The most rows one `import_do_not_contact` takes.
pub const MAX_IMPORT_ROWS: usize = 50_000;
/// How many refused rows an import's answer describes.
const MAX_REPORTED_ROWS: usize = 100;
const MAX_REASON_CHARS: usize = 500;

const COLUMNS: &str = "id, kind, value, reason, added_by, source, created_at";

/// One entry of the do-not-contact list.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct DoNotContactEntry {
    /// `dnc_...`
    pub id: String,
    pub kind: EntryKind,
    /// The profile URL, email or domain, normalised.
    pub value: String,
    /// Why, as whoever added it said.
    pub reason: Option<String>,
    /// The person who added it (`per_...`); null when it came from a prospect's flag set by an
    /// agent or a reply.
    pub added_by: Option<String>,
    pub source: EntrySource,
    pub created_at: Timestamp,
}

impl DoNotContactEntry {
    fn from_row(row: &AnyRow) -> Result<Self, ApiError> {
        Ok(Self {
            id: row.try_get("id")?,
            kind: EntryKind::from_db(&row.try_get::<String, _>("kind")?)?,
            value: row.try_get("value")?,
            reason: row.try_get("reason")?,
            added_by: row.try_get("added_by")?,
            source: EntrySource::from_db(&row.try_get::<String, _>("source")?)?,
            created_at: Timestamp(row.try_get("created_at")?),
        })
    }
}

/// `value` as stored for `kind`, or the sentence saying what is wrong with it (naming `field`).
pub fn normalize_value(kind: EntryKind, field: &str, value: &str) -> Result<String, ApiError> {
    let rename = |error: ApiError, from: &str| {
        ApiError::invalid_request(error.message.replace(&format!("`{from}`"), field))
    };
    let normalized = match kind {
        EntryKind::ProfileUrl => normalize::profile_url(Some(value.to_owned()))
            .map_err(|error| rename(error, "profile_url"))?,
        EntryKind::Email => {
            normalize::email(Some(value.to_owned())).map_err(|error| rename(error, "email"))?
        }
        EntryKind::Domain => Some(normalize::domain(field.trim_matches('`'), value)?),
    };
    normalized.ok_or_else(|| ApiError::invalid_request(format!("{field} must not be empty.")))
}

/// An entry to write: kind and normalised value, reason, who and how.
struct NewEntry<'a> {
    kind: EntryKind,
    value: String,
    reason: Option<&'a str>,
    added_by: Option<&'a str>,
    source: EntrySource,
}

/// Writes the entries not on the list yet; answers each entry's id (new or existing, in input
/// order) and how many were new. Flags the prospects the new ones match.
async fn insert_entries(
    conn: &mut AnyConnection,
    workspace_id: &str,
    entries: &[NewEntry<'_>],
    now: i64,
) -> Result<(Vec<String>, u64, u64), ApiError> {
    let mut ids_in_order = Vec::with_capacity(entries.len());
    let mut added = 0;
    let mut marked = 0;
    for entry in entries {
        let id = ids::new_id("dnc");
        let inserted = sqlx::query(
            "insert into do_not_contact_entries (id, workspace_id, kind, value, reason, added_by, source, created_at) \
             values ($1, $2, $3, $4, $5, $6, $7, $8) on conflict (workspace_id, kind, value) do nothing",
        )
        .bind(&id)
        .bind(workspace_id)
        .bind(entry.kind.as_str())
        .bind(&entry.value)
        .bind(entry.reason)
        .bind(entry.added_by)
        .bind(entry.source.as_str())
        .bind(now)
        .execute(&mut *conn)
        .await?;
        if inserted.rows_affected() == 1 {
            added += 1;
            ids_in_order.push(id);
        } else {
            let row = sqlx::query(
                "select id from do_not_contact_entries where workspace_id = $1 and kind = $2 and value = $3",
            )
            .bind(workspace_id)
            .bind(entry.kind.as_str())
            .bind(&entry.value)
            .fetch_one(&mut *conn)
            .await?;
            ids_in_order.push(row.try_get("id")?);
        }
    }
    if added > 0 {
        marked = flag_all_listed(conn, workspace_id, now).await?;
    }
    Ok((ids_in_order, added, marked))
}

/// The entries a person asked for (`add_do_not_contact`, `import_do_not_contact`), as written.
fn by_person<'a>(
    wanted: &'a [(EntryKind, String, Option<String>)],
    person_id: &'a str,
    source: EntrySource,
) -> Vec<NewEntry<'a>> {
    wanted
        .iter()
        .map(|(kind, value, reason)| NewEntry {
            kind: *kind,
            value: value.clone(),
            reason: reason.as_deref(),
            added_by: Some(person_id),
            source,
        })
        .collect()
}

/// The condition on `prospects` that an entry of `kind` matches, its value bound at `$at` (and,
/// for a domain, the `like` pattern of an email on it at `$at + 1`; see [`bind_match`]).
fn match_sql(kind: EntryKind, at: usize) -> String {
    match kind {
        EntryKind::ProfileUrl => format!("profile_url = ${at}"),
        EntryKind::Email => format!("email = ${at}"),
        EntryKind::Domain => format!(
            "(company_domain = ${at} or email like ${} escape '!')",
            at + 1
        ),
    }
}

/// Binds what [`match_sql`] names.
fn bind_match<'q>(
    query: sqlx::query::Query<'q, sqlx::Any, sqlx::any::AnyArguments>,
    kind: EntryKind,
    value: &str,
) -> sqlx::query::Query<'q, sqlx::Any, sqlx::any::AnyArguments> {
    let query = query.bind(value.to_owned());
    if kind == EntryKind::Domain {
        query.bind(email_domain_pattern(value))
    } else {
        query
    }
}

/// `%@domain`, with `like`'s wildcards escaped.
fn email_domain_pattern(domain: &str) -> String {
    let escaped = domain
        .replace('!', "!!")
        .replace('%', "!%")
        .replace('_', "!_");
    format!("%@{escaped}")
}

/// Flags every prospect of the workspace that an entry matches and that is not flagged yet,
/// with their events, in one statement; answers how many.
async fn flag_all_listed(
    conn: &mut AnyConnection,
    workspace_id: &str,
    now: i64,
) -> Result<u64, ApiError> {
    let sql = format!(
        "update prospects set do_not_contact = 1, updated_at = $2 where workspace_id = $1 and do_not_contact = 0 \
         and exists (select 1 from do_not_contact_entries e where {ENTRY_MATCHES_PROSPECT}) returning id"
    );
    let marked: Vec<String> = sqlx::query(sqlx::AssertSqlSafe(sql))
        .bind(workspace_id)
        .bind(now)
        .fetch_all(&mut *conn)
        .await?
        .iter()
        .map(|row| row.try_get("id"))
        .collect::<Result<_, _>>()?;
    record_added(conn, workspace_id, &marked, now).await?;
    Ok(marked.len() as u64)
}

async fn record_added(
    conn: &mut AnyConnection,
    workspace_id: &str,
    prospect_ids: &[String],
    now: i64,
) -> Result<(), ApiError> {
    if prospect_ids.is_empty() {
        return Ok(());
    }
    let data: Vec<serde_json::Value> = prospect_ids
        .iter()
        .map(|id| serde_json::json!({"prospect_id": id}))
        .collect();
    events::record_many(
        conn,
        workspace_id,
        now,
        EventType::ProspectDoNotContactAdded,
        &data,
    )
    .await
}

/// What a prospect is matched by: its profile URL, email and company domain.
struct Identity {
    id: String,
    profile_url: Option<String>,
    email: Option<String>,
    company_domain: Option<String>,
}

impl Identity {
    fn email_domain(&self) -> Option<String> {
        self.email
            .as_deref()
            .and_then(|email| email.rsplit_once('@'))
            .map(|(_, domain)| domain.to_owned())
    }
}

async fn identities(
    conn: &mut AnyConnection,
    workspace_id: &str,
    prospect_ids: &[&str],
) -> Result<Vec<Identity>, ApiError> {
    let mut found = Vec::with_capacity(prospect_ids.len());
    for id in prospect_ids {
        let row = sqlx::query(
            "select id, profile_url, email, company_domain from prospects where workspace_id = $1 and id = $2",
        )
        .bind(workspace_id)
        .bind(*id)
        .fetch_optional(&mut *conn)
        .await?;
        if let Some(row) = row {
            found.push(Identity {
                id: row.try_get("id")?,
                profile_url: row.try_get("profile_url")?,
                email: row.try_get("email")?,
                company_domain: row.try_get("company_domain")?,
            });
        }
    }
    Ok(found)
}

/// The entries that match a prospect, oldest first.
async fn entries_matching(
    conn: &mut AnyConnection,
    workspace_id: &str,
    who: &Identity,
) -> Result<Vec<DoNotContactEntry>, ApiError> {
    let sql = format!(
        "select {COLUMNS} from do_not_contact_entries where workspace_id = $1 and ( \
           (kind = 'profile_url' and value = $2) or (kind = 'email' and value = $3) \
           or (kind = 'domain' and (value = $4 or value = $5))) order by created_at, id"
    );
    let rows = sqlx::query(sqlx::AssertSqlSafe(sql))
        .bind(workspace_id)
        .bind(&who.profile_url)
        .bind(&who.email)
        .bind(&who.company_domain)
        .bind(who.email_domain())
        .fetch_all(&mut *conn)
        .await?;
    rows.iter().map(DoNotContactEntry::from_row).collect()
}

/// Whether an entry `e` matches the row of `prospects`: the one rule, in SQL. Emails and
/// domains are stored normalised (lowercase), as entries are. A domain matches the company's and
/// the email's (the `like` finds the `@`, the `substr` compares exactly).
const ENTRY_MATCHES_PROSPECT: &str = "e.workspace_id = prospects.workspace_id and ( \
     (e.kind = 'profile_url' and e.value = prospects.profile_url) \
     or (e.kind = 'email' and e.value = prospects.email) \
     or (e.kind = 'domain' and (e.value = prospects.company_domain \
       or (prospects.email like '%@' || e.value \
         and substr(prospects.email, length(prospects.email) - length(e.value) + 1) = e.value))))";

/// Ids per statement of [`flag_listed`].
const FLAG_BATCH: usize = 500;

/// Flags the given prospects (just written) that an entry matches and that are not flagged yet,
/// with their events: how a prospect created, imported, edited or processed after an entry was
/// added comes under it. One statement per 500 prospects, none when the list is empty.
pub(crate) async fn flag_listed(
    conn: &mut AnyConnection,
    workspace_id: &str,
    prospect_ids: &[&str],
    now: i64,
) -> Result<(), ApiError> {
    let any_entry =
        sqlx::query("select 1 from do_not_contact_entries where workspace_id = $1 limit 1")
            .bind(workspace_id)
            .fetch_optional(&mut *conn)
            .await?;
    if any_entry.is_none() || prospect_ids.is_empty() {
        return Ok(());
    }
    for batch in prospect_ids.chunks(FLAG_BATCH) {
        let list: Vec<String> = (0..batch.len()).map(|n| format!("${}", n + 3)).collect();
        let sql = format!(
            "update prospects set do_not_contact = 1, updated_at = $2 \
             where workspace_id = $1 and do_not_contact = 0 and id in ({}) \
             and exists (select 1 from do_not_contact_entries e where {ENTRY_MATCHES_PROSPECT}) returning id",
            list.join(", ")
        );
        let mut query = sqlx::query(sqlx::AssertSqlSafe(sql))
            .persistent(false)
            .bind(workspace_id)
            .bind(now);
        for id in batch {
            query = query.bind(*id);
        }
        let marked: Vec<String> = query
            .fetch_all(&mut *conn)
            .await?
            .iter()
            .map(|row| row.try_get("id"))
            .collect::<Result<_, _>>()?;
        record_added(conn, workspace_id, &marked, now).await?;
    }
    Ok(())
}

/// Adds the entries of prospects just flagged do-not-contact (their profile URL, else their
/// email; a prospect with neither keeps the flag alone): the flag and the list are one rule.
pub(crate) async fn list_flagged(
    conn: &mut AnyConnection,
    workspace_id: &str,
    prospect_ids: &[&str],
    added_by: Option<&str>,
    now: i64,
) -> Result<(), ApiError> {
    let mut entries = Vec::new();
    for who in identities(conn, workspace_id, prospect_ids).await? {
        let (kind, value) = match (who.profile_url, who.email) {
            (Some(url), _) => (EntryKind::ProfileUrl, url),
            (None, Some(email)) => (EntryKind::Email, email),
            (None, None) => continue,
        };
        entries.push(NewEntry {
            kind,
            value,
            reason: None,
            added_by,
            source: EntrySource::Prospect,
        });
    }
    insert_entries(conn, workspace_id, &entries, now).await?;
    Ok(())
}

/// Clears a prospect's flag (a person's edit): removes the entries of their own profile URL and
/// email, and refuses (409 `invalid_state`, naming it) while a domain entry still matches them.
pub(crate) async fn unlist_prospect(
    conn: &mut AnyConnection,
    workspace_id: &str,
    prospect_id: &str,
) -> Result<(), ApiError> {
    let Some(who) = identities(conn, workspace_id, &[prospect_id])
        .await?
        .into_iter()
        .next()
    else {
        return Ok(());
    };
    for entry in entries_matching(conn, workspace_id, &who).await? {
        if entry.kind == EntryKind::Domain {
            return Err(ApiError::new(
                ErrorCode::INVALID_STATE,
                format!(
                    "The prospect stays do-not-contact: the domain `{}` is on the do-not-contact list (entry `{}`). Remove that entry with remove_do_not_contact to contact anyone there.",
                    entry.value, entry.id
                ),
            ));
        }
        sqlx::query("delete from do_not_contact_entries where workspace_id = $1 and id = $2")
            .bind(workspace_id)
            .bind(&entry.id)
            .execute(&mut *conn)
            .await?;
    }
    Ok(())
}

fn check_reason(field: &str, reason: Option<String>) -> Result<Option<String>, ApiError> {
    let reason = reason
        .map(|reason| reason.trim().to_owned())
        .filter(|reason| !reason.is_empty());
    if let Some(reason) = &reason
        && reason.chars().count() > MAX_REASON_CHARS
    {
        return Err(ApiError::invalid_request(format!(
            "{field} is {} characters; at most {MAX_REASON_CHARS}.",
            reason.chars().count()
        )));
    }
    Ok(reason)
}

async fn fetch_entries(
    conn: &mut AnyConnection,
    workspace_id: &str,
    ids_in_order: &[String],
) -> Result<Vec<DoNotContactEntry>, ApiError> {
    let mut entries = Vec::with_capacity(ids_in_order.len());
    let mut seen = HashSet::new();
    for id in ids_in_order {
        if !seen.insert(id.as_str()) {
            continue;
        }
        let sql = format!(
            "select {COLUMNS} from do_not_contact_entries where workspace_id = $1 and id = $2"
        );
        let row = sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(workspace_id)
            .bind(id)
            .fetch_one(&mut *conn)
            .await?;
        entries.push(DoNotContactEntry::from_row(&row)?);
    }
    Ok(entries)
}

// ----- actions -----

// One entry to add.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(rename = "DoNotContactEntryInput")]
pub struct EntryInput {
    /// A `domain` covers everyone at the company.
    pub kind: EntryKind,
    /// A profile URL, email or company domain, as `kind` says.
    ///
    /// Compared with a prospect's `profile_url`, `email` and `company_domain`, normalised as they
    /// are; a URL on a domain is reduced to the domain.
    #[schemars(length(min = 1, max = 2000), regex(pattern = crate::common::NOT_BLANK))]
    pub value: String,
    /// E.g. "customer", "asked to stop", "competitor".
    #[schemars(length(max = 500))]
    pub reason: Option<String>,
}

/// The input of `add_do_not_contact`.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct AddDoNotContactInput {
    /// Repeats and entries already listed are folded.
    #[schemars(length(min = 1, max = 1000))]
    pub entries: Vec<EntryInput>,
}

/// What adding to the do-not-contact list did.
#[derive(Debug, Serialize, JsonSchema)]
pub struct DoNotContactAdded {
    /// Entries new to the list.
    pub added: u64,
    /// Entries that were on the list already (kept as they were) or repeated in the call.
    pub already_listed: u64,
    /// Prospects newly marked do-not-contact because an entry matches them.
    pub prospects_marked: u64,
    /// The entries asked for, once each, in the order given.
    pub entries: Vec<DoNotContactEntry>,
}

/// Add people or companies to the do-not-contact list.
///
/// Nobody listed is enrolled, approved or sent anything; matching prospects are flagged at once.
/// One bad value refuses the whole call.
///
/// Takes 1 to 1000 entries, each a `profile_url`, `email` or company `domain` with an optional
/// `reason`. A step that comes due for a listed prospect finishes its enrollment without
/// sending. The refusal names the bad value; nothing is saved.
#[action(scope = "write", idempotent, http = "POST /do-not-contact")]
pub async fn add_do_not_contact(
    ctx: Ctx,
    input: AddDoNotContactInput,
) -> Result<DoNotContactAdded, ApiError> {
    if input.entries.is_empty() || input.entries.len() > MAX_ENTRIES {
        return Err(ApiError::invalid_request(format!(
            "`entries` holds {} entries; send 1 to {MAX_ENTRIES}.",
            input.entries.len()
        )));
    }
    let mut checked = Vec::with_capacity(input.entries.len());
    for (index, entry) in input.entries.into_iter().enumerate() {
        let value = normalize_value(
            entry.kind,
            &format!("`entries[{index}].value`"),
            &entry.value,
        )?;
        let reason = check_reason(&format!("`entries[{index}].reason`"), entry.reason)?;
        checked.push((entry.kind, value, reason));
    }
    let entries = by_person(&checked, &ctx.principal().person_id, EntrySource::Manual);
    let now = ctx.now_ms();
    let mut tx = ctx.tx().await?;
    let (ids_in_order, added, prospects_marked) =
        insert_entries(&mut tx, ctx.workspace_id(), &entries, now).await?;
    let entries = fetch_entries(&mut tx, ctx.workspace_id(), &ids_in_order).await?;
    Ok(DoNotContactAdded {
        added,
        already_listed: ids_in_order.len() as u64 - added,
        prospects_marked,
        entries,
    })
}

outreach_runtime::prelude::example!(add_do_not_contact,
    request: {"entries": [
        {"kind": "domain", "value": "analytical-engines.example", "reason": "customer"},
        {"kind": "email", "value": "charles@difference.example", "reason": "asked to stop"}
    ]},
    response: {
        "added": 2,
        "already_listed": 0,
        "prospects_marked": 3,
        "entries": [
            {"id": "dnc_Qm3Lx8ZpV2cN7bW1tRy4", "kind": "domain", "value": "analytical-engines.example", "reason": "customer", "added_by": "per_5NeLx2Qm8ZbV0cW3tRy9", "source": "manual", "created_at": "2026-11-23T18:22:30.054Z"},
            {"id": "dnc_Wn4Kc9XqB1vM6zL0sPe2", "kind": "email", "value": "charles@difference.example", "reason": "asked to stop", "added_by": "per_5NeLx2Qm8ZbV0cW3tRy9", "source": "manual", "created_at": "2026-11-23T18:22:30.054Z"}
        ]
    }
);

outreach_runtime::prelude::parity!(add_do_not_contact, write,
    ok: {"entries": [{"kind": "domain", "value": "world-${number}-parity.example"}]},
    fails: {"entries": [{"kind": "email", "value": "not an email"}]} => INVALID_REQUEST
);

/// The input of `list_do_not_contact`.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct ListDoNotContactInput {
    /// Only entries of this kind.
    pub kind: Option<EntryKind>,
    #[serde(flatten)]
    pub page: PageParams,
}

/// List the do-not-contact list, newest first.
#[action(scope = "read", http = "GET /do-not-contact")]
pub async fn list_do_not_contact(
    ctx: Ctx,
    input: ListDoNotContactInput,
) -> Result<Page<DoNotContactEntry>, ApiError> {
    let filter = if input.kind.is_some() {
        "workspace_id = $1 and kind = $2"
    } else {
        "workspace_id = $1 and $2 is null"
    };
    let kind = input.kind.map(|kind| kind.as_str().to_owned());
    paged(
        ctx.db().pool(),
        input.page,
        format!("select count(*) from do_not_contact_entries where {filter}"),
        format!(
            "select {COLUMNS} from do_not_contact_entries where {filter} \
             order by created_at desc, id desc limit $3 offset $4"
        ),
        |query| query.bind(ctx.workspace_id()).bind(kind.clone()),
        DoNotContactEntry::from_row,
    )
    .await
}

outreach_runtime::prelude::example!(list_do_not_contact,
    request: {"kind": "domain", "limit": 50},
    response: {
        "items": [
            {"id": "dnc_Qm3Lx8ZpV2cN7bW1tRy4", "kind": "domain", "value": "analytical-engines.example", "reason": "customer", "added_by": "per_5NeLx2Qm8ZbV0cW3tRy9", "source": "manual", "created_at": "2026-11-23T18:22:30.054Z"}
        ],
        "count": 1,
        "has_more": false,
        "next_offset": null,
        "offset": 0,
        "total": 1
    }
);

outreach_runtime::prelude::parity!(list_do_not_contact, read,
    ok: {"kind": "email"},
    fails: {"kind": "phone"} => INVALID_REQUEST
);

/// The input of `remove_do_not_contact`.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct RemoveDoNotContactInput {
    /// `dnc_...`
    pub id: String,
}

/// What removing an entry did.
#[derive(Debug, Serialize, JsonSchema)]
pub struct DoNotContactRemoved {
    pub id: String,
    pub deleted: bool,
    /// Prospects no longer do-not-contact: the entry matched them, and no other entry does.
    pub prospects_unmarked: u64,
}

/// Remove an entry from the do-not-contact list.
///
/// Prospects no other entry matches lose their `do_not_contact` flag; nothing is sent to them
/// before a person approves it.
#[action(scope = "write", idempotent, http = "DELETE /do-not-contact/{id}")]
pub async fn remove_do_not_contact(
    ctx: Ctx,
    input: RemoveDoNotContactInput,
) -> Result<DoNotContactRemoved, ApiError> {
    let not_found = || {
        ApiError::new(
            ErrorCode::NOT_FOUND,
            format!("No do-not-contact entry `{}` in this workspace.", input.id),
        )
    };
    if !input.id.starts_with("dnc_") {
        return Err(not_found());
    }
    let now = ctx.now_ms();
    let mut tx = ctx.tx().await?;
    let sql =
        format!("select {COLUMNS} from do_not_contact_entries where workspace_id = $1 and id = $2");
    let row = sqlx::query(sqlx::AssertSqlSafe(sql))
        .bind(ctx.workspace_id())
        .bind(&input.id)
        .fetch_optional(&mut *tx)
        .await?
        .ok_or_else(not_found)?;
    let entry = DoNotContactEntry::from_row(&row)?;
    sqlx::query("delete from do_not_contact_entries where workspace_id = $1 and id = $2")
        .bind(ctx.workspace_id())
        .bind(&entry.id)
        .execute(&mut *tx)
        .await?;
    let sql = format!(
        "select id from prospects where workspace_id = $1 and do_not_contact <> 0 and {}",
        match_sql(entry.kind, 2)
    );
    let query = sqlx::query(sqlx::AssertSqlSafe(sql)).bind(ctx.workspace_id());
    let matched: Vec<String> = bind_match(query, entry.kind, &entry.value)
        .fetch_all(&mut *tx)
        .await?
        .iter()
        .map(|row| row.try_get("id"))
        .collect::<Result<_, _>>()?;
    let matched: Vec<&str> = matched.iter().map(String::as_str).collect();
    let mut prospects_unmarked = 0;
    for who in identities(&mut tx, ctx.workspace_id(), &matched).await? {
        // Someone with neither a profile URL nor an email has no entry of their own: their flag
        // may be a person's, which no entry records, so it stays.
        if who.profile_url.is_none() && who.email.is_none() {
            continue;
        }
        if !entries_matching(&mut tx, ctx.workspace_id(), &who)
            .await?
            .is_empty()
        {
            continue;
        }
        sqlx::query(
            "update prospects set do_not_contact = 0, updated_at = $3 where workspace_id = $1 and id = $2",
        )
        .bind(ctx.workspace_id())
        .bind(&who.id)
        .bind(now)
        .execute(&mut *tx)
        .await?;
        prospects_unmarked += 1;
    }
    Ok(DoNotContactRemoved {
        id: entry.id,
        deleted: true,
        prospects_unmarked,
    })
}

outreach_runtime::prelude::example!(remove_do_not_contact,
    request: {"id": "dnc_Qm3Lx8ZpV2cN7bW1tRy4"},
    response: {"deleted": true, "id": "dnc_Qm3Lx8ZpV2cN7bW1tRy4", "prospects_unmarked": 3}
);

outreach_runtime::prelude::parity!(remove_do_not_contact, write,
    ok: {"id": "$dnc_entry"},
    fails: {"id": "dnc_missing"} => NOT_FOUND
);

/// The input of `import_do_not_contact`.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct ImportDoNotContactInput {
    /// CSV text with a header row; common synonyms of the column names are recognised.
    ///
    /// Columns used: `profile_url` (or LinkedIn URL, Profile URL, LinkedIn Profile), `email` (or
    /// Email Address), `domain` (or Company Domain, Website), and `reason`; headers are matched
    /// without regard to case, spaces or punctuation, and other columns are ignored. Each
    /// non-empty value of a row becomes an entry. Over REST the file can also be the whole body
    /// (`Content-Type: text/csv`) or a `multipart/form-data` part named `file`.
    #[schemars(regex(pattern = crate::common::NOT_BLANK))]
    pub csv: String,
    /// For rows with no `reason` value.
    #[schemars(length(max = 500))]
    pub reason: Option<String>,
}

/// A row an import refused.
#[derive(Debug, Serialize, JsonSchema)]
pub struct RefusedRow {
    /// Row 1 is the first row after the header.
    pub row: u64,
    /// Why, naming the column.
    pub reason: String,
}

/// What an import into the do-not-contact list did.
#[derive(Debug, Serialize, JsonSchema)]
pub struct DoNotContactImported {
    /// Data rows read.
    pub rows: u64,
    /// Entries new to the list.
    pub added: u64,
    /// Values on the list already, or repeated in the file (folded).
    pub duplicates: u64,
    /// Prospects newly marked do-not-contact.
    pub prospects_marked: u64,
    /// How many rows were refused (bad values, or nothing usable).
    pub refused: u64,
    /// The first 100 refused rows, with why.
    pub refused_rows: Vec<RefusedRow>,
}

/// The columns an import reads, by the header's letters and digits, lowercased.
fn column_of(header: &str) -> Option<&'static str> {
    let key: String = header
        .chars()
        .filter(char::is_ascii_alphanumeric)
        .map(|c| c.to_ascii_lowercase())
        .collect();
    match key.as_str() {
        "profileurl" | "linkedinurl" | "linkedin" | "linkedinprofile" | "personlinkedinurl" => {
            Some("profile_url")
        }
        "email" | "emailaddress" | "workemail" => Some("email"),
        "domain" | "companydomain" | "website" | "companywebsite" => Some("domain"),
        "reason" => Some("reason"),
        _ => None,
    }
}

/// Import a do-not-contact list from CSV.
///
/// Needs a `profile_url`, `email` or `domain` column (optionally `reason`); each value becomes an
/// entry. Rows with a bad value are refused and reported with why; the rest are added.
///
/// A file upload as `import_prospects` takes it. Repeats and values already listed are folded. A
/// file without a usable column is refused whole, naming the columns it has.
#[action(scope = "write", idempotent, http = "POST /do-not-contact/imports")]
pub async fn import_do_not_contact(
    ctx: Ctx,
    input: ImportDoNotContactInput,
) -> Result<DoNotContactImported, ApiError> {
    let default_reason = check_reason("`reason`", input.reason)?;
    let mut reader = csv::ReaderBuilder::new()
        .flexible(true)
        .trim(csv::Trim::All)
        .from_reader(input.csv.as_bytes());
    let headers = reader
        .headers()
        .map_err(|error| ApiError::invalid_request(format!("`csv` could not be read: {error}.")))?
        .clone();
    let columns: Vec<Option<&'static str>> = headers.iter().map(column_of).collect();
    if !columns
        .iter()
        .any(|column| matches!(column, Some("profile_url" | "email" | "domain")))
    {
        let found: Vec<String> = headers.iter().map(|header| format!("`{header}`")).collect();
        return Err(ApiError::invalid_request(format!(
            "`csv` has no `profile_url`, `email` or `domain` column; its header names {}.",
            if found.is_empty() {
                "no columns".to_owned()
            } else {
                found.join(", ")
            }
        )));
    }
    let mut rows = 0;
    let mut refused = 0;
    let mut refused_rows = Vec::new();
    let mut seen = BTreeSet::new();
    let mut wanted: Vec<(EntryKind, String, Option<String>)> = Vec::new();
    let mut repeats = 0;
    for record in reader.records() {
        rows += 1;
        if rows as usize > MAX_IMPORT_ROWS {
            return Err(ApiError::invalid_request(format!(
                "`csv` holds more than {MAX_IMPORT_ROWS} rows; split it."
            )));
        }
        let record = record.map_err(|error| {
            ApiError::invalid_request(format!("`csv` row {rows} could not be read: {error}."))
        })?;
        let reason_cell = columns
            .iter()
            .zip(record.iter())
            .find(|(column, _)| **column == Some("reason"))
            .map(|(_, cell)| cell.to_owned())
            .filter(|cell| !cell.is_empty());
        let reason = match check_reason(&format!("row {rows}'s `reason`"), reason_cell) {
            Ok(reason) => reason.or_else(|| default_reason.clone()),
            Err(error) => {
                refuse(&mut refused, &mut refused_rows, rows, error.message);
                continue;
            }
        };
        let mut values = Vec::new();
        let mut problem = None;
        for (column, cell) in columns.iter().zip(record.iter()) {
            let kind = match column {
                Some("profile_url") => EntryKind::ProfileUrl,
                Some("email") => EntryKind::Email,
                Some("domain") => EntryKind::Domain,
                _ => continue,
            };
            if cell.is_empty() {
                continue;
            }
            match normalize_value(kind, &format!("`{}`", kind.as_str()), cell) {
                Ok(value) => values.push((kind, value)),
                Err(error) => {
                    problem = Some(error.message);
                    break;
                }
            }
        }
        if let Some(problem) = problem {
            refuse(&mut refused, &mut refused_rows, rows, problem);
            continue;
        }
        if values.is_empty() {
            refuse(
                &mut refused,
                &mut refused_rows,
                rows,
                "The row has no `profile_url`, `email` or `domain` value.".to_owned(),
            );
            continue;
        }
        for (kind, value) in values {
            if seen.insert((kind.as_str(), value.clone())) {
                wanted.push((kind, value, reason.clone()));
            } else {
                repeats += 1;
            }
        }
    }
    let entries = by_person(&wanted, &ctx.principal().person_id, EntrySource::Import);
    let now = ctx.now_ms();
    let mut tx = ctx.tx().await?;
    let (_, added, prospects_marked) =
        insert_entries(&mut tx, ctx.workspace_id(), &entries, now).await?;
    Ok(DoNotContactImported {
        rows,
        added,
        duplicates: repeats + (entries.len() as u64 - added),
        prospects_marked,
        refused,
        refused_rows,
    })
}

fn refuse(count: &mut u64, rows: &mut Vec<RefusedRow>, row: u64, reason: String) {
    *count += 1;
    if rows.len() < MAX_REPORTED_ROWS {
        rows.push(RefusedRow { row, reason });
    }
}

outreach_runtime::prelude::text_body!(import_do_not_contact, "csv", "text/csv");

outreach_runtime::prelude::example!(import_do_not_contact,
    request: {"csv": "email,domain,reason\ncharles@difference.example,,asked to stop\n,analytical-engines.example,customer\nnot-an-email,,\n", "reason": "imported from the CRM"},
    response: {
        "added": 2,
        "duplicates": 0,
        "prospects_marked": 1,
        "refused": 1,
        "refused_rows": [{"reason": "`email` must be an email address; got `not-an-email`.", "row": 3}],
        "rows": 3
    }
);

outreach_runtime::prelude::parity!(import_do_not_contact, write,
    ok: {"csv": "domain\nworld-${number}-import.example\n"},
    fails: {"csv": "name\nAda\n"} => INVALID_REQUEST
);
