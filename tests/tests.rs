//! The integration tests: one target, a module per area.

mod util;

mod architecture;

mod single_loop;
mod single_memory;
mod single_parsers;
mod single_state;
mod single_table;

mod designs_card;
mod designs_grade;
mod designs_plans;
mod designs_policypal;
mod designs_table;
mod durable_crash;
mod durable_http;
mod durable_store;
mod durable_support;
mod http_failures;
mod http_interop;
mod http_limits;
mod http_multi;
mod http_record;
mod http_runs;
mod http_server;
mod human_approvals;
mod human_cli;
mod human_identity;
mod human_keys;
mod human_memory;
mod human_resume;
mod human_store;
mod store_concurrency;
mod store_effects;
mod store_outbox;
mod store_quarantine;

mod call_graph_labels;
mod hardening_corpora;
mod hardening_exit;
mod hardening_faults;
mod hardening_limits;
mod hardening_props;
mod hardening_regressions;
mod hardening_roles;
mod hardening_secrets;
mod hardening_store;
mod hardening_trace;
mod hidden_text;
mod hot_path;
mod ifc_labels;
mod memory_labels;
mod multi_actors;
mod multi_call_graph;
mod multi_parsers;
mod multi_table;
mod otel_export;

mod attack_classes;
mod report_attack;
mod report_cells;
mod results_tables;
mod run_usage;
mod suite_checkers;
mod suite_experiments;
mod suite_matrix;
mod suite_report;
mod suite_reuse;
mod suite_row_errors;
mod suite_rows;
mod suite_templates;
mod suite_transforms;
mod template_results;
mod usage_answered;
