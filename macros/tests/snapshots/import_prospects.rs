// Expansion snapshot, checked by `expand::tests`; regenerate with `UPDATE_SNAPSHOTS=1 cargo test -p outreach-macros`.

/// Import prospects from CSV text or JSON rows.
///
/// Rows are deduplicated by profile URL, then email.
/// Costs one credit per row.
pub async fn import_prospects(
    ctx: Ctx,
    input: ImportInput,
    plan: ImportPlan,
) -> Result<ImportOutcome, ApiError> {
    imports::run(ctx, input, plan).await
}
#[doc(hidden)]
const _: () = {
    fn __api_error<E: ::outreach_runtime::__private::IsApiError + 'static>(
        error: E,
    ) -> ::outreach_runtime::ApiError {
        let error: ::std::boxed::Box<dyn ::core::any::Any> = ::std::boxed::Box::new(
            error,
        );
        match error.downcast::<::outreach_runtime::ApiError>() {
            ::core::result::Result::Ok(error) => *error,
            ::core::result::Result::Err(_) => {
                ::core::unreachable!("only `ApiError` implements `IsApiError`")
            }
        }
    }
    const fn __action() -> ::outreach_runtime::__private::ActionDef {
        ::outreach_runtime::__private::assert_input::<ImportInput>();
        ::outreach_runtime::__private::assert_output::<ImportOutcome>();
        ::outreach_runtime::__private::assert_api_error::<ApiError>();
        ::outreach_runtime::__private::ActionDef {
            name: "import_prospects",
            summary: "Import prospects from CSV text or JSON rows.",
            description: "Rows are deduplicated by profile URL, then email.\nCosts one credit per row.",
            scope: ::outreach_runtime::Scope::Write,
            http: ::core::option::Option::Some(::outreach_runtime::__private::HttpRoute {
                method: "POST",
                path: "/imports",
            }),
            idempotent: true,
            test_helper: false,
            price: ::core::option::Option::Some(|ctx, input| ::std::boxed::Box::pin(async move {
                ::outreach_runtime::__private::erase_priced::<
                    ImportPlan,
                >(
                    price_import(
                            ctx,
                            ::outreach_runtime::__private::input_ref::<
                                ImportInput,
                            >(input),
                        )
                        .await,
                )
            })),
            input_schema: ::outreach_runtime::__private::schema::<ImportInput>,
            output_schema: ::outreach_runtime::__private::schema::<ImportOutcome>,
            decode: ::outreach_runtime::__private::decode::<ImportInput>,
            call: |ctx, input, plan| {
                ::std::boxed::Box::pin(async move {
                    let _ = &plan;
                    match import_prospects(
                            ctx,
                            ::outreach_runtime::__private::input::<ImportInput>(input),
                            ::outreach_runtime::__private::plan::<ImportPlan>(plan),
                        )
                        .await
                    {
                        ::core::result::Result::Ok(output) => {
                            ::outreach_runtime::__private::encode::<
                                ImportOutcome,
                            >(&output)
                        }
                        ::core::result::Result::Err(error) => {
                            ::core::result::Result::Err(__api_error::<ApiError>(error))
                        }
                    }
                })
            },
        }
    }
    ::outreach_runtime::__private::inventory::submit! {
        __action()
    }
};
