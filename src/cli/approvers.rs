//! `rolegate approvers add|list`: the registry of approvers and their public keys.
//! `add NAME --key-out FILE` makes an Ed25519 key pair, writes the private key to a new
//! file only its owner can read (mode 0600) and registers the public key (the row is
//! signed with the store key). Hand the file to the approver; nobody else keeps a copy.
//! Exit codes: 0 done, 1 refused (not an approver, already registered), 2 unusable input.

use clap::Subcommand;
use std::path::PathBuf;

use super::desk::{ListFormat, StoreArg, open, open_existing};
use super::format::OutputFormat;
use super::{EXIT_MISMATCH, EXIT_OK, EXIT_USAGE, out};
use rolegate::human::{Approver, ApproverKey};
use rolegate::store::DeskError;

/// What to do with the approver registry.
#[derive(Debug, Subcommand)]
pub enum ApproversCommand {
    /// Register an approver: a new key pair, the private key written to FILE (mode 0600).
    Add {
        /// The approver (a user with the approver role).
        name: String,
        /// Where the private key goes (a new file; never overwritten).
        #[arg(long, value_name = "FILE")]
        key_out: PathBuf,
        /// The store.
        #[command(flatten)]
        store: StoreArg,
    },
    /// List the registered approvers and their key fingerprints.
    List {
        /// Output format.
        #[arg(long, value_enum, default_value_t = OutputFormat::Table)]
        format: OutputFormat,
        /// The store.
        #[command(flatten)]
        store: StoreArg,
    },
}

/// Runs an approvers subcommand.
pub(crate) fn approvers(command: ApproversCommand) -> u8 {
    match command {
        ApproversCommand::Add { name, key_out, store } => add(&name, &key_out, &store),
        ApproversCommand::List { format, store } => list(&store, format),
    }
}

fn add(name: &str, key_out: &std::path::Path, store: &StoreArg) -> u8 {
    let mut desk = match open(&store.path) {
        Ok(d) => d,
        Err(e) => {
            eprintln!("rolegate: {e}");
            return EXIT_USAGE;
        }
    };
    let key = match ApproverKey::generate(name) {
        Ok(k) => k,
        Err(e) => {
            eprintln!("rolegate: {e}");
            return EXIT_USAGE;
        }
    };
    // the file first: a registered key nobody holds would lock the name for good
    if let Err(e) = key.write_new(key_out) {
        eprintln!("rolegate: {e}; nothing was registered");
        return EXIT_USAGE;
    }
    match desk.add_approver(&Approver::of(&key)) {
        Ok(()) => {
            out(&format!(
                "approver {name} registered, key {}; private key in {} (mode 0600): hand it to {name} only",
                key.fingerprint(),
                key_out.display()
            ));
            EXIT_OK
        }
        Err(e) => {
            let _ = std::fs::remove_file(key_out);
            eprintln!("rolegate: approvers add {name}: {e}; nothing was registered and the key file was removed");
            if matches!(e, DeskError::Identity(_)) { EXIT_MISMATCH } else { EXIT_USAGE }
        }
    }
}

fn list(store: &StoreArg, format: OutputFormat) -> u8 {
    let format = match ListFormat::take("approvers list", format) {
        Ok(f) => f,
        Err(e) => {
            eprintln!("rolegate: {e}");
            return EXIT_USAGE;
        }
    };
    let rows = match open_existing(&store.path).and_then(|d| d.approvers().map_err(|e| e.to_string())) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("rolegate: {e}");
            return EXIT_USAGE;
        }
    };
    match format {
        ListFormat::Json => {
            let mut items: Vec<serde_json::Value> = rows
                .good
                .iter()
                .map(|a| serde_json::json!({"name": a.name, "fingerprint": a.fingerprint, "status": "ok"}))
                .collect();
            items.extend(rows.bad.iter().map(
                |b| serde_json::json!({"name": b.id, "status": "refused", "code": b.code.as_str(), "detail": b.detail}),
            ));
            out(&serde_json::to_string_pretty(&items).unwrap_or_default());
        }
        ListFormat::Table => {
            for a in &rows.good {
                out(&format!("{:<10} key {}", a.name, a.fingerprint));
            }
            for b in &rows.bad {
                out(&format!("{:<10} refused: {} ({})", b.id, b.code, b.detail));
            }
        }
    }
    EXIT_OK
}
