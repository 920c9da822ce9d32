//! `rolegate store check`: every row of the store that fails its signature or its schema,
//! by table and id, with the reason. Nothing is changed or deleted. Exit codes: 0 every
//! row reads back, 1 some row was set aside, 2 the store cannot be read at all.

use clap::Subcommand;

use super::desk::{ListFormat, StoreArg, open_existing};
use super::format::OutputFormat;
use super::{EXIT_MISMATCH, EXIT_OK, EXIT_USAGE, out};

/// What to do with the store file.
#[derive(Debug, Subcommand)]
pub enum StoreCommand {
    /// List every row set aside (bad signature, another key, does not read back).
    Check {
        /// Output format.
        #[arg(long, value_enum, default_value_t = OutputFormat::Table)]
        format: OutputFormat,
        /// The store.
        #[command(flatten)]
        store: StoreArg,
    },
}

/// Runs a store subcommand.
pub(crate) fn store(command: &StoreCommand) -> u8 {
    let StoreCommand::Check { format, store } = command;
    let format = match ListFormat::take("store check", *format) {
        Ok(f) => f,
        Err(e) => {
            eprintln!("rolegate: {e}");
            return EXIT_USAGE;
        }
    };
    let bad = match open_existing(&store.path).and_then(|d| d.check().map_err(|e| e.to_string())) {
        Ok(b) => b,
        Err(e) => {
            eprintln!("rolegate: {e}");
            return EXIT_USAGE;
        }
    };
    match format {
        ListFormat::Json => {
            out(&serde_json::to_string_pretty(&bad).unwrap_or_default());
        }
        ListFormat::Table if bad.is_empty() => {
            out(&format!("{}: every row reads back", store.path.display()));
        }
        ListFormat::Table => {
            for b in &bad {
                if !out(&b.to_string()) {
                    break;
                }
            }
        }
    }
    if bad.is_empty() { EXIT_OK } else { EXIT_MISMATCH }
}
