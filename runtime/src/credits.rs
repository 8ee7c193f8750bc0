//! Credits: a balance per workspace, an append-only ledger, and reservations.
//!
//! The balance changes only through a conditional update (`... where credits_balance >= $price`)
//! in the same transaction as the ledger row that explains it, so it can never go below zero,
//! whatever the number of concurrent requests or instances, and `balance = sum(ledger amounts)`.
//! A priced action reserves its whole price before it runs (a `spend` row); it may then settle
//! inside its own transaction, returning what it did not use (a `release` row) atomically with
//! its writes. If it fails, the dispatch releases whatever of the reservation is still held;
//! releases are computed from the ledger, so a reservation is never returned twice.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::Serialize;
use serde_json::{Map, Value};
use sqlx::Row;

use crate::clock::{Clock, Timestamp};
use crate::db::Db;
use crate::error::{ApiError, ErrorCode};
use crate::ids;
use crate::paging::{Page, PageParams, paged};

/// The price of one request, with its breakdown.
#[derive(Debug, Clone, Default, PartialEq, Serialize, JsonSchema)]
pub struct Price {
    /// The total in credits.
    pub total: i64,
    /// What the total is made of.
    pub breakdown: Vec<PriceLine>,
    /// Action-specific figures behind the price (e.g. rows, new, duplicates, invalid).
    pub details: Map<String, Value>,
}

/// One line of a price: `quantity` units of `item` at `unit_price` each.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
pub struct PriceLine {
    pub item: String,
    pub quantity: i64,
    pub unit_price: i64,
    pub amount: i64,
}

impl Price {
    /// A price of one line.
    pub fn line(item: &str, quantity: i64, unit_price: i64) -> Self {
        Self::default().add(item, quantity, unit_price)
    }

    /// Adds `quantity` units of `item` at `unit_price` each.
    pub fn add(mut self, item: &str, quantity: i64, unit_price: i64) -> Self {
        let amount = quantity.saturating_mul(unit_price);
        self.total = self.total.saturating_add(amount);
        self.breakdown.push(PriceLine {
            item: item.to_owned(),
            quantity,
            unit_price,
            amount,
        });
        self
    }

    pub fn detail(mut self, key: &str, value: impl Into<Value>) -> Self {
        self.details.insert(key.to_owned(), value.into());
        self
    }
}

/// What an `estimate_only` call returns instead of running the action.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct Estimate {
    /// Always `true`: nothing was done and nothing was spent.
    pub estimate: bool,
    /// The price in credits of the same call without `estimate_only`.
    pub price: i64,
    pub breakdown: Vec<PriceLine>,
    /// Action-specific figures behind the price.
    pub details: Map<String, Value>,
    /// The workspace's balance now.
    pub balance: i64,
    /// Whether the balance covers the price.
    pub sufficient: bool,
}

/// Unit prices in credits, by item. Defaults below; `OUTREACH_PRICES="item=n,..."` overrides.
#[derive(Debug, Clone)]
pub struct PriceTable(BTreeMap<String, i64>);

impl Default for PriceTable {
    fn default() -> Self {
        Self(
            [
                ("import.prospect", 1),
                ("scoring.prospect", 1),
                ("list_processing.prospect", 1),
            ]
            .into_iter()
            .map(|(item, price)| (item.to_owned(), price))
            .collect(),
        )
    }
}

impl PriceTable {
    /// Applies overrides such as `import.prospect=2,scoring.prospect=0`.
    pub fn with_overrides(mut self, spec: &str) -> Result<Self, String> {
        for entry in spec
            .split(',')
            .map(str::trim)
            .filter(|entry| !entry.is_empty())
        {
            let (item, price) = entry
                .split_once('=')
                .ok_or_else(|| format!("price override `{entry}` is not `item=credits`"))?;
            let price: i64 = price
                .trim()
                .parse()
                .map_err(|_| format!("price of `{item}` must be a whole number"))?;
            if price < 0 {
                return Err(format!("price of `{item}` must not be negative"));
            }
            self.0.insert(item.trim().to_owned(), price);
        }
        Ok(self)
    }

    /// The unit price of `item`; unknown items are a programming error and cost nothing.
    pub fn unit(&self, item: &str) -> i64 {
        self.0.get(item).copied().unwrap_or_else(|| {
            tracing::error!(item, "no price for item");
            0
        })
    }
}

/// Credits held for a running action.
#[derive(Debug, Clone)]
pub struct Reservation {
    /// The `spend` ledger row.
    pub id: String,
    pub workspace_id: String,
    pub amount: i64,
}

/// The current balance of a workspace.
pub async fn balance(db: &Db, workspace_id: &str) -> Result<i64, ApiError> {
    let row = sqlx::query("select credits_balance from workspaces where id = $1")
        .bind(workspace_id)
        .fetch_one(db.pool())
        .await?;
    Ok(row.try_get("credits_balance")?)
}

/// Who and why, recorded on each ledger row.
#[derive(Debug, Clone, Default)]
pub struct Source<'a> {
    pub action: Option<&'a str>,
    pub object_id: Option<&'a str>,
    pub idempotency_key: Option<&'a str>,
    pub reason: Option<&'a str>,
    pub person_id: Option<&'a str>,
}

/// The figures of one ledger row.
struct Entry<'a> {
    workspace_id: &'a str,
    kind: &'a str,
    amount: i64,
    balance_after: i64,
    reservation_id: Option<&'a str>,
}

async fn insert_entry(
    conn: &mut sqlx::AnyConnection,
    entry: Entry<'_>,
    source: &Source<'_>,
    now: i64,
) -> Result<String, ApiError> {
    let Entry {
        workspace_id,
        kind,
        amount,
        balance_after,
        reservation_id,
    } = entry;
    let id = ids::new_id("crd");
    sqlx::query(
        "insert into credit_ledger (id, workspace_id, kind, amount, balance_after, reservation_id, action, object_id, \
         idempotency_key, reason, person_id, created_at) values ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)",
    )
    .bind(&id)
    .bind(workspace_id)
    .bind(kind)
    .bind(amount)
    .bind(balance_after)
    .bind(reservation_id)
    .bind(source.action)
    .bind(source.object_id)
    .bind(source.idempotency_key)
    .bind(source.reason)
    .bind(source.person_id)
    .bind(now)
    .execute(conn)
    .await?;
    Ok(id)
}

/// Adds credits to a workspace; returns the new balance.
pub async fn grant(
    db: &Db,
    clock: &Clock,
    workspace_id: &str,
    amount: i64,
    source: &Source<'_>,
) -> Result<i64, ApiError> {
    if amount <= 0 {
        return Err(ApiError::invalid_request(
            "A grant must be a positive number of credits.",
        ));
    }
    let mut tx = db.pool().begin().await?;
    let row = sqlx::query("update workspaces set credits_balance = credits_balance + $1 where id = $2 returning credits_balance")
        .bind(amount)
        .bind(workspace_id)
        .fetch_optional(&mut *tx)
        .await?
        .ok_or_else(|| ApiError::not_found("workspace", workspace_id))?;
    let balance: i64 = row.try_get("credits_balance")?;
    let entry = Entry {
        workspace_id,
        kind: "grant",
        amount,
        balance_after: balance,
        reservation_id: None,
    };
    insert_entry(&mut tx, entry, source, clock.now_ms()).await?;
    tx.commit().await?;
    Ok(balance)
}

/// Holds `amount` credits for an action, or answers 402 with the price and the balance.
pub async fn reserve(
    db: &Db,
    clock: &Clock,
    workspace_id: &str,
    amount: i64,
    source: &Source<'_>,
) -> Result<Reservation, ApiError> {
    let mut tx = db.pool().begin().await?;
    let row = sqlx::query(
        "update workspaces set credits_balance = credits_balance - $1 where id = $2 and credits_balance >= $1 returning credits_balance",
    )
    .bind(amount)
    .bind(workspace_id)
    .fetch_optional(&mut *tx)
    .await?;
    let Some(row) = row else {
        drop(tx);
        let balance = balance(db, workspace_id).await?;
        return Err(ApiError::new(
            ErrorCode::InsufficientCredits,
            format!("This request costs {amount} credits and the workspace has {balance}; nothing was done. Add credits and retry."),
        )
        .with_extra("price", amount)
        .with_extra("balance", balance));
    };
    let balance_after: i64 = row.try_get("credits_balance")?;
    let entry = Entry {
        workspace_id,
        kind: "spend",
        amount: -amount,
        balance_after,
        reservation_id: None,
    };
    let id = insert_entry(&mut tx, entry, source, clock.now_ms()).await?;
    tx.commit().await?;
    Ok(Reservation {
        id,
        workspace_id: workspace_id.to_owned(),
        amount,
    })
}

/// How much of a reservation is still held (its amount minus what was released already).
async fn held(conn: &mut sqlx::AnyConnection, reservation: &Reservation) -> Result<i64, ApiError> {
    let row = sqlx::query("select cast(coalesce(sum(amount), 0) as bigint) as released from credit_ledger where reservation_id = $1")
        .bind(&reservation.id)
        .fetch_one(&mut *conn)
        .await?;
    Ok(reservation.amount - row.try_get::<i64, _>("released")?)
}

async fn release_in(
    conn: &mut sqlx::AnyConnection,
    clock: &Clock,
    reservation: &Reservation,
    amount: i64,
    reason: &str,
) -> Result<(), ApiError> {
    if amount <= 0 {
        return Ok(());
    }
    let row = sqlx::query("update workspaces set credits_balance = credits_balance + $1 where id = $2 returning credits_balance")
        .bind(amount)
        .bind(&reservation.workspace_id)
        .fetch_one(&mut *conn)
        .await?;
    let balance: i64 = row.try_get("credits_balance")?;
    let source = Source {
        reason: Some(reason),
        ..Source::default()
    };
    let entry = Entry {
        workspace_id: &reservation.workspace_id,
        kind: "release",
        amount,
        balance_after: balance,
        reservation_id: Some(&reservation.id),
    };
    insert_entry(conn, entry, &source, clock.now_ms()).await?;
    Ok(())
}

/// Keeps `used` credits of a reservation and returns the rest, inside the action's transaction so
/// the release commits (or not) with the action's writes; records the object the spend paid for.
pub async fn settle(
    conn: &mut sqlx::AnyConnection,
    clock: &Clock,
    reservation: &Reservation,
    used: i64,
    object_id: Option<&str>,
) -> Result<(), ApiError> {
    if used > reservation.amount {
        return Err(ApiError::internal(format!(
            "action used {used} credits of a {} reservation",
            reservation.amount
        )));
    }
    if let Some(object_id) = object_id {
        sqlx::query("update credit_ledger set object_id = $1 where id = $2")
            .bind(object_id)
            .bind(&reservation.id)
            .execute(&mut *conn)
            .await?;
    }
    let unused = held(conn, reservation).await? - used;
    release_in(conn, clock, reservation, unused, "unused").await
}

/// Returns whatever of a reservation is still held (after a failed action).
pub async fn release_remaining(
    db: &Db,
    clock: &Clock,
    reservation: &Reservation,
) -> Result<(), ApiError> {
    let mut tx = db.pool().begin().await?;
    // Lock the workspace row first (a write), so two releases of one reservation serialise.
    sqlx::query("update workspaces set credits_balance = credits_balance where id = $1")
        .bind(&reservation.workspace_id)
        .execute(&mut *tx)
        .await?;
    let remaining = held(&mut tx, reservation).await?;
    release_in(&mut tx, clock, reservation, remaining, "action failed").await?;
    tx.commit().await?;
    Ok(())
}

crate::text_enum! {
    /// What a ledger entry did to the balance.
    pub enum TransactionKind {
        /// Credits added to the workspace.
        Grant => "grant",
        /// Credits reserved and spent by an action.
        Spend => "spend",
        /// Credits of a spend returned because the action did not use them.
        Release => "release",
    }
}

/// One ledger row as the API shows it.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct Transaction {
    pub id: String,
    /// `grant`, `spend` or `release`.
    pub kind: TransactionKind,
    /// Positive for grants and releases, negative for spends.
    pub amount: i64,
    pub balance_after: i64,
    /// For a release: the spend it returns credits of.
    pub reservation_id: Option<String>,
    /// The action that spent (or was released from).
    pub action: Option<String>,
    /// The object the spend paid for (an import, a scoring run, ...).
    pub object_id: Option<String>,
    pub idempotency_key: Option<String>,
    pub reason: Option<String>,
    pub person_id: Option<String>,
    pub created_at: Timestamp,
}

impl Transaction {
    fn from_row(row: &sqlx::any::AnyRow) -> Result<Self, ApiError> {
        Ok(Self {
            id: row.try_get("id")?,
            kind: TransactionKind::from_db(&row.try_get::<String, _>("kind")?)?,
            amount: row.try_get("amount")?,
            balance_after: row.try_get("balance_after")?,
            reservation_id: row.try_get("reservation_id")?,
            action: row.try_get("action")?,
            object_id: row.try_get("object_id")?,
            idempotency_key: row.try_get("idempotency_key")?,
            reason: row.try_get("reason")?,
            person_id: row.try_get("person_id")?,
            created_at: Timestamp(row.try_get("created_at")?),
        })
    }
}

/// A page of the ledger, newest first.
pub async fn transactions(
    db: &Db,
    workspace_id: &str,
    params: PageParams,
) -> Result<Page<Transaction>, ApiError> {
    paged(
        db.pool(),
        params,
        "select count(*) from credit_ledger where workspace_id = $1".to_owned(),
        "select id, kind, amount, balance_after, reservation_id, action, object_id, idempotency_key, reason, person_id, created_at \
         from credit_ledger where workspace_id = $1 order by created_at desc, id desc limit $2 offset $3"
            .to_owned(),
        |query| query.bind(workspace_id),
        Transaction::from_row,
    )
    .await
}
