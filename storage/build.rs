//! The crate is rebuilt when a migration is added or changed:
//! `sqlx::migrate!` embeds the repository's `migrations/` directory, and
//! cargo does not watch it otherwise.

fn main() {
    println!("cargo:rerun-if-changed=../migrations");
}
