//! Message templates: `Hi {{first_name|there}}, ...` rendered per prospect.
//!
//! A template is parsed once, when a sequence's steps are written, so an unknown variable or an
//! unclosed `{{` is a 400 that names the step before any prospect is involved; rendering is then a
//! pure function of the template and the prospect's values, unit-tested here.
//!
//! Syntax: `{{name}}` or `{{name|fallback}}` (spaces around the name are ignored). The names are
//! the prospect's scalar fields ([`VARIABLES`]) and `custom.<key>` for a custom field. A variable
//! with no value and no fallback is not rendered as an empty string (that sends "Hi ," to a real
//! person): the prospect is reported instead, and `{{title|}}` says an empty value is fine. A
//! literal `{{` is written `\{{`; a lone `{` or `}` is plain text.

use std::collections::BTreeMap;

use serde_json::Value;

use crate::prospects::Prospect;

/// The prospect fields a template may name, besides `custom.<key>`.
pub const VARIABLES: &[&str] = &[
    "first_name",
    "last_name",
    "full_name",
    "headline",
    "title",
    "seniority",
    "department",
    "company_name",
    "company_domain",
    "company_industry",
    "company_size",
    "location",
    "country",
    "timezone",
    "profile_url",
    "email",
    "phone",
];

/// A parsed template.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Template {
    parts: Vec<Part>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Part {
    Text(String),
    Var {
        name: Variable,
        fallback: Option<String>,
    },
}

/// What a `{{...}}` names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Variable {
    /// One of [`VARIABLES`].
    Field(&'static str),
    /// `custom.<key>`: a custom field.
    Custom(String),
}

impl Variable {
    fn parse(name: &str) -> Result<Self, TemplateError> {
        if let Some(key) = name.strip_prefix("custom.") {
            if key.is_empty() {
                return Err(TemplateError::UnknownVariable(name.to_owned()));
            }
            return Ok(Variable::Custom(key.to_owned()));
        }
        VARIABLES
            .iter()
            .find(|known| **known == name)
            .map(|known| Variable::Field(known))
            .ok_or_else(|| TemplateError::UnknownVariable(name.to_owned()))
    }

    /// The name as written in a template.
    pub fn name(&self) -> String {
        match self {
            Variable::Field(name) => (*name).to_owned(),
            Variable::Custom(key) => format!("custom.{key}"),
        }
    }
}

/// Why a template text cannot be used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TemplateError {
    UnknownVariable(String),
    Unclosed,
    EmptyName,
}

impl TemplateError {
    /// The sentence, for the field it was found in (e.g. "`steps[1].text`").
    pub fn sentence(&self, field: &str) -> String {
        match self {
            TemplateError::UnknownVariable(name) => format!(
                "{field} uses the unknown variable `{{{{{name}}}}}`; use one of {} or `custom.<key>` (a fallback goes after a bar: `{{{{first_name|there}}}}`).",
                VARIABLES
                    .iter()
                    .map(|name| format!("`{name}`"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            TemplateError::Unclosed => format!(
                "{field} opens `{{{{` without closing it with `}}}}`; write `\\{{{{` for literal braces."
            ),
            TemplateError::EmptyName => format!("{field} has an empty variable `{{{{}}}}`."),
        }
    }
}

/// A variable without a value nor a fallback, met while rendering.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MissingValue(pub String);

impl Template {
    /// Parses a template text.
    pub fn parse(text: &str) -> Result<Self, TemplateError> {
        let mut parts = Vec::new();
        let mut literal = String::new();
        let mut rest = text;
        while !rest.is_empty() {
            if let Some(after) = rest.strip_prefix("\\{{") {
                literal.push_str("{{");
                rest = after;
            } else if let Some(after) = rest.strip_prefix("{{") {
                let end = after.find("}}").ok_or(TemplateError::Unclosed)?;
                let inner = &after[..end];
                let (name, fallback) = match inner.split_once('|') {
                    Some((name, fallback)) => (name, Some(fallback.to_owned())),
                    None => (inner, None),
                };
                let name = name.trim();
                if name.is_empty() {
                    return Err(TemplateError::EmptyName);
                }
                if !literal.is_empty() {
                    parts.push(Part::Text(std::mem::take(&mut literal)));
                }
                parts.push(Part::Var {
                    name: Variable::parse(name)?,
                    fallback,
                });
                rest = &after[end + 2..];
            } else {
                let next = rest.chars().next().map_or(1, char::len_utf8);
                literal.push_str(&rest[..next]);
                rest = &rest[next..];
            }
        }
        if !literal.is_empty() {
            parts.push(Part::Text(literal));
        }
        Ok(Self { parts })
    }

    /// Renders with `value` giving each variable's value (`None` or empty: no value).
    pub fn render(
        &self,
        value: impl Fn(&Variable) -> Option<String>,
    ) -> Result<String, MissingValue> {
        let mut out = String::new();
        for part in &self.parts {
            match part {
                Part::Text(text) => out.push_str(text),
                Part::Var { name, fallback } => {
                    match (value(name).filter(|v| !v.trim().is_empty()), fallback) {
                        (Some(value), _) => out.push_str(value.trim()),
                        (None, Some(fallback)) => out.push_str(fallback),
                        (None, None) => return Err(MissingValue(name.name())),
                    }
                }
            }
        }
        Ok(out)
    }

    /// Renders for one prospect.
    pub fn render_for(&self, prospect: &Prospect) -> Result<String, MissingValue> {
        self.render(|variable| prospect_value(prospect, variable))
    }
}

/// A prospect's value of a variable, as text.
pub fn prospect_value(prospect: &Prospect, variable: &Variable) -> Option<String> {
    let p = prospect;
    match variable {
        Variable::Custom(key) => custom_value(&p.custom_fields, key),
        Variable::Field(name) => match *name {
            "first_name" => p.first_name.clone(),
            "last_name" => p.last_name.clone(),
            "full_name" => p.full_name.clone(),
            "headline" => p.headline.clone(),
            "title" => p.title.clone(),
            "seniority" => p.seniority.clone(),
            "department" => p.department.clone(),
            "company_name" => p.company_name.clone(),
            "company_domain" => p.company_domain.clone(),
            "company_industry" => p.company_industry.clone(),
            "company_size" => p.company_size.map(|size| size.to_string()),
            "location" => p.location.clone(),
            "country" => p.country.clone(),
            "timezone" => p.timezone.clone(),
            "profile_url" => p.profile_url.clone(),
            "email" => p.email.clone(),
            "phone" => p.phone.clone(),
            _ => None,
        },
    }
}

/// A custom field's value as text: scalars only; lists and objects have no text.
fn custom_value(fields: &BTreeMap<String, Value>, key: &str) -> Option<String> {
    match fields.get(key)? {
        Value::String(text) => Some(text.clone()),
        Value::Number(number) => Some(number.to_string()),
        Value::Bool(flag) => Some(flag.to_string()),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn values(variable: &Variable) -> Option<String> {
        match variable.name().as_str() {
            "first_name" => Some("Ada".to_owned()),
            "company_name" => Some("  Engines ".to_owned()),
            "title" => Some(String::new()),
            "custom.met_at" => Some("SaaStr".to_owned()),
            _ => None,
        }
    }

    fn render(text: &str) -> Result<String, MissingValue> {
        Template::parse(text).expect("parses").render(values)
    }

    #[test]
    fn variables_and_fallbacks_render() {
        assert_eq!(
            render("Hi {{ first_name }} at {{company_name}}!").as_deref(),
            Ok("Hi Ada at Engines!")
        );
        assert_eq!(render("Hi {{last_name|there}}").as_deref(), Ok("Hi there"));
        assert_eq!(
            render("Met at {{custom.met_at}}").as_deref(),
            Ok("Met at SaaStr")
        );
        // An empty value counts as no value; an empty fallback is allowed.
        assert_eq!(render("[{{title|}}]").as_deref(), Ok("[]"));
        assert_eq!(render("no variables").as_deref(), Ok("no variables"));
        assert_eq!(render("").as_deref(), Ok(""));
    }

    #[test]
    fn a_missing_value_without_fallback_is_reported_not_blank() {
        assert_eq!(
            render("Hi {{last_name}}"),
            Err(MissingValue("last_name".to_owned()))
        );
        assert_eq!(
            render("{{custom.nope}}"),
            Err(MissingValue("custom.nope".to_owned()))
        );
    }

    #[test]
    fn unknown_and_malformed_templates_are_refused() {
        assert_eq!(
            Template::parse("Hi {{frist_name}}"),
            Err(TemplateError::UnknownVariable("frist_name".to_owned()))
        );
        assert_eq!(
            Template::parse("Hi {{first_name"),
            Err(TemplateError::Unclosed)
        );
        assert_eq!(Template::parse("Hi {{ }}"), Err(TemplateError::EmptyName));
        assert_eq!(
            Template::parse("{{custom.}}"),
            Err(TemplateError::UnknownVariable("custom.".to_owned()))
        );
        let sentence =
            TemplateError::UnknownVariable("frist_name".to_owned()).sentence("`steps[1].text`");
        assert!(sentence.contains("`{{frist_name}}`"), "{sentence}");
        assert!(sentence.contains("`steps[1].text`"), "{sentence}");
    }

    #[test]
    fn braces_escape_and_lone_braces_stay() {
        assert_eq!(
            render("\\{{first_name}} is {{first_name}}").as_deref(),
            Ok("{{first_name}} is Ada")
        );
        assert_eq!(render("a { b } c}}").as_deref(), Ok("a { b } c}}"));
        assert_eq!(
            render("Grüße, {{first_name}} ✓").as_deref(),
            Ok("Grüße, Ada ✓")
        );
    }
}
