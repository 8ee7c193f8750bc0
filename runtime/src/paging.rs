//! Paging: one input shape and one output shape for every list action.
//!
//! Offset paging (`limit`, `offset`) keeps list actions trivially callable from an assistant and
//! from curl; a stable order (newest first, id as tie-break) makes walking `next_offset` visit each
//! row once while nothing is inserted. `limit` is validated while decoding, so a bad value is a 400
//! that names the bound before the action runs. Flatten [`PageParams`] into a list input and return
//! [`Page`].

use schemars::JsonSchema;
use serde::{Deserialize, Deserializer, Serialize};
use sqlx::any::{AnyArguments, AnyRow};
use sqlx::{AssertSqlSafe, Row as _};

use crate::error::ApiError;

/// A query on the `Any` driver, as a bind closure extends it.
pub type AnyQuery<'q> = sqlx::query::Query<'q, sqlx::Any, AnyArguments>;

pub const DEFAULT_LIMIT: u32 = 25;
pub const MAX_LIMIT: u32 = 200;

/// The paging fields of a list action's input.
#[derive(Debug, Clone, Copy, Default, Deserialize, JsonSchema)]
pub struct PageParams {
    /// How many items to return: 1 to 200, default 25.
    #[serde(default, deserialize_with = "limit_in_range")]
    #[schemars(range(min = 1, max = 200), default = "default_limit")]
    pub limit: Option<u32>,
    /// How many items to skip: default 0. Use the previous page's `next_offset`.
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

/// One page of a list.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct Page<T> {
    /// How many items match in all.
    pub total: u64,
    /// How many items this page holds.
    pub count: u64,
    /// The offset this page starts at.
    pub offset: u64,
    /// Whether another page follows.
    pub has_more: bool,
    /// The `offset` of the next page while `has_more` is true, else null.
    pub next_offset: Option<u64>,
    pub items: Vec<T>,
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

#[cfg(test)]
mod tests {
    use super::*;
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
}
