//! How actions are grouped: resource tags, and the toolsets an MCP client picks from.
//!
//! An MCP host reads every tool of `tools/list` into its model's context, and some cut the list
//! short (Cursor sends its model the first 40 tools), so a client asks for the toolsets it needs
//! and gets a default set otherwise (see `mcp::selection`). The runtime names no domain: the crate
//! of actions declares each toolset with [`toolset!`](crate::toolset) and places each resource tag
//! (the first segment of an action's REST path, which also groups the OpenAPI document) in one
//! with [`resource_tag!`](crate::resource_tag). So an action's toolset is its tag's, and a new
//! action on a known resource needs no declaration. [`validate_registered`] checks at start that
//! every action's tag is described and placed in a declared toolset.

use std::sync::OnceLock;

use crate::registry::{Action, Registry};

/// A named group of tools an MCP client may ask for (`?toolsets=<name>,...`).
#[derive(Debug)]
pub struct Toolset {
    pub name: &'static str,
    /// One sentence for the server's instructions and the docs.
    pub description: &'static str,
    /// Whether a client that names no toolsets gets this one.
    pub default: bool,
}

inventory::collect!(Toolset);

/// Declares a toolset: `toolset!("outreach", default = true, "Senders, sequences, ...");`.
#[macro_export]
macro_rules! toolset {
    ($name:literal, default = $default:literal, $description:literal) => {
        $crate::__private::inventory::submit! {
            $crate::toolsets::Toolset { name: $name, description: $description, default: $default }
        }
    };
}

/// One resource tag: its line in the OpenAPI document, and the toolset its tools belong to.
#[derive(Debug)]
pub struct TagDescription {
    pub tag: &'static str,
    pub toolset: &'static str,
    pub description: &'static str,
}

inventory::collect!(TagDescription);

/// Describes a resource tag and places it in a toolset:
/// `resource_tag!("prospects", toolset = "prospecting", "People you may reach out to ...");`.
#[macro_export]
macro_rules! resource_tag {
    ($tag:literal, toolset = $toolset:literal, $description:literal) => {
        $crate::__private::inventory::submit! {
            $crate::toolsets::TagDescription { tag: $tag, toolset: $toolset, description: $description }
        }
    };
}

/// Every declared toolset, by name: the fixed order of every list of them. Collected once (the
/// MCP guard reads the default set on every request).
pub fn toolsets() -> &'static [&'static Toolset] {
    static SORTED: OnceLock<Vec<&'static Toolset>> = OnceLock::new();
    SORTED.get_or_init(|| {
        let mut all: Vec<&'static Toolset> = inventory::iter::<Toolset>.into_iter().collect();
        all.sort_by_key(|toolset| toolset.name);
        all
    })
}

/// The description of `tag`, if its crate gave one.
pub fn tag(tag: &str) -> Option<&'static TagDescription> {
    inventory::iter::<TagDescription>
        .into_iter()
        .find(|described| described.tag == tag)
}

/// The toolset `action`'s tools belong to: its tag's.
pub fn toolset_of(action: &Action) -> Option<&'static str> {
    tag(action.tag()).map(|described| described.toolset)
}

/// Checks the declarations against the registry: toolset names and tags declared once, each
/// tag placed in a declared toolset, and every action's tag described. The binary runs it at
/// start, so a new resource placed nowhere refuses to start rather than hiding its tools.
pub fn validate_registered(registry: &Registry) -> Result<(), String> {
    let toolsets = toolsets();
    for pair in toolsets.windows(2) {
        if pair[0].name == pair[1].name {
            return Err(format!("the toolset `{}` is declared twice", pair[0].name));
        }
    }
    if !toolsets.iter().any(|toolset| toolset.default) {
        return Err(
            "no toolset is a default one, so a client that names none gets no tools".into(),
        );
    }
    let mut tags: Vec<&'static TagDescription> =
        inventory::iter::<TagDescription>.into_iter().collect();
    tags.sort_by_key(|described| described.tag);
    for pair in tags.windows(2) {
        if pair[0].tag == pair[1].tag {
            return Err(format!(
                "the resource tag `{}` is described twice",
                pair[0].tag
            ));
        }
    }
    for described in &tags {
        if !toolsets
            .iter()
            .any(|toolset| toolset.name == described.toolset)
        {
            return Err(format!(
                "the resource tag `{}` is placed in the toolset `{}`, which no toolset! declares",
                described.tag, described.toolset
            ));
        }
    }
    for action in registry.actions() {
        if toolset_of(action).is_none() {
            return Err(format!(
                "the action `{}` has the resource tag `{}`, which no resource_tag! describes and \
                 places in a toolset",
                action.name(),
                action.tag()
            ));
        }
    }
    Ok(())
}
