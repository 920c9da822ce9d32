//! The `rolegate` binary: parses arguments and calls the library.

use std::process::ExitCode;

mod cli;

// Many short runs in flight allocate and free small blocks on every worker thread; mimalloc
// keeps that cheap where the system allocator's shared bins do not (see `rolegate bench`).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    cli::main()
}
