//! Evaluation: the scenario tables (single-agent and multi-agent) and what a row may add,
//! trace grading, the go/no-go list, designs and single versus multi side by side, and the
//! benchmark.

pub(crate) mod attack_classes;
pub(crate) mod bench;
pub(crate) mod checklist;
pub(crate) mod compare;
pub(crate) mod grade;
pub(crate) mod memory_rows;
pub(crate) mod multi_scenarios;
pub(crate) mod parked;
pub(crate) mod reuse;
pub(crate) mod rows;
pub(crate) mod scenarios;
pub(crate) mod single_vs_multi;

pub use attack_classes::{BUNDLED_CLASSES, bundled_attack_classes};
pub use bench::{BenchOptions, BenchReport, Peers, Rate, bench, durable_runs, ratios};
pub use checklist::{AUTOMATIC, ChecklistInput, MANUAL, unreached};
pub use checklist::{Attestation, Attested, AutoCheck, automatic, go_no_go};
pub use compare::{
    CompareModels, DESIGN_TABLE_COLUMNS, compare_report, compare_report_with, design_table, median, pal_row,
    plan_checks,
};
pub use compare::{
    CompareReport, DESIGN_ROW_HEADER, DESIGN_ROW_LEGEND, DesignRow, PAL_ROW_HEADER, PAL_ROW_LEGEND, PLAN_CHECK_HEADER,
    PalRow, PalSection, PlanCheckRow,
};
pub use grade::{TraceSpec, grade};
pub use memory_rows::{NoteWriter, PriorRun};
pub use multi_scenarios::{
    AnyRow, BUNDLED_MULTI, MultiRow, bundled_multi, parse_any_table, parse_any_table_in, parse_any_table_with,
    parse_multi_table, run_multi, run_multi_with,
};
pub use parked::ParkingGate;
pub use reuse::{MAX_SHARED_FILE_BYTES, RowFiles};
pub use rows::{ScopeWidth, Switch};
pub use scenarios::{SingleRow, bundled_single, parse_single_row, parse_single_table, run_single, run_single_with};
pub use single_vs_multi::compare;
