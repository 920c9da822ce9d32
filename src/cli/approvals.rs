//! `rolegate approvals list|approve|deny|cancel`: decide parked runs from the store, in a
//! process of their own. Exit codes: 0 decided, 1 refused by a rule or a request row set
//! aside (nothing ran), 2 unusable input (no key, damaged store, tampered checkpoint).
//! `list` shows a request row that fails its signature or schema as `refused: CODE`.

use clap::Subcommand;
use serde_json::json;

use super::desk::{ListFormat, StoreArg, open_existing, request_line};
use super::format::OutputFormat;
use super::{EXIT_MISMATCH, EXIT_OK, EXIT_USAGE, out};
use rolegate::human::{ApproverKey, DecisionCode, IdentityCode, IdentityError};
use rolegate::store::{DeskAction, DeskError};

/// What to do with approval requests.
#[derive(Debug, Subcommand)]
pub enum ApprovalsCommand {
    /// List every request (expired ones are marked as such first).
    List {
        /// Output format.
        #[arg(long, value_enum, default_value_t = OutputFormat::Table)]
        format: OutputFormat,
        /// The store.
        #[command(flatten)]
        store: StoreArg,
    },
    /// Approve a request: the action runs once and the run continues. The decision is
    /// signed with the approver's key (`--key`), never taken from a typed name.
    Approve {
        /// The request id, e.g. req-1.
        request: String,
        /// The approver's private key file (written by `rolegate approvers add`).
        #[arg(long, value_name = "FILE")]
        key: Option<std::path::PathBuf>,
        /// Who decides; only a check against the key's owner (refused without --key).
        #[arg(long = "as", value_name = "USER")]
        actor: Option<String>,
        /// The store.
        #[command(flatten)]
        store: StoreArg,
    },
    /// Deny a request: nothing runs; the run stops as denied. Signed with `--key`.
    Deny {
        /// The request id.
        request: String,
        /// The approver's private key file.
        #[arg(long, value_name = "FILE")]
        key: Option<std::path::PathBuf>,
        /// Who decides; only a check against the key's owner (refused without --key).
        #[arg(long = "as", value_name = "USER")]
        actor: Option<String>,
        /// Hand the refusal to the model instead of stopping the run.
        #[arg(long)]
        replan: bool,
        /// The store.
        #[command(flatten)]
        store: StoreArg,
    },
    /// Withdraw a request: the run stops as cancelled; nothing runs. The requester may
    /// withdraw their own request by name (`--as`); anyone else signs with `--key`.
    Cancel {
        /// The request id.
        request: String,
        /// An approver's private key file.
        #[arg(long, value_name = "FILE")]
        key: Option<std::path::PathBuf>,
        /// The requester withdrawing their own request.
        #[arg(long = "as", value_name = "USER")]
        actor: Option<String>,
        /// The store.
        #[command(flatten)]
        store: StoreArg,
    },
}

/// Runs an approvals subcommand.
pub(crate) async fn approvals(command: ApprovalsCommand) -> u8 {
    let (path, request, key, actor, action) = match command {
        ApprovalsCommand::List { format, store } => return list(&store.path, format),
        ApprovalsCommand::Approve { request, key, actor, store } => {
            (store.path, request, key, actor, DeskAction::Approve)
        }
        ApprovalsCommand::Deny { request, key, actor, replan, store } => {
            (store.path, request, key, actor, if replan { DeskAction::DenyReplan } else { DeskAction::Deny })
        }
        ApprovalsCommand::Cancel { request, key, actor, store } => {
            (store.path, request, key, actor, DeskAction::Cancel)
        }
    };
    let verb = action.verb();
    let who = match (&key, &actor) {
        (Some(file), _) => match ApproverKey::read(file) {
            Ok(k) if actor.as_ref().is_some_and(|a| a != k.name()) => {
                let e = IdentityError::new(
                    IdentityCode::NameMismatch,
                    format!("the key belongs to {}, not {}", k.name(), actor.unwrap_or_default()),
                );
                eprintln!("rolegate: {request} {verb}: refused: {e}; nothing ran");
                return EXIT_USAGE;
            }
            Ok(k) => Who::Key(Box::new(k)),
            Err(e) => {
                eprintln!("rolegate: {request} {verb}: refused: {e}; nothing ran");
                return EXIT_USAGE;
            }
        },
        (None, Some(name)) if action == DeskAction::Cancel => Who::Name(name.clone()),
        (None, _) => {
            let e = IdentityError::new(
                IdentityCode::NoKey,
                format!(
                    "to {verb} a request, sign with the approver's key file: --key FILE (a name alone decides nothing)"
                ),
            );
            eprintln!("rolegate: {request} {verb}: refused: {e}; nothing ran");
            return EXIT_USAGE;
        }
    };
    let mut desk = match open_existing(&path) {
        Ok(d) => d,
        Err(e) => {
            eprintln!("rolegate: {e}");
            return EXIT_USAGE;
        }
    };
    let decided = match &who {
        Who::Key(k) => desk.decide_signed(&request, k, action).await,
        Who::Name(name) => desk.withdraw(&request, name).await,
    };
    let by = match &who {
        Who::Key(k) => k.name().to_string(),
        Who::Name(name) => name.clone(),
    };
    match decided {
        Ok(d) => {
            let ran = if d.code == DecisionCode::Ok { "" } else { " (refused: nothing ran)" };
            if d.code == DecisionCode::Ok {
                super::committed(format!("{request} {verb} by {by}: ok, e-mails sent: {}", d.sent_now));
            }
            out(&format!("{request} {verb} by {by}: {}{ran}", d.code.as_str()));
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
        Err(e @ (DeskError::Quarantined(_) | DeskError::Identity(_))) => {
            eprintln!("rolegate: {request} {verb}: {e}");
            EXIT_MISMATCH
        }
        Err(e) => {
            eprintln!("rolegate: {e}");
            EXIT_USAGE
        }
    }
}

/// Who decides at the command line: the owner of a key file, or (to withdraw) a name.
enum Who {
    Key(Box<ApproverKey>),
    Name(String),
}

fn list(path: &std::path::Path, format: OutputFormat) -> u8 {
    let format = match ListFormat::take("approvals list", format) {
        Ok(f) => f,
        Err(e) => {
            eprintln!("rolegate: {e}");
            return EXIT_USAGE;
        }
    };
    let listing = match open_existing(path).and_then(|mut d| d.listing().map_err(|e| e.to_string())) {
        Ok(l) => l,
        Err(e) => {
            eprintln!("rolegate: {e}");
            return EXIT_USAGE;
        }
    };
    match format {
        ListFormat::Json => {
            let mut items: Vec<_> = listing
                .requests
                .iter()
                .map(|r| {
                    json!({
                        "id": r.id, "run_id": r.run_id, "tool": r.tool, "preview": r.preview,
                        "requested_by": r.requested_by, "expires_at": r.expires_at,
                        "status": r.status.as_str(), "decided_by": r.decided_by,
                    })
                })
                .collect();
            items.extend(
                listing
                    .refused
                    .iter()
                    .map(|b| json!({ "id": b.id, "status": "refused", "code": b.code.as_str(), "detail": b.detail })),
            );
            out(&serde_json::to_string_pretty(&items).unwrap_or_default());
        }
        ListFormat::Table => {
            let refused = listing.refused.iter().map(|b| format!("{:<7} refused: {} ({})", b.id, b.code, b.detail));
            for line in listing.requests.iter().map(request_line).chain(refused) {
                if !out(&line) {
                    break;
                }
            }
        }
    }
    EXIT_OK
}
