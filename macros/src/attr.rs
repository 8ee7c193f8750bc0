//! The arguments of `#[action(...)]`: `scope`, `http`, `idempotent`, `test_helper` and `credits`.
//!
//! The arguments are parsed as a plain list of `syn::Meta` and then read by name, rather than with
//! a parser that stops at the first surprise, so that one pass reports every mistake at once (an
//! unknown argument, a repeated one and a missing `scope` all show up together). The `http` route
//! is checked here too, at compile time: a typo in a path would otherwise only surface when the
//! server refuses to start.

use proc_macro2::{Span, TokenStream};
use quote::ToTokens;
use syn::parse::Parser;
use syn::punctuated::Punctuated;
use syn::{Expr, ExprLit, Lit, LitStr, Meta, Path, Token};

use crate::combine;

/// Who may call the action; mirrors `outreach_runtime::Scope`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    Read,
    Write,
    Send,
}

impl Scope {
    /// The variant's name in `outreach_runtime::Scope`.
    pub fn variant(self) -> &'static str {
        match self {
            Self::Read => "Read",
            Self::Write => "Write",
            Self::Send => "Send",
        }
    }
}

/// A REST route, checked for shape; whether its `{params}` are input fields is checked at start-up.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Route {
    pub method: &'static str,
    pub path: String,
}

/// The parsed arguments of one `#[action(...)]`.
#[derive(Debug)]
pub struct Args {
    pub scope: Scope,
    pub http: Option<Route>,
    pub idempotent: bool,
    /// Outside production only: neither routed, listed nor callable in production.
    pub test_helper: bool,
    /// The price function, as the user wrote its path.
    pub credits: Option<Path>,
}

const ARGUMENTS: [&str; 5] = ["scope", "http", "idempotent", "test_helper", "credits"];
const METHODS: [&str; 5] = ["GET", "POST", "PUT", "PATCH", "DELETE"];

const MISSING_SCOPE: &str = "missing `scope`: add `scope = \"read\"`, `\"write\"` or `\"send\"`";
const MALFORMED_HTTP: &str =
    "malformed `http`: expected \"METHOD /path\", e.g. \"GET /prospects/{id}\"";

/// Parses the attribute's arguments, reporting every problem found, not only the first.
pub fn parse(attr: TokenStream) -> syn::Result<Args> {
    let metas = Punctuated::<Meta, Token![,]>::parse_terminated.parse2(attr)?;

    let mut errors = Vec::new();
    let mut seen: Vec<String> = Vec::new();
    let mut scope = None;
    let mut http = None;
    let mut idempotent = false;
    let mut test_helper = false;
    let mut credits = None;

    for meta in &metas {
        let name = match meta.path().get_ident() {
            Some(ident) if ARGUMENTS.contains(&ident.to_string().as_str()) => ident.to_string(),
            _ => {
                let name = meta.path().to_token_stream().to_string().replace(' ', "");
                errors.push(syn::Error::new_spanned(
                    meta.path(),
                    format!(
                        "unknown argument `{name}`: expected `scope`, `http`, `idempotent`, `test_helper` or `credits`"
                    ),
                ));
                continue;
            }
        };
        if seen.contains(&name) {
            errors.push(syn::Error::new_spanned(
                meta.path(),
                format!("`{name}` set multiple times"),
            ));
            continue;
        }
        seen.push(name.clone());

        let parsed = match name.as_str() {
            "scope" => parse_scope(meta).map(|value| scope = Some(value)),
            "http" => parse_http(meta).map(|value| http = Some(value)),
            "idempotent" => parse_flag(meta, "idempotent").map(|()| idempotent = true),
            "test_helper" => parse_flag(meta, "test_helper").map(|()| test_helper = true),
            "credits" => parse_credits(meta).map(|value| credits = Some(value)),
            _ => unreachable!("`{name}` is in ARGUMENTS"),
        };
        if let Err(error) = parsed {
            errors.push(error);
        }
    }

    // A `scope` that was written but is wrong has already been reported; say "missing" only when
    // it is really absent.
    if !seen.iter().any(|name| name == "scope") {
        errors.push(syn::Error::new(Span::call_site(), MISSING_SCOPE));
    }

    match (errors.into_iter().reduce(combine), scope) {
        (None, Some(scope)) => Ok(Args {
            scope,
            http,
            idempotent,
            test_helper,
            credits,
        }),
        (Some(error), _) => Err(error),
        (None, None) => unreachable!("a missing scope is an error"),
    }
}

fn parse_scope(meta: &Meta) -> syn::Result<Scope> {
    let value = string_value(meta, |found| match found {
        Some(Expr::Path(path)) if path.path.get_ident().is_some() => format!(
            "`scope` is a string: write `scope = \"{}\"`",
            path.path.to_token_stream()
        ),
        _ => MISSING_SCOPE.replace("missing `scope`", "`scope` needs a value"),
    })?;
    match value.value().as_str() {
        "read" => Ok(Scope::Read),
        "write" => Ok(Scope::Write),
        "send" => Ok(Scope::Send),
        other => Err(syn::Error::new(
            value.span(),
            format!("unknown scope `{other}`: expected one of `read`, `write`, `send`"),
        )),
    }
}

fn parse_http(meta: &Meta) -> syn::Result<Route> {
    let value = string_value(meta, |_| {
        "`http` needs a route as a string, e.g. `http = \"GET /prospects/{id}\"`".to_owned()
    })?;
    parse_route(&value.value()).map_err(|message| syn::Error::new(value.span(), message))
}

fn parse_flag(meta: &Meta, name: &str) -> syn::Result<()> {
    match meta {
        Meta::Path(_) => Ok(()),
        _ => Err(syn::Error::new_spanned(
            meta,
            format!("`{name}` is a flag: write `{name}` without a value, or leave it out"),
        )),
    }
}

fn parse_credits(meta: &Meta) -> syn::Result<Path> {
    const EXPECTED: &str = "`credits` takes the price function, e.g. `credits = price_import`";
    match meta {
        Meta::NameValue(nv) => match &nv.value {
            Expr::Path(path) if path.qself.is_none() && path.attrs.is_empty() => {
                Ok(path.path.clone())
            }
            Expr::Lit(ExprLit {
                lit: Lit::Str(lit), ..
            }) => Err(syn::Error::new(
                lit.span(),
                format!(
                    "`credits` takes the price function itself, not a string: write `credits = {}`",
                    lit.value()
                ),
            )),
            other => Err(syn::Error::new_spanned(other, EXPECTED)),
        },
        _ => Err(syn::Error::new_spanned(meta, EXPECTED)),
    }
}

/// The string literal of `name = "..."`; `wrong` words the error from what was found instead
/// (`None` when there was no `= value` at all).
fn string_value(meta: &Meta, wrong: impl FnOnce(Option<&Expr>) -> String) -> syn::Result<LitStr> {
    match meta {
        Meta::NameValue(nv) => match &nv.value {
            Expr::Lit(ExprLit {
                lit: Lit::Str(lit), ..
            }) => Ok(lit.clone()),
            other => Err(syn::Error::new_spanned(other, wrong(Some(other)))),
        },
        _ => Err(syn::Error::new_spanned(meta, wrong(None))),
    }
}

/// Checks `"METHOD /path/{param}"`; the error is the message to show on the literal.
pub fn parse_route(route: &str) -> Result<Route, String> {
    let parts: Vec<&str> = route.split_whitespace().collect();
    let (method, path) = match parts.as_slice() {
        [method, path] => (*method, *path),
        [path] if path.starts_with('/') => {
            return Err(format!(
                "malformed `http`: the method is missing: write \"GET {path}\" (or POST, PUT, PATCH, DELETE)"
            ));
        }
        _ => return Err(MALFORMED_HTTP.to_owned()),
    };

    let Some(method) = METHODS.iter().copied().find(|known| *known == method) else {
        let upper = method.to_ascii_uppercase();
        return Err(if METHODS.contains(&upper.as_str()) {
            format!("HTTP method `{method}` must be uppercase: write `{upper}`")
        } else {
            format!(
                "unknown HTTP method `{method}`: expected one of `GET`, `POST`, `PUT`, `PATCH`, `DELETE`"
            )
        });
    };

    let Some(rest) = path.strip_prefix('/') else {
        return Err(format!(
            "path `{path}` must start with `/`: write `/{path}`"
        ));
    };
    if path == "/" {
        return Ok(Route {
            method,
            path: path.to_owned(),
        });
    }
    if let Some(trimmed) = path.strip_suffix('/') {
        return Err(format!(
            "path `{path}` must not end with `/`: write `{trimmed}`"
        ));
    }

    let mut params: Vec<&str> = Vec::new();
    for segment in rest.split('/') {
        if segment.is_empty() {
            return Err(format!("path `{path}` has an empty segment (`//`)"));
        }
        if let Some(param) = segment.strip_prefix('{').and_then(|s| s.strip_suffix('}')) {
            if !is_identifier(param) {
                return Err(format!(
                    "bad path parameter `{segment}` in `{path}`: write `{{name}}`, where `name` is a field of the input"
                ));
            }
            if params.contains(&param) {
                return Err(format!(
                    "path parameter `{segment}` appears twice in `{path}`"
                ));
            }
            params.push(param);
        } else if segment.contains(['{', '}']) {
            return Err(format!(
                "bad path parameter `{segment}` in `{path}`: a parameter is a whole segment, `{{name}}`"
            ));
        } else if let Some(param) = segment.strip_prefix(':').filter(|p| is_identifier(p)) {
            return Err(format!(
                "path parameter `{segment}` in `{path}` uses the wrong syntax: write `{{{param}}}`"
            ));
        } else if !segment
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_' || b == b'-')
        {
            return Err(format!(
                "path segment `{segment}` in `{path}` may only use lowercase letters, digits, `_` and `-` (or be a `{{param}}`)"
            ));
        }
    }
    Ok(Route {
        method,
        path: path.to_owned(),
    })
}

fn is_identifier(name: &str) -> bool {
    let mut chars = name.chars();
    match chars.next() {
        Some(first) if first.is_ascii_alphabetic() || first == '_' => {
            name != "_" && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use quote::quote;

    fn parse_ok(attr: TokenStream) -> Args {
        parse(attr).unwrap_or_else(|error| panic!("unexpected error: {error}"))
    }

    /// Every message of a (possibly combined) error.
    fn messages(attr: TokenStream) -> Vec<String> {
        match parse(attr) {
            Ok(args) => panic!("expected an error, got {args:?}"),
            Err(error) => error.into_iter().map(|e| e.to_string()).collect(),
        }
    }

    #[test]
    fn all_four_arguments_parse() {
        let args = parse_ok(quote!(
            scope = "write",
            credits = price_import,
            idempotent,
            http = "POST /imports"
        ));
        assert_eq!(args.scope, Scope::Write);
        assert!(args.idempotent);
        assert_eq!(
            args.http,
            Some(Route {
                method: "POST",
                path: "/imports".into()
            })
        );
        assert_eq!(
            args.credits.unwrap().to_token_stream().to_string(),
            "price_import"
        );
    }

    #[test]
    fn scope_alone_is_enough() {
        let args = parse_ok(quote!(scope = "read"));
        assert_eq!(args.scope, Scope::Read);
        assert!(!args.idempotent);
        assert!(args.http.is_none());
        assert!(args.credits.is_none());
    }

    #[test]
    fn credits_may_be_a_path_and_a_trailing_comma_is_fine() {
        let args = parse_ok(quote!(
            scope = "send",
            credits = crate::pricing::per_message,
        ));
        assert_eq!(args.scope, Scope::Send);
        assert_eq!(
            args.credits
                .unwrap()
                .to_token_stream()
                .to_string()
                .replace(' ', ""),
            "crate::pricing::per_message"
        );
    }

    #[test]
    fn missing_scope_says_how_to_add_it() {
        assert_eq!(messages(quote!()), [MISSING_SCOPE]);
        assert_eq!(messages(quote!(idempotent)), [MISSING_SCOPE]);
    }

    #[test]
    fn unknown_scope_lists_the_valid_ones() {
        assert_eq!(
            messages(quote!(scope = "admin")),
            ["unknown scope `admin`: expected one of `read`, `write`, `send`"]
        );
    }

    #[test]
    fn unquoted_scope_suggests_the_string() {
        assert_eq!(
            messages(quote!(scope = read)),
            ["`scope` is a string: write `scope = \"read\"`"]
        );
    }

    #[test]
    fn scope_without_value_is_not_reported_as_missing() {
        assert_eq!(
            messages(quote!(scope)),
            ["`scope` needs a value: add `scope = \"read\"`, `\"write\"` or `\"send\"`"]
        );
    }

    #[test]
    fn repeated_argument_is_reported_once() {
        assert_eq!(
            messages(quote!(scope = "read", idempotent, scope = "write")),
            ["`scope` set multiple times"]
        );
        assert_eq!(
            messages(quote!(scope = "read", idempotent, idempotent)),
            ["`idempotent` set multiple times"]
        );
    }

    #[test]
    fn unknown_argument_lists_the_known_ones() {
        assert_eq!(
            messages(quote!(scope = "read", foo = 1)),
            [
                "unknown argument `foo`: expected `scope`, `http`, `idempotent`, `test_helper` or `credits`"
            ]
        );
        assert_eq!(
            messages(quote!(scope = "read", a::b)),
            [
                "unknown argument `a::b`: expected `scope`, `http`, `idempotent`, `test_helper` or `credits`"
            ]
        );
    }

    #[test]
    fn every_problem_is_reported_together() {
        assert_eq!(
            messages(quote!(foo, http = "GET prospects", idempotent, idempotent)),
            [
                "unknown argument `foo`: expected `scope`, `http`, `idempotent`, `test_helper` or `credits`",
                "path `prospects` must start with `/`: write `/prospects`",
                "`idempotent` set multiple times",
                MISSING_SCOPE,
            ]
        );
    }

    #[test]
    fn idempotent_is_a_flag() {
        assert_eq!(
            messages(quote!(scope = "write", idempotent = true)),
            ["`idempotent` is a flag: write `idempotent` without a value, or leave it out"]
        );
    }

    #[test]
    fn credits_as_a_string_suggests_the_path() {
        assert_eq!(
            messages(quote!(scope = "write", credits = "price_import")),
            [
                "`credits` takes the price function itself, not a string: write `credits = price_import`"
            ]
        );
        assert_eq!(
            messages(quote!(scope = "write", credits)),
            ["`credits` takes the price function, e.g. `credits = price_import`"]
        );
    }

    #[test]
    fn http_needs_a_string() {
        assert_eq!(
            messages(quote!(scope = "read", http)),
            ["`http` needs a route as a string, e.g. `http = \"GET /prospects/{id}\"`"]
        );
    }

    #[test]
    fn attribute_syntax_errors_come_from_syn() {
        assert_eq!(messages(quote!(scope: "read")).len(), 1);
    }

    #[test]
    fn good_routes_parse() {
        for (route, method, path) in [
            ("GET /", "GET", "/"),
            ("GET /prospects/{id}", "GET", "/prospects/{id}"),
            (
                "POST /agents/{agent_id}/run",
                "POST",
                "/agents/{agent_id}/run",
            ),
            (
                "DELETE /lists/{id}/members/{prospect_id}",
                "DELETE",
                "/lists/{id}/members/{prospect_id}",
            ),
            (
                "PATCH /sender-accounts/{id}",
                "PATCH",
                "/sender-accounts/{id}",
            ),
            ("PUT /targeting", "PUT", "/targeting"),
        ] {
            assert_eq!(
                parse_route(route),
                Ok(Route {
                    method,
                    path: path.into()
                }),
                "{route}"
            );
        }
    }

    #[test]
    fn bad_routes_say_what_is_wrong() {
        for (route, message) in [
            ("", MALFORMED_HTTP),
            ("GET /a /b", MALFORMED_HTTP),
            (
                "/imports",
                "malformed `http`: the method is missing: write \"GET /imports\" (or POST, PUT, PATCH, DELETE)",
            ),
            (
                "FETCH /imports",
                "unknown HTTP method `FETCH`: expected one of `GET`, `POST`, `PUT`, `PATCH`, `DELETE`",
            ),
            (
                "get /imports",
                "HTTP method `get` must be uppercase: write `GET`",
            ),
            (
                "GET imports",
                "path `imports` must start with `/`: write `/imports`",
            ),
            (
                "GET /imports/",
                "path `/imports/` must not end with `/`: write `/imports`",
            ),
            ("GET /a//b", "path `/a//b` has an empty segment (`//`)"),
            (
                "GET /prospects/{}",
                "bad path parameter `{}` in `/prospects/{}`: write `{name}`, where `name` is a field of the input",
            ),
            (
                "GET /prospects/{1d}",
                "bad path parameter `{1d}` in `/prospects/{1d}`: write `{name}`, where `name` is a field of the input",
            ),
            (
                "GET /prospects/id{id}",
                "bad path parameter `id{id}` in `/prospects/id{id}`: a parameter is a whole segment, `{name}`",
            ),
            (
                "GET /prospects/{id",
                "bad path parameter `{id` in `/prospects/{id`: a parameter is a whole segment, `{name}`",
            ),
            (
                "GET /prospects/:id",
                "path parameter `:id` in `/prospects/:id` uses the wrong syntax: write `{id}`",
            ),
            (
                "GET /Prospects",
                "path segment `Prospects` in `/Prospects` may only use lowercase letters, digits, `_` and `-` (or be a `{param}`)",
            ),
            (
                "GET /prospects?limit=1",
                "path segment `prospects?limit=1` in `/prospects?limit=1` may only use lowercase letters, digits, `_` and `-` (or be a `{param}`)",
            ),
            (
                "GET /a/{id}/b/{id}",
                "path parameter `{id}` appears twice in `/a/{id}/b/{id}`",
            ),
        ] {
            assert_eq!(parse_route(route), Err(message.to_owned()), "{route}");
        }
    }
}
