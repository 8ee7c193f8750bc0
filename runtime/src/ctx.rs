//! The context an action runs in: who is calling, in which workspace, and the one transaction its
//! writes go into.
//!
//! An action receives a [`Ctx`] by value; it is cheap to clone (a few `Arc`s) and carries
//! everything a capability may need without reaching for globals, so a test can run the same
//! action against any database and any clock.
//!
//! [`Ctx::tx`] is the action's transaction. Dispatch owns it: the action writes in it, and
//! dispatch commits it after the action returns, together with the settlement of its credits and
//! its stored idempotent response; if the action fails, or the process dies, none of it happened.
//! It begins on first use, so an action can first do what must be seen by others before its work
//! (a list marked `processing`); for a priced action its first statement reserves the price, so
//! the reservation takes the workspace row lock after such marks, never before.

use std::sync::Arc;

use tokio::sync::{MappedMutexGuard, Mutex, MutexGuard};

use crate::clock::Clock;
use crate::config::Config;
use crate::credits::{self, PriceItem, Reservation, Source};
use crate::db::Db;
use crate::error::ApiError;
use crate::principal::Principal;

/// The context of one action call.
#[derive(Clone)]
pub struct Ctx {
    db: Db,
    principal: Arc<Principal>,
    clock: Clock,
    config: Arc<Config>,
    request_id: Arc<str>,
    /// The id of the idempotent call this request runs (see [`Ctx::call_id`]).
    call_id: Option<Arc<str>>,
    work: Arc<Work>,
}

/// The action's transaction: a connection inside it.
pub type Tx<'a> = MappedMutexGuard<'a, sqlx::AnyConnection>;

/// The transaction of one call and the charge that opens it.
#[derive(Default)]
struct Work {
    tx: Mutex<Option<crate::db::WriteTx>>,
    charge: Option<Charge>,
    reservation: std::sync::Mutex<Option<Reservation>>,
    settled: std::sync::atomic::AtomicBool,
}

/// What a priced call reserves when its transaction begins.
struct Charge {
    price: i64,
    action: &'static str,
    idempotency_key: Option<String>,
}

impl Ctx {
    pub fn new(
        db: Db,
        principal: Arc<Principal>,
        clock: Clock,
        config: Arc<Config>,
        request_id: Arc<str>,
    ) -> Self {
        Self {
            db,
            principal,
            clock,
            config,
            request_id,
            call_id: None,
            work: Arc::default(),
        }
    }

    /// This context for a request that holds the claim of an idempotency key.
    pub(crate) fn claimed(mut self, call_id: String) -> Self {
        self.call_id = Some(call_id.into());
        self
    }

    /// For a request that holds an idempotency key's claim, an id of its call that every retry
    /// with the key shares: a mark the action committed before its work under this id (a list
    /// `processing`) was left by an earlier attempt that died, so it can be taken over at once
    /// instead of after its lease. `None` without a key.
    pub fn call_id(&self) -> Option<&str> {
        self.call_id.as_deref()
    }

    /// This context for a priced call: its transaction reserves `price` as it begins.
    pub(crate) fn charging(
        mut self,
        price: i64,
        action: &'static str,
        idempotency_key: Option<String>,
    ) -> Self {
        self.work = Arc::new(Work {
            charge: Some(Charge {
                price,
                action,
                idempotency_key,
            }),
            ..Work::default()
        });
        self
    }

    /// The call's transaction, begun on first use (and for a priced call, with the price
    /// reserved: 402 `insufficient_credits` if the balance is short). Take it once and pass
    /// `&mut tx` down: a second `tx()` while the first guard is held waits forever. Dispatch
    /// commits after the action returns.
    pub async fn tx(&self) -> Result<Tx<'_>, ApiError> {
        let mut guard = self.work.tx.lock().await;
        if guard.is_none() {
            let mut tx = self.db.begin_write().await?;
            if let Some(charge) = &self.work.charge {
                let source = Source {
                    action: Some(charge.action),
                    idempotency_key: charge.idempotency_key.as_deref(),
                    person_id: Some(&self.principal.person_id),
                    ..Source::default()
                };
                let reservation = credits::reserve(
                    &mut tx,
                    &self.clock,
                    &self.principal.workspace_id,
                    charge.price,
                    &source,
                )
                .await?;
                *self
                    .work
                    .reservation
                    .lock()
                    .unwrap_or_else(|e| e.into_inner()) = Some(reservation);
            }
            *guard = Some(tx);
        }
        Ok(MutexGuard::map(guard, |tx| match tx {
            Some(tx) => &mut **tx,
            None => unreachable!("the transaction was begun above"),
        }))
    }

    /// Keeps `used` credits of this call's reservation and returns the rest, in its transaction
    /// (`tx`, from [`Ctx::tx`]), recording the object the spend paid for. More than was priced is
    /// a 409 `invalid_state` (the workspace changed since pricing) and the call does nothing. A
    /// priced action that does not settle pays its whole price.
    pub async fn settle(
        &self,
        tx: &mut sqlx::AnyConnection,
        used: i64,
        object_id: &str,
    ) -> Result<(), ApiError> {
        let reservation = self.reservation().ok_or_else(|| {
            ApiError::internal("settle called outside a priced action's transaction")
        })?;
        credits::settle(tx, &self.clock, &reservation, used, Some(object_id)).await?;
        self.work
            .settled
            .store(true, std::sync::atomic::Ordering::Relaxed);
        Ok(())
    }

    /// Keeps this call's reservation open beyond its transaction, for work a durable job finishes
    /// (committed with the job row in `tx`, from [`Ctx::tx`]): the spend is recorded against
    /// `object_id` and held until `held_until` (epoch ms), which the job renews
    /// ([`credits::renew_hold`]) until it settles what it used ([`credits::settle`]). Dispatch then
    /// leaves the reservation to the job instead of charging it in full.
    pub async fn hold(
        &self,
        tx: &mut sqlx::AnyConnection,
        object_id: &str,
        held_until: i64,
    ) -> Result<Reservation, ApiError> {
        let reservation = self.reservation().ok_or_else(|| {
            ApiError::internal("hold called outside a priced action's transaction")
        })?;
        credits::keep_as_hold(tx, &reservation, object_id, held_until).await?;
        self.work
            .settled
            .store(true, std::sync::atomic::Ordering::Relaxed);
        Ok(reservation)
    }

    /// Rolls back the call's transaction now, for an action that must record its failure outside
    /// it (a mark others can see) once the failed work is undone; dispatch would roll it back
    /// anyway when the action returns its error.
    pub async fn rollback(&self) {
        drop(self.work.tx.lock().await.take());
    }

    /// The credits reserved for this call, once its transaction has begun (priced actions only).
    pub fn reservation(&self) -> Option<Reservation> {
        self.work
            .reservation
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Takes the call's transaction for dispatch to finish (settle what the action did not,
    /// store the answer, commit); `None` when the action never began one.
    pub(crate) async fn take_tx(&self) -> Option<(crate::db::WriteTx, Option<Reservation>, bool)> {
        let tx = self.work.tx.lock().await.take()?;
        let settled = self.work.settled.load(std::sync::atomic::Ordering::Relaxed);
        Some((tx, self.reservation(), settled))
    }

    /// The unit price of a price item, from the configured table.
    pub fn unit_price(&self, item: PriceItem) -> i64 {
        self.config.prices.unit(item)
    }

    /// A price of `quantity` units of `item` at the configured unit price.
    pub fn price(&self, item: PriceItem, quantity: i64) -> credits::Price {
        credits::Price::default().add(item, quantity, self.unit_price(item))
    }

    pub fn clock(&self) -> &Clock {
        &self.clock
    }

    /// The database, for reads outside the call's transaction and for what must be committed
    /// before it (marks other requests must see while the work runs).
    pub fn db(&self) -> &Db {
        &self.db
    }

    pub fn principal(&self) -> &Principal {
        &self.principal
    }

    /// The caller's workspace: every query an action makes is scoped to it.
    pub fn workspace_id(&self) -> &str {
        &self.principal.workspace_id
    }

    pub fn now_ms(&self) -> i64 {
        self.clock.now_ms()
    }

    pub fn config(&self) -> &Config {
        &self.config
    }

    /// The configuration as a handle to keep, for work the call hands on (jobs it runs itself).
    pub fn config_handle(&self) -> Arc<Config> {
        self.config.clone()
    }

    pub fn request_id(&self) -> &str {
        &self.request_id
    }
}
