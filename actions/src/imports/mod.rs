//! Imports: many prospects at once, from CSV text or JSON rows, priced per prospect created.
//!
//! An import is one transaction, the one dispatch gives it: the prospects it creates or updates,
//! their list memberships, the import record, the settlement of its credits and its stored
//! idempotent answer commit together or not at all. The price function reads, validates and
//! deduplicates the file to count what would be new, and hands the import the counts and the
//! valid rows' keys (profile URL and email) as its plan. The import matches the keys again inside
//! its transaction (whose reservation took the workspace's row lock, so two imports of one
//! workspace cannot both create the same person), then reads the file a second time and writes
//! its new prospects a batch at a time, so a large file is never held whole as prospect fields
//! (see `parse`), and keeps only what it used of the reservation.
//!
//! `parse` reads and validates rows, `plan` deduplicates them, `write` does the batched SQL.

mod parse;
mod plan;
mod write;

use std::collections::{BTreeMap, HashMap};

use outreach_runtime::prelude::paged;
use outreach_runtime::prelude::{
    ApiError, Backend, Ctx, Page, PageParams, Priced, Timestamp, action, ids, price_item,
};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use sqlx::Row as _;
use sqlx::any::AnyRow;

use crate::common::{IdKind, json_text};
use crate::events::{self, EventType};
use crate::lists::check_name;
use crate::prospects::Fields;
use crate::prospects::bulk::{BoundProspects, PROSPECT_BATCH};
pub use parse::{MAX_REPORTED_ERRORS, MAX_ROWS};
use parse::{Rows, Summary};
use plan::Target;
use write::NewProspects;

outreach_runtime::prelude::resource_tag!(
    "imports",
    toolset = "prospecting",
    "Bulk creation of prospects from CSV text or JSON rows, priced per row and idempotent."
);

price_item! {
    /// A prospect created by an import; updates and duplicates are free.
    pub IMPORT_PROSPECT = "import.prospect", 1;
}

/// What to do with a row that matches a prospect already in the workspace (or an earlier row).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum OnDuplicate {
    // Leave the prospect as it is (the default).
    #[default]
    Skip,
    // Write the row's non-empty values over the prospect's; add its tags and custom fields. The
    // profile URL and email are only filled in where the prospect has none. (Said in the
    // `on_duplicate` field's description: variant docs would make the schema a longer `oneOf`.)
    Update,
}

impl OnDuplicate {
    fn as_str(self) -> &'static str {
        match self {
            OnDuplicate::Skip => "skip",
            OnDuplicate::Update => "update",
        }
    }

    fn from_db(text: &str) -> Result<Self, ApiError> {
        [OnDuplicate::Skip, OnDuplicate::Update]
            .into_iter()
            .find(|value| value.as_str() == text)
            .ok_or_else(|| ApiError::internal(format!("stored on_duplicate `{text}`")))
    }
}

/// Prospect fields by name; a row needs a name, a `profile_url` or an `email`.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ImportRow {
    #[schemars(length(max = 500))]
    pub first_name: Option<String>,
    #[schemars(length(max = 500))]
    pub last_name: Option<String>,
    /// Split into first and last name when those are not given.
    ///
    /// `Jane Doe` or `Doe, Jane`.
    #[schemars(length(max = 500))]
    pub full_name: Option<String>,
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
    #[schemars(regex(pattern = crate::common::PROFILE_URL), length(max = 500))]
    pub profile_url: Option<String>,
    #[schemars(regex(pattern = crate::common::EMAIL), length(max = 500))]
    pub email: Option<String>,
    #[schemars(length(max = 500))]
    pub phone: Option<String>,
    /// Each at most 64 characters.
    ///
    /// More than 50 refuse the import, as the schema says; a longer tag makes the row invalid.
    #[serde(default)]
    #[schemars(length(max = 50))]
    pub tags: Vec<String>,
    /// Each value at most 10,000 characters of JSON, 64 KB in all; keys 1 to 100 characters.
    ///
    /// More than 50 keys refuse the import, as the schema says; a row over the other limits is
    /// invalid and reported.
    #[serde(default)]
    #[schemars(extend("maxProperties" = 50))]
    pub custom_fields: BTreeMap<String, Value>,
    pub do_not_contact: Option<bool>,
}

/// The input of `import_prospects`: `csv` or `rows` (exactly one), and what to do with them.
#[derive(Debug, Deserialize, JsonSchema)]
// An empty body is refused (it needs `csv` or `rows`): `minProperties` says so to readers that
// skip the cross-field rule below (`not`, since `oneOf` makes generated clients give up the
// input's class).
#[schemars(extend("minProperties" = 1))]
#[schemars(extend("not" = {"anyOf": [{"required": ["csv", "rows"], "properties": {"csv": {"not": {"type": "null"}}, "rows": {"not": {"type": "null"}}}}, {"required": ["list_id", "list_name"], "properties": {"list_id": {"not": {"type": "null"}}, "list_name": {"not": {"type": "null"}}}}, {"required": ["rows", "mapping"], "properties": {"rows": {"not": {"type": "null"}}, "mapping": {"not": {"type": "null"}}}}, {"properties": {"csv": {"type": "null"}, "rows": {"type": "null"}}}]}))]
pub struct ImportInput {
    /// CSV text with a header row. Common headers (also of Apollo, Sales Navigator, HeyReach,
    /// lemlist and LinkedIn exports) are recognised; other columns go into `custom_fields`.
    ///
    /// Comma-separated, values with commas or line breaks in double quotes. Common headers are
    /// recognised without regard to case, spaces or punctuation:
    /// First Name, Last Name, Full Name or Name (split into first and last), Company or
    /// Organization, Title or Job Title or Position, LinkedIn URL or Profile URL, Email or Email
    /// Address, Phone, Location, Country, Industry, Company Domain or Website, Company Size or
    /// Employees (`250`, `1,000`, `51-200` takes 51), Headline, Seniority, Department, Timezone,
    /// Tags (separated by `;` or `|`), Do Not Contact, City and State (joined into the location),
    /// and the headers of the exports of Apollo (`Person Linkedin Url`, `# Employees`, `First
    /// Phone`, ...), Sales Navigator, HeyReach, lemlist and LinkedIn's connections export (`URL`,
    /// `Connected On`; its `Notes:` paragraph above the header is skipped). Other columns go into
    /// `custom_fields` under their header, each named in the outcome's `warnings`. Row 1 is the
    /// first row after the header; blank lines are skipped. Over REST the file can also be the
    /// whole body (`Content-Type: text/csv`) or a `multipart/form-data` part named `file`.
    #[schemars(regex(pattern = crate::common::NOT_BLANK))]
    pub csv: Option<String>,
    /// For `csv`: header to prospect field (e.g. `title`, `custom_fields.<name>`), or null to skip
    /// the column.
    ///
    /// Overrides the recognised headers. Keys are CSV headers; values are prospect field names
    /// (`first_name`, ..., `full_name`, `tags`), `custom_fields.<name>`, or null to ignore the
    /// column.
    #[schemars(extend("maxProperties" = 1000))]
    pub mapping: Option<BTreeMap<String, Option<String>>>,
    /// Instead of `csv`: up to 100,000 rows.
    ///
    /// Row 1 is `rows[0]`.
    #[schemars(with = "Option<Vec<ImportRow>>")]
    #[schemars(length(min = 1))]
    pub rows: Option<Vec<Value>>,
    /// For a row matching a prospect (by profile URL, then email) or an earlier row: `update`
    /// writes its non-empty values over the prospect's.
    ///
    /// `skip` leaves the prospect as it is. `update` also adds the row's tags and custom fields;
    /// the profile URL and email are only filled in where the prospect has none.
    #[serde(default)]
    pub on_duplicate: OnDuplicate,
    /// Put every row's prospect on this list (`lst_...`).
    ///
    /// Created, updated or duplicate.
    pub list_id: Option<String>,
    /// Or a list by name, made if there is none.
    #[schemars(length(min = 1, max = 200), regex(pattern = crate::common::NOT_BLANK))]
    pub list_name: Option<String>,
}

/// What an import will write, worked out by its price function: the file's counts, the keys of
/// its valid rows, the prospects they matched and what becomes of each row.
pub struct ImportPlan {
    summary: Summary,
    existing: plan::Existing,
    plan: plan::Plan,
}

impl ImportInput {
    /// Opens the rows, refusing what is wrong with the input as a whole.
    fn open(&self) -> Result<Rows<'_>, ApiError> {
        if self.list_id.is_some() && self.list_name.is_some() {
            return Err(ApiError::invalid_request(
                "Send `list_id` or `list_name`, not both.",
            ));
        }
        if let Some(name) = &self.list_name {
            check_name(name).map_err(|error| {
                ApiError::invalid_request(error.message.replace("`name`", "`list_name`"))
            })?;
        }
        match (&self.csv, &self.rows) {
            (Some(csv), None) => parse::csv(csv, self.mapping.as_ref()),
            (None, Some(rows)) if self.mapping.is_none() => parse::json_rows(rows),
            (None, Some(_)) => Err(ApiError::invalid_request(
                "`mapping` applies to `csv` only; JSON `rows` already use prospect field names.",
            )),
            (Some(_), Some(_)) => Err(ApiError::invalid_request("Send `csv` or `rows`, not both.")),
            (None, None) => Err(ApiError::invalid_request(
                "Send the prospects to import: `csv` (CSV text with a header row) or `rows` (JSON objects).",
            )),
        }
    }

    fn source_format(&self) -> SourceFormat {
        if self.csv.is_some() {
            SourceFormat::Csv
        } else {
            SourceFormat::Rows
        }
    }
}

/// Why a row was not imported.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct RowError {
    /// 1 for the first data row (the CSV header is not counted; for JSON, `rows[0]`).
    pub row: u64,
    /// The field at fault; null when the row as a whole is (no name, profile URL or email).
    pub field: Option<String>,
    pub message: String,
}

outreach_runtime::prelude::text_enum! {
    /// Where an import stands.
    pub enum ImportStatus {
        /// Finished: an import runs to the end or leaves nothing behind.
        Completed => "completed",
    }
}

outreach_runtime::prelude::text_enum! {
    /// What an import read.
    pub enum SourceFormat {
        /// CSV text (`csv`).
        Csv => "csv",
        /// JSON objects (`rows`).
        Rows => "rows",
    }
}

/// An import and its outcome.
#[derive(Debug, Serialize, JsonSchema)]
pub struct Import {
    pub id: String,
    /// `completed`: an import runs to the end or leaves nothing behind.
    pub status: ImportStatus,
    /// `csv` or `rows`.
    pub source_format: SourceFormat,
    pub on_duplicate: OnDuplicate,
    /// The list the rows were added to.
    pub list_id: Option<String>,
    /// Whether the import made that list (from `list_name`).
    pub list_created: bool,
    /// Data rows read.
    pub rows: u64,
    /// New prospects.
    pub created: u64,
    /// Prospects that existed before the import and were changed by it (`on_duplicate: update`).
    pub updated: u64,
    /// Valid rows that matched an existing prospect or an earlier row of the file.
    pub duplicates: u64,
    /// Rows not imported; `rows = created + duplicates + invalid`.
    pub invalid: u64,
    /// Why rows were not imported, for the first 100 invalid rows.
    pub errors: Vec<RowError>,
    /// What to know about the file as a whole, one sentence each: CSV columns that are not a
    /// prospect field and were kept in `custom_fields` under their header (name them in `mapping`
    /// to put them elsewhere, or map them to null to leave them out), and the like. Empty for JSON
    /// `rows`.
    pub warnings: Vec<String>,
    /// Credits spent: the unit price of `import.prospect` for each prospect created.
    pub credits_spent: i64,
    pub created_at: Timestamp,
}

// Over REST, the CSV can also be the whole body (`text/csv`) or a multipart `file` part.
outreach_runtime::prelude::text_body!(import_prospects, "csv", "text/csv");

/// Prices an import: one `import.prospect` per prospect it would create now.
async fn price_import(ctx: &Ctx, input: &ImportInput) -> Result<Priced<ImportPlan>, ApiError> {
    let summary = parse::summarize(input.open()?)?;
    let mut conn = ctx.db().pool().acquire().await?;
    if let Some(list_id) = &input.list_id {
        write::existing_list(&mut conn, ctx.workspace_id(), list_id).await?;
    }
    let update = input.on_duplicate == OnDuplicate::Update;
    let backend = ctx.db().backend();
    let existing = plan::lookup(
        &mut conn,
        backend,
        ctx.workspace_id(),
        &summary.keys,
        update,
    )
    .await?;
    let plan = plan::plan(&summary.keys, &existing, update);
    let new = plan.creates.len() as u64;
    let duplicates = plan.duplicates;
    Ok(ctx
        .price(IMPORT_PROSPECT, new as i64)
        .detail("rows", summary.rows)
        .detail("new", new)
        .detail("duplicates", duplicates)
        .detail("invalid", summary.invalid)
        .detail("warnings", summary.warnings.clone())
        .plan(ImportPlan {
            summary,
            existing,
            plan,
        }))
}

/// Import prospects from CSV text or JSON rows.
///
/// Send `csv` or `rows` (at most 100,000 rows, 16 MiB); invalid rows are skipped and reported.
/// Costs one `import.prospect` unit (1 credit by default) per prospect created; `estimate_only`
/// prices it.
///
/// Send an `Idempotency-Key` to retry safely. Rows are normalised like `create_prospect`; the
/// first 100 invalid ones are reported. A row matching a prospect or an earlier row follows
/// `on_duplicate`; `list_id` or `list_name` puts the rows' prospects on a list. Atomic: the
/// prospects and the spend commit together. `estimate_only: true` needs only the `read` scope.
#[action(scope = "write", credits = price_import, idempotent, http = "POST /imports")]
pub async fn import_prospects(
    ctx: Ctx,
    input: ImportInput,
    plan: ImportPlan,
) -> Result<Import, ApiError> {
    let source_format = input.source_format();
    let on_duplicate = input.on_duplicate;
    let ImportPlan {
        mut summary,
        existing: priced_existing,
        plan: priced_plan,
    } = plan;
    let workspace_id = ctx.workspace_id();
    let backend = ctx.db().backend();
    let now = ctx.now_ms();
    let import_id = ids::new_id("imp");

    // The transaction's reservation took the workspace row lock, which serialises the imports of
    // a workspace: the lookups below see every prospect an earlier import committed.
    let mut tx = ctx.tx().await?;
    let (list_id, list_created) = target_list(&mut tx, workspace_id, &input, now).await?;

    let update = on_duplicate == OnDuplicate::Update;
    let keys = std::mem::take(&mut summary.keys);
    let valid_rows = keys.len();
    let existing = plan::lookup(&mut tx, backend, workspace_id, &keys, update).await?;
    // The plan is worked out from the keys and the prospects they match: unless another request
    // changed those since the price was worked out, it is the price's plan.
    let plan = if existing == priced_existing {
        priced_plan
    } else {
        plan::plan(&keys, &existing, update)
    };
    drop((priced_existing, keys));

    // Ids in ascending order: the primary-key index then takes each batch in one sweep rather
    // than at random places (the ids are random anyway, so their order means nothing).
    let mut new_ids: Vec<String> = (0..plan.creates.len())
        .map(|_| ids::new_id("prs"))
        .collect();
    new_ids.sort_unstable();
    // The last valid row each new prospect takes values from: its own, or the last merged in.
    let mut last_row = plan.creates.clone();
    for merge in &plan.merges {
        if let Target::New(n) = merge.target {
            last_row[n] = merge.row;
        }
    }

    // Existing prospects the rows update.
    let touched: Vec<&str> = {
        let mut seen = std::collections::HashSet::new();
        plan.merges
            .iter()
            .filter_map(|merge| match merge.target {
                Target::Existing(n) => Some(existing.ids[n].as_str()),
                Target::New(_) => None,
            })
            .filter(|id| seen.insert(*id))
            .collect()
    };
    let before =
        crate::prospects::bulk::load_fields(&mut tx, backend, workspace_id, &touched).await?;
    let mut after: HashMap<&str, Fields> = before
        .iter()
        .map(|(id, fields)| (id.as_str(), fields.clone()))
        .collect();

    // The file again, row by row. A new prospect is made from its first row, later matching
    // rows merged in, and written once the last of them has been read, a batch at a time. While
    // the database inserts one batch, the rows of the next are read and bound: `biased`, so the
    // insert is polled first and its statement is on its way before the reading, which never
    // waits, takes the task. On SQLite the first poll hands the statement to the connection's
    // thread. On PostgreSQL a statement not yet prepared (the first full batch, a short last one)
    // waits for its description first, and a large bind may be only partly sent, so there the
    // overlap is smaller (measured on SQLite only: bench/RESULTS.md).
    let mut creating = NewProspects::new(&new_ids, &last_row);
    let mut reading = SecondRead {
        rows: input.open()?,
        plan: &plan,
        existing_ids: &existing.ids,
        index: 0,
        finished: false,
        next_create: 0,
        next_merge: 0,
    };
    let mut next = reading.next_batch(&mut creating, &mut after, backend, workspace_id, now)?;
    loop {
        let (batch, more) = next;
        if !more {
            write::write_batch(&mut tx, backend, workspace_id, now, batch).await?;
            break;
        }
        let (written, read) = tokio::join!(
            biased;
            write::write_batch(&mut tx, backend, workspace_id, now, batch),
            async { reading.next_batch(&mut creating, &mut after, backend, workspace_id, now) },
        );
        written?;
        next = read?;
    }
    let SecondRead {
        index,
        next_create,
        next_merge,
        ..
    } = reading;
    if index != valid_rows || next_create != plan.creates.len() || next_merge != plan.merges.len() {
        return Err(ApiError::internal(format!(
            "the import read {index} valid rows the second time, {valid_rows} the first"
        )));
    }

    let updated = update_touched(
        &mut tx,
        backend,
        workspace_id,
        now,
        &touched,
        &before,
        &after,
    )
    .await?;

    if let Some(list_id) = &list_id {
        let members: Vec<&str> = plan
            .members
            .iter()
            .map(|target| match *target {
                Target::New(n) => new_ids[n].as_str(),
                Target::Existing(n) => existing.ids[n].as_str(),
            })
            .collect();
        crate::lists::insert_members(&mut tx, backend, workspace_id, list_id, now, &members)
            .await?;
        crate::lists::touch(&mut tx, workspace_id, list_id, now).await?;
    }

    let created = new_ids.len() as u64;
    let used = (created as i64).saturating_mul(ctx.unit_price(IMPORT_PROSPECT));
    let import = Import {
        id: import_id,
        status: ImportStatus::Completed,
        source_format,
        on_duplicate,
        list_id,
        list_created,
        rows: summary.rows,
        created,
        updated,
        duplicates: plan.duplicates,
        invalid: summary.invalid,
        errors: summary.errors,
        warnings: summary.warnings,
        credits_spent: used,
        created_at: Timestamp(now),
    };
    record_import(
        &mut tx,
        workspace_id,
        &ctx.principal().person_id,
        &import,
        now,
    )
    .await?;
    let data = json!({"import_id": import.id, "created": import.created, "updated": import.updated,
                      "invalid": import.invalid});
    events::record(&mut tx, workspace_id, now, EventType::ImportCompleted, data).await?;
    // More new prospects than were priced (some were deleted meanwhile) is a 409 here, and the
    // whole import rolls back.
    ctx.settle(&mut tx, used, &import.id).await?;
    crate::credits::spent(&mut tx, workspace_id, used, ctx.now_ms()).await?;
    Ok(import)
}

outreach_runtime::prelude::example!(import_prospects,
    request: {
        "csv": "First Name,Last Name,Title,Company,LinkedIn URL,Email\nGrace,Hopper,VP Sales,Compilers Inc,https://linkedin.com/in/grace-hopper-example,grace@compilers.example\n",
        "list_id": "lst_R4d0zhECHdJUnPY7RrLC",
        "on_duplicate": "skip"
    },
    response: {
        "created": 1,
        "created_at": "2026-11-23T18:22:30.074Z",
        "credits_spent": 1,
        "duplicates": 0,
        "errors": [],
        "id": "imp_lVtEiUF85cSeN2vqK2pm",
        "invalid": 0,
        "list_created": false,
        "list_id": "lst_R4d0zhECHdJUnPY7RrLC",
        "on_duplicate": "skip",
        "rows": 1,
        "source_format": "csv",
        "status": "completed",
        "updated": 0,
        "warnings": []
    }
);

outreach_runtime::prelude::parity!(import_prospects, write,
    ok: {
        "list_id": "$list",
        "rows": [
            {"email": "grace-${number}@navy.test", "first_name": "Grace"},
            {"last_name": "Hopper"}
        ]
    },
    fails: {} => INVALID_REQUEST
);

/// The list an import adds its prospects to: the one named by id (404 if missing), or by name
/// (made when missing: the `bool` says so), or none.
async fn target_list(
    tx: &mut sqlx::AnyConnection,
    workspace_id: &str,
    input: &ImportInput,
    now: i64,
) -> Result<(Option<String>, bool), ApiError> {
    Ok(match (&input.list_id, &input.list_name) {
        (Some(list_id), _) => (
            Some(write::existing_list(tx, workspace_id, list_id).await?),
            false,
        ),
        (None, Some(name)) => {
            let (id, made) =
                crate::lists::list_by_name(tx, workspace_id, &check_name(name)?, now).await?;
            (Some(id), made)
        }
        (None, None) => (None, false),
    })
}

/// The second read of an import's file: where it is, and what the plan says each row does.
struct SecondRead<'r, 'p> {
    rows: Rows<'r>,
    plan: &'p plan::Plan,
    existing_ids: &'p [String],
    /// Valid rows read so far.
    index: usize,
    /// Whether the last row has been read.
    finished: bool,
    /// The next of the plan's creates and merges.
    next_create: usize,
    next_merge: usize,
}

impl SecondRead<'_, '_> {
    /// Reads rows until a batch of new prospects is ready to write (`true`), or to the end of the
    /// file (`false`, every waiting prospect then ready). A new prospect is made from its first
    /// row; a later matching row is merged into it, or into the existing prospect it matched
    /// (`after`).
    fn until_batch(
        &mut self,
        creating: &mut NewProspects<'_>,
        after: &mut HashMap<&str, Fields>,
    ) -> Result<bool, ApiError> {
        while let Some(row) = self.rows.next_row()? {
            let Ok(row) = row else { continue };
            let index = self.index;
            self.index += 1;
            if self.plan.creates.get(self.next_create) == Some(&index) {
                creating.push(row.fields);
                self.next_create += 1;
            } else if let Some(merge) = self
                .plan
                .merges
                .get(self.next_merge)
                .filter(|m| m.row == index)
            {
                let into = match merge.target {
                    Target::New(n) => Some(creating.waiting_mut(n)?),
                    // Gone since the lookup: nothing to update.
                    Target::Existing(n) => after.get_mut(self.existing_ids[n].as_str()),
                };
                if let Some(fields) = into {
                    write::merge(fields, &row, merge.fill_url, merge.fill_email);
                }
                self.next_merge += 1;
            }
            creating.advance(index);
            if creating.ready() >= PROSPECT_BATCH {
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// Reads until a batch of new prospects is ready (see [`Self::until_batch`]) and binds it:
    /// at most [`PROSPECT_BATCH`] of them, so a file whose first row waits for its last one is
    /// still bound (and its values held) a batch at a time. With `false` when nothing is left to
    /// write after this batch.
    fn next_batch<'i>(
        &mut self,
        creating: &mut NewProspects<'i>,
        after: &mut HashMap<&str, Fields>,
        backend: Backend,
        workspace_id: &str,
        now: i64,
    ) -> Result<(BoundProspects<'i>, bool), ApiError> {
        if creating.ready() < PROSPECT_BATCH && !self.finished {
            self.finished = !self.until_batch(creating, after)?;
        }
        // At the end of the file every waiting prospect is ready.
        let count = if self.finished {
            creating.waiting()
        } else {
            creating.ready()
        }
        .min(PROSPECT_BATCH);
        let batch = creating.take(count, backend, workspace_id, now)?;
        Ok((batch, !self.finished || creating.waiting() > 0))
    }
}

/// Writes the existing prospects whose fields the rows changed; answers how many.
async fn update_touched(
    tx: &mut sqlx::AnyConnection,
    backend: Backend,
    workspace_id: &str,
    now: i64,
    touched: &[&str],
    before: &HashMap<String, Fields>,
    after: &HashMap<&str, Fields>,
) -> Result<u64, ApiError> {
    let mut updated = 0u64;
    for id in touched {
        let (Some(old), Some(new)) = (before.get(*id), after.get(id)) else {
            continue;
        };
        if old != new {
            crate::prospects::bulk::update_prospect(tx, backend, workspace_id, id, now, old, new)
                .await?;
            updated += 1;
        }
    }
    Ok(updated)
}

/// Stores the import's record, as `get_import` answers it later.
async fn record_import(
    tx: &mut sqlx::AnyConnection,
    workspace_id: &str,
    person_id: &str,
    import: &Import,
    now: i64,
) -> Result<(), ApiError> {
    sqlx::query(
        "insert into imports (id, workspace_id, status, source_format, on_duplicate, list_id, list_created, row_count, \
         created_count, updated_count, duplicate_count, invalid_count, errors, credits_spent, person_id, created_at, warnings) \
         values ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17)",
    )
    .bind(&import.id)
    .bind(workspace_id)
    .bind(import.status.as_str())
    .bind(import.source_format.as_str())
    .bind(import.on_duplicate.as_str())
    .bind(&import.list_id)
    .bind(i64::from(import.list_created))
    .bind(count(import.rows))
    .bind(count(import.created))
    .bind(count(import.updated))
    .bind(count(import.duplicates))
    .bind(count(import.invalid))
    .bind(json_text(&import.errors)?)
    .bind(import.credits_spent)
    .bind(person_id)
    .bind(now)
    .bind(json_text(&import.warnings)?)
    .execute(tx)
    .await?;
    Ok(())
}

fn count(value: u64) -> i64 {
    i64::try_from(value).unwrap_or(i64::MAX)
}

// ----- reading imports -----

const IMPORT_COLUMNS: &str = "id, status, source_format, on_duplicate, list_id, list_created, row_count, created_count, \
    updated_count, duplicate_count, invalid_count, errors, warnings, credits_spent, created_at";

impl Import {
    fn from_row(row: &AnyRow) -> Result<Self, ApiError> {
        let count = |column: &str| -> Result<u64, ApiError> {
            Ok(u64::try_from(row.try_get::<i64, _>(column)?).unwrap_or(0))
        };
        let errors: String = row.try_get("errors")?;
        Ok(Self {
            id: row.try_get("id")?,
            status: ImportStatus::from_db(&row.try_get::<String, _>("status")?)?,
            source_format: SourceFormat::from_db(&row.try_get::<String, _>("source_format")?)?,
            on_duplicate: OnDuplicate::from_db(&row.try_get::<String, _>("on_duplicate")?)?,
            list_id: row.try_get("list_id")?,
            list_created: row.try_get::<i64, _>("list_created")? != 0,
            rows: count("row_count")?,
            created: count("created_count")?,
            updated: count("updated_count")?,
            duplicates: count("duplicate_count")?,
            invalid: count("invalid_count")?,
            errors: serde_json::from_str(&errors).map_err(ApiError::internal)?,
            warnings: serde_json::from_str(&row.try_get::<String, _>("warnings")?)
                .map_err(ApiError::internal)?,
            credits_spent: row.try_get("credits_spent")?,
            created_at: Timestamp(row.try_get("created_at")?),
        })
    }
}

/// The input of `get_import`.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct ImportId {
    /// `imp_...`
    pub id: String,
}

/// Get an import by id.
#[action(scope = "read", http = "GET /imports/{id}")]
pub async fn get_import(ctx: Ctx, input: ImportId) -> Result<Import, ApiError> {
    IdKind::Import.check(&input.id)?;
    let sql = format!("select {IMPORT_COLUMNS} from imports where workspace_id = $1 and id = $2");
    let row = sqlx::query(sqlx::AssertSqlSafe(sql))
        .bind(ctx.workspace_id())
        .bind(&input.id)
        .fetch_optional(ctx.db().pool())
        .await?
        .ok_or_else(|| IdKind::Import.not_found(&input.id))?;
    Import::from_row(&row)
}

outreach_runtime::prelude::example!(get_import,
    request: {"id": "imp_lVtEiUF85cSeN2vqK2pm"},
    response: {
        "created": 1,
        "created_at": "2026-11-23T18:22:30.074Z",
        "credits_spent": 1,
        "duplicates": 0,
        "errors": [],
        "id": "imp_lVtEiUF85cSeN2vqK2pm",
        "invalid": 0,
        "list_created": false,
        "list_id": "lst_R4d0zhECHdJUnPY7RrLC",
        "on_duplicate": "skip",
        "rows": 1,
        "source_format": "csv",
        "status": "completed",
        "updated": 0,
        "warnings": []
    }
);

outreach_runtime::prelude::parity!(get_import, read,
    ok: {"id": "$import"},
    fails: {"id": "$missing:imp"} => NOT_FOUND
);

/// The input of `list_imports`.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct ListImportsInput {
    #[serde(flatten)]
    pub page: PageParams,
}

/// List imports, newest first.
#[action(scope = "read", http = "GET /imports")]
pub async fn list_imports(ctx: Ctx, input: ListImportsInput) -> Result<Page<Import>, ApiError> {
    paged(
        ctx.db().pool(),
        input.page,
        "select count(*) from imports where workspace_id = $1".to_owned(),
        format!(
            "select {IMPORT_COLUMNS} from imports where workspace_id = $1 order by created_at desc, id desc limit $2 offset $3"
        ),
        |query| query.bind(ctx.workspace_id()),
        Import::from_row,
    )
    .await
}

outreach_runtime::prelude::example!(list_imports,
    request: {"limit": 25},
    response: {
        "count": 1,
        "has_more": false,
        "items": [
            {
                "created": 1,
                "created_at": "2026-11-23T18:22:30.074Z",
                "credits_spent": 1,
                "duplicates": 0,
                "errors": [],
                "id": "imp_lVtEiUF85cSeN2vqK2pm",
                "invalid": 0,
                "list_created": false,
                "list_id": "lst_R4d0zhECHdJUnPY7RrLC",
                "on_duplicate": "skip",
                "rows": 1,
                "source_format": "csv",
                "status": "completed",
                "updated": 0,
                "warnings": []
            }
        ],
        "next_offset": null,
        "offset": 0,
        "total": 1
    }
);

outreach_runtime::prelude::parity!(list_imports, read,
    ok: {"limit": 5},
    fails: {"limit": 0} => INVALID_REQUEST
);
