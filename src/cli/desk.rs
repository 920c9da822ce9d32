//! What the store-backed subcommands share: the `--store` option, the list format and
//! opening the approval desk (store file, signing key from the environment, system clock).

use clap::Args;

use super::format::OutputFormat;
use std::path::PathBuf;
use std::sync::Arc;

use rolegate::agent::Env;
use rolegate::cost::SystemClock;
use rolegate::human::{ApprovalRequest, SigningKey};
use rolegate::store::{DEFAULT_STORE, Desk, SinkCheck, Store};

/// The store file option every store-backed command takes.
#[derive(Clone, Debug, Args)]
pub struct StoreArg {
    /// The store file (embedded SQLite); `run` creates it when missing, the other commands
    /// need it to exist.
    #[arg(long = "store", value_name = "PATH", default_value = DEFAULT_STORE)]
    pub path: PathBuf,
}

/// Output formats of the listing commands: `--format table` or `json` of the shared
/// vocabulary ([`OutputFormat`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ListFormat {
    /// Aligned text, one line per item.
    Table,
    /// One JSON array.
    Json,
}

impl ListFormat {
    /// The listing format of `given`, or the error naming the formats `command` takes.
    pub(crate) fn take(command: &str, given: OutputFormat) -> Result<Self, String> {
        super::format::takes(command, given, &super::format::LISTING)?;
        Ok(if given == OutputFormat::Json { Self::Json } else { Self::Table })
    }
}

/// Opens the desk over `path` with the key from `ROLEGATE_SIGNING_KEY` (or the file named
/// by `ROLEGATE_SIGNING_KEY_FILE`) and the system clock.
pub(crate) fn open(path: &std::path::Path) -> Result<Desk, String> {
    desk(path, Store::open)
}

/// As [`open`], for a store that must exist already (deciding, listing): a missing or
/// empty file is an error, never a new store.
pub(crate) fn open_existing(path: &std::path::Path) -> Result<Desk, String> {
    desk(path, Store::open_existing)
}

/// As [`open`], for a new run of `spec` in `env` (the world, policy, prices, prompts and
/// call graph of the flags): returns the desk and the spec recording them, so that every
/// later command on the run uses them.
pub(crate) fn open_for_run(
    path: &std::path::Path,
    spec: &rolegate::store::RunSpec,
    env: Env,
) -> Result<(Desk, rolegate::store::RunSpec), String> {
    let spec = spec.clone().with_data(&env)?;
    Ok((desk_in(path, Store::open, env)?, spec))
}

fn desk(
    path: &std::path::Path,
    open: fn(&std::path::Path) -> Result<Store, rolegate::store::StoreError>,
) -> Result<Desk, String> {
    // a command on runs already recorded starts from the bundled data; each run's own
    // record of what it ran on replaces it before anything of that run is done
    desk_in(path, open, Env::bundled().map_err(|e| e.to_string())?)
}

fn desk_in(
    path: &std::path::Path,
    open: fn(&std::path::Path) -> Result<Store, rolegate::store::StoreError>,
    env: Env,
) -> Result<Desk, String> {
    let key = SigningKey::from_env().map_err(|e| e.to_string())?;
    let store = open(path).map_err(|e| e.to_string())?;
    Ok(Desk::new(store, key, env, Arc::new(SystemClock)).check_sinks_with(SinkCheck::new(super::flush_sinks)))
}

/// One request as a table line.
pub(crate) fn request_line(r: &ApprovalRequest) -> String {
    format!(
        "{:<7} {:<9} {:<17} {:<8} expires_at={:.0} {}",
        r.id, r.status, r.tool, r.requested_by, r.expires_at, r.preview
    )
}
