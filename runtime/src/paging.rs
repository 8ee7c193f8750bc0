//! Paging: one input shape and one output shape for every list action.
//!
//! Offset paging (`limit`, `offset`) keeps list actions trivially callable from an assistant and
//! from curl; a stable order (newest first, id as tie-break) makes walking `next_offset` visit each
//! row once while nothing is inserted. `limit` is validated while decoding, so a bad value is a 400
//! that names the bound before the action runs. Flatten [`PageParams`] into a list input and return
//! [`Page`]. A page's answer is held to [`MAX_PAGE_BYTES`] by dispatch ([`within_bound`]): one
//! over it is cut short, with `has_more` and `next_offset` saying where to go on.

use schemars::JsonSchema;
use serde::{Deserialize, Deserializer, Serialize};
use sqlx::any::{AnyArguments, AnyRow};
use sqlx::{AssertSqlSafe, Row as _};

use crate::columns::{Cursor, FromColumns};
use crate::db::Db;
use crate::error::ApiError;
use crate::json::JsonBody;

/// A query on the `Any` driver, as a bind closure extends it.
pub type AnyQuery<'q> = sqlx::query::Query<'q, sqlx::Any, AnyArguments>;

pub const DEFAULT_LIMIT: u32 = 25;
pub const MAX_LIMIT: u32 = 200;

/// The most bytes a page's answer holds: 100 KB, 25,000 tokens at 4 bytes a token. MCP hosts
/// refuse a tool result past about that (Claude Code does at 25,000 tokens), and 200 large items
/// (prospects with every field filled) pass it, so a page is cut short rather than refused.
pub const MAX_PAGE_BYTES: usize = 100 * 1024;

/// The paging fields of a list action's input.
#[derive(Debug, Clone, Copy, Default, Deserialize, JsonSchema)]
pub struct PageParams {
    // How many items to return: the bounds and the default are the schema's.
    #[serde(default, deserialize_with = "limit_in_range")]
    #[schemars(range(min = 1, max = 200), default = "default_limit")]
    pub limit: Option<u32>,
    /// The previous page's `next_offset`.
    ///
    /// Follow it while the page `has_more`.
    #[serde(default, deserialize_with = "offset_not_negative")]
    #[schemars(range(min = 0), default = "default_offset")]
    pub offset: Option<u64>,
}

// What the schemas show as the defaults (an absent field decodes to `None`, which means the same).
fn default_limit() -> Option<u32> {
    Some(DEFAULT_LIMIT)
}

fn default_offset() -> Option<u64> {
    Some(0)
}

impl PageParams {
    pub fn limit(&self) -> u32 {
        self.limit.unwrap_or(DEFAULT_LIMIT)
    }

    pub fn offset(&self) -> u64 {
        self.offset.unwrap_or(0)
    }

    /// `limit` and `offset` as SQL bind values.
    pub fn sql(&self) -> (i64, i64) {
        (
            i64::from(self.limit()),
            i64::try_from(self.offset()).unwrap_or(i64::MAX),
        )
    }
}

// Both read a signed number so that a negative value gets a sentence naming the field: paging
// fields are flattened into each list input, where serde loses the field's path.
fn limit_in_range<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<u32>, D::Error> {
    match Option::<i64>::deserialize(deserializer) {
        Ok(Some(limit)) if (1..=i64::from(MAX_LIMIT)).contains(&limit) => Ok(Some(limit as u32)),
        Ok(Some(limit)) => Err(serde::de::Error::custom(format!(
            "`limit` must be between 1 and {MAX_LIMIT}, got {limit}"
        ))),
        Ok(None) => Ok(None),
        Err(_) => Err(serde::de::Error::custom(format!(
            "`limit` must be a whole number between 1 and {MAX_LIMIT}"
        ))),
    }
}

fn offset_not_negative<'de, D: Deserializer<'de>>(
    deserializer: D,
) -> Result<Option<u64>, D::Error> {
    match Option::<i64>::deserialize(deserializer) {
        Ok(Some(offset)) if offset >= 0 => Ok(Some(offset as u64)),
        Ok(Some(offset)) => Err(serde::de::Error::custom(format!(
            "`offset` must be 0 or more, got {offset}"
        ))),
        Ok(None) => Ok(None),
        Err(_) => Err(serde::de::Error::custom(
            "`offset` must be a whole number, 0 or more",
        )),
    }
}

// The fields are in alphabetical order, the order an answer writes keys in (see `json.rs`), so a
// page's items are written once, never moved to put the page's keys in order.
/// One page of a list.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct Page<T> {
    /// How many items this page holds.
    pub count: u64,
    /// Whether another page follows.
    pub has_more: bool,
    pub items: Vec<T>,
    /// The `offset` of the next page while `has_more` is true, else null.
    pub next_offset: Option<u64>,
    /// The offset this page starts at.
    pub offset: u64,
    /// How many items match in all.
    pub total: u64,
}

impl<T> Page<T> {
    /// A page of `items` out of `total` (a SQL `count(*)`, hence signed) matching items.
    pub fn new(params: PageParams, total: i64, items: Vec<T>) -> Self {
        let total = u64::try_from(total).unwrap_or(0);
        let offset = params.offset();
        let count = items.len() as u64;
        let end = offset.saturating_add(count);
        let has_more = end < total && count > 0;
        Self {
            total,
            count,
            offset,
            has_more,
            next_offset: has_more.then_some(end),
            items,
        }
    }
}

/// Runs a "count plus page" pair: `count_sql` (whose first column is the total) and `page_sql`,
/// which must end with `limit $n offset $n+1`, the two placeholders after the filter's. `bind`
/// binds the filter's values and is applied to both; `limit` and `offset` are bound after it.
pub async fn paged<'q, T>(
    pool: &sqlx::AnyPool,
    params: PageParams,
    count_sql: String,
    page_sql: String,
    bind: impl Fn(AnyQuery<'q>) -> AnyQuery<'q>,
    map: impl FnMut(&AnyRow) -> Result<T, ApiError>,
) -> Result<Page<T>, ApiError> {
    let total: i64 = bind(sqlx::query(AssertSqlSafe(count_sql)))
        .fetch_one(pool)
        .await?
        .try_get(0)?;
    let (limit, offset) = params.sql();
    let rows = bind(sqlx::query(AssertSqlSafe(page_sql)))
        .bind(limit)
        .bind(offset)
        .fetch_all(pool)
        .await?;
    let items = rows.iter().map(map).collect::<Result<Vec<_>, _>>()?;
    Ok(Page::new(params, total, items))
}

/// One term of a page's order: an SQL expression and whether it sorts descending.
#[derive(Debug, Clone)]
pub struct OrderTerm {
    pub expression: String,
    pub descending: bool,
}

impl OrderTerm {
    pub fn new(expression: impl Into<String>, descending: bool) -> Self {
        Self {
            expression: expression.into(),
            descending,
        }
    }
}

/// `a desc, b desc` for `terms`, or every direction flipped when `reversed`.
fn order_sql(terms: &[OrderTerm], reversed: bool) -> String {
    terms
        .iter()
        .map(|term| {
            let descending = term.descending != reversed;
            format!(
                "{} {}",
                term.expression,
                if descending { "desc" } else { "asc" }
            )
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// A page of one table's rows in a total order (the last term must be unique, like the id).
#[derive(Debug, Clone, Copy)]
pub struct SortedQuery<'a> {
    /// The table, whose `id` column is the key.
    pub table: &'a str,
    /// What to select for each row, in the order the row's [`FromColumns`] reads them.
    pub columns: &'a str,
    /// The `where` condition, with placeholders `$1` to `$n` for the `n` values bound into it.
    pub filter: &'a str,
    pub order: &'a [OrderTerm],
}

/// A value bound into a [`SortedQuery`]'s filter.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Bind {
    Text(String),
    Int(i64),
}

impl rusqlite::ToSql for Bind {
    fn to_sql(&self) -> rusqlite::Result<rusqlite::types::ToSqlOutput<'_>> {
        match self {
            Bind::Text(text) => text.to_sql(),
            Bind::Int(number) => number.to_sql(),
        }
    }
}

/// Where a page's total comes from.
#[derive(Debug, Clone, Copy)]
pub enum Total<'a> {
    /// `count(*)` of the filter.
    Count,
    /// A counter kept beside the rows: this query of one integer, with the filter's first value
    /// bound as `$1`; no row means 0.
    Kept(&'a str),
}

/// Runs one page of `query`, cheap wherever it starts.
///
/// Offset paging has to step over the rows before the page; two things keep that small. A page
/// that skips rows finds its ids first, through the index that serves the order, and only those
/// rows are read (so a skipped row costs an index entry, not a row). And a page past the middle is read from
/// the other end, in the reversed order, then turned around: the last page of 100,000 rows costs
/// what the first does. The total must be exact for that, which is why it is known first.
///
/// On SQLite on a file, the total and the page are read together by one [`Db::read_blocking`]
/// call; elsewhere through the pool.
pub async fn paged_sorted<T>(
    db: &Db,
    params: PageParams,
    query: SortedQuery<'_>,
    total: Total<'_>,
    binds: Vec<Bind>,
) -> Result<Page<T>, ApiError>
where
    T: FromColumns + Send + 'static,
{
    let SortedQuery {
        table,
        columns,
        filter,
        order,
    } = query;
    let total_sql = match total {
        Total::Count => format!("select count(*) from {table} where {filter}"),
        Total::Kept(sql) => sql.to_owned(),
    };
    let total_binds = match total {
        Total::Count => binds.len(),
        Total::Kept(_) => binds.len().min(1),
    };
    // The page in both directions; which one is read depends on the total. A page that skips no
    // row is read directly; one that does finds its ids first.
    let page_sql = |reversed, skips| {
        let order = order_sql(order, reversed);
        let (limit_n, offset_n) = (binds.len() + 1, binds.len() + 2);
        if skips {
            format!(
                "select {columns} from {table} where id in \
                 (select id from {table} where {filter} order by {order} limit ${limit_n} offset ${offset_n}) \
                 order by {order}"
            )
        } else {
            format!(
                "select {columns} from {table} where {filter} order by {order} limit ${limit_n} offset ${offset_n}"
            )
        }
    };
    let sql = [
        [page_sql(false, false), page_sql(false, true)],
        [page_sql(true, false), page_sql(true, true)],
    ];
    let (limit, offset) = params.sql();

    let in_place = {
        let (total_sql, sql) = (total_sql.clone(), sql.clone());
        let binds = binds.clone();
        db.read_blocking(move |connection| -> Result<_, ApiError> {
            use rusqlite::OptionalExtension as _;
            let total: Option<i64> = connection
                .prepare_cached(&total_sql)?
                .query_row(rusqlite::params_from_iter(&binds[..total_binds]), |row| {
                    row.get(0)
                })
                .optional()?;
            let total = total.unwrap_or(0);
            let (reversed, offset, limit) = from_nearer_end(total, offset, limit);
            let mut items = Vec::with_capacity(usize::try_from(limit).unwrap_or(0));
            if limit > 0 {
                let page_sql = &sql[usize::from(reversed)][usize::from(offset > 0)];
                let mut statement = connection.prepare_cached(page_sql)?;
                let bounds = [Bind::Int(limit), Bind::Int(offset)];
                let values = binds.iter().chain(&bounds);
                let mut rows = statement.query(rusqlite::params_from_iter(values))?;
                while let Some(row) = rows.next()? {
                    items.push(T::from_columns(&mut Cursor::new(row))?);
                }
            }
            Ok((total, reversed, items))
        })
        .await
    };
    let (total, reversed, mut items) = match in_place {
        Some(read) => read?,
        None => {
            let total: Option<i64> =
                bind_all(sqlx::query(AssertSqlSafe(total_sql)), &binds[..total_binds])
                    .fetch_optional(db.pool())
                    .await?
                    .map(|row| row.try_get(0))
                    .transpose()?;
            let total = total.unwrap_or(0);
            let (reversed, offset, limit) = from_nearer_end(total, offset, limit);
            let mut items = Vec::new();
            if limit > 0 {
                let page_sql = sql[usize::from(reversed)][usize::from(offset > 0)].clone();
                let rows = bind_all(sqlx::query(AssertSqlSafe(page_sql)), &binds)
                    .bind(limit)
                    .bind(offset)
                    .fetch_all(db.pool())
                    .await?;
                items = rows
                    .iter()
                    .map(|row| T::from_columns(&mut Cursor::new(row)))
                    .collect::<Result<Vec<_>, _>>()?;
            }
            (total, reversed, items)
        }
    };
    if reversed {
        items.reverse();
    }
    Ok(Page::new(params, total, items))
}

/// Binds `binds` to `query` in order.
fn bind_all<'q>(query: AnyQuery<'q>, binds: &[Bind]) -> AnyQuery<'q> {
    binds.iter().fold(query, |query, bind| match bind {
        Bind::Text(text) => query.bind(text.clone()),
        Bind::Int(number) => query.bind(*number),
    })
}

/// Whether to read a page from the far end, and the offset and limit to read it with there.
///
/// Rows `offset .. offset + limit` of `total` are rows `total - offset - limit .. total - offset`
/// counted from the other end; near the end, that offset is the smaller one.
fn from_nearer_end(total: i64, offset: i64, limit: i64) -> (bool, i64, i64) {
    let remaining = (total - offset).max(0);
    let limit = limit.min(remaining);
    let from_end = total - offset - limit;
    if from_end < offset {
        (true, from_end.max(0), limit)
    } else {
        (false, offset, limit)
    }
}

/// The keys of a serialised [`Page`], in the order it writes them.
pub const PAGE_KEYS: [&str; 6] = [
    "count",
    "has_more",
    "items",
    "next_offset",
    "offset",
    "total",
];

/// A page's answer cut to [`MAX_PAGE_BYTES`]: the first items that fit (always at least one), with
/// `has_more` true and `next_offset` where the cut fell, so a client that walks `next_offset` still
/// sees every item once and is never handed an empty page. The envelope keeps its shape. Any other
/// answer, and a page that fits, is returned as it is; only an oversized page is read again.
pub fn within_bound(body: JsonBody) -> JsonBody {
    if body.bytes().len() <= MAX_PAGE_BYTES {
        return body;
    }
    let Ok(serde_json::Value::Object(mut page)) =
        serde_json::from_slice::<serde_json::Value>(body.bytes())
    else {
        return body;
    };
    let offset = page.get("offset").and_then(serde_json::Value::as_u64);
    let (true, Some(offset), Some(serde_json::Value::Array(mut items))) =
        (is_page(&page), offset, page.remove("items"))
    else {
        return body;
    };
    // The envelope with the cut's own figures (at most 20 digits each) and the brackets.
    let envelope = crate::json::to_vec(&page).map_or(0, |bytes| bytes.len()) + 64;
    let mut used = envelope;
    let mut kept = 0;
    for item in &items {
        let size = crate::json::to_vec(item).map_or(0, |bytes| bytes.len()) + 1;
        if kept > 0 && used + size > MAX_PAGE_BYTES {
            break;
        }
        used += size;
        kept += 1;
    }
    if kept == items.len() {
        return body;
    }
    items.truncate(kept);
    let kept = kept as u64;
    page.insert("count".into(), kept.into());
    page.insert("has_more".into(), true.into());
    page.insert("items".into(), serde_json::Value::Array(items));
    page.insert("next_offset".into(), offset.saturating_add(kept).into());
    JsonBody::of(&serde_json::Value::Object(page)).unwrap_or(body)
}

fn is_page(object: &serde_json::Map<String, serde_json::Value>) -> bool {
    object.len() == PAGE_KEYS.len() && PAGE_KEYS.iter().all(|key| object.contains_key(*key))
}

/// A page's answer whose items keep only `fields` and their `id`: an MCP client's `fields`, so an
/// assistant can ask for names and ids only (see `Action::chosen_fields`). Any other answer is
/// returned as it is. Run before [`within_bound`], so the bound counts what is sent.
pub fn only_fields(body: JsonBody, fields: &[String]) -> JsonBody {
    let Ok(serde_json::Value::Object(mut page)) =
        serde_json::from_slice::<serde_json::Value>(body.bytes())
    else {
        return body;
    };
    if !is_page(&page) {
        return body;
    }
    if let Some(serde_json::Value::Array(items)) = page.get_mut("items") {
        for item in items.iter_mut() {
            if let serde_json::Value::Object(item) = item {
                item.retain(|key, _| key == "id" || fields.iter().any(|field| field == key));
            }
        }
    }
    JsonBody::of(&serde_json::Value::Object(page)).unwrap_or(body)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_fields_asked_for_and_the_id_are_kept() {
        let items = [
            serde_json::json!({"id": "a", "name": "Ann", "notes": "long"}),
            serde_json::json!({"id": "b", "name": "Bob", "notes": "longer"}),
        ];
        let body = only_fields(page_of(&items, 0), &["name".to_owned()]);
        let page = body.to_value();
        assert_eq!(
            page["items"],
            serde_json::json!([{"id": "a", "name": "Ann"}, {"id": "b", "name": "Bob"}])
        );
        assert_eq!(page["count"], 2);
        let other = JsonBody::of(&serde_json::json!({"id": "a", "notes": "x"})).unwrap();
        assert_eq!(
            only_fields(other, &["name".to_owned()]).to_value(),
            serde_json::json!({"id": "a", "notes": "x"})
        );
    }

    #[test]
    fn pages_past_the_middle_are_read_from_the_other_end() {
        // The first page of 1,000 rows, 200 at a time: rows 0..200 from the front.
        assert_eq!(from_nearer_end(1000, 0, 200), (false, 0, 200));
        // The last page: rows 800..1000 are rows 0..200 from the back.
        assert_eq!(from_nearer_end(1000, 800, 200), (true, 0, 200));
        // A short last page: rows 950..1000 are rows 0..50 from the back.
        assert_eq!(from_nearer_end(1000, 950, 200), (true, 0, 50));
        // Rows 600..800 are rows 200..400 from the back.
        assert_eq!(from_nearer_end(1000, 600, 200), (true, 200, 200));
        // Past the end: nothing to read.
        assert_eq!(from_nearer_end(1000, 1200, 200).2, 0);
        assert_eq!(from_nearer_end(0, 0, 25), (false, 0, 0));
    }

    #[test]
    fn reversing_an_order_flips_every_term() {
        let order = [
            OrderTerm::new("(score is null)", false),
            OrderTerm::new("score", true),
            OrderTerm::new("id", true),
        ];
        assert_eq!(
            order_sql(&order, false),
            "(score is null) asc, score desc, id desc"
        );
        assert_eq!(
            order_sql(&order, true),
            "(score is null) desc, score asc, id asc"
        );
    }
    use serde_json::json;

    fn params(value: serde_json::Value) -> Result<PageParams, serde_json::Error> {
        serde_json::from_value(value)
    }

    #[test]
    fn limit_is_bounded() {
        assert_eq!(params(json!({})).map(|p| p.limit()).ok(), Some(25));
        assert_eq!(
            params(json!({"limit": 200})).map(|p| p.limit()).ok(),
            Some(200)
        );
        let error = params(json!({"limit": 201}))
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(error.contains("between 1 and 200"), "{error}");
        assert!(params(json!({"limit": 0})).is_err());
    }

    #[test]
    fn next_offset_follows_has_more() {
        let page = Page::new(
            PageParams {
                limit: Some(2),
                offset: Some(2),
            },
            5,
            vec![1, 2],
        );
        assert!(page.has_more);
        assert_eq!(page.next_offset, Some(4));
        let last = Page::new(
            PageParams {
                limit: Some(2),
                offset: Some(4),
            },
            5,
            vec![1],
        );
        assert!(!last.has_more);
        assert_eq!(last.next_offset, None);
    }

    fn page_of(items: &[serde_json::Value], offset: u64) -> JsonBody {
        let count = items.len() as u64;
        JsonBody::of(&serde_json::json!({
            "count": count, "has_more": false, "items": items,
            "next_offset": null, "offset": offset, "total": offset + count,
        }))
        .expect("a page")
    }

    #[test]
    fn a_page_over_the_bound_keeps_what_fits_and_says_where_to_go_on() {
        let item = |n: usize| serde_json::json!({"id": n, "text": "x".repeat(1_000)});
        let body = within_bound(page_of(&(0..300).map(item).collect::<Vec<_>>(), 40));
        assert!(
            body.bytes().len() <= MAX_PAGE_BYTES,
            "{}",
            body.bytes().len()
        );
        let page = body.to_value();
        let kept = page["items"].as_array().expect("items").len() as u64;
        assert!(kept > 90 && kept < 300, "{kept}");
        assert_eq!(page["count"], serde_json::json!(kept));
        assert_eq!(page["has_more"], serde_json::json!(true));
        assert_eq!(page["next_offset"], serde_json::json!(40 + kept));
        assert_eq!(page["total"], serde_json::json!(340));

        // One item larger than the bound is still sent: a page is never empty.
        let huge = serde_json::json!({"id": 0, "text": "x".repeat(2 * MAX_PAGE_BYTES)});
        let page = within_bound(page_of(&[huge.clone(), huge], 0)).to_value();
        assert_eq!(page["count"], serde_json::json!(1));
        assert_eq!(page["next_offset"], serde_json::json!(1));

        // What fits, and what is not a page, is left as it is.
        let small = page_of(&(0..3).map(item).collect::<Vec<_>>(), 0);
        assert_eq!(within_bound(small.clone()).bytes(), small.bytes());
        let other =
            JsonBody::of(&serde_json::json!({"items": [huge_text()], "id": 1})).expect("json");
        assert_eq!(within_bound(other.clone()).bytes(), other.bytes());
    }

    fn huge_text() -> String {
        "x".repeat(2 * MAX_PAGE_BYTES)
    }
}
