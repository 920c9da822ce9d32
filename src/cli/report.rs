//! `rolegate report --out FILE.html [FILES…]`: runs the scenario rows (the bundled tables
//! when no file is given) and the defense matrix (with `--templates`, the template payloads
//! too), and writes one self-contained HTML page ([`rolegate::report::html`]). Exit code 0 when every row matched and every configuration
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

/// Runs everything and writes the page.
pub(crate) async fn run(args: ReportArgs) -> u8 {
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
    if let Err(e) = super::input::output_path(&args.out) {
        eprintln!("rolegate: {e}");
        return EXIT_USAGE;
    }
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
