//! Credits: a balance per workspace, an append-only ledger, reservations, and the price items.
//!
//! The balance changes only through a conditional update (`... where credits_balance >= $price`)
//! in the same transaction as the ledger row that explains it, so it can never go below zero,
//! whatever the number of concurrent requests or instances, and `balance = sum(ledger amounts)`.
//!
//! A priced action's reservation is the first statement of the transaction dispatch gives it
//! ([`reserve`], a `spend` row, which also takes the workspace row lock every priced transaction
//! takes first); the action settles inside the same transaction, returning what it did not use
//! (a `release` row). The reservation, the work and the settlement commit together or not at all,
//! so a crash at any moment costs nothing. Work longer than one transaction (a durable job) holds
//! its reservation instead ([`hold`]): the spend is committed with the job row and carries a lease
//! (`held_until`) the job renews; the job settles it when it ends, and [`release_lapsed_holds`]
//! returns what a dead job still held. Releases are computed from the ledger, so a reservation
//! is never returned twice.
//!
//! What an action charges for is a [`PriceItem`], declared beside the action with
//! [`price_item!`](crate::price_item) and registered like actions, so a misspelt item does not
//! compile and `OUTREACH_PRICES` overrides are checked against the registered set at start-up.

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

/// One thing an action charges for (`import.prospect`), with its default unit price. Made only by
/// [`price_item!`](crate::price_item), which also registers it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PriceItem {
    name: &'static str,
    default_credits: i64,
    description: &'static str,
}

impl PriceItem {
    #[doc(hidden)]
    pub const fn __new(
        name: &'static str,
        default_credits: i64,
        description: &'static str,
    ) -> Self {
        Self {
            name,
            default_credits,
            description,
        }
    }

    /// The item's name in price breakdowns and in `OUTREACH_PRICES`.
    pub fn name(&self) -> &'static str {
        self.name
    }

    /// The unit price when `OUTREACH_PRICES` does not override it.
    pub fn default_credits(&self) -> i64 {
        self.default_credits
    }

    pub fn description(&self) -> &'static str {
        self.description
    }
}

inventory::collect!(PriceItem);

/// Declares a price item beside the action that charges it, and registers it.
///
/// ```ignore
/// price_item! {
///     /// A prospect created by an import.
///     pub IMPORT_PROSPECT = "import.prospect", 1;
/// }
/// ```
#[macro_export]
macro_rules! price_item {
    ($(#[doc = $doc:literal])* $vis:vis $ident:ident = $name:literal, $credits:literal;) => {
        $(#[doc = $doc])*
        $vis const $ident: $crate::credits::PriceItem =
            $crate::credits::PriceItem::__new($name, $credits, ::core::concat!($($doc),*));
        $crate::__private::inventory::submit! { $ident }
    };
}

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
    /// Adds `quantity` units of `item` at `unit_price` each.
    pub fn add(mut self, item: PriceItem, quantity: i64, unit_price: i64) -> Self {
        let amount = quantity.saturating_mul(unit_price);
        self.total = self.total.saturating_add(amount);
        self.breakdown.push(PriceLine {
            item: item.name.to_owned(),
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

    /// This price with the plan the action will carry out for it.
    pub fn plan<P>(self, plan: P) -> Priced<P> {
        Priced { price: self, plan }
    }
}

/// What a price function returns: the price, and the plan the action receives so that nothing
/// the price function worked out (a parsed file, a resolved list) is done twice.
#[derive(Debug)]
pub struct Priced<P> {
    pub price: Price,
    pub plan: P,
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

/// Unit prices in credits of every registered item: their defaults, overridden by
/// `OUTREACH_PRICES="item=n,..."`.
#[derive(Debug, Clone)]
pub struct PriceTable(BTreeMap<&'static str, i64>);

impl Default for PriceTable {
    /// Every registered item at its default price.
    fn default() -> Self {
        Self::from_items(inventory::iter::<PriceItem>)
    }
}

impl PriceTable {
    fn from_items<'a>(items: impl IntoIterator<Item = &'a PriceItem>) -> Self {
        Self(
            items
                .into_iter()
                .map(|item| (item.name, item.default_credits))
                .collect(),
        )
    }

    /// Checks the registered items: unique names of the form `resource.unit`, prices not negative.
    pub fn validate_registered() -> Result<(), String> {
        validate_items(inventory::iter::<PriceItem>.into_iter().copied().collect())
    }

    /// Applies overrides such as `import.prospect=2,scoring.prospect=0`; an item that is not
    /// registered is an error that lists the ones that are.
    pub fn with_overrides(mut self, spec: &str) -> Result<Self, String> {
        for entry in spec
            .split(',')
            .map(str::trim)
            .filter(|entry| !entry.is_empty())
        {
            let (item, price) = entry
                .split_once('=')
                .ok_or_else(|| format!("price override `{entry}` is not `item=credits`"))?;
            let item = item.trim();
            let price: i64 = price
                .trim()
                .parse()
                .map_err(|_| format!("price of `{item}` must be a whole number"))?;
            if price < 0 {
                return Err(format!("price of `{item}` must not be negative"));
            }
            let Some(unit) = self.0.get_mut(item) else {
                let known: Vec<&str> = self.0.keys().copied().collect();
                return Err(format!(
                    "price override names `{item}`, which no action charges; the price items are {}",
                    known.join(", ")
                ));
            };
            *unit = price;
        }
        Ok(self)
    }

    /// The unit price of `item`.
    pub fn unit(&self, item: PriceItem) -> i64 {
        // Every item made by `price_item!` is registered, so the table has it; the default is only
        // reached by a table built before an item was linked in (never at run time).
        self.0
            .get(item.name)
            .copied()
            .unwrap_or(item.default_credits)
    }
}

fn validate_items(mut items: Vec<PriceItem>) -> Result<(), String> {
    items.sort_by_key(|item| item.name);
    let mut problems = Vec::new();
    for pair in items.windows(2) {
        if pair[0].name == pair[1].name {
            problems.push(format!("price item `{}` is declared twice", pair[0].name));
        }
    }
    for item in &items {
        let well_formed = item.name.split_once('.').is_some_and(|(resource, unit)| {
            [resource, unit].iter().all(|part| {
                !part.is_empty()
                    && part
                        .bytes()
                        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
            })
        });
        if !well_formed {
            problems.push(format!(
                "price item `{}` must be `resource.unit` in snake_case",
                item.name
            ));
        }
        if item.default_credits < 0 {
            problems.push(format!("price item `{}` has a negative price", item.name));
        }
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(format!("invalid price items:\n- {}", problems.join("\n- ")))
    }
}

/// Credits taken from the balance for work that is paid for when it ends.
#[derive(Debug, Clone)]
pub struct Reservation {
    /// The `spend` ledger row.
    pub id: String,
    pub workspace_id: String,
    pub amount: i64,
}

/// The current balance of a workspace.
pub async fn balance(db: &Db, workspace_id: &str) -> Result<i64, ApiError> {
    balance_in(&mut *db.pool().acquire().await?, workspace_id).await
}

async fn balance_in(conn: &mut sqlx::AnyConnection, workspace_id: &str) -> Result<i64, ApiError> {
    let row = sqlx::query("select credits_balance from workspaces where id = $1")
        .bind(workspace_id)
        .fetch_one(conn)
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
    held_until: Option<i64>,
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
        held_until,
    } = entry;
    let id = ids::new_id("crd");
    sqlx::query(
        "insert into credit_ledger (id, workspace_id, kind, amount, balance_after, reservation_id, action, object_id, \
         idempotency_key, reason, person_id, created_at, held_until) \
         values ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)",
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
    .bind(held_until)
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
    let mut tx = db.begin_write().await?;
    let balance = grant_in(&mut tx, clock.now_ms(), workspace_id, amount, source).await?;
    tx.commit().await?;
    Ok(balance)
}

/// [`grant`] inside the caller's transaction (a new workspace's starter credits commit with it).
pub async fn grant_in(
    conn: &mut sqlx::AnyConnection,
    now: i64,
    workspace_id: &str,
    amount: i64,
    source: &Source<'_>,
) -> Result<i64, ApiError> {
    let row = sqlx::query("update workspaces set credits_balance = credits_balance + $1 where id = $2 returning credits_balance")
        .bind(amount)
        .bind(workspace_id)
        .fetch_optional(&mut *conn)
        .await?
        .ok_or_else(|| ApiError::not_found("workspace", workspace_id))?;
    let balance: i64 = row.try_get("credits_balance")?;
    let entry = Entry {
        workspace_id,
        kind: "grant",
        amount,
        balance_after: balance,
        reservation_id: None,
        held_until: None,
    };
    insert_entry(conn, entry, source, now).await?;
    Ok(balance)
}

/// Takes `amount` credits from the balance inside the caller's transaction (which it makes wait
/// for the workspace row), or answers 402 with the price and the balance. Settle with [`settle`]
/// in the same transaction.
pub async fn reserve(
    conn: &mut sqlx::AnyConnection,
    clock: &Clock,
    workspace_id: &str,
    amount: i64,
    source: &Source<'_>,
) -> Result<Reservation, ApiError> {
    take(conn, clock, workspace_id, amount, source, None).await
}

/// Like [`reserve`], for work that outlives the transaction (a durable job): the spend stays open
/// until [`settle`] and is released by [`release_lapsed_holds`] once `held_until` (epoch ms)
/// passes without a [`renew_hold`]. Commit it with the job row that will settle it.
pub async fn hold(
    conn: &mut sqlx::AnyConnection,
    clock: &Clock,
    workspace_id: &str,
    amount: i64,
    source: &Source<'_>,
    held_until: i64,
) -> Result<Reservation, ApiError> {
    take(conn, clock, workspace_id, amount, source, Some(held_until)).await
}

async fn take(
    conn: &mut sqlx::AnyConnection,
    clock: &Clock,
    workspace_id: &str,
    amount: i64,
    source: &Source<'_>,
    held_until: Option<i64>,
) -> Result<Reservation, ApiError> {
    if amount < 0 {
        return Err(ApiError::internal(format!(
            "a reservation of {amount} credits"
        )));
    }
    let row = sqlx::query(
        "update workspaces set credits_balance = credits_balance - $1 where id = $2 and credits_balance >= $1 returning credits_balance",
    )
    .bind(amount)
    .bind(workspace_id)
    .fetch_optional(&mut *conn)
    .await?;
    let Some(row) = row else {
        let balance = balance_in(conn, workspace_id).await?;
        return Err(insufficient(amount, balance));
    };
    let balance_after: i64 = row.try_get("credits_balance")?;
    let entry = Entry {
        workspace_id,
        kind: "spend",
        amount: -amount,
        balance_after,
        reservation_id: None,
        held_until,
    };
    let id = insert_entry(conn, entry, source, clock.now_ms()).await?;
    Ok(Reservation {
        id,
        workspace_id: workspace_id.to_owned(),
        amount,
    })
}

/// The 402 for a price the balance does not cover.
pub fn insufficient(price: i64, balance: i64) -> ApiError {
    ApiError::new(
        ErrorCode::INSUFFICIENT_CREDITS,
        format!("This request costs {price} credits and the workspace has {balance}; nothing was done. Add credits and retry."),
    )
    .with_extra("price", price)
    .with_extra("balance", balance)
}

/// Turns a reservation taken by [`reserve`] into a hold, in the transaction that took it: for a
/// priced action whose work a durable job finishes. The spend records the object it pays for and
/// stays open until the job calls [`settle`]; [`release_lapsed_holds`] returns it if `held_until`
/// (epoch ms) passes without a [`renew_hold`].
pub async fn keep_as_hold(
    conn: &mut sqlx::AnyConnection,
    reservation: &Reservation,
    object_id: &str,
    held_until: i64,
) -> Result<(), ApiError> {
    sqlx::query("update credit_ledger set object_id = $2, held_until = $3 where id = $1")
        .bind(&reservation.id)
        .bind(object_id)
        .bind(held_until)
        .execute(conn)
        .await?;
    Ok(())
}

/// Extends the hold of an open reservation (a durable job's heartbeat). `false` when the hold is
/// no longer open: settled already, or released by [`release_lapsed_holds`] after it lapsed.
pub async fn renew_hold(
    conn: &mut sqlx::AnyConnection,
    reservation_id: &str,
    held_until: i64,
) -> Result<bool, ApiError> {
    let renewed = sqlx::query(
        "update credit_ledger set held_until = $2 where id = $1 and held_until is not null",
    )
    .bind(reservation_id)
    .bind(held_until)
    .execute(conn)
    .await?;
    Ok(renewed.rows_affected() == 1)
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
    // A release names what its spend names (the action, the object it paid for), so the entries
    // of one object (a run's hold, its release) add up to what it cost.
    let spend = sqlx::query("select action, object_id from credit_ledger where id = $1")
        .bind(&reservation.id)
        .fetch_optional(&mut *conn)
        .await?;
    let (action, object_id): (Option<String>, Option<String>) = match &spend {
        Some(spend) => (spend.try_get("action")?, spend.try_get("object_id")?),
        None => (None, None),
    };
    let source = Source {
        action: action.as_deref(),
        object_id: object_id.as_deref(),
        reason: Some(reason),
        ..Source::default()
    };
    let entry = Entry {
        workspace_id: &reservation.workspace_id,
        kind: "release",
        amount,
        balance_after: balance,
        reservation_id: Some(&reservation.id),
        held_until: None,
    };
    insert_entry(conn, entry, &source, clock.now_ms()).await?;
    Ok(())
}

/// Keeps `used` credits of a reservation and returns the rest, in the transaction that did the
/// work it paid for, and records that work's id on the spend. Using more than was reserved is a
/// 409 `invalid_state` (the workspace changed between pricing and working): the caller's
/// transaction must roll back, which leaves nothing done and nothing spent.
pub async fn settle(
    conn: &mut sqlx::AnyConnection,
    clock: &Clock,
    reservation: &Reservation,
    used: i64,
    object_id: Option<&str>,
) -> Result<(), ApiError> {
    if used > reservation.amount {
        return Err(ApiError::new(
            ErrorCode::INVALID_STATE,
            format!(
                "The workspace changed while this request was starting: it now costs {used} credits, more than the {} \
                 priced; nothing was done or spent. Retry to be priced again.",
                reservation.amount
            ),
        ));
    }
    sqlx::query("update credit_ledger set object_id = coalesce($1, object_id), held_until = null where id = $2")
        .bind(object_id)
        .bind(&reservation.id)
        .execute(&mut *conn)
        .await?;
    let unused = held(conn, reservation).await? - used;
    release_in(conn, clock, reservation, unused, "unused").await
}

/// Returns what lapsed holds still keep (their job died or was lost); returns how many holds.
pub async fn release_lapsed_holds(db: &Db, clock: &Clock) -> Result<u64, ApiError> {
    let lapsed = sqlx::query(
        "select id, workspace_id, amount from credit_ledger where held_until is not null and held_until < $1",
    )
    .bind(clock.now_ms())
    .fetch_all(db.pool())
    .await?;
    let mut released = 0;
    for row in lapsed {
        let reservation = Reservation {
            id: row.try_get("id")?,
            workspace_id: row.try_get("workspace_id")?,
            amount: -row.try_get::<i64, _>("amount")?,
        };
        let mut tx = db.begin_write().await?;
        // The workspace row first, as every priced transaction takes it, then the hold, which is
        // only released if it is still open and still lapsed (a late renewal or settlement wins).
        sqlx::query("update workspaces set credits_balance = credits_balance where id = $1")
            .bind(&reservation.workspace_id)
            .execute(&mut *tx)
            .await?;
        let closed = sqlx::query(
            "update credit_ledger set held_until = null where id = $1 and held_until is not null and held_until < $2",
        )
        .bind(&reservation.id)
        .bind(clock.now_ms())
        .execute(&mut *tx)
        .await?;
        if closed.rows_affected() == 1 {
            let remaining = held(&mut tx, &reservation).await?;
            release_in(&mut tx, clock, &reservation, remaining, "hold lapsed").await?;
            released += 1;
        }
        tx.commit().await?;
    }
    Ok(released)
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: PriceItem = PriceItem::__new("import.prospect", 1, "");
    const B: PriceItem = PriceItem::__new("scoring.prospect", 2, "");

    #[test]
    fn overrides_name_registered_items_only() {
        let table = PriceTable::from_items(&[A, B]);
        let table = table
            .with_overrides("scoring.prospect=5")
            .expect("known item");
        assert_eq!(table.unit(A), 1);
        assert_eq!(table.unit(B), 5);
        let error = PriceTable::from_items(&[A, B])
            .with_overrides("import.prospects=3")
            .expect_err("misspelt item");
        assert!(
            error.contains("`import.prospects`")
                && error.contains("import.prospect, scoring.prospect"),
            "{error}"
        );
        assert!(
            PriceTable::from_items(&[A])
                .with_overrides("import.prospect=-1")
                .is_err()
        );
        assert!(
            PriceTable::from_items(&[A])
                .with_overrides("import.prospect")
                .is_err()
        );
    }

    #[test]
    fn item_names_are_checked() {
        assert!(validate_items(vec![A, B]).is_ok());
        let error = validate_items(vec![A, A, PriceItem::__new("Bad Name", 1, "")])
            .expect_err("a duplicate and a bad name");
        assert!(
            error.contains("declared twice") && error.contains("`Bad Name`"),
            "{error}"
        );
    }
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
