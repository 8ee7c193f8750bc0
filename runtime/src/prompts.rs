//! MCP prompts: the common workflows, written out as the staged steps an assistant takes with the
//! tools, each with its arguments (`prompts/list`, `prompts/get`).
//!
//! A prompt is text, so the runtime names no domain here either: the crate of actions declares
//! each with [`prompt!`](crate::prompt), and the MCP face lists and renders them. A prompt names
//! the least scope its steps need and is listed only to credentials that have it, as tools are.
//! [`validate_registered`] checks at start that every tool a prompt names exists and that every
//! placeholder is a declared argument, so a renamed action cannot leave a prompt pointing nowhere.

use std::collections::BTreeMap;
use std::sync::OnceLock;

use crate::error::ApiError;
use crate::registry::Registry;
use crate::scope::Scope;

/// One argument of a prompt, filled into its text where `{{name}}` stands.
#[derive(Debug)]
pub struct PromptArgument {
    pub name: &'static str,
    pub description: &'static str,
    /// Used when the client gives none; `None` makes the argument required.
    pub default: Option<&'static str>,
}

impl PromptArgument {
    pub fn required(&self) -> bool {
        self.default.is_none()
    }
}

/// A workflow an assistant can be asked to walk.
#[derive(Debug)]
pub struct Prompt {
    pub name: &'static str,
    pub title: &'static str,
    /// One sentence for `prompts/list`.
    pub description: &'static str,
    /// The least scope the steps need: the prompt is listed to credentials that have it.
    pub scope: Scope,
    pub arguments: &'static [PromptArgument],
    /// The user message the prompt becomes, with `{{argument}}` placeholders.
    pub text: &'static str,
}

inventory::collect!(Prompt);

/// Declares a prompt: `prompt!(Prompt { name: "weekly_report", ... });`.
#[macro_export]
macro_rules! prompt {
    ($prompt:expr) => {
        $crate::__private::inventory::submit! { $prompt }
    };
}

/// Every declared prompt, by name: the fixed order of `prompts/list`.
pub fn prompts() -> &'static [&'static Prompt] {
    static SORTED: OnceLock<Vec<&'static Prompt>> = OnceLock::new();
    SORTED.get_or_init(|| {
        let mut all: Vec<&'static Prompt> = inventory::iter::<Prompt>.into_iter().collect();
        all.sort_by_key(|prompt| prompt.name);
        all
    })
}

/// The prompts a credential with `scope` is offered.
pub fn offered(scope: Scope) -> impl Iterator<Item = &'static Prompt> {
    prompts()
        .iter()
        .copied()
        .filter(move |prompt| prompt.scope <= scope)
}

/// The prompt `name` as a credential with `scope` sees it; a 400 naming the offered ones
/// otherwise (an unknown name and one beyond the scope read alike, as for tools).
pub fn find(name: &str, scope: Scope) -> Result<&'static Prompt, ApiError> {
    offered(scope)
        .find(|prompt| prompt.name == name)
        .ok_or_else(|| {
            let names: Vec<&str> = offered(scope).map(|prompt| prompt.name).collect();
            ApiError::invalid_request(format!(
                "There is no prompt `{name}` for this credential; the prompts are: {}.",
                names.join(", ")
            ))
        })
}

impl Prompt {
    /// The prompt's text with its arguments filled in. A missing required argument, or one the
    /// prompt does not take, is a 400 naming it; values are used as given (trimmed).
    pub fn render(&self, given: &BTreeMap<String, String>) -> Result<String, ApiError> {
        if let Some(unknown) = given
            .keys()
            .find(|name| !self.arguments.iter().any(|arg| arg.name == name.as_str()))
        {
            let names: Vec<&str> = self.arguments.iter().map(|arg| arg.name).collect();
            return Err(ApiError::invalid_request(format!(
                "The prompt `{}` takes no argument `{unknown}`; it takes: {}.",
                self.name,
                names.join(", ")
            )));
        }
        let mut values = BTreeMap::new();
        for argument in self.arguments {
            let value = given
                .get(argument.name)
                .map(|value| value.trim())
                .filter(|value| !value.is_empty())
                .or(argument.default)
                .ok_or_else(|| {
                    ApiError::invalid_request(format!(
                        "The prompt `{}` needs the argument `{}`: {}",
                        self.name, argument.name, argument.description
                    ))
                })?;
            values.insert(argument.name, value);
        }
        // One pass over the text: a value that itself holds `{{...}}` stays as it was given.
        let mut text = String::with_capacity(self.text.len());
        let mut rest = self.text;
        while let Some(start) = rest.find("{{") {
            text.push_str(&rest[..start]);
            let after = &rest[start + 2..];
            match after
                .split_once("}}")
                .and_then(|(name, tail)| Some((values.get(name)?, tail)))
            {
                Some((value, tail)) => {
                    text.push_str(value);
                    rest = tail;
                }
                None => {
                    text.push_str("{{");
                    rest = after;
                }
            }
        }
        text.push_str(rest);
        Ok(text)
    }
}

/// Checks the declarations against the registry: names declared once, every placeholder a
/// declared argument and every argument used, and every `service_<action>` a prompt names an
/// action that exists.
pub fn validate_registered(registry: &Registry) -> Result<(), String> {
    let prompts = prompts();
    for pair in prompts.windows(2) {
        if pair[0].name == pair[1].name {
            return Err(format!("the prompt `{}` is declared twice", pair[0].name));
        }
    }
    for prompt in prompts {
        for placeholder in placeholders(prompt.text) {
            if !prompt.arguments.iter().any(|arg| arg.name == placeholder) {
                return Err(format!(
                    "the prompt `{}` has the placeholder `{{{{{placeholder}}}}}`, which is none of \
                     its arguments",
                    prompt.name
                ));
            }
        }
        for argument in prompt.arguments {
            if !placeholders(prompt.text).any(|used| used == argument.name) {
                return Err(format!(
                    "the prompt `{}` never uses its argument `{}`",
                    prompt.name, argument.name
                ));
            }
        }
        for tool in tools_named(prompt.text) {
            if registry.by_tool_name(tool).is_none() {
                return Err(format!(
                    "the prompt `{}` names the tool `{tool}`, which no action registers",
                    prompt.name
                ));
            }
        }
    }
    Ok(())
}

/// The `{{name}}` placeholders of a text.
fn placeholders(text: &str) -> impl Iterator<Item = &str> {
    text.split("{{")
        .skip(1)
        .filter_map(|rest| rest.split_once("}}").map(|(name, _)| name))
}

/// The `service_<action>` tool names a text mentions.
pub fn tools_named(text: &str) -> impl Iterator<Item = &str> {
    text.match_indices("service_").map(move |(at, _)| {
        let rest = &text[at..];
        let end = rest
            .find(|c: char| !(c.is_ascii_lowercase() || c == '_'))
            .unwrap_or(rest.len());
        &rest[..end]
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEST: Prompt = Prompt {
        name: "test",
        title: "Test",
        description: "A test.",
        scope: Scope::Read,
        arguments: &[
            PromptArgument {
                name: "who",
                description: "Who to greet.",
                default: None,
            },
            PromptArgument {
                name: "period",
                description: "A period.",
                default: Some("7d"),
            },
        ],
        text: "Greet {{who}} over {{period}} with service_get_workspace.",
    };

    fn given(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn arguments_fill_placeholders_and_defaults_stand_in() {
        assert_eq!(
            TEST.render(&given(&[("who", " Ann ")])).unwrap(),
            "Greet Ann over 7d with service_get_workspace."
        );
        assert_eq!(
            TEST.render(&given(&[("who", "Ann"), ("period", "30d")]))
                .unwrap(),
            "Greet Ann over 30d with service_get_workspace."
        );
    }

    #[test]
    fn a_value_holding_a_placeholder_is_left_as_given() {
        assert_eq!(
            TEST.render(&given(&[("who", "{{period}}")])).unwrap(),
            "Greet {{period}} over 7d with service_get_workspace."
        );
    }

    #[test]
    fn a_missing_or_unknown_argument_is_refused_by_name() {
        let missing = TEST.render(&given(&[])).unwrap_err();
        assert!(missing.message.contains("`who`"), "{}", missing.message);
        let blank = TEST.render(&given(&[("who", "  ")])).unwrap_err();
        assert!(blank.message.contains("`who`"), "{}", blank.message);
        let unknown = TEST
            .render(&given(&[("who", "Ann"), ("whom", "Bob")]))
            .unwrap_err();
        assert!(
            unknown.message.contains("`whom`") && unknown.message.contains("who, period"),
            "{}",
            unknown.message
        );
    }

    #[test]
    fn tool_names_and_placeholders_are_found() {
        assert_eq!(
            tools_named(TEST.text).collect::<Vec<_>>(),
            ["service_get_workspace"]
        );
        assert_eq!(
            placeholders(TEST.text).collect::<Vec<_>>(),
            ["who", "period"]
        );
    }
}
