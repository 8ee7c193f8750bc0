//! The context an action runs in: who is calling, in which workspace, with which database.
//!
//! An action receives a [`Ctx`] by value; it is cheap to clone (a few `Arc`s) and carries
//! everything a capability may need without reaching for globals, so a test can run the same
//! action against any database and any clock.

use std::sync::Arc;

use crate::auth::Principal;
use crate::clock::Clock;
use crate::config::Config;
use crate::db::Db;

/// The context of one action call.
#[derive(Clone)]
pub struct Ctx {
    db: Db,
    principal: Arc<Principal>,
    clock: Clock,
    config: Arc<Config>,
    request_id: Arc<str>,
}

impl Ctx {
    pub fn new(db: Db, principal: Arc<Principal>, clock: Clock, config: Arc<Config>, request_id: Arc<str>) -> Self {
        Self { db, principal, clock, config, request_id }
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
