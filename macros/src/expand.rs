//! Code generation: the user's function, unchanged, then one hidden `const _` block that registers
//! it.
//!
//! Everything the registration needs from the user's types is written inside one function body,
//! `__action`, with the type-checking calls spanned to the user's own type tokens. The compiler
//! reports a failed trait bound once per span and predicate within a body, so a wrong input,
//! output or error type is reported once, on the user's line, instead of once per use in separate
//! shims. The shims are closures in that body for the same reason (closures are type-checked with
//! their parent). Every path goes through `::outreach_runtime` (and its hidden `__private`
//! module), so crates that define actions depend on the runtime alone.
//!
//! When the attribute or the signature is wrong, the function is still emitted as written, next to
//! the `compile_error!`s, so the rest of the crate and the editor keep working.

use proc_macro2::{Span, TokenStream};
use quote::{quote, quote_spanned};
use syn::ItemFn;
use syn::spanned::Spanned;

use crate::attr::{self, Args};
use crate::combine;
use crate::doc::{self, Doc};
use crate::signature::{self, Action};

/// Expands `#[action(attr)] item`.
pub fn expand(attr: TokenStream, item: TokenStream) -> TokenStream {
    match parse(attr, &item) {
        Ok((args, doc, action, function)) => generate(&args, &doc, &action, &function),
        Err(error) => {
            let mut tokens = item;
            tokens.extend(error.to_compile_error());
            tokens
        }
    }
}

/// Parses and checks everything, collecting every error before giving up.
fn parse(attr: TokenStream, item: &TokenStream) -> syn::Result<(Args, Doc, Action, ItemFn)> {
    let args = attr::parse(attr);
    let function: ItemFn = match syn::parse2(item.clone()) {
        Ok(function) => function,
        Err(_) => {
            let error = syn::Error::new_spanned(item, "`#[action]` goes on an `async fn`");
            return Err(match args {
                Ok(_) => error,
                Err(args_error) => combine(args_error, error),
            });
        }
    };
    let action = signature::check(&function.sig);
    let doc = doc::parse(&function.attrs, function.sig.ident.span());
    // A priced action receives its price function's plan, and only a priced action has one.
    let action = match (&args, action) {
        (Ok(args), Ok(action)) => match (&args.credits, &action.plan) {
            (Some(price_fn), None) => Err(syn::Error::new_spanned(
                &function.sig.inputs,
                format!(
                    "an action with `credits = {}` takes the plan its price function returns as a third argument: \
                     `(ctx: Ctx, input: {}, plan: YourPlan)`, where the price function returns `Result<Priced<YourPlan>, ApiError>`",
                    quote!(#price_fn).to_string().replace(' ', ""),
                    {
                        let input = &action.input;
                        quote!(#input).to_string().replace(' ', "")
                    }
                ),
            )),
            (None, Some(plan)) => Err(syn::Error::new_spanned(
                plan,
                "only a priced action takes a plan: add `credits = your_price_fn` to `#[action(...)]`, or remove the third argument",
            )),
            _ => Ok(action),
        },
        (_, action) => action,
    };
    match (args, action, doc) {
        (Ok(args), Ok(action), Ok(doc)) => Ok((args, doc, action, function)),
        (args, action, doc) => Err([args.err(), action.err(), doc.err()]
            .into_iter()
            .flatten()
            .reduce(combine)
            .expect("at least one part failed")),
    }
}

fn generate(args: &Args, doc: &Doc, action: &Action, function: &ItemFn) -> TokenStream {
    let rt = quote!(::outreach_runtime);
    let private = quote!(::outreach_runtime::__private);
    let Action {
        ident,
        name,
        ctx: ctx_ty,
        input: in_ty,
        plan: plan_ty,
        output: out_ty,
        error: err_ty,
    } = action;
    let Doc {
        summary,
        description,
    } = doc;

    let scope = syn::Ident::new(args.scope.variant(), Span::call_site());
    let http = match &args.http {
        Some(route) => {
            let (method, path) = (route.method, &route.path);
            quote!(::core::option::Option::Some(#private::HttpRoute { method: #method, path: #path }))
        }
        None => quote!(::core::option::Option::None),
    };
    let idempotent = args.idempotent;
    let test_helper = args.test_helper;

    // Each check is spanned to the user's type, so a failed bound points at it.
    let in_span = in_ty.span();
    let out_span = out_ty.span();
    let err_span = err_ty.span();
    let assert_input = quote_spanned!(in_span=> #private::assert_input::<#in_ty>(););
    let assert_output = quote_spanned!(out_span=> #private::assert_output::<#out_ty>(););
    let assert_api_error = quote_spanned!(err_span=> #private::assert_api_error::<#err_ty>(););
    let input_schema = quote_spanned!(in_span=> #private::schema::<#in_ty>);
    let output_schema = quote_spanned!(out_span=> #private::schema::<#out_ty>);
    let decode = quote_spanned!(in_span=> #private::decode::<#in_ty>);
    // Local variables keep the macro's hygiene wherever they are shown.
    let (input, output, error) = (
        local("input", in_span),
        local("output", out_span),
        local("error", err_span),
    );
    let take_input = quote_spanned!(in_span=> #private::input::<#in_ty>(#input));
    let encode = quote_spanned!(out_span=> #private::encode::<#out_ty>(&#output));
    let api_error = quote_spanned!(err_span=> __api_error::<#err_ty>(#error));
    // A context of the wrong type is a mismatch on the user's `ctx: Type`.
    let ctx = local("ctx", ctx_ty.span());

    let price = match (&args.credits, plan_ty) {
        (Some(price_fn), Some(plan_ty)) => {
            let span = price_fn.span();
            let (ctx, input) = (local("ctx", span), local("input", span));
            let input_ref = quote_spanned!(span=> #private::input_ref::<#in_ty>(#input));
            // A price function of the wrong shape, or whose plan is not the action's third
            // argument, is reported on its name in the attribute.
            let call_price = quote_spanned! {span=>
                ::std::boxed::Box::pin(async move {
                    #private::erase_priced::<#plan_ty>(#price_fn(#ctx, #input_ref).await)
                })
            };
            quote! {
                ::core::option::Option::Some(|ctx, input| #call_price)
            }
        }
        _ => quote!(::core::option::Option::None),
    };
    let plan = local("plan", Span::call_site());
    let take_plan = plan_ty.as_ref().map(|plan_ty| {
        let span = plan_ty.span();
        quote_spanned!(span=> , #private::plan::<#plan_ty>(#plan))
    });

    // A function compiled out must not be registered.
    let cfgs = function
        .attrs
        .iter()
        .filter(|attr| attr.path().is_ident("cfg"));

    quote! {
        #function

        #(#cfgs)*
        #[doc(hidden)]
        const _: () = {
            // `IsApiError` is implemented for `ApiError` alone, so this only ever moves an
            // `ApiError`; the bound is what reports a wrong error type.
            fn __api_error<E: #private::IsApiError + 'static>(error: E) -> #rt::ApiError {
                let error: ::std::boxed::Box<dyn ::core::any::Any> = ::std::boxed::Box::new(error);
                match error.downcast::<#rt::ApiError>() {
                    ::core::result::Result::Ok(error) => *error,
                    ::core::result::Result::Err(_) => ::core::unreachable!("only `ApiError` implements `IsApiError`"),
                }
            }

            const fn __action() -> #private::ActionDef {
                #assert_input
                #assert_output
                #assert_api_error
                #private::ActionDef {
                    name: #name,
                    summary: #summary,
                    description: #description,
                    scope: #rt::Scope::#scope,
                    http: #http,
                    idempotent: #idempotent,
                    test_helper: #test_helper,
                    price: #price,
                    input_schema: #input_schema,
                    output_schema: #output_schema,
                    decode: #decode,
                    call: |ctx, input, #plan| {
                        ::std::boxed::Box::pin(async move {
                            let _ = &#plan;
                            match #ident(#ctx, #take_input #take_plan).await {
                                ::core::result::Result::Ok(output) => #encode,
                                ::core::result::Result::Err(error) => {
                                    ::core::result::Result::Err(#api_error)
                                }
                            }
                        })
                    },
                }
            }

            #private::inventory::submit! { __action() }
        };
    }
}

/// An identifier with the macro's hygiene, shown at `span`.
fn local(name: &str, span: Span) -> syn::Ident {
    syn::Ident::new(name, Span::call_site().located_at(span))
}

#[cfg(test)]
mod tests {
    //! Expansion snapshots: the expansion of a few representative actions, formatted with
    //! prettyplease and compared with golden files in `tests/snapshots/`. A change to the
    //! generated code shows up as a reviewable diff of those files.

    use super::*;
    use std::path::Path;

    const UPDATE: &str = "UPDATE_SNAPSHOTS=1 cargo test -p outreach-macros";

    fn assert_snapshot(name: &str, expansion: TokenStream) {
        let file: syn::File = syn::parse2(expansion).expect("the expansion parses as items");
        let actual = format!(
            "// Expansion snapshot, checked by `expand::tests`; regenerate with `{UPDATE}`.\n\n{}",
            prettyplease::unparse(&file)
        );
        let path = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/snapshots")
            .join(format!("{name}.rs"));
        if std::env::var_os("UPDATE_SNAPSHOTS").is_some_and(|value| value == "1") {
            std::fs::create_dir_all(path.parent().expect("a parent directory"))
                .expect("create snapshot dir");
            std::fs::write(&path, actual).expect("write snapshot");
            return;
        }
        let expected = std::fs::read_to_string(&path)
            .unwrap_or_else(|_| panic!("no snapshot at {}: run `{UPDATE}`", path.display()));
        assert!(
            expected == actual,
            "the expansion of `{name}` differs from {} (- snapshot, + now):\n{}\nIf the change is intended, run `{UPDATE}` and review the diff.",
            path.display(),
            diff(&expected, &actual)
        );
    }

    /// A line diff (longest common subsequence) with two lines of context around each change.
    fn diff(old: &str, new: &str) -> String {
        let (old, new): (Vec<&str>, Vec<&str>) = (old.lines().collect(), new.lines().collect());
        // lcs[i][j]: the length of the longest common subsequence of old[i..] and new[j..].
        let mut lcs = vec![vec![0usize; new.len() + 1]; old.len() + 1];
        for i in (0..old.len()).rev() {
            for j in (0..new.len()).rev() {
                lcs[i][j] = if old[i] == new[j] {
                    lcs[i + 1][j + 1] + 1
                } else {
                    lcs[i + 1][j].max(lcs[i][j + 1])
                };
            }
        }
        let mut lines = Vec::new();
        let (mut i, mut j) = (0, 0);
        while i < old.len() || j < new.len() {
            if i < old.len() && j < new.len() && old[i] == new[j] {
                lines.push((' ', old[i]));
                (i, j) = (i + 1, j + 1);
            } else if i < old.len() && (j == new.len() || lcs[i + 1][j] >= lcs[i][j + 1]) {
                lines.push(('-', old[i]));
                i += 1;
            } else {
                lines.push(('+', new[j]));
                j += 1;
            }
        }
        let near_change = |index: usize| {
            lines[index.saturating_sub(2)..(index + 3).min(lines.len())]
                .iter()
                .any(|(tag, _)| *tag != ' ')
        };
        let mut out = String::new();
        let mut skipped = false;
        for (index, (tag, line)) in lines.iter().enumerate() {
            if near_change(index) {
                out.push_str(&format!("{tag} {line}\n"));
                skipped = false;
            } else if !skipped {
                out.push_str("  ...\n");
                skipped = true;
            }
        }
        out
    }

    #[test]
    fn action_with_every_argument() {
        assert_snapshot(
            "import_prospects",
            expand(
                quote!(
                    scope = "write",
                    credits = price_import,
                    idempotent,
                    http = "POST /imports"
                ),
                quote! {
                    /// Import prospects from CSV text or JSON rows.
                    ///
                    /// Rows are deduplicated by profile URL, then email.
                    /// Costs one credit per row.
                    pub async fn import_prospects(ctx: Ctx, input: ImportInput, plan: ImportPlan) -> Result<ImportOutcome, ApiError> {
                        imports::run(ctx, input, plan).await
                    }
                },
            ),
        );
    }

    #[test]
    fn plain_action() {
        assert_snapshot(
            "get_workspace",
            expand(
                quote!(scope = "read"),
                quote! {
                    /// Get the caller's workspace.
                    pub async fn get_workspace(ctx: Ctx, _input: Empty) -> Result<Workspace, ApiError> {
                        workspaces::get(&ctx).await
                    }
                },
            ),
        );
    }

    #[test]
    fn misuse_keeps_the_function() {
        assert_snapshot(
            "misuse",
            expand(
                quote!(scope = "admin", http = "GET /things/"),
                quote! {
                    fn get_thing(ctx: Ctx) -> Thing {
                        Thing::default()
                    }
                },
            ),
        );
    }

    #[test]
    fn misuse_emits_the_function_unchanged_and_every_error() {
        let item = quote! {
            /// Get it.
            fn get_it(ctx: &Ctx, input: In) -> Out { todo() }
        };
        let expansion = expand(quote!(scope = "root", scope = "read"), item.clone()).to_string();
        assert!(expansion.starts_with(&item.to_string()), "{expansion}");
        for message in [
            "unknown scope `root`",
            "`scope` set multiple times",
            "an action must be an `async fn`",
            "the context is passed by value",
            "an action returns `Result<Output, ApiError>`",
        ] {
            assert!(
                expansion.contains(message),
                "`{message}` missing from {expansion}"
            );
        }
        assert_eq!(expansion.matches("compile_error").count(), 5, "{expansion}");
        assert!(
            !expansion.contains("inventory"),
            "no registration on error: {expansion}"
        );
    }

    #[test]
    fn not_a_function_is_reported_and_kept() {
        let item = quote!(
            pub struct Thing;
        );
        let expansion = expand(quote!(scope = "read"), item.clone()).to_string();
        assert!(expansion.starts_with(&item.to_string()), "{expansion}");
        assert!(
            expansion.contains("`#[action]` goes on an `async fn`"),
            "{expansion}"
        );
    }

    #[test]
    fn registration_follows_the_functions_cfg() {
        let expansion = expand(
            quote!(scope = "read"),
            quote! {
                /// Test only.
                #[cfg(test)]
                async fn get_it(ctx: Ctx, input: In) -> Result<Out, ApiError> { todo() }
            },
        )
        .to_string();
        let cfg = quote!(#[cfg(test)]).to_string();
        assert_eq!(expansion.matches(&cfg).count(), 2, "{expansion}");
        assert!(
            expansion.contains(&format!("{cfg} # [doc (hidden)] const _")),
            "{expansion}"
        );
    }

    #[test]
    fn diff_marks_changed_lines() {
        let old = "a\nb\nc\nd\ne\nf\ng\nh\n";
        let new = "a\nb\nc\nd\nE\nf\ng\nh\n";
        assert_eq!(
            diff(old, new),
            "  ...\n  c\n  d\n- e\n+ E\n  f\n  g\n  ...\n"
        );
    }
}
