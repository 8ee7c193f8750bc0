// Expansion snapshot, checked by `expand::tests`; regenerate with `UPDATE_SNAPSHOTS=1 cargo test -p outreach-macros`.

fn get_thing(ctx: Ctx) -> Thing {
    Thing::default()
}
::core::compile_error! {
    "unknown scope `admin`: expected one of `read`, `write`, `send`"
}
::core::compile_error! {
    "path `/things/` must not end with `/`: write `/things`"
}
::core::compile_error! {
    "an action must be an `async fn`: write `async fn get_thing`"
}
::core::compile_error! {
    "an action takes two arguments, the context and its input, e.g. `(ctx: Ctx, input: ImportInput)`, and a priced action a third, its price function's plan; found 1"
}
::core::compile_error! {
    "an action returns `Result<Output, ApiError>`: write `-> Result<Thing, ApiError>`"
}
::core::compile_error! {
    "document the action: the first line of its doc comment is its summary"
}
