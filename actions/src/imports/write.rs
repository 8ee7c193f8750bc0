//! What an import writes, between its plan and the owners' statements: a duplicate merged into
//! the prospect it matched, the list it fills checked, and its new prospects held until no later
//! row changes them, then written in batches (`prospects::bulk`).

use std::collections::VecDeque;

use outreach_runtime::prelude::{ApiError, Backend};
use sqlx::Row as _;

use crate::common::IdKind;
use crate::prospects::bulk::{BoundProspects, bind_prospects, insert_bound};
use crate::prospects::{Fields, normalize};

type Tx = sqlx::AnyConnection;

/// Merges a duplicate row into the prospect it matched: the row's values replace the prospect's,
/// empty cells keep them; tags and custom fields are added to (within their limits).
pub fn merge(into: &mut Fields, row: &super::parse::Row, fill_url: bool, fill_email: bool) {
    fn set<T: Clone>(into: &mut Option<T>, value: &Option<T>) {
        if value.is_some() {
            into.clone_from(value);
        }
    }
    let from = &row.fields;
    set(&mut into.first_name, &from.first_name);
    set(&mut into.last_name, &from.last_name);
    set(&mut into.headline, &from.headline);
    set(&mut into.title, &from.title);
    set(&mut into.seniority, &from.seniority);
    set(&mut into.department, &from.department);
    set(&mut into.company_name, &from.company_name);
    set(&mut into.company_domain, &from.company_domain);
    set(&mut into.company_industry, &from.company_industry);
    set(&mut into.company_size, &from.company_size);
    set(&mut into.location, &from.location);
    set(&mut into.country, &from.country);
    set(&mut into.timezone, &from.timezone);
    set(&mut into.phone, &from.phone);
    if fill_url {
        set(&mut into.profile_url, &from.profile_url);
    }
    if fill_email {
        set(&mut into.email, &from.email);
    }
    for tag in &from.tags {
        if into.tags.len() < normalize::MAX_TAGS && !into.tags.contains(tag) {
            into.tags.push(tag.clone());
        }
    }
    for (key, value) in &from.custom_fields {
        if into.custom_fields.len() < normalize::MAX_CUSTOM_FIELDS
            || into.custom_fields.contains_key(key)
        {
            into.custom_fields.insert(key.clone(), value.clone());
        }
    }
    if row.do_not_contact_given {
        into.do_not_contact = from.do_not_contact;
    }
}

/// Checks that a list exists in the workspace; returns its id.
pub async fn existing_list(
    conn: &mut sqlx::AnyConnection,
    workspace_id: &str,
    list_id: &str,
) -> Result<String, ApiError> {
    IdKind::List.check(list_id)?;
    let row = sqlx::query("select id from lists where workspace_id = $1 and id = $2")
        .bind(workspace_id)
        .bind(list_id)
        .fetch_optional(conn)
        .await?
        .ok_or_else(|| IdKind::List.not_found(list_id))?;
    Ok(row.try_get("id")?)
}

/// An import's new prospects between the two reads of the file: read, waiting for the rows that
/// merge into them, and written in batches, in the order of their (sorted) ids.
pub struct NewProspects<'a> {
    /// The id of each new prospect.
    ids: &'a [String],
    /// The last valid row each new prospect takes values from.
    last_row: &'a [usize],
    /// Read and not written yet: new prospects `written..`.
    waiting: VecDeque<Fields>,
    written: usize,
    /// How many of `waiting`, from the front, no later row changes.
    ready: usize,
}

impl<'a> NewProspects<'a> {
    /// `ids[n]` is the id of new prospect `n`, and `last_row[n]` the last valid row it takes
    /// values from.
    pub fn new(ids: &'a [String], last_row: &'a [usize]) -> Self {
        Self {
            ids,
            last_row,
            waiting: VecDeque::new(),
            written: 0,
            ready: 0,
        }
    }

    /// The next new prospect, as its first row made it.
    pub fn push(&mut self, fields: Fields) {
        self.waiting.push_back(fields);
    }

    /// How many are read and not written yet.
    pub fn waiting(&self) -> usize {
        self.waiting.len()
    }

    /// How many of those, from the first, no later row changes.
    pub fn ready(&self) -> usize {
        self.ready
    }

    /// New prospect `n`, which must still be waiting.
    pub fn waiting_mut(&mut self, n: usize) -> Result<&mut Fields, ApiError> {
        n.checked_sub(self.written)
            .and_then(|at| self.waiting.get_mut(at))
            .ok_or_else(|| ApiError::internal(format!("new prospect {n} was written too soon")))
    }

    /// Valid row `index` has been read.
    pub fn advance(&mut self, index: usize) {
        while self.ready < self.waiting.len() && self.last_row[self.written + self.ready] <= index {
            self.ready += 1;
        }
    }

    /// Takes the first `count` waiting prospects (all of them ready) and binds them into their
    /// inserts, to be written by [`write_batch`].
    pub fn take(
        &mut self,
        count: usize,
        backend: Backend,
        workspace_id: &str,
        now: i64,
    ) -> Result<BoundProspects<'a>, ApiError> {
        let fields: Vec<Fields> = self.waiting.drain(..count).collect();
        let ids = &self.ids[self.written..self.written + count];
        self.written += count;
        self.ready = self.ready.saturating_sub(count);
        bind_prospects(backend, workspace_id, now, ids, fields)
    }
}

/// Writes a batch of new prospects (see [`NewProspects::take`]) and their tags.
pub async fn write_batch(
    tx: &mut Tx,
    backend: Backend,
    workspace_id: &str,
    now: i64,
    batch: BoundProspects<'_>,
) -> Result<(), ApiError> {
    insert_bound(tx, backend, workspace_id, now, batch)
        .await
        .map_err(|error| {
            // A prospect with one of these profile URLs was created by another request meanwhile.
            match error
                .internal
                .as_deref()
                .filter(|cause| cause.contains("prospects_profile_url_key"))
            {
                Some(cause) => {
                    tracing::info!(cause, "import raced a prospect create");
                    ApiError::conflict(
                        "A prospect with one of these profile URLs was created while the import ran; nothing was imported or spent. Retry.",
                    )
                }
                None => error,
            }
        })
}
