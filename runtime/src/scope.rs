//! Scopes and roles: what a credential may do, and what its person may hold.
//!
//! Scopes nest (`send` includes `write` includes `read`), so a credential's scopes reduce to the
//! highest one, and "has scope S" is an ordered comparison. A role caps what its person can hold:
//! a `member` reads, an `owner` or `admin` writes, and `send` also needs the workspace's sending
//! terms accepted. The cap is applied on every request, so a demotion takes effect on the next call.

use std::fmt;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// An access scope. The order is the nesting: `Read < Write < Send`.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum Scope {
    Read,
    Write,
    Send,
}

impl Scope {
    pub const ALL: [Scope; 3] = [Scope::Read, Scope::Write, Scope::Send];

    pub fn as_str(self) -> &'static str {
        match self {
            Scope::Read => "read",
            Scope::Write => "write",
            Scope::Send => "send",
        }
    }

    pub fn parse(text: &str) -> Option<Self> {
        match text.trim() {
            "read" => Some(Scope::Read),
            "write" => Some(Scope::Write),
            "send" => Some(Scope::Send),
            _ => None,
        }
    }

    /// Parses a comma- or space-separated list into its highest scope.
    pub fn parse_list(text: &str) -> Result<Self, String> {
        let mut highest = None;
        for part in text
            .split([',', ' '])
            .filter(|part| !part.trim().is_empty())
        {
            let scope = Scope::parse(part).ok_or_else(|| {
                format!(
                    "unknown scope `{}`: expected `read`, `write` or `send`",
                    part.trim()
                )
            })?;
            highest = highest.max(Some(scope));
        }
        highest
            .ok_or_else(|| "no scopes given: expected some of `read`, `write`, `send`".to_owned())
    }

    /// Every scope this one includes, itself last: `write` -> `[read, write]`.
    pub fn included(self) -> Vec<Scope> {
        Scope::ALL
            .into_iter()
            .filter(|scope| *scope <= self)
            .collect()
    }

    /// The stored and displayed form: `read,write`.
    pub fn list_string(self) -> String {
        self.included()
            .iter()
            .map(|scope| scope.as_str())
            .collect::<Vec<_>>()
            .join(",")
    }
}

impl fmt::Display for Scope {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A person's role in a workspace.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    Owner,
    Admin,
    Member,
}

impl Role {
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Owner => "owner",
            Role::Admin => "admin",
            Role::Member => "member",
        }
    }

    pub fn parse(text: &str) -> Option<Self> {
        match text {
            "owner" => Some(Role::Owner),
            "admin" => Some(Role::Admin),
            "member" => Some(Role::Member),
            _ => None,
        }
    }

    /// The highest scope a person with this role may use, given the sending terms.
    pub fn scope_cap(self, terms_accepted: bool) -> Scope {
        match self {
            Role::Member => Scope::Read,
            Role::Owner | Role::Admin if terms_accepted => Scope::Send,
            Role::Owner | Role::Admin => Scope::Write,
        }
    }

    /// Owners and admins manage keys, members and the sending terms.
    pub fn can_manage(self) -> bool {
        matches!(self, Role::Owner | Role::Admin)
    }
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Why a role cannot hold a scope, as a sentence; `None` when it can.
pub fn scope_refusal(role: Role, terms_accepted: bool, wanted: Scope) -> Option<String> {
    if wanted <= role.scope_cap(terms_accepted) {
        return None;
    }
    Some(match (role, wanted) {
        (Role::Member, _) => format!(
            "a `member` may hold only the `read` scope; `{wanted}` needs the `owner` or `admin` role"
        ),
        _ => "the `send` scope needs the workspace's sending terms accepted first".to_owned(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scopes_nest() {
        assert_eq!(Scope::parse_list("read,write"), Ok(Scope::Write));
        assert_eq!(Scope::parse_list("send"), Ok(Scope::Send));
        assert_eq!(Scope::Send.list_string(), "read,write,send");
        assert!(Scope::parse_list("read,admin").is_err());
        assert!(Scope::parse_list("").is_err());
    }

    #[test]
    fn roles_cap_scopes() {
        assert_eq!(Role::Member.scope_cap(true), Scope::Read);
        assert_eq!(Role::Admin.scope_cap(false), Scope::Write);
        assert_eq!(Role::Owner.scope_cap(true), Scope::Send);
        assert!(scope_refusal(Role::Member, true, Scope::Write).is_some());
        assert!(scope_refusal(Role::Owner, false, Scope::Send).is_some());
        assert!(scope_refusal(Role::Owner, true, Scope::Send).is_none());
    }
}
