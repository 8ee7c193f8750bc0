//! The action's documentation, read from its doc comment at compile time.
//!
//! The doc comment is the API documentation (OpenAPI summary and description, MCP tool
//! description), so it is read here and stored as two `&'static str`s rather than kept in a
//! separate attribute that could drift from what rustdoc shows. The summary is the first paragraph
//! (normally one line, as rustdoc's own summary is); the description is everything after it, with
//! the common indentation removed and paragraphs kept. An action without a doc comment does not
//! compile: an undocumented operation is a hole in the public API.

use proc_macro2::Span;
use syn::{Attribute, Expr, ExprLit, Lit, Meta};

use crate::combine;

/// The summary and description of an action.
#[derive(Debug, PartialEq, Eq)]
pub struct Doc {
    pub summary: String,
    pub description: String,
}

const MISSING: &str = "document the action: the first line of its doc comment is its summary";

/// Reads the `///` lines (`#[doc = "..."]` attributes); `missing` is where to point when there
/// are none.
pub fn parse(attrs: &[Attribute], missing: Span) -> syn::Result<Doc> {
    let mut lines = Vec::new();
    let mut errors = Vec::new();
    for attr in attrs.iter().filter(|attr| attr.path().is_ident("doc")) {
        // `#[doc(hidden)]` and friends carry no text.
        if let Meta::NameValue(nv) = &attr.meta {
            if let Expr::Lit(ExprLit {
                lit: Lit::Str(text),
                ..
            }) = &nv.value
            {
                // Not `lines()`: an empty `///` line is an empty string, and it separates paragraphs.
                lines.extend(text.value().split('\n').map(str::to_owned));
            } else {
                errors.push(syn::Error::new_spanned(
                    attr,
                    "`#[action]` reads the doc comment at compile time: write it as `///` lines",
                ));
            }
        }
    }
    if let Some(error) = errors.into_iter().reduce(combine) {
        return Err(error);
    }
    split(&lines).ok_or_else(|| syn::Error::new(missing, MISSING))
}

/// Splits doc lines into summary and description; `None` when there is no text at all.
fn split(lines: &[String]) -> Option<Doc> {
    let mut lines = lines
        .iter()
        .map(|line| line.trim_end())
        .skip_while(|line| line.trim().is_empty());

    let mut summary = Vec::new();
    for line in lines.by_ref() {
        if line.trim().is_empty() {
            break;
        }
        summary.push(line.trim());
    }
    if summary.is_empty() {
        return None;
    }

    let mut rest: Vec<&str> = lines.skip_while(|line| line.trim().is_empty()).collect();
    while rest.last().is_some_and(|line| line.trim().is_empty()) {
        rest.pop();
    }
    let indent = rest
        .iter()
        .filter(|line| !line.trim().is_empty())
        .map(|line| line.len() - line.trim_start().len())
        .min()
        .unwrap_or(0);
    let description: Vec<&str> = rest
        .iter()
        .map(|line| {
            if line.trim().is_empty() {
                ""
            } else {
                &line[indent..]
            }
        })
        .collect();

    Some(Doc {
        summary: summary.join(" "),
        description: description.join("\n"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use quote::quote;

    fn doc(tokens: proc_macro2::TokenStream) -> syn::Result<Doc> {
        let item: syn::ItemFn = syn::parse2(tokens).expect("a function");
        parse(&item.attrs, Span::call_site())
    }

    #[test]
    fn summary_only() {
        let parsed = doc(quote! {
            /// Get the workspace.
            fn f() {}
        });
        assert_eq!(
            parsed.unwrap(),
            Doc {
                summary: "Get the workspace.".into(),
                description: String::new()
            }
        );
    }

    #[test]
    fn description_keeps_paragraphs_and_relative_indentation() {
        let parsed = doc(quote! {
            ///
            /// Import prospects from CSV text or JSON rows.
            ///
            /// Rows are deduplicated by profile URL, then email.
            /// Costs one credit per row.
            ///
            /// Example:
            ///
            ///     name,email
            ///
            #[allow(clippy::too_many_lines)]
            fn f() {}
        });
        assert_eq!(
            parsed.unwrap(),
            Doc {
                summary: "Import prospects from CSV text or JSON rows.".into(),
                description: "Rows are deduplicated by profile URL, then email.\nCosts one credit per row.\n\nExample:\n\n    name,email".into(),
            }
        );
    }

    #[test]
    fn a_wrapped_summary_is_joined() {
        let parsed = doc(quote! {
            /// Score prospects against the targeting profile
            /// and store their tiers.
            ///
            /// More.
            fn f() {}
        });
        assert_eq!(
            parsed.unwrap(),
            Doc {
                summary: "Score prospects against the targeting profile and store their tiers."
                    .into(),
                description: "More.".into(),
            }
        );
    }

    #[test]
    fn block_doc_comments_are_read() {
        let parsed = doc(quote! {
            #[doc = "\n  List prospects.\n\n  Newest first.\n  "]
            fn f() {}
        });
        assert_eq!(
            parsed.unwrap(),
            Doc {
                summary: "List prospects.".into(),
                description: "Newest first.".into()
            }
        );
    }

    #[test]
    fn missing_or_empty_doc_is_an_error() {
        for tokens in [
            quote!(
                fn f() {}
            ),
            quote!(
                #[doc = "   "]
                #[doc(hidden)]
                fn f() {}
            ),
        ] {
            assert_eq!(doc(tokens).unwrap_err().to_string(), MISSING);
        }
    }

    #[test]
    fn computed_doc_is_an_error() {
        assert_eq!(
            doc(quote!(
                #[doc = include_str!("x.md")]
                fn f() {}
            ))
            .unwrap_err()
            .to_string(),
            "`#[action]` reads the doc comment at compile time: write it as `///` lines"
        );
    }
}
