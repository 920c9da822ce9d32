//! `rolegate merge FILES…`: the `--out` files of an experiment's shards (or of any runs of
//! it) combined into the tables, JSON or JUnit one run prints, the figures per template
//! included (counted again from the cells, which name their template). Every file must name the
//! same experiment; a cell in two files, a cell in none, or a file of another experiment
//! is refused by name (exit 2).

use clap::Args;
use std::path::PathBuf;

use super::experiment::{MAX_RESULTS_BYTES, print_matrix, print_rows};
use super::{EXIT_USAGE, OutputFormat};
use rolegate::suite::{ExperimentConfig, matrix_of_cells, merge, paired_lines, paired_single_vs_multi, rows_of_cells};

/// The arguments of `merge`.
#[derive(Debug, Args)]
pub struct MergeArgs {
    /// The results files (`suite --out`), one per shard.
    #[arg(required = true)]
    pub files: Vec<PathBuf>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = OutputFormat::Table)]
    pub format: OutputFormat,
    /// Print instead the paired table of a matrix: every three-role configuration against
    /// the single agent with the same scopes, approval and ifc, on the same (task, payload,
    /// repetition), with McNemar's exact test (`--format json` for the rows as JSON).
    #[arg(long)]
    pub paired: bool,
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
    if args.paired {
        return print_paired(&config, &cells, args.format);
    }
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

/// The paired table of a matrix's cells (exit 0), or why there is none (exit 2).
fn print_paired(
    config: &ExperimentConfig,
    cells: &std::collections::BTreeMap<String, serde_json::Value>,
    format: OutputFormat,
) -> u8 {
    if config.kind == "suite" {
        eprintln!("rolegate: --paired pairs the matrix's configurations; these are scenario rows' results");
        return EXIT_USAGE;
    }
    let rows = match matrix_of_cells(config, cells) {
        Ok(m) => paired_single_vs_multi(&m),
        Err(e) => {
            eprintln!("rolegate: {e}");
            return EXIT_USAGE;
        }
    };
    match format {
        OutputFormat::Table => paired_lines(&rows).iter().for_each(|l| println!("{l}")),
        OutputFormat::Json => println!("{}", serde_json::to_string_pretty(&rows).unwrap_or_default()),
        other => {
            eprintln!("rolegate: --paired takes --format table or json, not {other:?}");
            return EXIT_USAGE;
        }
    }
    0
}
