//! `rolegate outbox`: the e-mails really sent, from the store.

use super::desk::{ListFormat, StoreArg, open_existing};
use super::format::OutputFormat;
use super::{EXIT_OK, EXIT_USAGE, out};

/// Prints the sent mail.
pub(crate) fn outbox(store: &StoreArg, format: OutputFormat) -> u8 {
    let format = match ListFormat::take("outbox", format) {
        Ok(f) => f,
        Err(e) => {
            eprintln!("rolegate: {e}");
            return EXIT_USAGE;
        }
    };
    let sent = match open_existing(&store.path).and_then(|d| d.outbox().map_err(|e| e.to_string())) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("rolegate: {e}");
            return EXIT_USAGE;
        }
    };
    match format {
        ListFormat::Json => {
            out(&serde_json::to_string_pretty(&sent).unwrap_or_default());
        }
        ListFormat::Table => {
            for e in &sent {
                if !out(&format!("{:<4} {:<24} {:<20} key={}", e.id, e.to, e.subject, e.idempotency_key)) {
                    break;
                }
            }
        }
    }
    EXIT_OK
}
