//! Deduplication: which rows make new prospects, and which match one that exists.
//!
//! A row matches by its normalised profile URL first, then by its email, against the workspace and
//! against the earlier rows of the same file. The price function and the import itself run the same
//! [`plan`] over the same [`lookup`], so an estimate names exactly what an import made at that
//! moment would create. The lookups are batched `in (...)` queries over the distinct URLs and emails
//! of the file, never one query per row.

use std::collections::{HashMap, HashSet};

use outreach_runtime::prelude::ApiError;
use sqlx::{AssertSqlSafe, Row as _};

use super::parse::Keys;
use crate::placeholders::Placeholders;
use outreach_runtime::prelude::Backend;

/// Values per `in (...)` lookup: far below SQLite's 32,766 parameters and PostgreSQL's 65,535.
pub const LOOKUP_BATCH: usize = 5000;

/// The workspace's prospects that share a profile URL or an email with the file.
#[derive(Debug, Default, PartialEq)]
pub struct Existing {
    pub ids: Vec<String>,
    has_url: Vec<bool>,
    has_email: Vec<bool>,
    by_url: HashMap<String, usize>,
    by_email: HashMap<String, usize>,
}

impl Existing {
    fn add(&mut self, id: String, url: Option<String>, email: Option<String>) {
        let index = self.ids.len();
        self.ids.push(id);
        self.has_url.push(url.is_some());
        self.has_email.push(email.is_some());
        if let Some(url) = url {
            self.by_url.insert(url, index);
        }
        if let Some(email) = email {
            // Emails are not unique: rows match the oldest prospect with the email.
            self.by_email.entry(email).or_insert(index);
        }
    }
}

/// A prospect found by a lookup: created at, profile URL, email.
type Found = HashMap<String, (i64, Option<String>, Option<String>)>;

/// Looks up, in batches, the prospects whose profile URL or email appears among `rows`. With
/// `update` every email is looked up (a row may fill in an email, which must not be taken); else
/// only the emails of rows whose profile URL matched nothing, the only ones a row is matched by.
pub async fn lookup(
    conn: &mut sqlx::AnyConnection,
    backend: Backend,
    workspace_id: &str,
    rows: &[Keys],
    update: bool,
) -> Result<Existing, ApiError> {
    let mut found = Found::new();
    let urls = distinct(rows.iter().filter_map(|row| row.profile_url.as_deref()));
    fetch(
        conn,
        backend,
        workspace_id,
        "profile_url",
        &urls,
        &mut found,
    )
    .await?;
    let known_urls: HashSet<&str> = found
        .values()
        .filter_map(|(_, url, _)| url.as_deref())
        .collect();
    let emails = distinct(
        rows.iter()
            .filter(|row| {
                update
                    || row
                        .profile_url
                        .as_deref()
                        .is_none_or(|url| !known_urls.contains(url))
            })
            .filter_map(|row| row.email.as_deref()),
    );
    drop(known_urls);
    fetch(conn, backend, workspace_id, "email", &emails, &mut found).await?;

    let mut found: Vec<_> = found.into_iter().collect();
    found.sort_by(|(a_id, (a_at, ..)), (b_id, (b_at, ..))| (a_at, a_id).cmp(&(b_at, b_id)));
    let mut existing = Existing::default();
    for (id, (_, url, email)) in found {
        existing.add(id, url, email);
    }
    Ok(existing)
}

/// Adds to `found` the prospects whose `column` is one of `values`.
async fn fetch(
    conn: &mut sqlx::AnyConnection,
    backend: Backend,
    workspace_id: &str,
    column: &'static str,
    values: &[&str],
    found: &mut Found,
) -> Result<(), ApiError> {
    for batch in values.chunks(LOOKUP_BATCH) {
        // Interpolates a column name the caller passes as a constant, and placeholders.
        let mut sql = String::from(
            "select id, profile_url, email, created_at from prospects where workspace_id = ",
        );
        let mut placeholders = Placeholders::new(backend);
        placeholders.one(&mut sql);
        sql.push_str(" and ");
        sql.push_str(column);
        sql.push_str(" in ");
        placeholders.tuple(&mut sql, batch.len());
        // Unprepared, so it is planned with its values (see `sql`).
        let mut query = sqlx::query(AssertSqlSafe(sql))
            .persistent(false)
            .bind(workspace_id);
        for value in batch {
            query = query.bind(*value);
        }
        for row in query.fetch_all(&mut *conn).await? {
            found.insert(
                row.try_get("id")?,
                (
                    row.try_get("created_at")?,
                    row.try_get("profile_url")?,
                    row.try_get("email")?,
                ),
            );
        }
    }
    Ok(())
}

fn distinct<'a>(values: impl Iterator<Item = &'a str>) -> Vec<&'a str> {
    let mut seen = HashSet::new();
    values.filter(|value| seen.insert(*value)).collect()
}

/// The prospect a row goes to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    /// The `n`th prospect this import creates.
    New(usize),
    /// `Existing::ids[n]`.
    Existing(usize),
}

/// A row merged into the prospect it matched (`on_duplicate: update`).
#[derive(Debug, Clone, Copy)]
pub struct Merge {
    pub target: Target,
    /// Index into the valid rows.
    pub row: usize,
    /// Whether the row's profile URL (or email) fills the prospect's empty one. Identity fields are
    /// only filled, never replaced, so a match can never take another prospect's URL.
    pub fill_url: bool,
    pub fill_email: bool,
}

/// What an import does with its valid rows.
#[derive(Debug, Default)]
pub struct Plan {
    /// For each new prospect, the index of its first row.
    pub creates: Vec<usize>,
    /// Rows that matched an existing prospect or an earlier row.
    pub duplicates: u64,
    /// With `update`: the merges, in row order.
    pub merges: Vec<Merge>,
    /// Every prospect the rows went to, once each, in first-seen order (the list's new members).
    pub members: Vec<Target>,
}

/// `existing`'s keys and the prospects they name, with room for `rows` more: a map that grows
/// while it is filled holds its old table and the new one at once (an import of 100,000 rows is
/// sized once, not sixteen times).
fn seeded(existing: &HashMap<String, usize>, rows: usize) -> HashMap<&str, Target> {
    let mut map = HashMap::with_capacity(existing.len() + rows);
    map.extend(
        existing
            .iter()
            .map(|(key, &index)| (key.as_str(), Target::Existing(index))),
    );
    map
}

/// Classifies the valid rows, in file order.
pub fn plan(rows: &[Keys], existing: &Existing, update: bool) -> Plan {
    let mut plan = Plan {
        creates: Vec::with_capacity(rows.len()),
        ..Plan::default()
    };
    let mut by_url = seeded(&existing.by_url, rows.len());
    let mut by_email = seeded(&existing.by_email, rows.len());
    let mut existing_url = existing.has_url.clone();
    let mut existing_email = existing.has_email.clone();
    let (mut new_url, mut new_email) = (
        Vec::with_capacity(rows.len()),
        Vec::with_capacity(rows.len()),
    );
    // A new prospect is a member from the row that creates it; an existing one from its first row.
    let mut existing_member = vec![false; existing.ids.len()];

    for (index, row) in rows.iter().enumerate() {
        let url = row.profile_url.as_deref();
        let email = row.email.as_deref();
        let matched = url
            .and_then(|url| by_url.get(url))
            .or_else(|| email.and_then(|email| by_email.get(email)))
            .copied();
        let target = match matched {
            None => {
                let target = Target::New(plan.creates.len());
                plan.creates.push(index);
                new_url.push(url.is_some());
                new_email.push(email.is_some());
                if let Some(url) = url {
                    by_url.insert(url, target);
                }
                if let Some(email) = email {
                    by_email.insert(email, target);
                }
                target
            }
            Some(target) => {
                plan.duplicates += 1;
                if update {
                    let (has_url, has_email) = match target {
                        Target::New(n) => (&mut new_url[n], &mut new_email[n]),
                        Target::Existing(n) => (&mut existing_url[n], &mut existing_email[n]),
                    };
                    let fill_url = url.is_some_and(|url| !*has_url && !by_url.contains_key(url));
                    let fill_email =
                        email.is_some_and(|email| !*has_email && !by_email.contains_key(email));
                    if let (true, Some(url)) = (fill_url, url) {
                        *has_url = true;
                        by_url.insert(url, target);
                    }
                    if let (true, Some(email)) = (fill_email, email) {
                        *has_email = true;
                        by_email.insert(email, target);
                    }
                    plan.merges.push(Merge {
                        target,
                        row: index,
                        fill_url,
                        fill_email,
                    });
                }
                target
            }
        };
        let first_seen = match (target, matched) {
            (_, None) => true,
            (Target::Existing(n), Some(_)) => !std::mem::replace(&mut existing_member[n], true),
            (Target::New(_), Some(_)) => false,
        };
        if first_seen {
            plan.members.push(target);
        }
    }
    plan
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(url: Option<&str>, email: Option<&str>) -> Keys {
        Keys {
            profile_url: url.map(str::to_owned),
            email: email.map(str::to_owned),
        }
    }

    #[test]
    fn rows_match_by_url_then_email_within_the_file_and_the_workspace() {
        let mut existing = Existing::default();
        existing.add(
            "prs_old".into(),
            Some("x.com/in/old".into()),
            Some("old@x.com".into()),
        );
        let rows = [
            row(Some("x.com/in/a"), Some("a@x.com")), // new 0
            row(Some("x.com/in/a"), None),            // dup of new 0 by URL
            row(Some("x.com/in/b"), Some("a@x.com")), // dup of new 0 by email
            row(None, Some("old@x.com")),             // dup of existing by email
            row(Some("x.com/in/old"), None),          // dup of existing by URL
            row(Some("x.com/in/b"), None),            // new 1: `b` was not stored (skip)
        ];
        let plan = plan(&rows, &existing, false);
        assert_eq!(plan.creates, vec![0, 5]);
        assert_eq!(plan.duplicates, 4);
        assert!(plan.merges.is_empty());
        assert_eq!(
            plan.members,
            vec![Target::New(0), Target::Existing(0), Target::New(1)]
        );
    }

    #[test]
    fn updates_fill_empty_identity_fields_only() {
        let mut existing = Existing::default();
        existing.add("prs_old".into(), None, Some("old@x.com".into()));
        let rows = [
            row(Some("x.com/in/old"), Some("old@x.com")), // matches by email, fills the URL
            row(Some("x.com/in/old"), None),              // now matches the same prospect by URL
        ];
        let plan = plan(&rows, &existing, true);
        assert!(plan.creates.is_empty());
        assert_eq!(plan.merges.len(), 2);
        assert!(plan.merges[0].fill_url && !plan.merges[0].fill_email);
        assert_eq!(plan.merges[1].target, Target::Existing(0));
        assert_eq!(plan.members, vec![Target::Existing(0)], "a member once");
    }
}
