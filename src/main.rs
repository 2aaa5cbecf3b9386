//! The `navd` binary: see `navd --help`.

fn main() -> std::process::ExitCode {
    navd::cli::run()
}
