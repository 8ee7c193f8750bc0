//! Rebuild when a migration is added: `sqlx::migrate!` embeds the folders at compile time, but
//! on stable Rust it cannot tell cargo to watch them.

fn main() {
    println!("cargo:rerun-if-changed=../migrations");
}
