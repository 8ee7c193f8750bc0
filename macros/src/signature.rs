//! The shape of an action function: `async fn name(ctx: Ctx, input: In) -> Result<Out, Err>`.
//!
//! Only what a macro can see in the tokens is checked here: `async`, two typed arguments, no
//! generics and no `self`, a return type that is written as `Result<_, _>`, a snake_case name.
//! Whether `In`, `Out` and `Err` are the right kinds of types is left to trait bounds in the
//! expansion, spanned to the user's tokens, because only the compiler can see through aliases and
//! paths: `Result<Out, outreach_runtime::ApiError>` and `Result<Out, ApiError>` are the same type.

use syn::spanned::Spanned;
use syn::{FnArg, GenericArgument, Ident, PathArguments, ReturnType, Signature, Type};

use crate::combine;

/// The longest action name; the runtime enforces the same limit at start-up.
const MAX_NAME_LEN: usize = 64;

/// What the expansion needs from the function's signature.
#[derive(Debug)]
pub struct Action {
    /// The function, as written (possibly a raw identifier).
    pub ident: Ident,
    /// The action's name: the function name without `r#`.
    pub name: String,
    pub ctx: Type,
    pub input: Type,
    /// The third argument of a priced action: the plan its price function made.
    pub plan: Option<Type>,
    pub output: Type,
    pub error: Type,
}

/// Checks the signature, reporting every problem found, not only the first.
pub fn check(sig: &Signature) -> syn::Result<Action> {
    let mut errors = Vec::new();

    if sig.asyncness.is_none() {
        errors.push(syn::Error::new(
            sig.fn_token.span,
            format!(
                "an action must be an `async fn`: write `async fn {}`",
                sig.ident
            ),
        ));
    }
    if let Some(unsafety) = sig.unsafety {
        errors.push(syn::Error::new(
            unsafety.span,
            "an action cannot be `unsafe`",
        ));
    }
    if let Some(abi) = &sig.abi {
        errors.push(syn::Error::new_spanned(
            abi,
            "an action cannot declare an ABI: remove it",
        ));
    }
    if !sig.generics.params.is_empty() || sig.generics.where_clause.is_some() {
        errors.push(syn::Error::new_spanned(
            &sig.generics,
            "an action cannot be generic: its input and output must be concrete types",
        ));
    }

    let name = check_name(&sig.ident)
        .map_err(|error| errors.push(error))
        .ok();
    let arguments = check_arguments(sig)
        .map_err(|error| errors.push(error))
        .ok();
    let result = result_types(sig).map_err(|error| errors.push(error)).ok();

    match (errors.into_iter().reduce(combine), name, arguments, result) {
        (None, Some(name), Some((ctx, input, plan)), Some((output, error))) => Ok(Action {
            ident: sig.ident.clone(),
            name,
            ctx,
            input,
            plan,
            output,
            error,
        }),
        (Some(error), ..) => Err(error),
        (None, ..) => unreachable!("every failed check pushed an error"),
    }
}

fn check_name(ident: &Ident) -> syn::Result<String> {
    let name = syn::ext::IdentExt::unraw(ident).to_string();
    let snake_case = name.starts_with(|c: char| c.is_ascii_lowercase())
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_');
    if !snake_case {
        return Err(syn::Error::new(
            ident.span(),
            format!(
                "the action name `{name}` must be snake_case (`verb_resource`, e.g. `list_prospects`): it is the operation id and the MCP tool name"
            ),
        ));
    }
    if name.len() > MAX_NAME_LEN {
        return Err(syn::Error::new(
            ident.span(),
            format!(
                "the action name `{name}` is {} characters long; shorten it to at most {MAX_NAME_LEN}",
                name.len()
            ),
        ));
    }
    Ok(name)
}

/// The context and input types, and the plan's type when there is a third argument.
fn check_arguments(sig: &Signature) -> syn::Result<(Type, Type, Option<Type>)> {
    if let Some(FnArg::Receiver(receiver)) = sig.inputs.first() {
        return Err(syn::Error::new_spanned(
            receiver,
            "an action is a free function: remove `self` and take `(ctx: Ctx, input: YourInput)`",
        ));
    }
    let typed: Vec<&Type> = sig
        .inputs
        .iter()
        .filter_map(|arg| match arg {
            FnArg::Typed(pat) => Some(&*pat.ty),
            FnArg::Receiver(_) => None,
        })
        .collect();
    let (ctx, input, plan) = match typed.as_slice() {
        [ctx, input] => (ctx, input, None),
        [ctx, input, plan] => (ctx, input, Some(plan)),
        _ => {
            let span = if sig.inputs.is_empty() {
                sig.paren_token.span.join()
            } else {
                sig.inputs.span()
            };
            return Err(syn::Error::new(
                span,
                format!(
                    "an action takes two arguments, the context and its input, e.g. `(ctx: Ctx, input: ImportInput)`, \
                     and a priced action a third, its price function's plan; found {}",
                    typed.len()
                ),
            ));
        }
    };
    let mut errors = Vec::new();
    if let Type::Reference(reference) = ctx {
        errors.push(syn::Error::new_spanned(
            reference,
            "the context is passed by value: write `ctx: Ctx`",
        ));
    }
    match input {
        Type::Reference(reference) => errors.push(syn::Error::new_spanned(
            reference,
            format!(
                "the input is passed by value: write `input: {}`",
                code(&reference.elem)
            ),
        )),
        Type::ImplTrait(_) | Type::Infer(_) => errors.push(syn::Error::new_spanned(
            input,
            "the input must be a concrete type that derives `Deserialize` and `JsonSchema`",
        )),
        _ => {}
    }
    if let Some(Type::Reference(reference)) = plan {
        errors.push(syn::Error::new_spanned(
            reference,
            format!(
                "the plan is passed by value: write `plan: {}`",
                code(&reference.elem)
            ),
        ));
    }
    match errors.into_iter().reduce(combine) {
        Some(error) => Err(error),
        None => Ok((
            (*ctx).clone(),
            (*input).clone(),
            plan.map(|plan| (*plan).clone()),
        )),
    }
}

/// `Out` and `Err` of a return type written as `Result<Out, Err>`.
fn result_types(sig: &Signature) -> syn::Result<(Type, Type)> {
    const EXPECTED: &str = "an action returns `Result<Output, ApiError>`";
    let ty = match &sig.output {
        ReturnType::Type(_, ty) => ty,
        ReturnType::Default => {
            return Err(syn::Error::new(
                sig.paren_token.span.close(),
                format!("{EXPECTED}: add `-> Result<YourOutput, ApiError>`"),
            ));
        }
    };
    let segment = match &**ty {
        Type::Path(path) if path.qself.is_none() => path.path.segments.last(),
        _ => None,
    };
    let Some(segment) = segment.filter(|segment| segment.ident == "Result") else {
        return Err(syn::Error::new_spanned(
            ty,
            format!("{EXPECTED}: write `-> Result<{}, ApiError>`", code(ty)),
        ));
    };
    let types: Vec<&Type> = match &segment.arguments {
        PathArguments::AngleBracketed(args) => args
            .args
            .iter()
            .filter_map(|arg| match arg {
                GenericArgument::Type(ty) => Some(ty),
                _ => None,
            })
            .collect(),
        _ => Vec::new(),
    };
    match types.as_slice() {
        [output, error] => Ok(((*output).clone(), (*error).clone())),
        [output] => Err(syn::Error::new_spanned(
            ty,
            format!(
                "{EXPECTED}; write both types out: `Result<{}, ApiError>`",
                code(output)
            ),
        )),
        _ => Err(syn::Error::new_spanned(ty, EXPECTED)),
    }
}

/// A type as a user would write it in a suggestion: `Vec<u8>`, not `Vec < u8 >`.
fn code(ty: &Type) -> String {
    let text = quote::ToTokens::to_token_stream(ty).to_string();
    [
        (" <", "<"),
        ("< ", "<"),
        (" >", ">"),
        (" :: ", "::"),
        (":: ", "::"),
        (" ,", ","),
        ("& ", "&"),
    ]
    .iter()
    .fold(text, |text, (from, to)| text.replace(from, to))
}

#[cfg(test)]
mod tests {
    use super::*;
    use quote::{ToTokens, quote};

    fn check_fn(tokens: proc_macro2::TokenStream) -> syn::Result<Action> {
        let item: syn::ItemFn = syn::parse2(tokens).expect("a function");
        check(&item.sig)
    }

    fn messages(tokens: proc_macro2::TokenStream) -> Vec<String> {
        match check_fn(tokens) {
            Ok(action) => panic!("expected an error, got {action:?}"),
            Err(error) => error.into_iter().map(|e| e.to_string()).collect(),
        }
    }

    fn text(ty: &Type) -> String {
        ty.to_token_stream().to_string().replace(' ', "")
    }

    #[test]
    fn types_are_extracted() {
        let action = check_fn(quote! {
            pub async fn import_prospects(ctx: Ctx, input: ImportInput) -> Result<ImportOutcome, ApiError> {}
        })
        .unwrap();
        assert_eq!(action.name, "import_prospects");
        assert_eq!(text(&action.ctx), "Ctx");
        assert_eq!(text(&action.input), "ImportInput");
        assert_eq!(text(&action.output), "ImportOutcome");
        assert_eq!(text(&action.error), "ApiError");
    }

    #[test]
    fn qualified_result_and_patterns_are_accepted() {
        let action = check_fn(quote! {
            async fn r#move(_: outreach_runtime::Ctx, Input { id }: Input) -> std::result::Result<Vec<u8>, outreach_runtime::ApiError> {}
        })
        .unwrap();
        assert_eq!(action.name, "move");
        assert_eq!(text(&action.output), "Vec<u8>");
        assert_eq!(text(&action.error), "outreach_runtime::ApiError");
    }

    #[test]
    fn non_async_is_rejected() {
        assert_eq!(
            messages(quote!(
                fn get_it(ctx: Ctx, input: In) -> Result<Out, ApiError> {}
            )),
            ["an action must be an `async fn`: write `async fn get_it`"]
        );
    }

    #[test]
    fn return_type_must_be_a_result() {
        assert_eq!(
            messages(quote!(
                async fn get_it(ctx: Ctx, input: In) -> Out {}
            )),
            ["an action returns `Result<Output, ApiError>`: write `-> Result<Out, ApiError>`"]
        );
        assert_eq!(
            messages(quote!(
                async fn get_it(ctx: Ctx, input: In) {}
            )),
            ["an action returns `Result<Output, ApiError>`: add `-> Result<YourOutput, ApiError>`"]
        );
        assert_eq!(
            messages(quote!(
                async fn get_it(ctx: Ctx, input: In) -> anyhow::Result<Out> {}
            )),
            [
                "an action returns `Result<Output, ApiError>`; write both types out: `Result<Out, ApiError>`"
            ]
        );
    }

    #[test]
    fn suggestions_print_types_as_written() {
        let ty: Type = syn::parse_quote!(std::collections::HashMap<String, Vec<&'static str>>);
        assert_eq!(
            code(&ty),
            "std::collections::HashMap<String, Vec<&'static str>>"
        );
    }

    #[test]
    fn argument_count_and_self_are_checked() {
        assert_eq!(
            messages(quote!(
                async fn get_it(ctx: Ctx) -> Result<Out, ApiError> {}
            )),
            [
                "an action takes two arguments, the context and its input, e.g. `(ctx: Ctx, input: ImportInput)`, \
                 and a priced action a third, its price function's plan; found 1"
            ]
        );
        assert_eq!(
            messages(quote!(
                async fn get_it(&self, input: In) -> Result<Out, ApiError> {}
            )),
            ["an action is a free function: remove `self` and take `(ctx: Ctx, input: YourInput)`"]
        );
    }

    #[test]
    fn a_third_argument_is_the_plan_taken_by_value() {
        let sig: Signature = syn::parse_quote!(
            async fn import_it(ctx: Ctx, input: In, plan: Plan) -> Result<Out, ApiError>
        );
        let action = check(&sig).expect("three arguments");
        assert!(action.plan.is_some());
        assert_eq!(
            messages(quote!(
                async fn import_it(ctx: Ctx, input: In, plan: &Plan) -> Result<Out, ApiError> {}
            )),
            ["the plan is passed by value: write `plan: Plan`"]
        );
    }

    #[test]
    fn arguments_are_taken_by_value() {
        assert_eq!(
            messages(quote!(
                async fn get_it(ctx: &Ctx, input: &In) -> Result<Out, ApiError> {}
            )),
            [
                "the context is passed by value: write `ctx: Ctx`",
                "the input is passed by value: write `input: In`"
            ]
        );
    }

    #[test]
    fn generics_are_rejected() {
        assert_eq!(
            messages(quote!(
                async fn get_it<T>(ctx: Ctx, input: T) -> Result<Out, ApiError> {}
            )),
            ["an action cannot be generic: its input and output must be concrete types"]
        );
    }

    #[test]
    fn names_are_snake_case_and_short() {
        assert_eq!(
            messages(quote!(
                async fn GetIt(ctx: Ctx, input: In) -> Result<Out, ApiError> {}
            )),
            [
                "the action name `GetIt` must be snake_case (`verb_resource`, e.g. `list_prospects`): it is the operation id and the MCP tool name"
            ]
        );
        let long = Ident::new(&"a".repeat(65), proc_macro2::Span::call_site());
        assert_eq!(
            messages(quote!(async fn #long(ctx: Ctx, input: In) -> Result<Out, ApiError> {})),
            [format!(
                "the action name `{long}` is 65 characters long; shorten it to at most 64"
            )]
        );
    }

    #[test]
    fn all_problems_are_reported_together() {
        assert_eq!(
            messages(quote!(
                fn get_it<T>(ctx: Ctx) -> T {}
            ))
            .len(),
            4,
            "not async, generic, one argument, not a Result"
        );
    }
}
