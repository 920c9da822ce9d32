//! `rolegate run --design multi`: one three-role run, printed as its envelope log (every
//! accepted envelope, every refusal, every refused tool call) and its outcome.

use super::{EXIT_OK, EXIT_USAGE, out};
use crate::eval::Env;
use crate::multi::{Behaviours, ClaimMode, MultiConfig, MultiEnv, MultiRun, RoleModels};

/// The flags of a multi run.
#[derive(Debug, Clone)]
pub(crate) struct MultiFlags {
    /// The signed-in user.
    pub user: String,
    /// A behaviour per role.
    pub roles: Behaviours,
    /// Strict or free-text claims.
    pub claims: ClaimMode,
}

/// The log of a finished run, in the coordinator's order, then the outcome.
pub fn log(run: &MultiRun) -> Vec<String> {
    let mut lines = Vec::new();
    let mut accepted = run.messages.iter();
    if let Some(coordinator) = run.traces.first() {
        for l in &coordinator.lines {
            if l.code == "ok" && l.kind == crate::agent::TraceKind::Message {
                if let Some(env) = accepted.next() {
                    lines.push(format!("accepted {}", env.log_line()));
                    continue;
                }
            }
            lines.push(format!("{:<8} {} {}", l.kind.as_str(), l.code, l.detail).trim_end().to_string());
        }
    }
    for d in &run.denied {
        lines.push(format!("denied   {d}"));
    }
    let tools: Vec<String> = run.tools.iter().map(|(r, t)| format!("{r} [{}]", t.join(", "))).collect();
    lines.push(format!(
        "outcome: {} | messages {} | rejected {} | denied {} | role calls {} | rounds {} | tools {} | e-mails {}",
        run.reason,
        run.messages.len(),
        run.rejected.len(),
        run.denied.len(),
        run.role_calls,
        run.rounds,
        tools.join(", "),
        run.emails
    ));
    if let Some(answer) = &run.answer {
        lines.push(format!("answer (agent output, shown as data): {}", crate::security::redact(answer)));
    }
    if let Some(f) = &run.failed {
        lines.push(format!("failed role: {} ({})", f.role, f.detail));
    }
    lines
}

/// Runs `goal` with three roles and prints the log.
pub(crate) async fn run(goal: &str, flags: MultiFlags) -> u8 {
    let env = match Env::bundled().map_err(|e| e.to_string()).and_then(|e| MultiEnv::new(&e).map_err(|e| e.to_string()))
    {
        Ok(e) => e,
        Err(e) => {
            eprintln!("rolegate: {e}");
            return EXIT_USAGE;
        }
    };
    let cfg = MultiConfig { user: flags.user, claims: flags.claims, ..MultiConfig::default() };
    match crate::multi::run(&env, cfg, RoleModels::fakes(flags.roles), goal, "run-1").await {
        Ok(run) => {
            for l in log(&run) {
                if !out(&l) {
                    break;
                }
            }
            EXIT_OK
        }
        Err(e) => {
            eprintln!("rolegate: {e}");
            EXIT_USAGE
        }
    }
}
