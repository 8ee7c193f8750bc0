// Expansion snapshot, checked by `expand::tests`; regenerate with `UPDATE_SNAPSHOTS=1 cargo test -p outreach-macros`.

/// Get the caller's workspace.
pub async fn get_workspace(ctx: Ctx, _input: Empty) -> Result<Workspace, ApiError> {
    workspaces::get(&ctx).await
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
        ::outreach_runtime::__private::assert_input::<Empty>();
        ::outreach_runtime::__private::assert_output::<Workspace>();
        ::outreach_runtime::__private::assert_api_error::<ApiError>();
        ::outreach_runtime::__private::ActionDef {
            name: "get_workspace",
            summary: "Get the caller's workspace.",
            description: "",
            scope: ::outreach_runtime::Scope::Read,
            http: ::core::option::Option::None,
            idempotent: false,
            test_helper: false,
            price: ::core::option::Option::None,
            input_schema: ::outreach_runtime::__private::schema::<Empty>,
            output_schema: ::outreach_runtime::__private::schema::<Workspace>,
            decode: ::outreach_runtime::__private::decode::<Empty>,
            call: |ctx, input, plan| {
                ::std::boxed::Box::pin(async move {
                    let _ = &plan;
                    match get_workspace(
                            ctx,
                            ::outreach_runtime::__private::input::<Empty>(input),
                        )
                        .await
                    {
                        ::core::result::Result::Ok(output) => {
                            ::outreach_runtime::__private::encode::<Workspace>(&output)
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
