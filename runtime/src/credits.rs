//! Credits: what an action costs.
//!
//! Actions declared with `credits = <price fn>` return a [`Price`] from their price function. The
//! balance, ledger, reservations and estimates that use it come with the credits issue; until then
//! the dispatch refuses such calls with 501 rather than running them for free.

use schemars::JsonSchema;
use serde::Serialize;

/// The price of one request, with its breakdown.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, JsonSchema)]
pub struct Price {
    /// The total in credits.
    pub total: i64,
    /// What the total is made of.
    pub breakdown: Vec<PriceLine>,
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
    pub fn line(item: &str, quantity: i64, unit_price: i64) -> Self {
        let amount = quantity.saturating_mul(unit_price);
        Self { total: amount, breakdown: vec![PriceLine { item: item.to_owned(), quantity, unit_price, amount }] }
    }
}
