//! Confirmations: the calls an MCP client that can ask its person (elicitation) asks about first,
//! with the exact effect, and does nothing on a "no".
//!
//! Two kinds of call ask. One that reaches people: the crate of actions registers it with
//! [`confirmation!`](crate::confirmation), naming how to learn what the call would do (its own
//! preview, such as `dry_run`, or a read action) and how to say it in one sentence from that
//! (`describe`, which answers `None` when the call would do nothing worth asking about). And a
//! priced call whose estimate reaches [`CREDITS_THRESHOLD`]: the runtime says its price and the
//! balance itself. The MCP face asks (`mcp/confirm.rs`); nothing here names a domain.
//!
//! A credential made for an unattended agent (`outreach admin key create --unattended`) is never
//! asked, and neither is a client that cannot ask. The questions asked wait in
//! `mcp_confirmations` ([`ask`], [`take_answer`]): an answer is honoured once, for the call asked
//! about, within [`ANSWER_WITHIN_MS`].

use serde_json::{Map, Value};

use crate::clock::Clock;
use crate::db::Db;
use crate::error::ApiError;
use crate::ids;
use crate::registry::Registry;
use crate::scope::Scope;

/// How long a question waits for its answer.
pub const ANSWER_WITHIN_MS: i64 = 10 * 60 * 1000;

/// A priced call asks for a confirmation when its estimate is at least this many credits.
pub const CREDITS_THRESHOLD: i64 = 100;

/// How a confirmation learns what the call would do.
#[derive(Debug, Clone, Copy)]
pub enum Look {
    /// The action itself with its preview switch on (`preview_field!`): changes nothing.
    Preview,
    /// A read action called with `{"id": <the call's argument named id_field>}`.
    Read {
        action: &'static str,
        id_field: &'static str,
    },
}

/// A call that reaches people, and how to say what it would do.
#[derive(Debug)]
pub struct Confirmation {
    pub action: &'static str,
    pub look: Look,
    /// The least scope with which the call reaches people; a caller below it is not asked (an
    /// autonomous agent run by a `write` credential only proposes). `None`: the action's own.
    pub reaches_people_with: Option<Scope>,
    /// The sentence the person confirms, from the call's arguments and what `look` answered;
    /// `None` when the call would reach nobody (nothing to ask).
    pub describe: fn(&Map<String, Value>, &Value) -> Option<String>,
}

inventory::collect!(Confirmation);

/// Registers a confirmation:
///
/// ```ignore
/// outreach_runtime::prelude::confirmation! {
///     action: "approve_outreach", look: Look::Preview, describe: approve_sentence,
/// }
/// ```
#[macro_export]
macro_rules! confirmation {
    (action: $action:literal, look: $look:expr, describe: $describe:path $(,)?) => {
        $crate::__private::inventory::submit! {
            $crate::confirmations::Confirmation {
                action: $action,
                look: $look,
                reaches_people_with: None,
                describe: $describe,
            }
        }
    };
    (action: $action:literal, look: $look:expr, reaches_people_with: $scope:expr,
     describe: $describe:path $(,)?) => {
        $crate::__private::inventory::submit! {
            $crate::confirmations::Confirmation {
                action: $action,
                look: $look,
                reaches_people_with: Some($scope),
                describe: $describe,
            }
        }
    };
}

/// Every registered confirmation.
pub fn all() -> impl Iterator<Item = &'static Confirmation> {
    inventory::iter::<Confirmation>.into_iter()
}

/// The confirmation registered for `action`, if any.
pub fn of(action: &str) -> Option<&'static Confirmation> {
    all().find(|confirmation| confirmation.action == action)
}

/// Checks the registrations against the registry: each action exists and is registered once, a
/// `Preview` action has a preview switch, and a `Read` action exists and changes nothing.
pub fn validate_registered(registry: &Registry) -> Result<(), String> {
    let mut seen = std::collections::BTreeSet::new();
    for confirmation in all() {
        let name = confirmation.action;
        if !seen.insert(name) {
            return Err(format!("the confirmation of `{name}` is registered twice"));
        }
        let action = registry
            .get(name)
            .ok_or_else(|| format!("a confirmation names `{name}`, which is no action"))?;
        match confirmation.look {
            Look::Preview if action.preview.is_none() => {
                return Err(format!(
                    "the confirmation of `{name}` looks at its preview, but `{name}` declares no \
                     `preview_field!`"
                ));
            }
            Look::Read { action: read, .. } => {
                let reader = registry.get(read).ok_or_else(|| {
                    format!("the confirmation of `{name}` reads with `{read}`, which is no action")
                })?;
                if !reader.is_read_only() {
                    return Err(format!(
                        "the confirmation of `{name}` reads with `{read}`, which changes things"
                    ));
                }
            }
            Look::Preview => {}
        }
    }
    Ok(())
}

/// Records a question asked of `credential_id`'s person about the call `binding` names, and
/// answers its token: the `requestState` the client sends back with the answer. Questions past
/// their time are deleted with the other expired rows (`crate::housekeeping`).
pub async fn ask(
    db: &Db,
    clock: &Clock,
    credential_id: &str,
    binding: &str,
) -> Result<String, ApiError> {
    let now = clock.now_ms();
    let token = ids::new_id("cnf");
    sqlx::query(
        "insert into mcp_confirmations (id, credential_id, binding, expires_at, created_at) \
         values ($1, $2, $3, $4, $5)",
    )
    .bind(&token)
    .bind(credential_id)
    .bind(binding)
    .bind(now + ANSWER_WITHIN_MS)
    .bind(now)
    .execute(db.writes())
    .await?;
    Ok(token)
}

/// Whether `token` names a question still waiting, asked of this credential about this call;
/// taking it ends it, so one answer serves one call.
pub async fn take_answer(
    db: &Db,
    clock: &Clock,
    token: &str,
    credential_id: &str,
    binding: &str,
) -> Result<bool, ApiError> {
    let taken = sqlx::query(
        "delete from mcp_confirmations where id = $1 and credential_id = $2 and binding = $3 \
         and expires_at >= $4",
    )
    .bind(token)
    .bind(credential_id)
    .bind(binding)
    .bind(clock.now_ms())
    .execute(db.writes())
    .await?;
    Ok(taken.rows_affected() == 1)
}

/// The sentence of a priced call's estimate: `None` below [`CREDITS_THRESHOLD`].
pub fn price_sentence(price: i64, balance: i64) -> Option<String> {
    (price >= CREDITS_THRESHOLD).then(|| {
        format!(
            "This costs {} credits of your {}.",
            thousands(price),
            thousands(balance)
        )
    })
}

/// `1200` as `1,200`.
pub fn thousands(number: i64) -> String {
    let digits = number.unsigned_abs().to_string();
    let mut out = String::new();
    for (index, digit) in digits.chars().enumerate() {
        if index > 0 && (digits.len() - index).is_multiple_of(3) {
            out.push(',');
        }
        out.push(digit);
    }
    if number < 0 { format!("-{out}") } else { out }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_are_written_with_thousands_separators() {
        assert_eq!(thousands(0), "0");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(1_200), "1,200");
        assert_eq!(thousands(4_000_000), "4,000,000");
        assert_eq!(thousands(-12_345), "-12,345");
    }

    #[test]
    fn only_a_price_at_the_threshold_asks() {
        assert_eq!(price_sentence(99, 4_000), None);
        assert_eq!(
            price_sentence(1_200, 4_000).as_deref(),
            Some("This costs 1,200 credits of your 4,000.")
        );
    }
}
