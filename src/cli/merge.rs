//! `rolegate merge FILES…`: the `--out` files of an experiment's shards (or of any runs of
//! it) combined into the tables, JSON or JUnit one run prints, the figures per template
//! included (counted again from the cells, which name their template). Every file must name the
//! same experiment; a cell in two files, a cell in none, or a file of another experiment
//! is refused by name (exit 2).

use clap::Args;
use std::path::PathBuf;

use super::experiment::{MAX_RESULTS_BYTES, print_matrix, print_rows};
use super::{EXIT_USAGE, OutputFormat};
use rolegate::suite::{matrix_of_cells, merge, rows_of_cells};

/// The arguments of `merge`.
#[derive(Debug, Args)]
pub struct MergeArgs {
    /// The results files (`suite --out`), one per shard.
    #[arg(required = true)]
    pub files: Vec<PathBuf>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = OutputFormat::Table)]
    pub format: OutputFormat,
}

/// Merges and prints; the exit code is the one run's (0, or 1 when a row did not match or
/// a configuration that must hold did not), 2 when the files do not merge.
pub(crate) fn run(args: &MergeArgs) -> u8 {
    let (config, cells) = match merge(&args.files, MAX_RESULTS_BYTES) {
        Ok(m) => m,
        Err(e) => {
            eprintln!("rolegate: {e}");
            return EXIT_USAGE;
        }
    };
    if config.kind == "suite" {
        if args.format == OutputFormat::Junit {
            eprintln!("rolegate: merge of scenario rows' results takes --format table, json, jsonl or csv, not junit");
            return EXIT_USAGE;
        }
        return match rows_of_cells(&config, &cells) {
            Ok(rows) => print_rows(&rows, args.format, config.intervals),
            Err(e) => {
                eprintln!("rolegate: {e}");
                EXIT_USAGE
            }
        };
    }
    match matrix_of_cells(&config, &cells) {
        Ok(m) => print_matrix(&m, args.format, config.repeat, None),
        Err(e) => {
            eprintln!("rolegate: {e}");
            EXIT_USAGE
        }
    }
}
