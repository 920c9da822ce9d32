//! Who is driving a durable run now: a process that starts or resumes a run holds its
//! lease (a row naming the process and host) until the run ends or the process does. A
//! second `resume` of a run whose lease is held by a live process is refused as a
//! conflict, before it asks any model, so no exchange is ever paid twice; a lease whose
//! process is gone (killed, crashed) is taken over. `runs list` shows a run being driven as
//! `running (pid N)`.
//!
//! A lease is no fact about the run (nothing of it is read back as what happened): it only
//! says who may drive the run now, so it is not signed.

use rusqlite::{Connection, OptionalExtension, params};

use super::StoreError;

/// The process holding a run's lease.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Holder {
    /// Its process id.
    pub(crate) pid: u32,
    /// The host it runs on.
    pub(crate) host: String,
    /// Since when (seconds since the Unix epoch, as text).
    pub(crate) since: String,
}

/// This machine's name (`HOSTNAME`, else `/etc/hostname`, else `localhost`).
fn host() -> String {
    std::env::var("HOSTNAME")
        .ok()
        .or_else(|| std::fs::read_to_string("/etc/hostname").ok().map(|h| h.trim().to_string()))
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "localhost".to_string())
}

/// True when `holder` is a live process (on another host it is taken to be).
fn alive(holder: &Holder) -> bool {
    if holder.host != host() {
        return true;
    }
    if holder.pid == std::process::id() {
        return true;
    }
    #[cfg(unix)]
    {
        let Ok(pid) = libc::pid_t::try_from(holder.pid) else { return false };
        // SAFETY: kill with signal 0 sends nothing; it only asks whether the process exists
        let r = unsafe { libc::kill(pid, 0) };
        r == 0 || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
    }
    #[cfg(not(unix))]
    {
        true
    }
}

/// The live holder of `run_id`'s lease, if any.
///
/// # Errors
/// [`StoreError::Sql`].
pub(crate) fn holder(c: &Connection, run_id: &str) -> Result<Option<Holder>, StoreError> {
    let row: Option<(i64, String, String)> = c
        .query_row("SELECT pid, host, since FROM leases WHERE run_id = ?1", params![run_id], |r| {
            Ok((r.get(0)?, r.get(1)?, r.get(2)?))
        })
        .optional()?;
    Ok(row.map(|(pid, host, since)| Holder { pid: u32::try_from(pid).unwrap_or(0), host, since }).filter(alive))
}

/// Takes `run_id`'s lease for this process (inside the caller's write transaction), or
/// returns the live process that holds it.
///
/// # Errors
/// [`StoreError::Sql`].
pub(crate) fn take(c: &Connection, run_id: &str) -> Result<Result<(), Holder>, StoreError> {
    if let Some(h) = holder(c, run_id)?
        && (h.pid != std::process::id() || h.host != host())
    {
        return Ok(Err(h));
    }
    let since = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs());
    c.execute(
        "INSERT INTO leases (run_id, pid, host, since) VALUES (?1, ?2, ?3, ?4)
         ON CONFLICT(run_id) DO UPDATE SET pid = excluded.pid, host = excluded.host, since = excluded.since",
        params![run_id, i64::from(std::process::id()), host(), since.to_string()],
    )?;
    Ok(Ok(()))
}

/// Gives `run_id`'s lease back (only this process's own).
///
/// # Errors
/// [`StoreError::Sql`].
pub(crate) fn give_back(c: &Connection, run_id: &str) -> Result<(), StoreError> {
    c.execute(
        "DELETE FROM leases WHERE run_id = ?1 AND pid = ?2 AND host = ?3",
        params![run_id, i64::from(std::process::id()), host()],
    )?;
    Ok(())
}
