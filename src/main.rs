//! The `navd` binary: see `navd --help`.

fn main() -> std::process::ExitCode {
    limit_malloc_arenas();
    navd::cli::run()
}

/// glibc gives every thread that allocates its own malloc arena (up to
/// 8 × cores); with tokio's and librdkafka's threads that fragments memory
/// into tens of MB of RSS that is never returned. Two arenas cost no
/// measurable throughput here and keep the process lean. `MALLOC_ARENA_MAX`
/// in the environment still wins, since glibc reads it at start.
fn limit_malloc_arenas() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    if std::env::var_os("MALLOC_ARENA_MAX").is_none() {
        // SAFETY: mallopt only tunes the allocator; called before any thread
        // is started.
        unsafe {
            libc::mallopt(libc::M_ARENA_MAX, 2);
        }
    }
}
