//! `suite` as an experiment: the matrix (with the compromised fakes or a model deciding),
//! or the scenario rows with `--repeat`, `--out`, `--force` or `--shard`; and the tables
//! both print, shared with `merge` so that a merged set of shards prints what one run does.

use std::collections::BTreeMap;
use std::sync::Arc;

use super::suite::{Models, SuiteArgs, matrix_spec, model_setup};
use super::{EXIT_MISMATCH, EXIT_OK, EXIT_USAGE, OutputFormat, out};
use rolegate::eval::AnyRow;
use rolegate::lab::{Attack, DeciderSpec, TemplateName};
use rolegate::multi::MultiEnv;
use rolegate::multi::RoleSetup;
use rolegate::report::junit;
use rolegate::suite::{
    ExperimentConfig, ExperimentTable, MAX_CELLS, MAX_REPEAT, Matrix, MatrixModels, MatrixPlan, RESULTS_VERSION,
    ResultsFile, ResultsHeader, RowsPlan, Shard, StoredRow, matrix_experiment, rows_experiment, run_matrix_plan,
    run_rows_plan, sha256_hex, wilson,
};
use rolegate::suite::{TemplateFigures, template_figures};

/// The crash-test variable (as the store's): `cell:N` aborts the process right after the
/// Nth cell line it appends. Never set it in a deployment.
const CRASH_AT_ENV: &str = "ROLEGATE_TEST_CRASH_AT";

/// The largest results file read back (256 MiB).
pub(crate) const MAX_RESULTS_BYTES: u64 = 256 << 20;

/// The shard of `--shard`, reading `env/N` from the environment.
fn shard(arg: Option<&str>) -> Result<Option<Shard>, String> {
    arg.map(|s| Shard::parse(s, &|k| std::env::var(k).ok())).transpose().map_err(|e| e.to_string())
}

/// The `--model` values of the run, by who they are for (what a results header records).
fn models_named(a: &SuiteArgs<'_>) -> BTreeMap<String, String> {
    let mut m = BTreeMap::new();
    let r = a.role_models;
    let named = [
        ("model", a.model),
        ("planner", r.planner_model.as_deref()),
        ("researcher", r.researcher_model.as_deref()),
        ("reviewer", r.reviewer_model.as_deref()),
    ];
    for (who, model) in named {
        if let Some(model) = model {
            m.insert(who.to_string(), model.to_string());
        }
    }
    m
}

/// What each HTTP model of the run is asked with, by who it is for (`model`, `planner`, …):
/// tool choice, output allowance, temperature and seed change what a model answers, so a
/// results file records them and a resume with other values is refused.
fn model_settings(decider: Option<&DeciderSpec>, roles: Option<&RoleSetup>) -> BTreeMap<String, String> {
    let mut m = BTreeMap::new();
    let single = match decider {
        Some(DeciderSpec::Http(cfg)) => Some(cfg),
        _ => None,
    };
    let roles = roles.map(|r| [("planner", &r.planner), ("researcher", &r.researcher), ("reviewer", &r.reviewer)]);
    let all = std::iter::once(("model", single)).chain(roles.into_iter().flatten().map(|(who, c)| (who, c.as_ref())));
    for (who, cfg) in all {
        if let Some(cfg) = cfg {
            let e = &cfg.endpoint;
            let temperature = e.temperature.map_or("-".to_string(), |t| t.get().to_string());
            let seed = e.seed.map_or("-".to_string(), |s| s.to_string());
            m.insert(
                format!("{who}.settings"),
                format!(
                    "tool_choice={} max_tokens={} temperature={temperature} seed={seed}",
                    e.tool_choice.as_str(),
                    cfg.max_tokens
                ),
            );
        }
    }
    m
}

/// The cells a results file already holds, by id.
type Done = BTreeMap<String, serde_json::Value>;

/// The tool mode of the run's HTTP models (what a results header records beside the
/// model names: it changes what a model is sent).
fn tool_mode(decider: Option<&DeciderSpec>, roles: Option<&RoleSetup>) -> Option<&'static str> {
    let single = match decider {
        Some(DeciderSpec::Http(cfg)) => Some(cfg),
        _ => None,
    };
    let role = roles.and_then(|r| r.planner.as_ref().or(r.researcher.as_ref()).or(r.reviewer.as_ref()));
    single.or(role).map(|cfg| cfg.endpoint.tool_mode.as_str())
}

/// Opens `--out` for `config` (with `shard`), or `None` without `--out`.
fn open_out(
    a: &SuiteArgs<'_>,
    config: ExperimentConfig,
    shard: Option<Shard>,
) -> Result<(Option<Arc<ResultsFile>>, Done), String> {
    if config.cell_count().is_none_or(|n| n > MAX_CELLS) {
        return Err(format!("the experiment has more than {MAX_CELLS} cells; use fewer repetitions or tasks"));
    }
    let Some(path) = a.out else {
        return Ok((None, BTreeMap::new()));
    };
    super::input::output_path(path)?;
    let header = ResultsHeader { rolegate_results: RESULTS_VERSION, config, shard };
    let (mut file, done) = ResultsFile::open(path, &header, a.force, MAX_RESULTS_BYTES).map_err(|e| e.to_string())?;
    // crash tests only: `ROLEGATE_TEST_CRASH_AT=cell:N` aborts right after the Nth line
    let crash = std::env::var(CRASH_AT_ENV).ok();
    if let Some(n) = crash.as_deref().and_then(|v| v.strip_prefix("cell:")).and_then(|n| n.parse().ok()) {
        file = file.crash_after(n);
    }
    Ok((Some(Arc::new(file)), done))
}

/// Checks the experiment flags that do not depend on the data.
fn check_flags(a: &SuiteArgs<'_>) -> Result<Option<Shard>, String> {
    if a.repeat.is_some_and(|r| r == 0 || r > MAX_REPEAT) {
        return Err(format!("--repeat takes 1 to {MAX_REPEAT}"));
    }
    let shard = shard(a.shard)?;
    if shard.is_some() && a.out.is_none() {
        return Err("--shard needs --out FILE: the shards' files are what `rolegate merge` combines".into());
    }
    if a.force && a.out.is_none() {
        return Err("--force starts an --out file over; give --out FILE".into());
    }
    Ok(shard)
}

/// `suite --matrix`: the matrix, with the models of the flags deciding when given.
pub(crate) async fn matrix(a: &SuiteArgs<'_>) -> u8 {
    if !a.files.is_empty() {
        eprintln!("rolegate: --matrix runs the benign tasks and the catalog (--tasks, --attacks), not scenario files");
        return EXIT_USAGE;
    }
    let run = async {
        let shard = check_flags(a)?;
        let Models { decider, roles, env } = model_setup(a.model, a.role_models, a.model_args)?;
        let mut spec = matrix_spec(a.tasks, a.attacks, Some(&env.world))?;
        // templates are made from the catalog as written, not from transformed variants
        let made = template_payloads(a.templates, &spec.attacks)?;
        if let Some(list) = a.transforms {
            let transforms = rolegate::lab::parse_transforms(list).map_err(|e| format!("--transforms: {e}"))?;
            for note in rolegate::suite::add_variants(&mut spec, &env.world, &transforms) {
                eprintln!("rolegate: note: {note}");
            }
        }
        if !made.is_empty() {
            spec.attacks = spec.attacks.iter().cloned().chain(made).collect();
        }
        let models = MatrixModels { single: if a.model.is_some() { decider } else { None }, roles };
        let any_model = models.single.is_some() || models.roles.is_some();
        let in_flight = super::suite::cells_in_flight(a, models.single.as_ref(), models.roles.as_ref());
        let mut plan = MatrixPlan {
            models,
            repeat: a.repeat.unwrap_or(1),
            intervals: a.repeat.is_some() || any_model,
            shard,
            in_flight,
            time_budget: a.time_budget,
            ..MatrixPlan::default()
        };
        let mut config = matrix_experiment(&spec, &plan);
        config.models = models_named(a);
        if let Some(mode) = tool_mode(plan.models.single.as_ref(), plan.models.roles.as_ref()) {
            config.models.insert("tool_mode".into(), mode.into());
        }
        config.models.extend(model_settings(plan.models.single.as_ref(), plan.models.roles.as_ref()));
        config.data = super::data_args::env_hashes(&env);
        let json = |v: serde_json::Result<String>| sha256_hex(v.unwrap_or_default().as_bytes());
        config.data.insert("tasks".into(), json(serde_json::to_string(&spec.tasks)));
        config.data.insert("attacks".into(), json(serde_json::to_string(&*spec.attacks)));
        let (file, done) = open_out(a, config, shard)?;
        plan.out = file;
        plan.done = done;
        let m = run_matrix_plan(&spec, &env, &plan).await.map_err(|e| e.to_string())?;
        Ok::<_, String>((m, plan.repeat))
    };
    match run.await {
        Ok((m, repeat)) => {
            let code = print_matrix(&m, a.format, repeat, shard(a.shard).ok().flatten());
            super::model_args::print_connection_times(a.format == OutputFormat::Table);
            code
        }
        Err(e) => {
            eprintln!("rolegate: {e}");
            EXIT_USAGE
        }
    }
}

/// The payloads `--templates LIST` adds (one per template and payload of `catalog`, see
/// [`rolegate::lab::generate`]); none without the flag.
pub(crate) fn template_payloads(names: Option<&str>, catalog: &[Attack]) -> Result<Vec<Attack>, String> {
    let Some(names) = names else { return Ok(Vec::new()) };
    let names = TemplateName::parse_list(names).map_err(|e| format!("--templates: {e}"))?;
    rolegate::lab::generate(&names, catalog).map_err(|e| format!("--templates: {e}"))
}

/// Prints the figures per template as a table after the matrix's (nothing when no
/// template payload ran).
fn print_templates(figures: &[TemplateFigures]) {
    if figures.is_empty() {
        return;
    }
    let _ = out("") && out(TemplateFigures::header(figures));
    for f in figures {
        if !out(&f.line()) {
            break;
        }
    }
}

/// Prints the matrix; the exit code says whether every configuration that must hold did.
/// The figures per template (counted from the runs, [`template_figures`]; none when no
/// template payload ran) go into the JSON document as `templates`, into JSON Lines as one
/// line each after the cells, and after the table's summary line as a table of their own
/// ([`print_templates`]); CSV and JUnit hold the configurations only. `suite --matrix` and
/// `merge` both print through here, so merged shards print what one run prints.
pub(crate) fn print_matrix(m: &Matrix, format: OutputFormat, repeat: u32, shard: Option<Shard>) -> u8 {
    let templates = &template_figures(m);
    match format {
        OutputFormat::Junit => {
            let _ = out(junit::matrix(m).trim_end());
        }
        OutputFormat::Jsonl => {
            let lines = m.json_lines().into_iter().chain(templates.iter().map(|f| {
                let mut v = serde_json::to_value(f).unwrap_or_default();
                if let Some(o) = v.as_object_mut() {
                    o.insert("kind".into(), "template".into());
                }
                v.to_string()
            }));
            for l in lines {
                if !out(&l) {
                    break;
                }
            }
        }
        OutputFormat::Json => {
            let mut doc = serde_json::to_value(m.document()).unwrap_or_default();
            if let (false, Some(o)) = (templates.is_empty(), doc.as_object_mut()) {
                o.insert("templates".into(), serde_json::to_value(templates).unwrap_or_default());
            }
            out(&serde_json::to_string_pretty(&doc).unwrap_or_default());
        }
        OutputFormat::Csv => match ExperimentTable::of_matrix(m).csv() {
            Ok(text) => {
                let _ = out(text.trim_end());
            }
            Err(e) => {
                eprintln!("rolegate: {e}");
                return EXIT_USAGE;
            }
        },
        OutputFormat::Table => {
            for l in m.table_lines() {
                if !out(&l) {
                    break;
                }
            }
            let broken = m.figures.iter().filter(|f| !f.holds).count();
            let reps = if repeat > 1 { format!(" x {repeat} repetitions") } else { String::new() };
            let part = shard.map_or(String::new(), |s| {
                format!("; shard {s} only: `rolegate merge` the shards' --out files for the whole matrix")
            });
            out(&format!(
                "{} configurations x {} tasks x (1 benign + {} attacked){reps} = {} runs; configurations that must stop every effect and did not: {broken}{part}",
                m.figures.len(),
                m.tasks,
                m.attacks,
                m.runs.len()
            ));
            print_templates(templates);
        }
    }
    if m.holds() { EXIT_OK } else { EXIT_MISMATCH }
}

/// `suite` with `--repeat`, `--out`, `--force` or `--shard`: each row × repetition is a
/// cell.
pub(crate) async fn rows(a: &SuiteArgs<'_>) -> u8 {
    if a.format == OutputFormat::Junit {
        eprintln!(
            "rolegate: suite with --repeat, --out or --shard takes --format table, json, jsonl or csv, not junit"
        );
        return EXIT_USAGE;
    }
    let run = async {
        let shard = check_flags(a)?;
        let loaded = super::suite::load_all(a.files, a.attacks, a.model, a.role_models, a.model_args)?;
        let intervals = a.repeat.is_some();
        let in_flight = super::suite::cells_in_flight(a, loaded.decider.as_ref(), loaded.roles.as_ref());
        let mut plan = RowsPlan {
            model: loaded.decider.clone(),
            roles: loaded.roles.clone(),
            repeat: a.repeat.unwrap_or(1),
            shard,
            in_flight,
            ..RowsPlan::default()
        };
        let mut config = rows_experiment(&loaded.rows, &plan, intervals);
        config.models = models_named(a);
        if let Some(mode) = tool_mode(plan.model.as_ref(), plan.roles.as_ref()) {
            config.models.insert("tool_mode".into(), mode.into());
        }
        config.models.extend(model_settings(plan.model.as_ref(), plan.roles.as_ref()));
        config.data = super::data_args::env_hashes(&loaded.env);
        config.data.insert("rows".into(), rows_hash(&loaded.rows));
        let (file, done) = open_out(a, config, shard)?;
        plan.out = file;
        plan.done = done;
        let menv: Arc<MultiEnv> = loaded.menv.clone();
        run_rows_plan(loaded.rows, &loaded.env, &menv, &plan).await.map_err(|e| e.to_string())
    };
    match run.await {
        Ok(rows) => {
            let code = print_rows(&rows, a.format, a.repeat.is_some());
            super::model_args::print_connection_times(a.format == OutputFormat::Table);
            code
        }
        Err(e) => {
            eprintln!("rolegate: {e}");
            EXIT_USAGE
        }
    }
}

/// SHA-256 of the rows as parsed.
fn rows_hash(rows: &[AnyRow]) -> String {
    let text: Vec<String> = rows
        .iter()
        .map(|r| match r {
            AnyRow::Single(r) => serde_json::to_string(r),
            AnyRow::Multi(r) => serde_json::to_string(r),
        })
        .map(Result::unwrap_or_default)
        .collect();
    sha256_hex(text.join("\n").as_bytes())
}

/// What the fields of the rows' table lines say.
pub(crate) const ROWS_LEGEND: [&str; 4] = [
    "legend: single rows: ID STATUS REASON, calls= tool calls sent to the gate, emails= e-mails that left the outbox,",
    "  attack= the planted payload's verdict (executed, refused: proposed or carried on and stopped by code, ignored);",
    "  multi rows: ID REASON, msgs= accepted messages, rejected=[codes of refused messages], denied=[role:tool:code of refused tool calls];",
    "  matches: every expectation of the row held; MISMATCH: what differed",
];

/// Prints the rows' cells in order; the exit code says whether every one matched. `json`
/// is one document, `csv` one record per row; JUnit is the caller's.
pub(crate) fn print_rows(rows: &[(String, StoredRow)], format: OutputFormat, intervals: bool) -> u8 {
    let matching = rows.iter().filter(|(_, r)| r.matches).count();
    let exit = if matching == rows.len() { EXIT_OK } else { EXIT_MISMATCH };
    match format {
        OutputFormat::Json => {
            let parsed: Vec<serde_json::Value> =
                rows.iter().map(|(_, r)| serde_json::from_str(&r.json_line).unwrap_or_default()).collect();
            let doc = serde_json::json!({ "rows": parsed, "matching": matching, "of": rows.len() });
            out(&serde_json::to_string_pretty(&doc).unwrap_or_default());
            return exit;
        }
        OutputFormat::Csv => {
            let mut w = csv::Writer::from_writer(Vec::new());
            let mut ok = w.write_record(["id", "design", "matches", "emails", "mismatches"]).is_ok();
            for (_, r) in rows {
                let rec = [
                    r.id.clone(),
                    r.table.clone(),
                    r.matches.to_string(),
                    r.emails.to_string(),
                    r.mismatches.join("; "),
                ];
                ok &= w.write_record(&rec).is_ok();
            }
            match w.into_inner() {
                Ok(bytes) if ok => {
                    let _ = out(String::from_utf8_lossy(&bytes).trim_end());
                }
                _ => {
                    eprintln!("rolegate: the CSV could not be written");
                    return EXIT_USAGE;
                }
            }
            return exit;
        }
        _ => {}
    }
    for (_, r) in rows {
        let line = if format == OutputFormat::Jsonl { &r.json_line } else { &r.table_line };
        if !out(line) {
            break;
        }
    }
    if format == OutputFormat::Table {
        for l in ROWS_LEGEND {
            out(l);
        }
        let emails: usize = rows.iter().map(|(_, r)| r.emails).sum();
        let n = rows.len();
        let line = if intervals {
            let ci = wilson(matching, n).map_or_else(|| "-".to_string(), |i| i.percent());
            let pct = rolegate::suite::Count { n: matching, of: n }.percent();
            format!(
                "{matching} of {n} row runs match their expectation ({pct}; 95% CI {ci}); e-mails sent in all rows: {emails}"
            )
        } else {
            format!("{matching} of {n} rows match their expectation; e-mails sent in all rows: {emails}")
        };
        out(&line);
    }
    exit
}
