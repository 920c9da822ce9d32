//! Results files: an experiment's finished cells, one JSON line each, after a header line
//! naming the experiment ([`ExperimentConfig`]) and the shard. A run appends a line as
//! soon as a cell finishes and flushes it, so a killed run loses at most the cells in
//! flight; running again with the same file skips the cells it holds. Lines are in the
//! order cells finished; every table is built in the experiment's own order, so the order
//! of the lines never shows.
//!
//! A cell is one task × payload × configuration × repetition of the matrix, or one row ×
//! repetition of the scenario tables. Its id is stable text ([`matrix_cell`],
//! [`row_cell`]), which is what a shard is chosen by.
//!
//! A file is refused, by name, when its header does not match the run (another
//! configuration, model, repetition count, shard or data), when a line is not a cell of
//! the experiment, or when a cell appears twice. A last line without its newline is a
//! write the kill cut short: it is dropped and its cell runs again.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};
use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use super::shard::Shard;

/// The format version a results file's header states. Version 2: a matrix cell also
/// keeps the payload's style, the graded answer, where and by which code it was stopped,
/// its model calls, tokens, credits and wall time. Version 3: a template payload's cell
/// names its template, so the figures per template are counted again from the cells (a
/// resumed run and a merge of shards print them as one run does). A file of an older
/// version is refused by name.
pub const RESULTS_VERSION: u32 = 3;

/// Most cells of one experiment (a header naming more is refused before its cells are
/// listed).
pub const MAX_CELLS: usize = 10_000_000;

/// Most runs of one cell (`--repeat`).
pub const MAX_REPEAT: u32 = 10_000;

/// Most bytes of one line of a results file.
pub const MAX_RESULT_LINE_BYTES: usize = 1 << 20;

/// What an experiment runs: enough to list every cell and to tell two experiments apart.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExperimentConfig {
    /// `matrix` or `suite`.
    pub kind: String,
    /// The matrix's configurations, by label, in order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub configs: Vec<String>,
    /// The matrix's benign task ids, in order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tasks: Vec<String>,
    /// The matrix's payload ids, in order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub attacks: Vec<String>,
    /// The suite's row ids, in order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rows: Vec<String>,
    /// Runs per cell.
    pub repeat: u32,
    /// Rates are printed with 95% Wilson intervals.
    pub intervals: bool,
    /// Who decides: `single` and each role, as `--model` values (the compromised fakes
    /// when absent).
    #[serde(default)]
    pub models: BTreeMap<String, String>,
    /// SHA-256 of each input that shapes the runs (world, policy, prompts, tasks, catalog,
    /// rows, prices), by name.
    #[serde(default)]
    pub data: BTreeMap<String, String>,
}

/// The id of a matrix cell: configuration label, task, payload (empty for the benign run)
/// and repetition, joined by `|`.
pub fn matrix_cell(config: &str, task: &str, attack: Option<&str>, rep: u32) -> String {
    format!("{config}|{task}|{}|{rep}", attack.unwrap_or(""))
}

/// The id of a scenario-row cell: row id and repetition.
pub fn row_cell(row: &str, rep: u32) -> String {
    format!("{row}|{rep}")
}

impl ExperimentConfig {
    /// Every cell id, in the experiment's order: configuration, task, benign run then each
    /// payload, repetition (matrix); row, repetition (suite).
    pub fn cells(&self) -> Vec<String> {
        let mut out = Vec::new();
        if self.kind == "suite" {
            for row in &self.rows {
                out.extend((0..self.repeat).map(|rep| row_cell(row, rep)));
            }
            return out;
        }
        for config in &self.configs {
            for task in &self.tasks {
                let variants = std::iter::once(None).chain(self.attacks.iter().map(|a| Some(a.as_str())));
                for attack in variants {
                    out.extend((0..self.repeat).map(|rep| matrix_cell(config, task, attack, rep)));
                }
            }
        }
        out
    }

    /// How many cells the experiment has; `None` when the count overflows.
    pub fn cell_count(&self) -> Option<usize> {
        let repeat = usize::try_from(self.repeat).ok()?;
        if self.kind == "suite" {
            return self.rows.len().checked_mul(repeat);
        }
        let variants = self.attacks.len().checked_add(1)?;
        self.configs.len().checked_mul(self.tasks.len())?.checked_mul(variants)?.checked_mul(repeat)
    }

    /// The cells of `shard` (all with `None`), in order.
    pub fn cells_of(&self, shard: Option<Shard>) -> Vec<String> {
        self.cells().into_iter().filter(|c| shard.is_none_or(|s| s.holds(c))).collect()
    }

    /// The name of the first field where `self` and `other` differ.
    fn first_difference(&self, other: &Self) -> Option<&'static str> {
        let fields: [(&'static str, bool); 9] = [
            ("kind", self.kind == other.kind),
            ("configs", self.configs == other.configs),
            ("tasks", self.tasks == other.tasks),
            ("attacks", self.attacks == other.attacks),
            ("rows", self.rows == other.rows),
            ("repeat", self.repeat == other.repeat),
            ("intervals", self.intervals == other.intervals),
            ("models", self.models == other.models),
            ("data", self.data == other.data),
        ];
        fields.iter().find(|(_, same)| !same).map(|(name, _)| *name)
    }
}

/// The first line of a results file.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ResultsHeader {
    /// [`RESULTS_VERSION`].
    pub rolegate_results: u32,
    /// The experiment.
    pub config: ExperimentConfig,
    /// The shard this file holds, `None` for all cells.
    pub shard: Option<Shard>,
}

/// One finished cell.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CellLine {
    /// The cell id.
    pub cell: String,
    /// What it gave (a matrix run, or a row's outcome).
    pub result: Value,
}

/// Why a results file (or a set of them) was refused.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ResultsError {
    /// The file could not be read or written.
    #[error("{path}: {message}")]
    Io {
        /// The file.
        path: String,
        /// What failed.
        message: String,
    },
    /// The first line is not a results header.
    #[error("{path}: not a rolegate results file (the first line is no header): {message}")]
    NotResults {
        /// The file.
        path: String,
        /// What the parser said.
        message: String,
    },
    /// The header names another experiment or shard than the run.
    #[error(
        "{path}: mismatched_configuration: the file was written by another experiment ({field} differs); use another --out file, or --force to start it over"
    )]
    Mismatch {
        /// The file.
        path: String,
        /// The first field that differs.
        field: String,
    },
    /// A line is not a cell line.
    #[error("{path}: line {line}: bad_line: {message}")]
    BadLine {
        /// The file.
        path: String,
        /// 1-based line number.
        line: usize,
        /// What is wrong.
        message: String,
    },
    /// A cell that is not one of the experiment's (or of the file's shard).
    #[error("{path}: line {line}: unknown_cell: {cell} is not a cell of this experiment{shard}")]
    UnknownCell {
        /// The file.
        path: String,
        /// 1-based line number.
        line: usize,
        /// The cell id.
        cell: String,
        /// ` (shard I/N)` or empty.
        shard: String,
    },
    /// A cell twice in one file, or in two files of a merge.
    #[error("overlapping_cell: {cell} is in {first} and in {second}")]
    Overlap {
        /// The cell id.
        cell: String,
        /// Where it was first (file:line).
        first: String,
        /// Where it was again.
        second: String,
    },
    /// Cells no merged file holds.
    #[error("missing_cells: {count} cell(s) of the experiment are in no file, the first: {first}")]
    Missing {
        /// How many.
        count: usize,
        /// The first in the experiment's order.
        first: String,
    },
    /// Files of a merge that were written by different experiments.
    #[error("mismatched_configuration: {path} was written by another experiment than {first} ({field} differs)")]
    MergeMismatch {
        /// The file that differs.
        path: String,
        /// The first file.
        first: String,
        /// The first field that differs (or `shard` for different shard counts).
        field: String,
    },
    /// No file to merge.
    #[error("merge needs at least one results file")]
    NoFiles,
}

fn io(path: &Path, e: impl std::fmt::Display) -> ResultsError {
    ResultsError::Io { path: path.display().to_string(), message: e.to_string() }
}

/// SHA-256 of `bytes` in lower-case hex.
pub fn sha256_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes).iter().map(|b| format!("{b:02x}")).collect()
}

/// A results file as read: its header, its cell lines (with their line numbers), and the
/// byte length of its complete lines (a torn last line ends past it).
struct Read {
    header: ResultsHeader,
    cells: Vec<(usize, CellLine)>,
    complete: u64,
}

fn read(path: &Path, text: &str) -> Result<Read, ResultsError> {
    let p = path.display().to_string();
    // a last line without its newline is a write cut short: not part of the file
    let complete = text.rfind('\n').map_or(0, |i| i + 1);
    let mut lines = text[..complete].lines().enumerate();
    let header = match lines.next() {
        Some((_, l)) => serde_json::from_str::<ResultsHeader>(l)
            .map_err(|e| ResultsError::NotResults { path: p.clone(), message: e.to_string() })?,
        None => return Err(ResultsError::NotResults { path: p, message: "the file has no complete line".into() }),
    };
    if header.config.repeat == 0
        || header.config.repeat > MAX_REPEAT
        || header.config.cell_count().is_none_or(|n| n > MAX_CELLS)
    {
        return Err(ResultsError::NotResults {
            path: p,
            message: format!("the header names 0 or more than {MAX_CELLS} cells, or a repeat over {MAX_REPEAT}"),
        });
    }
    if header.rolegate_results != RESULTS_VERSION {
        return Err(ResultsError::NotResults {
            path: p,
            message: format!(
                "format version {}, this build reads {RESULTS_VERSION} (its cells are not read back: run the experiment again with --force)",
                header.rolegate_results
            ),
        });
    }
    let expected: BTreeSet<String> = header.config.cells_of(header.shard).into_iter().collect();
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    let mut cells = Vec::new();
    for (i, l) in lines {
        let line = i + 1;
        if l.len() > MAX_RESULT_LINE_BYTES {
            return Err(ResultsError::BadLine {
                path: p,
                line,
                message: format!("longer than {MAX_RESULT_LINE_BYTES} bytes"),
            });
        }
        let cell: CellLine = serde_json::from_str(l).map_err(|e| ResultsError::BadLine {
            path: p.clone(),
            line,
            message: e.to_string(),
        })?;
        if !expected.contains(&cell.cell) {
            let shard = header.shard.map_or(String::new(), |s| format!(" (shard {s})"));
            return Err(ResultsError::UnknownCell { path: p, line, cell: cell.cell, shard });
        }
        if let Some(first) = seen.insert(cell.cell.clone(), line) {
            return Err(ResultsError::Overlap {
                cell: cell.cell,
                first: format!("{p}:{first}"),
                second: format!("{p}:{line}"),
            });
        }
        cells.push((line, cell));
    }
    Ok(Read { header, cells, complete: complete as u64 })
}

/// Reads a whole results file (for `merge`).
///
/// # Errors
/// [`ResultsError`] naming the file and the line.
pub fn read_results(path: &Path, max_bytes: u64) -> Result<(ResultsHeader, Vec<CellLine>), ResultsError> {
    let text = read_bounded(path, max_bytes)?;
    let r = read(path, &text)?;
    Ok((r.header, r.cells.into_iter().map(|(_, c)| c).collect()))
}

fn read_bounded(path: &Path, max_bytes: u64) -> Result<String, ResultsError> {
    let meta = std::fs::metadata(path).map_err(|e| io(path, e))?;
    if !meta.is_file() {
        return Err(io(path, "not a regular file"));
    }
    if meta.len() > max_bytes {
        return Err(io(path, format!("larger than {max_bytes} bytes")));
    }
    std::fs::read_to_string(path).map_err(|e| io(path, e))
}

/// An open results file that cells are appended to.
#[derive(Debug)]
pub struct ResultsFile {
    path: PathBuf,
    file: Mutex<std::fs::File>,
    /// Lines appended by this process.
    appended: std::sync::atomic::AtomicUsize,
    /// Crash tests only: abort the process right after this many lines.
    crash_after: Option<usize>,
}

impl ResultsFile {
    /// Opens `path` for the run `header` describes. A missing or empty file (or any file
    /// with `force`) is started over with the header; an existing one must carry this
    /// header, and its cells are returned (by id) so the run skips them.
    ///
    /// # Errors
    /// [`ResultsError`]: unreadable, not a results file, another experiment, a bad line.
    pub fn open(
        path: &Path,
        header: &ResultsHeader,
        force: bool,
        max_bytes: u64,
    ) -> Result<(Self, BTreeMap<String, Value>), ResultsError> {
        let existing = match std::fs::metadata(path) {
            Ok(m) if m.len() > 0 && !force => Some(read_bounded(path, max_bytes)?),
            Ok(m) if !m.is_file() => return Err(io(path, "not a regular file")),
            _ => None,
        };
        let mut done = BTreeMap::new();
        let file = match existing {
            None => {
                let mut f = std::fs::File::create(path).map_err(|e| io(path, e))?;
                let line = serde_json::to_string(header).map_err(|e| io(path, e))?;
                f.write_all(format!("{line}\n").as_bytes()).map_err(|e| io(path, e))?;
                f.flush().map_err(|e| io(path, e))?;
                f
            }
            Some(text) => {
                let r = read(path, &text)?;
                let field = if r.header.shard == header.shard {
                    r.header.config.first_difference(&header.config)
                } else {
                    Some("shard")
                };
                if let Some(field) = field {
                    return Err(ResultsError::Mismatch { path: path.display().to_string(), field: field.into() });
                }
                let f = std::fs::OpenOptions::new().write(true).open(path).map_err(|e| io(path, e))?;
                // drop a torn last line, then append after the complete ones
                f.set_len(r.complete).map_err(|e| io(path, e))?;
                let mut f = std::fs::OpenOptions::new().append(true).open(path).map_err(|e| io(path, e))?;
                f.flush().map_err(|e| io(path, e))?;
                done.extend(r.cells.into_iter().map(|(_, c)| (c.cell, c.result)));
                f
            }
        };
        let file = Self { path: path.to_path_buf(), file: Mutex::new(file), appended: 0.into(), crash_after: None };
        Ok((file, done))
    }

    /// Crash tests only: the process aborts right after appending its `n`th line, as a
    /// `kill -9` would stop it (the cells in flight are lost, the lines written stay).
    #[must_use]
    pub fn crash_after(self, n: usize) -> Self {
        Self { crash_after: Some(n), ..self }
    }

    /// Appends one finished cell as one line, written in one call and flushed.
    ///
    /// # Errors
    /// [`ResultsError::Io`] when the line cannot be written.
    pub fn append(&self, cell: &str, result: Value) -> Result<(), ResultsError> {
        let line =
            serde_json::to_string(&CellLine { cell: cell.to_string(), result }).map_err(|e| io(&self.path, e))?;
        let mut f = self.file.lock().map_err(|_| io(&self.path, "a writer panicked"))?;
        f.write_all(format!("{line}\n").as_bytes()).map_err(|e| io(&self.path, e))?;
        f.flush().map_err(|e| io(&self.path, e))?;
        let n = self.appended.fetch_add(1, std::sync::atomic::Ordering::SeqCst) + 1;
        if self.crash_after == Some(n) {
            std::process::abort();
        }
        Ok(())
    }
}

/// Merges shard files: every file must name the same experiment (and the same shard
/// count), no cell may be in two files, and together they must hold every cell.
/// Returns the experiment and every cell's result, by id.
///
/// # Errors
/// [`ResultsError::MergeMismatch`], [`ResultsError::Overlap`], [`ResultsError::Missing`],
/// or the error of a file that does not read.
pub fn merge(files: &[PathBuf], max_bytes: u64) -> Result<(ExperimentConfig, BTreeMap<String, Value>), ResultsError> {
    let mut first: Option<(String, ResultsHeader)> = None;
    let mut cells: BTreeMap<String, (String, Value)> = BTreeMap::new();
    for path in files {
        let p = path.display().to_string();
        let text = read_bounded(path, max_bytes)?;
        let r = read(path, &text)?;
        if let Some((first_path, h)) = &first {
            let field = match (h.shard, r.header.shard) {
                (Some(a), Some(b)) if a.count != b.count => Some("shard"),
                _ => h.config.first_difference(&r.header.config),
            };
            if let Some(field) = field {
                return Err(ResultsError::MergeMismatch { path: p, first: first_path.clone(), field: field.into() });
            }
        } else {
            first = Some((p.clone(), r.header.clone()));
        }
        for (line, c) in r.cells {
            let here = format!("{p}:{line}");
            if let Some((there, _)) = cells.get(&c.cell) {
                return Err(ResultsError::Overlap { cell: c.cell, first: there.clone(), second: here });
            }
            cells.insert(c.cell, (here, c.result));
        }
    }
    let (_, header) = first.ok_or(ResultsError::NoFiles)?;
    let all = header.config.cells();
    let missing: Vec<&String> = all.iter().filter(|c| !cells.contains_key(*c)).collect();
    if let Some(first) = missing.first() {
        return Err(ResultsError::Missing { count: missing.len(), first: (*first).clone() });
    }
    Ok((header.config, cells.into_iter().map(|(k, (_, v))| (k, v)).collect()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config() -> ExperimentConfig {
        ExperimentConfig {
            kind: "suite".into(),
            rows: vec!["s01".into(), "s02".into(), "s03".into()],
            repeat: 2,
            ..ExperimentConfig::default()
        }
    }

    fn header(shard: Option<Shard>) -> ResultsHeader {
        ResultsHeader { rolegate_results: RESULTS_VERSION, config: config(), shard }
    }

    fn dir(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("rolegate-results-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn cells_are_listed_in_order_and_matrix_ids_name_every_part() {
        assert_eq!(config().cells(), ["s01|0", "s01|1", "s02|0", "s02|1", "s03|0", "s03|1"]);
        let m = ExperimentConfig {
            kind: "matrix".into(),
            configs: vec!["c1".into()],
            tasks: vec!["b1".into()],
            attacks: vec!["a1".into(), "a2".into()],
            repeat: 1,
            ..ExperimentConfig::default()
        };
        assert_eq!(m.cells(), ["c1|b1||0", "c1|b1|a1|0", "c1|b1|a2|0"]);
    }

    #[test]
    fn a_file_is_resumed_a_torn_line_dropped_and_another_experiment_refused() {
        let d = dir("resume");
        let path = d.join("out.jsonl");
        let (f, done) = ResultsFile::open(&path, &header(None), false, 1 << 20).unwrap();
        assert!(done.is_empty());
        f.append("s01|0", serde_json::json!({"ok": true})).unwrap();
        drop(f);
        // a kill in the middle of a write leaves a line without its newline
        std::fs::write(&path, std::fs::read_to_string(&path).unwrap() + "{\"cell\":\"s02|0\",\"res").unwrap();
        let (f, done) = ResultsFile::open(&path, &header(None), false, 1 << 20).unwrap();
        assert_eq!(done.keys().collect::<Vec<_>>(), ["s01|0"]);
        f.append("s02|0", serde_json::json!(1)).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        assert_eq!(text.lines().count(), 3, "{text}");
        assert!(text.ends_with("{\"cell\":\"s02|0\",\"result\":1}\n"));

        let mut other = header(None);
        other.config.repeat = 3;
        let err = ResultsFile::open(&path, &other, false, 1 << 20).unwrap_err().to_string();
        assert!(err.contains("mismatched_configuration") && err.contains("repeat differs"), "{err}");
        let err = ResultsFile::open(&path, &header(Some(Shard { index: 0, count: 2 })), false, 1 << 20)
            .unwrap_err()
            .to_string();
        assert!(err.contains("shard differs"), "{err}");
        // --force starts it over
        let (_, done) = ResultsFile::open(&path, &other, true, 1 << 20).unwrap();
        assert!(done.is_empty());
        assert_eq!(std::fs::read_to_string(&path).unwrap().lines().count(), 1);

        let mut huge = header(None);
        huge.config.repeat = MAX_REPEAT;
        huge.config.rows = (0..1001).map(|i| format!("r{i}")).collect();
        std::fs::write(&path, format!("{}\n", serde_json::to_string(&huge).unwrap())).unwrap();
        let err = ResultsFile::open(&path, &huge, false, 1 << 20).unwrap_err().to_string();
        assert!(err.contains("more than 10000000 cells"), "{err}");
        std::fs::write(&path, "{\"not\":\"a header\"}\n").unwrap();
        let err = ResultsFile::open(&path, &header(None), false, 1 << 20).unwrap_err().to_string();
        assert!(err.contains("not a rolegate results file"), "{err}");
        let h = serde_json::to_string(&header(None)).unwrap();
        std::fs::write(&path, format!("{h}\n{{\"cell\":\"s09|0\",\"result\":1}}\n")).unwrap();
        let err = ResultsFile::open(&path, &header(None), false, 1 << 20).unwrap_err().to_string();
        assert!(err.contains("line 2: unknown_cell: s09|0"), "{err}");
        std::fs::write(
            &path,
            format!("{h}\n{{\"cell\":\"s01|0\",\"result\":1}}\n{{\"cell\":\"s01|0\",\"result\":2}}\n"),
        )
        .unwrap();
        let err = ResultsFile::open(&path, &header(None), false, 1 << 20).unwrap_err().to_string();
        assert!(err.contains("overlapping_cell: s01|0"), "{err}");
        std::fs::write(&path, format!("{h}\n{{\"cell\":\"s01|0\",\"result\":1,\"extra\":0}}\n")).unwrap();
        let err = ResultsFile::open(&path, &header(None), false, 1 << 20).unwrap_err().to_string();
        assert!(err.contains("line 2: bad_line") && err.contains("unknown field"), "{err}");
    }

    #[test]
    fn a_merge_refuses_overlaps_gaps_and_other_experiments_by_name() {
        let d = dir("merge");
        let write = |name: &str, h: &ResultsHeader, cells: &[&str]| {
            let path = d.join(name);
            let (f, _) = ResultsFile::open(&path, h, true, 1 << 20).unwrap();
            for c in cells {
                f.append(c, serde_json::json!(c)).unwrap();
            }
            path
        };
        let shards: Vec<Shard> = (0..2).map(|index| Shard { index, count: 2 }).collect();
        let all = config().cells();
        let part = |s: Shard| all.iter().filter(|c| s.holds(c)).map(String::as_str).collect::<Vec<_>>();
        let a = write("a", &header(Some(shards[0])), &part(shards[0]));
        let b = write("b", &header(Some(shards[1])), &part(shards[1]));
        let (cfg, cells) = merge(&[a.clone(), b.clone()], 1 << 20).unwrap();
        assert_eq!(cfg, config());
        assert_eq!(cells.keys().cloned().collect::<BTreeSet<_>>(), all.iter().cloned().collect());

        let err = merge(std::slice::from_ref(&a), 1 << 20).unwrap_err().to_string();
        assert!(err.starts_with("missing_cells:"), "{err}");
        let whole = write("whole", &header(None), &all.iter().map(String::as_str).collect::<Vec<_>>());
        let err = merge(&[a.clone(), whole], 1 << 20).unwrap_err().to_string();
        assert!(err.starts_with("overlapping_cell:"), "{err}");
        let mut other = header(Some(shards[1]));
        other.config.data.insert("policy".into(), "0".into());
        let c = write("c", &other, &[]);
        let err = merge(&[a.clone(), c], 1 << 20).unwrap_err().to_string();
        assert!(err.starts_with("mismatched_configuration:") && err.contains("data differs"), "{err}");
        let three = write("three", &header(Some(Shard { index: 1, count: 3 })), &[]);
        let err = merge(&[a, three], 1 << 20).unwrap_err().to_string();
        assert!(err.contains("shard differs"), "{err}");
        assert!(matches!(merge(&[], 1 << 20), Err(ResultsError::NoFiles)));
    }
}
