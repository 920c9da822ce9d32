//! `rolegate report --out FILE.html [FILES…]`: runs the scenario rows (the bundled tables
//! when no file is given) and the defense matrix (with `--templates`, the template payloads
//! too), and writes one self-contained HTML page ([`rolegate::report::html`]). Given
//! results files (`suite --out`, shards of one experiment together, as `merge` takes
//! them), it runs nothing and shows what they hold: the experiment, its models and their
//! settings, its data by digest, and the tables `merge` prints. Exit code 0 when every row matched and every configuration
//! that must stop all effects did, 1 otherwise (the page is written either way), 2 for
//! unusable input or a file that cannot be written.

use clap::Args;
use std::path::PathBuf;

use super::suite::{load_all, matrix_spec, results};
use super::{EXIT_MISMATCH, EXIT_OK, EXIT_USAGE, ModelArgs};
use rolegate::suite::run_matrix;

/// The arguments of `report`.
#[derive(Debug, Args)]
pub struct ReportArgs {
    /// Where to write the page.
    #[arg(long, value_name = "FILE.html")]
    pub out: PathBuf,
    /// Scenario files (JSON Lines; default: the bundled tables).
    pub files: Vec<PathBuf>,
    /// The attack catalog (default: the bundled data/attacks.jsonl).
    #[arg(long, value_name = "FILE")]
    pub attacks: Option<PathBuf>,
    /// The benign tasks of the matrix (default: the bundled data/benign_tasks.jsonl).
    #[arg(long, value_name = "FILE")]
    pub tasks: Option<PathBuf>,
    /// Show e-mail addresses in the payload texts and the calls they ask for (redacted by
    /// default).
    #[arg(long)]
    pub show_addresses: bool,
    /// Add AgentDojo-style template payloads to the matrix, as `suite --matrix --templates`
    /// does (`all` or a comma-separated list of important_instructions, tool_knowledge,
    /// ignore_previous, injecagent, direct); the page then shows the figures per template
    /// and names each cell's template.
    #[arg(long, value_name = "LIST")]
    pub templates: Option<String>,
}

/// True when `path` starts with a results file's header (`suite --out`, `merge`'s input).
fn is_results_file(path: &std::path::Path) -> bool {
    use std::io::{BufRead, Read};
    let Ok(file) = std::fs::File::open(path) else { return false };
    let mut first = String::new();
    // a header line is short; a longer first line is no header
    let _ = std::io::BufReader::new(file.take(64 * 1024)).read_line(&mut first);
    serde_json::from_str::<serde_json::Value>(&first).is_ok_and(|v| v.get("rolegate_results").is_some())
}

/// The page of results files: merged as `merge` merges them (shards given together), the
/// experiment's header and the tables `merge` prints.
fn results_report(args: &ReportArgs) -> u8 {
    use rolegate::suite::{matrix_of_cells, merge, rows_of_cells, template_figures};
    let (config, cells) = match merge(&args.files, super::experiment::MAX_RESULTS_BYTES) {
        Ok(m) => m,
        Err(e) => {
            eprintln!("rolegate: {e}");
            return EXIT_USAGE;
        }
    };
    let figures = if config.kind == "suite" {
        rows_of_cells(&config, &cells).map(|rows| {
            let matching = rows.iter().filter(|(_, r)| r.matches).count();
            let mut lines: Vec<String> = rows.iter().map(|(_, r)| r.table_line.clone()).collect();
            lines.push(format!("{matching} of {} row runs match their expectation", rows.len()));
            (lines, matching == rows.len())
        })
    } else {
        matrix_of_cells(&config, &cells).map(|m| {
            let mut lines = m.table_lines();
            lines.extend(template_figures(&m).iter().map(|f| f.line()));
            (lines, m.holds())
        })
    };
    let (lines, ok) = match figures {
        Ok(f) => f,
        Err(e) => {
            eprintln!("rolegate: {e}");
            return EXIT_USAGE;
        }
    };
    if let Err(e) = std::fs::write(&args.out, rolegate::report::results_page(&config, &lines)) {
        eprintln!("rolegate: {}: {e}", args.out.display());
        return EXIT_USAGE;
    }
    if ok { EXIT_OK } else { EXIT_MISMATCH }
}

/// Runs everything and writes the page; results files (`suite --out`, shards) are shown
/// as what they hold instead.
pub(crate) async fn run(args: ReportArgs) -> u8 {
    if let Err(e) = super::input::output_path(&args.out) {
        eprintln!("rolegate: {e}");
        return EXIT_USAGE;
    }
    if args.files.first().is_some_and(|f| is_results_file(f)) {
        return results_report(&args);
    }
    let page = async {
        let loaded = load_all(
            &args.files,
            args.attacks.as_deref(),
            None,
            &super::RoleModelArgs::default(),
            &ModelArgs::default(),
        )?;
        let env = loaded.env.clone();
        let menv = loaded.menv.clone();
        let contexts: Vec<_> = loaded.rows.iter().map(rolegate::report::RunContext::of).collect();
        let opts = rolegate::report::ReportOptions { show_addresses: args.show_addresses };
        let mut spec = matrix_spec(args.tasks.as_deref(), args.attacks.as_deref(), None)?;
        let made = super::experiment::template_payloads(args.templates.as_deref(), &spec.attacks)?;
        if !made.is_empty() {
            spec.attacks = spec.attacks.iter().cloned().chain(made).collect();
        }
        let rows = results(loaded, 64).await?;
        let matrix = run_matrix(&spec, &env).await.map_err(|e| e.to_string())?;
        let ok = rows.iter().all(|r| r.matches()) && matrix.holds();
        let cells =
            rolegate::report::cells_section(&matrix, &spec, &env, &menv, &opts).await.map_err(|e| e.to_string())?;
        Ok::<_, String>((rolegate::report::html_with(&rows, &contexts, &matrix, &opts, &cells), ok))
    };
    let (html, ok) = match page.await {
        Ok(p) => p,
        Err(e) => {
            eprintln!("rolegate: {e}");
            return EXIT_USAGE;
        }
    };
    if let Err(e) = std::fs::write(&args.out, html) {
        eprintln!("rolegate: {}: {e}", args.out.display());
        return EXIT_USAGE;
    }
    if ok { EXIT_OK } else { EXIT_MISMATCH }
}
