//! The context an action runs in: who is calling, in which workspace, with which database.
//!
//! An action receives a [`Ctx`] by value; it is cheap to clone (a few `Arc`s) and carries
//! everything a capability may need without reaching for globals, so a test can run the same
//! action against any database and any clock.

use std::sync::Arc;

use crate::clock::Clock;
use crate::config::Config;
use crate::credits::{self, Reservation};
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
    reservation: Option<Arc<Reservation>>,
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
            reservation: None,
        }
    }

    pub(crate) fn with_reservation(mut self, reservation: Reservation) -> Self {
        self.reservation = Some(Arc::new(reservation));
        self
    }

    /// The unit price of a priced item (`import.prospect`, ...), from the configured table.
    pub fn unit_price(&self, item: &str) -> i64 {
        self.config.prices.unit(item)
    }

    /// The credits reserved for this call (priced actions only).
    pub fn reservation(&self) -> Option<&Reservation> {
        self.reservation.as_deref()
    }

    /// Keeps `used` credits of this call's reservation and returns the rest, inside the action's
    /// own transaction so the spend commits with its writes. Records what the spend paid for.
    pub async fn settle_credits(
        &self,
        conn: &mut sqlx::AnyConnection,
        used: i64,
        object_id: &str,
    ) -> Result<(), ApiError> {
        match &self.reservation {
            Some(reservation) => {
                credits::settle(conn, &self.clock, reservation, used, Some(object_id)).await
            }
            None if used == 0 => Ok(()),
            None => Err(ApiError::internal(
                "settle_credits called by an action without a reservation",
            )),
        }
    }

    pub fn clock(&self) -> &Clock {
        &self.clock
    }

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

    pub fn request_id(&self) -> &str {
        &self.request_id
    }
}
