//! `rolegate compare`: designs side by side on the bundled tasks, on fakes or with
//! `--model openai:NAME` for the model-driven designs.

use super::format::{COMPARE, OutputFormat, takes};
use super::{EXIT_OK, EXIT_USAGE, ModelArgs, RoleModelArgs, out};
use rolegate::agent::Env;
use rolegate::design::{bundled_tasks, parse_tasks};
use rolegate::eval::{CompareModels, compare_report_with};
use rolegate::model::{FakeKind, ModelSpec};
use rolegate::multi::Behaviours;
use rolegate::suite::ExperimentTable;

/// The models of the comparison and the environment priced for them: `--model` must be
/// `openai:NAME` (or the default `fake:sensible`, which keeps every fake).
fn models(model: Option<&str>, roles: &RoleModelArgs, args: &ModelArgs) -> Result<(CompareModels, Env), String> {
    let spec: ModelSpec = model.map_or_else(|| Ok(ModelSpec::default()), str::parse).map_err(|e| e.to_string())?;
    if matches!(spec, ModelSpec::Fake(k) if k != FakeKind::Sensible) {
        return Err(format!("compare --model takes openai:NAME; {spec} is one fake, and compare shows each design's"));
    }
    let (setup, env) = super::design::role_setup(&spec, roles, Behaviours::default(), args)?;
    let endpoint = args.endpoint(&[&spec])?;
    let model = spec.http_config(endpoint.as_ref()).map_err(|e| e.to_string())?;
    Ok((CompareModels { model, roles: setup }, env))
}

/// Runs every comparison and prints it.
pub(crate) async fn compare(
    format: OutputFormat,
    model: Option<&str>,
    roles: &RoleModelArgs,
    args: &ModelArgs,
    tasks: Option<&std::path::Path>,
) -> u8 {
    if let Err(e) = takes("compare", format, &COMPARE) {
        eprintln!("rolegate: {e}");
        return EXIT_USAGE;
    }
    let report = async {
        let (models, env) = models(model, roles, args)?;
        let tasks = match tasks {
            None => bundled_tasks().map_err(|e| e.to_string())?,
            Some(f) => {
                let text = super::input::read_text(f, super::input::MAX_INPUT_BYTES)?;
                let tasks = parse_tasks(&text, &f.display().to_string()).map_err(|e| e.to_string())?;
                if tasks.is_empty() {
                    return Err(format!("{}: no task in the file", f.display()));
                }
                tasks
            }
        };
        compare_report_with(&env, &tasks, &models).await.map_err(|e| e.to_string())
    };
    let report = match report.await {
        Ok(r) => r,
        Err(e) => {
            eprintln!("rolegate: {e}");
            return EXIT_USAGE;
        }
    };
    let table = ExperimentTable::of_designs(&report.designs, model.unwrap_or("fakes"));
    match format {
        OutputFormat::Csv => match table.csv() {
            Ok(text) => {
                let _ = out(text.trim_end());
            }
            Err(e) => {
                eprintln!("rolegate: {e}");
                return EXIT_USAGE;
            }
        },
        OutputFormat::Json => {
            // the sections' keys as before, the experiment table beside them
            let mut doc = serde_json::to_value(&report).unwrap_or_default();
            if let Some(map) = doc.as_object_mut() {
                map.insert("table".into(), serde_json::to_value(&table).unwrap_or_default());
            }
            out(&serde_json::to_string_pretty(&doc).unwrap_or_default());
        }
        _ => {
            let mut lines = vec![format!(
                "== experiment table: each design over the tasks of the designs group ({} tasks)",
                report.designs.len() / table.rows.len().max(1)
            )];
            lines.extend(table.table_lines());
            lines.push(String::new());
            lines.extend(report.table_lines());
            for line in lines {
                if !out(&line) {
                    break;
                }
            }
        }
    }
    EXIT_OK
}
