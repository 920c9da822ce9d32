//! The injection test suite: rows run concurrently ([`run`]), the defense matrix
//! ([`matrix`]) and the line checkers ([`checkers`]); experiments of repeated cells with
//! results files, resume and shards ([`experiment`], [`results`], [`shard`]), and the 95%
//! Wilson interval of a rate ([`wilson`]).

pub mod agentdojo;
mod bounded;
pub(crate) mod checkers;
pub(crate) mod context;
pub(crate) mod experiment;
mod experiment_table;
mod graded;
pub(crate) mod matrix;
mod paired;
pub(crate) mod results;
pub(crate) mod run;
pub(crate) mod shard;
pub(crate) mod templated;
pub(crate) mod variants;
pub(crate) mod wilson;
pub use checkers::{CheckKind, Checker, LineVerdict, MAX_LINE_BYTES};
pub use experiment::{
    MatrixPlan, RowsPlan, StoredRow, matrix_experiment, matrix_of_cells, rows_experiment, rows_of_cells,
    run_matrix_plan, run_rows_plan,
};
pub use experiment_table::{
    BROKEN, COMPARE_LEAD, CellView, ConfigView, ExperimentRow, ExperimentTable, LEGEND, Lead, MATRIX_LEAD,
    MatrixDocument, percentile_ms,
};
pub use matrix::{
    Count, DefenseConfig, Figures, Intervals, Matrix, MatrixModels, MatrixSpec, RoleCompromise, VariantRun,
    bundled_benign_tasks, parse_benign_tasks, parse_benign_tasks_in, run_matrix,
};
pub use paired::{Paired, PairedRow, mcnemar_exact, paired_lines, paired_single_vs_multi};
pub use results::{
    CellLine, ExperimentConfig, MAX_CELLS, MAX_REPEAT, MAX_RESULT_LINE_BYTES, RESULTS_VERSION, ResultsError,
    ResultsFile, ResultsHeader, matrix_cell, merge, read_results, row_cell, sha256_hex,
};
pub use run::{RowResult, run_rows, run_rows_bounded};
pub use shard::{MAX_SHARDS, Shard, ShardError, shard_of};
pub use templated::{TemplateFigures, template_figures};
pub use variants::add_variants;
pub use wilson::{Interval, wilson};
