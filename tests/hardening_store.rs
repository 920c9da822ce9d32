//! The durable store's file damaged between two commands of the built binary (`run`,
//! then `approvals approve`, each a process of its own): removed, read-only, or cut
//! short. Each command on the damaged file ends with a clear error (exit 2: SQLite reports
//! it damaged, or the rows the cut spoiled are refused by name) and leaves the file as it
//! found it; once the file is back, the approved action runs exactly once and
//! a second approval sends nothing.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Output};

use crate::util::temp_dir;

const KEY: &str = "store-fault test signing key, not a real secret";

/// The user a command runs as when this process could write a read-only file anyway (it
/// runs as root, which file modes do not stop): `nobody`.
const NOBODY: u32 = 65_534;

fn rolegate(store: &Path, args: &[&str], as_nobody: bool) -> Output {
    let bin = if as_nobody {
        nobody_binary().unwrap_or_else(|e| panic!("checked by nobody_can_run: {e}"))
    } else {
        std::path::PathBuf::from(env!("CARGO_BIN_EXE_rolegate"))
    };
    let mut cmd = Command::new(bin);
    cmd.current_dir(store.parent().unwrap());
    cmd.args(args).arg("--store").arg(store).env("ROLEGATE_SIGNING_KEY", KEY).env_remove("ROLEGATE_SIGNING_KEY_FILE");
    if as_nobody {
        cmd.uid(NOBODY).gid(NOBODY);
    }
    cmd.output().expect("the binary runs")
}

/// Where [`nobody_binary`] copied the binary, once it did.
static NOBODY_COPY: std::sync::OnceLock<Result<std::path::PathBuf, String>> = std::sync::OnceLock::new();

/// The binary copied where `nobody` can reach it: the build's own copy may sit in a
/// checkout under a private (0700) directory, which `nobody` cannot enter. The copy lives
/// in a fresh world-readable directory under `/tmp`, made once per test process.
fn nobody_binary() -> Result<std::path::PathBuf, String> {
    NOBODY_COPY
        .get_or_init(|| {
            let dir = Path::new("/tmp").join(format!("rolegate-nobody-bin-{}", std::process::id()));
            let _ = fs::remove_dir_all(&dir);
            fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
            fs::set_permissions(&dir, fs::Permissions::from_mode(0o755)).map_err(|e| e.to_string())?;
            let bin = dir.join("rolegate");
            fs::copy(env!("CARGO_BIN_EXE_rolegate"), &bin).map_err(|e| format!("copying the binary: {e}"))?;
            fs::set_permissions(&bin, fs::Permissions::from_mode(0o755)).map_err(|e| e.to_string())?;
            Ok(bin)
        })
        .clone()
}

/// Whether a command run as `nobody` can run the binary and reach `store` (its
/// directories must be enterable by others); the reason when it cannot.
fn nobody_can_run(store: &Path) -> Result<(), String> {
    let bin = nobody_binary()?;
    let probe = Command::new(&bin)
        .args(["outbox", "--store"])
        .arg(store)
        .env("ROLEGATE_SIGNING_KEY", KEY)
        .uid(NOBODY)
        .gid(NOBODY)
        .output()
        .map_err(|e| format!("running {} as nobody: {e}", bin.display()))?;
    if probe.status.code() == Some(0) {
        Ok(())
    } else {
        Err(format!("nobody cannot read {}: {}", store.display(), String::from_utf8_lossy(&probe.stderr).trim()))
    }
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

const APPROVE: &[&str] = &["approvals", "approve", "req-1", "--key", "lena.key"];

/// Every command that reads or decides an existing store.
const DECIDING: &[&[&str]] = &[
    APPROVE,
    &["approvals", "deny", "req-1", "--key", "lena.key"],
    &["approvals", "cancel", "req-1", "--as", "kwame"],
    &["approvals", "list"],
];

/// Parks a run that wants to send one e-mail; returns the store's bytes afterwards.
fn park(store: &Path) -> Vec<u8> {
    let parked = rolegate(store, &["run", "--task", "reply", "--user", "kwame", crate::util::REPLY_GOAL], false);
    assert_eq!(parked.status.code(), Some(0), "{}", stderr(&parked));
    assert!(stdout(&parked).contains("run-1 awaiting_approval needs_approval"), "{}", stdout(&parked));
    // lena's key file: hers alone (0600), owned by the user the read-only cases run as
    let key = crate::util::register_lena(store, KEY);
    std::os::unix::fs::chown(&key, Some(NOBODY), Some(NOBODY)).unwrap();
    fs::read(store).unwrap()
}

/// The e-mails the store records as sent.
fn sent(store: &Path) -> usize {
    let out = rolegate(store, &["outbox", "--format", "json"], false);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    serde_json::from_slice::<serde_json::Value>(&out.stdout).unwrap().as_array().unwrap().len()
}

/// Approves req-1 on a sound store: the e-mail goes out once.
fn approve_sends_once(store: &Path) {
    let approved = rolegate(store, APPROVE, false);
    assert_eq!(approved.status.code(), Some(0), "{}", stderr(&approved));
    assert!(stdout(&approved).contains("run-1 done done sources=o1,o2,o3 emails_sent=1"), "{}", stdout(&approved));
    assert_eq!(sent(store), 1);
}

/// A second approval of req-1: refused, nothing sent, still one e-mail.
fn approve_again_sends_nothing(store: &Path) {
    let again = rolegate(store, APPROVE, false);
    assert_eq!(again.status.code(), Some(1), "{}", stderr(&again));
    assert!(stdout(&again).contains("not_pending") && stdout(&again).contains("emails_sent=0"), "{}", stdout(&again));
    assert_eq!(sent(store), 1, "never sent twice");
}

#[test]
fn a_store_removed_between_run_and_approve_is_an_error_and_is_not_created_anew() {
    let store = temp_dir("store-removed").join("rolegate.db");
    let saved = park(&store);
    fs::remove_file(&store).unwrap();
    for args in DECIDING.iter().chain([&["outbox"][..]].iter()) {
        let out = rolegate(&store, args, false);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert!(stderr(&out).contains("no such file; nothing was created"), "{args:?}: {}", stderr(&out));
        assert!(!store.exists(), "{args:?} created a store in place of the lost one");
    }
    // the file comes back (from a backup): the approval was not lost, and runs once
    fs::write(&store, &saved).unwrap();
    approve_sends_once(&store);
    approve_again_sends_nothing(&store);
}

/// Makes `path` read-only: mode 0444. Returns true when a command must also run as
/// another user to feel it (this process can still write the file: it runs as root).
fn make_read_only(path: &Path) -> bool {
    fs::set_permissions(path, fs::Permissions::from_mode(0o444)).unwrap();
    fs::OpenOptions::new().write(true).open(path).is_ok()
}

fn make_writable(path: &Path) {
    fs::set_permissions(path, fs::Permissions::from_mode(0o644)).unwrap();
}

#[test]
fn a_read_only_store_decides_nothing_and_the_approval_runs_once_when_it_is_writable() {
    let store = temp_dir("store-read-only").join("rolegate.db");
    let saved = park(&store);
    let as_nobody = make_read_only(&store);
    if as_nobody && let Err(why) = nobody_can_run(&store) {
        // e.g. a temporary directory only this user may enter: the test cannot show
        // a read-only file to a user who cannot reach it at all
        println!("skipped: this test needs another user (nobody) to reach the store: {why}");
        make_writable(&store);
        remove_nobody_binary();
        return;
    }
    for args in DECIDING {
        let out = rolegate(&store, args, as_nobody);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}{}", stdout(&out), stderr(&out));
        assert!(stderr(&out).contains("read-only; nothing was decided or written"), "{args:?}: {}", stderr(&out));
    }
    assert_eq!(fs::read(&store).unwrap(), saved, "the file is as it was");
    let listed = rolegate(&store, &["outbox"], as_nobody);
    assert_eq!((listed.status.code(), stdout(&listed).as_str()), (Some(0), ""), "reading needs no writing");
    make_writable(&store);
    approve_sends_once(&store);
    // read-only again after the approval: a second approval is refused before anything
    let approved = fs::read(&store).unwrap();
    let as_nobody = make_read_only(&store);
    let out = rolegate(&store, APPROVE, as_nobody);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert_eq!(fs::read(&store).unwrap(), approved);
    make_writable(&store);
    approve_again_sends_nothing(&store);
    remove_nobody_binary();
}

/// Removes the copy [`nobody_binary`] made, if it made one.
fn remove_nobody_binary() {
    if let Some(Ok(bin)) = NOBODY_COPY.get()
        && let Some(dir) = bin.parent()
    {
        let _ = fs::remove_dir_all(dir);
    }
}

#[test]
fn a_store_cut_short_is_refused_untouched_and_nothing_is_lost_or_sent_twice() {
    let store = temp_dir("store-cut").join("rolegate.db");
    let saved = park(&store);
    let page = 4096;
    assert_eq!(saved.len() % page, 0, "a store is whole pages");
    // cut: to nothing, inside the header, inside the first page, to one page and to all
    // pages but the last; SQLite itself finds each (an empty file is refused as such)
    let cuts = [0, 50, 100, page, saved.len() - page];
    for cut in cuts {
        fs::write(&store, &saved[..cut]).unwrap();
        for args in DECIDING.iter().chain([&["outbox"][..]].iter()) {
            let out = rolegate(&store, args, false);
            assert_eq!(out.status.code(), Some(2), "cut to {cut} bytes, {args:?}: {}", stdout(&out));
            let err = stderr(&out);
            let said = if cut == 0 {
                err.contains("the file is empty") && err.contains("nothing was read or created")
            } else {
                err.contains("SQLite reports the file damaged") && err.contains("left untouched")
                    || err.contains("not a rolegate store") && err.contains("file is not a database")
            };
            assert!(said, "cut to {cut}: {err}");
            assert_eq!(fs::read(&store).unwrap(), &saved[..cut], "cut to {cut}, {args:?}: the file was changed");
        }
    }
    // cut inside the last page: SQLite reads the lost bytes as zeros and finds nothing; the
    // rows those bytes held no longer verify and are refused by name, nothing runs
    fs::write(&store, &saved[..saved.len() - 1]).unwrap();
    let out = rolegate(&store, APPROVE, false);
    assert_ne!(out.status.code(), Some(0), "{}", stdout(&out));
    assert!(stderr(&out).contains("refused") && stderr(&out).contains("run-1"), "{}", stderr(&out));
    assert_eq!(sent(&store), 0, "nothing was sent from a cut store");
    fs::write(&store, &saved).unwrap();
    approve_sends_once(&store);
    let approved = fs::read(&store).unwrap();
    fs::write(&store, &approved[..approved.len() / 2]).unwrap();
    let out = rolegate(&store, APPROVE, false);
    assert_eq!(out.status.code(), Some(2), "{}", stdout(&out));
    fs::write(&store, &approved).unwrap();
    approve_again_sends_nothing(&store);
}
