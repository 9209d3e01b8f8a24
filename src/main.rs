//! The `sim` binary: a thin entry that hands over to `sim::cli`.

fn main() -> std::process::ExitCode {
    sim::cli::main()
}
