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

use crate::attr::{self, Args, combine};
use crate::doc::{self, Doc};
use crate::signature::{self, Action};

/// Expands `#[action(attr)] item`.
pub fn expand(attr: TokenStream, item: TokenStream) -> TokenStream {
    match parse(attr, item.clone()) {
        Ok((args, doc, action, function)) => generate(&args, &doc, &action, &function),
        Err(error) => {
            let errors = error.to_compile_error();
            quote! {
                #item
                #errors
            }
        }
    }
}

/// Parses and checks everything, collecting every error before giving up.
fn parse(attr: TokenStream, item: TokenStream) -> syn::Result<(Args, Doc, Action, ItemFn)> {
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
    let Action { ident, name, ctx: ctx_ty, input: in_ty, output: out_ty, error: err_ty } = action;
    let Doc { summary, description } = doc;

    let scope = syn::Ident::new(args.scope.variant(), Span::call_site());
    let http = match &args.http {
        Some(route) => {
            let (method, path) = (route.method, &route.path);
            quote!(::core::option::Option::Some(#private::HttpRoute { method: #method, path: #path }))
        }
        None => quote!(::core::option::Option::None),
    };
    let idempotent = args.idempotent;

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
    let (input, output, error) = (local("input", in_span), local("output", out_span), local("error", err_span));
    let take_input = quote_spanned!(in_span=> #private::input::<#in_ty>(#input));
    let encode = quote_spanned!(out_span=> #private::encode::<#out_ty>(&#output));
    let api_error = quote_spanned!(err_span=> __api_error::<#err_ty>(#error));
    // A context of the wrong type is a mismatch on the user's `ctx: Type`.
    let ctx = local("ctx", ctx_ty.span());

    let price = match &args.credits {
        Some(price_fn) => {
            let input_ref = quote_spanned!(in_span=> #private::input_ref::<#in_ty>(#input));
            let ctx = local("ctx", price_fn.span());
            // A price function of the wrong shape is reported on its name in the attribute.
            let call_price = quote_spanned! {price_fn.span()=>
                ::std::boxed::Box::pin(#price_fn(#ctx, #input_ref))
            };
            quote! {
                ::core::option::Option::Some(|ctx, input| #call_price)
            }
        }
        None => quote!(::core::option::Option::None),
    };

    quote! {
        #function

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
                    price: #price,
                    input_schema: #input_schema,
                    output_schema: #output_schema,
                    decode: #decode,
                    call: |ctx, input| {
                        ::std::boxed::Box::pin(async move {
                            match #ident(#ctx, #take_input).await {
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
