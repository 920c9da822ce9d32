//! `rolegate approvals list|approve|deny|cancel`: decide parked runs from the store, in a
//! process of their own. Exit codes: 0 decided, 1 refused by a rule (nothing ran), 2
//! unusable input (no key, damaged store, tampered checkpoint).

use clap::Subcommand;
use serde_json::json;

use super::desk::{ListFormat, StoreArg, open_existing, request_line};
use super::{EXIT_MISMATCH, EXIT_OK, EXIT_USAGE, out};
use rolegate::human::DecisionCode;
use rolegate::store::DeskAction;

/// What to do with approval requests.
#[derive(Debug, Subcommand)]
pub enum ApprovalsCommand {
    /// List every request (expired ones are marked as such first).
    List {
        /// Output format.
        #[arg(long, value_enum, default_value_t = ListFormat::Table)]
        format: ListFormat,
        /// The store.
        #[command(flatten)]
        store: StoreArg,
    },
    /// Approve a request: the action runs once and the run continues.
    Approve {
        /// The request id, e.g. req-1.
        request: String,
        /// Who decides (an approver other than the requester).
        #[arg(long = "as", value_name = "USER")]
        actor: String,
        /// The store.
        #[command(flatten)]
        store: StoreArg,
    },
    /// Deny a request: nothing runs; the run stops as denied.
    Deny {
        /// The request id.
        request: String,
        /// Who decides.
        #[arg(long = "as", value_name = "USER")]
        actor: String,
        /// Hand the refusal to the model instead of stopping the run.
        #[arg(long)]
        replan: bool,
        /// The store.
        #[command(flatten)]
        store: StoreArg,
    },
    /// Withdraw a request (the requester or an approver): the run stops as cancelled.
    Cancel {
        /// The request id.
        request: String,
        /// Who withdraws.
        #[arg(long = "as", value_name = "USER")]
        actor: String,
        /// The store.
        #[command(flatten)]
        store: StoreArg,
    },
}

/// Runs an approvals subcommand.
pub(crate) async fn approvals(command: ApprovalsCommand) -> u8 {
    let (path, request, actor, action) = match command {
        ApprovalsCommand::List { format, store } => return list(&store.path, format),
        ApprovalsCommand::Approve { request, actor, store } => (store.path, request, actor, DeskAction::Approve),
        ApprovalsCommand::Deny { request, actor, replan, store } => {
            (store.path, request, actor, if replan { DeskAction::DenyReplan } else { DeskAction::Deny })
        }
        ApprovalsCommand::Cancel { request, actor, store } => (store.path, request, actor, DeskAction::Cancel),
    };
    let mut desk = match open_existing(&path) {
        Ok(d) => d,
        Err(e) => {
            eprintln!("rolegate: {e}");
            return EXIT_USAGE;
        }
    };
    let verb = match action {
        DeskAction::Approve => "approve",
        DeskAction::Deny | DeskAction::DenyReplan => "deny",
        DeskAction::Cancel => "cancel",
    };
    match desk.decide(&request, &actor, action).await {
        Ok(d) => {
            let ran = if d.code == DecisionCode::Ok { "" } else { " (refused: nothing ran)" };
            out(&format!("{request} {verb} by {actor}: {}{ran}", d.code.as_str()));
            if let Some(run) = &d.run {
                out(&format!(
                    "{} {} {} sources={} emails_sent={}{}",
                    run.state.run_id(),
                    run.state.status().name(),
                    run.reason(),
                    run.state.sources().join(","),
                    d.sent_now,
                    if d.replayed { " (replayed)" } else { "" }
                ));
            }
            if d.code == DecisionCode::Ok { EXIT_OK } else { EXIT_MISMATCH }
        }
        Err(e) => {
            eprintln!("rolegate: {e}");
            EXIT_USAGE
        }
    }
}

fn list(path: &std::path::Path, format: ListFormat) -> u8 {
    let requests = match open_existing(path).and_then(|mut d| d.requests().map_err(|e| e.to_string())) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("rolegate: {e}");
            return EXIT_USAGE;
        }
    };
    match format {
        ListFormat::Json => {
            let items: Vec<_> = requests
                .iter()
                .map(|r| {
                    json!({
                        "id": r.id, "run_id": r.run_id, "tool": r.tool, "preview": r.preview,
                        "requested_by": r.requested_by, "expires_at": r.expires_at,
                        "status": r.status.as_str(), "decided_by": r.decided_by,
                    })
                })
                .collect();
            out(&serde_json::to_string_pretty(&items).unwrap_or_default());
        }
        ListFormat::Table => {
            for r in &requests {
                if !out(&request_line(r)) {
                    break;
                }
            }
        }
    }
    EXIT_OK
}
