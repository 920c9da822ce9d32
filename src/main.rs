//! The `rolegate` binary: parses arguments and calls the library.

use std::process::ExitCode;

fn main() -> ExitCode {
    rolegate::cli::main()
}
