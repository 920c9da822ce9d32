//! Evaluation: the scenario tables (single-agent and multi-agent) and what a row may add,
//! trace grading, the go/no-go list, designs and single versus multi side by side, and the
//! benchmark.

pub mod bench;
pub mod checklist;
pub mod compare;
pub mod grade;
pub mod multi_scenarios;
pub mod rows;
pub mod scenarios;
pub mod single_vs_multi;

pub use checklist::{Attestation, Attested, AutoCheck, Verdict, automatic, go_no_go};
pub use compare::{
    CompareModels, CompareReport, DESIGN_TABLE_COLUMNS, DesignRow, PLAN_CHECK_GOAL, PalRow, PalSection, PlanCheckRow,
    compare_report, compare_report_with, design_table, design_table_with, median, pal_row, pal_row_with, plan_checks,
};
pub use grade::{Grade, TraceSpec, grade};
