//! Input and output paths of the binary: a path read must be a regular file (a FIFO
//! would hang the read, `/dev/zero` would never end) no larger than a limit; a path
//! written may be a regular file, a path that does not exist yet, a character device
//! (`/dev/null`, `/dev/stdout` on a terminal) or a FIFO that a reader holds open (`--out
//! /dev/stdout | …`); a FIFO nobody reads, a directory, a socket or a block device is
//! refused before anything runs, since writing to it would hang or fail. A file that is not UTF-8 is refused
//! naming the line of its first bad byte.

use std::io::Read;
use std::path::Path;

/// The largest table, catalog or price file read (64 MiB).
pub(crate) const MAX_INPUT_BYTES: u64 = 64 << 20;

/// Refuses `path` unless it is a regular file (symbolic links are followed).
///
/// # Errors
/// A message naming the path and what it is instead.
pub(crate) fn regular_file(path: &Path) -> Result<std::fs::File, String> {
    let meta = std::fs::metadata(path).map_err(|e| format!("{}: {e}", path.display()))?;
    if !meta.is_file() {
        return Err(format!("{}: not a regular file ({}); give a file", path.display(), kind(&meta)));
    }
    let file = std::fs::File::open(path).map_err(|e| format!("{}: {e}", path.display()))?;
    // checked again on the open file: the path may have changed in between
    match file.metadata() {
        Ok(m) if m.is_file() => Ok(file),
        Ok(m) => Err(format!("{}: not a regular file ({})", path.display(), kind(&m))),
        Err(e) => Err(format!("{}: {e}", path.display())),
    }
}

/// Reads a regular file of at most `max` bytes as UTF-8 text.
///
/// # Errors
/// As [`regular_file`]; a file over `max` bytes; a file that is not UTF-8 (naming the
/// line and byte of the first bad byte).
pub(crate) fn read_text(path: &Path, max: u64) -> Result<String, String> {
    let file = regular_file(path)?;
    let mut bytes = Vec::new();
    file.take(max + 1).read_to_end(&mut bytes).map_err(|e| format!("{}: {e}", path.display()))?;
    if bytes.len() as u64 > max {
        return Err(format!("{}: larger than {max} bytes", path.display()));
    }
    String::from_utf8(bytes).map_err(|e| {
        let good = e.utf8_error().valid_up_to();
        let bytes = e.as_bytes();
        let line = bytes[..good].iter().filter(|b| **b == b'\n').count() + 1;
        let column = good - bytes[..good].iter().rposition(|b| *b == b'\n').map_or(0, |i| i + 1) + 1;
        format!("{}: line {line}: not UTF-8 (byte {column} of the line)", path.display())
    })
}

/// Refuses an output path that would hang or cannot take a stream of bytes: a FIFO no
/// process reads (opening it to write would block until one does), a directory, a
/// socket or a block device. A regular file, a missing path, a character device and a
/// FIFO with a reader pass.
///
/// # Errors
/// A message naming the path and what it is.
pub(crate) fn output_path(path: &Path) -> Result<(), String> {
    use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
    let Ok(meta) = std::fs::metadata(path) else { return Ok(()) };
    let t = meta.file_type();
    let refuse = |what: &str| Err(format!("{}: not a regular file ({what}); give a file to write", path.display()));
    if t.is_file() || t.is_char_device() {
        return Ok(());
    }
    if t.is_fifo() {
        // a non-blocking open for writing fails at once (ENXIO) when no process reads
        return match std::fs::OpenOptions::new().write(true).custom_flags(libc::O_NONBLOCK).open(path) {
            Ok(_) => Ok(()),
            Err(_) => refuse("a FIFO with no reader"),
        };
    }
    refuse(kind(&meta))
}

fn kind(meta: &std::fs::Metadata) -> &'static str {
    use std::os::unix::fs::FileTypeExt;
    let t = meta.file_type();
    if t.is_dir() {
        "a directory"
    } else if t.is_fifo() {
        "a FIFO"
    } else if t.is_char_device() {
        "a character device"
    } else if t.is_block_device() {
        "a block device"
    } else if t.is_socket() {
        "a socket"
    } else {
        "not a file"
    }
}
