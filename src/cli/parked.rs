//! `rolegate run` on the store: used when `--store` is given or the run has a write tool
//! granted (the reply task by default), so a parked run can be decided by another process.

use super::desk::request_line;
use super::{EXIT_USAGE, out};
use rolegate::store::RunSpec;

/// Runs `goal` through the desk and prints the trace, the outcome and any request.
pub(crate) async fn run_stored(path: &std::path::Path, spec: &RunSpec, goal: &str, env: rolegate::agent::Env) -> u8 {
    let (mut desk, spec) = match super::desk::open_for_run(path, spec, env) {
        Ok(d) => d,
        Err(e) => {
            eprintln!("rolegate: {e}");
            return EXIT_USAGE;
        }
    };
    match desk.start(&spec, goal).await {
        Ok(started) => {
            let run = &started.run;
            let filed = started.request.as_ref().map_or(String::new(), |r| format!(", request {} filed", r.id));
            super::committed(format!("{} stored{filed}", run.state.run_id()));
            out(rolegate::design::TRACE_HEADER);
            for l in run.trace().lines() {
                out(&l);
            }
            out(rolegate::design::TRACE_LEGEND);
            out(&rolegate::design::usage_line("agent", &run.ledger().summary()));
            if let Some(a) = run.state.answer() {
                out(&rolegate::design::answer_line(a));
            }
            out(&format!(
                "{} {} {} calls={:?}",
                run.state.run_id(),
                run.state.status().name(),
                run.reason(),
                run.calls()
            ));
            if let Some(r) = &started.request {
                out(&format!("approval needed: {}", request_line(r)));
                out(&format!(
                    "decide with: rolegate approvals approve {} --key <approver's key file> --store {}",
                    r.id,
                    path.display()
                ));
            }
            super::run_checks::exit_for(run.state.status().name())
        }
        Err(e) => {
            eprintln!("rolegate: {e}");
            EXIT_USAGE
        }
    }
}
