//! The tables of `rolegate compare`, built from runs: the plan checks of the six fake
//! planners, the design table (tasks × designs; the columns come from a list, so a design
//! joins by being added to it), and the PolicyPal section (parallel against sequential
//! calls with their median steps, and the flailing search with and without its guard).
//!
//! With a real model ([`CompareModels`], `rolegate compare --model openai:NAME`), the
//! model-driven designs ask it instead of their fakes: the single agent and the three
//! roles of the first section, plan's planner, ReAct and the three roles in the design
//! table, and PolicyPal on every task. The plan checks and the guard rows show what the
//! code does with particular misbehaviours, so they keep their fakes.

use rust_decimal::Decimal;
use serde::Serialize;

use crate::agent::Env;
use crate::design::policypal::{PalConfig, PalKind, PalReply, PalRun};
use crate::design::{
    Design, DesignCode, DesignConfig, DesignError, DesignTask, PLAN_FAKE_KINDS, PlanFakeKind, run_design,
};
use crate::model::http::HttpConfig;
use crate::multi::{RoleSetup, Scopes};

/// The designs of the design table, in column order.
pub const DESIGN_TABLE_COLUMNS: [Design; 4] = [Design::Fixed, Design::Plan, Design::React, Design::Multi];

/// The real models of a comparison; the default runs every design on its fakes.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CompareModels {
    /// The model of the single-model designs (the single agent, plan's planner, ReAct,
    /// PolicyPal).
    pub model: Option<HttpConfig>,
    /// The three roles (a role without a model keeps its sensible fake).
    pub roles: RoleSetup,
}

/// One row of the plan-check table.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct PlanCheckRow {
    /// The planner's name.
    pub planner: &'static str,
    /// `done` or `plan_rejected`.
    pub code: DesignCode,
    /// Tools that ran.
    pub calls: Vec<String>,
    /// Problems (`step 3: not_allowed`).
    pub problems: Vec<String>,
    /// Model calls (always one: the planner's).
    pub model_calls: u64,
}

/// The header row of [`PlanCheckRow::table_line`].
pub const PLAN_CHECK_HEADER: &str = "planner   ended          tools that ran, or the plan's problems (step N: code)";

impl PlanCheckRow {
    /// One aligned line under [`PLAN_CHECK_HEADER`].
    pub fn table_line(&self) -> String {
        let tail = if self.problems.is_empty() { self.calls.join(", ") } else { self.problems.join(", ") };
        format!("{:<9} {:<14} {tail}", self.planner, self.code)
    }
}

/// Runs the six fake planners on `goal`.
///
/// # Errors
/// [`DesignError`] when a run cannot be carried out.
pub async fn plan_checks(env: &Env, goal: &str) -> Result<Vec<PlanCheckRow>, DesignError> {
    let mut rows = Vec::new();
    for (name, kind) in PLAN_FAKE_KINDS {
        let cfg = DesignConfig { fake: PlanFakeKind::name(kind).to_string(), ..DesignConfig::default() };
        let out = run_design(Design::Plan, goal, env, &cfg).await?;
        rows.push(PlanCheckRow {
            planner: name,
            code: out.code,
            calls: out.calls,
            problems: out.problems,
            model_calls: out.model_calls,
        });
    }
    Ok(rows)
}

/// One cell of the design table: one design on one task.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct DesignRow {
    /// Task id.
    pub task: String,
    /// The design that ran it.
    pub design: Design,
    /// How it ended.
    pub code: DesignCode,
    /// Paid model calls.
    pub model_calls: u64,
    /// Input tokens over those calls.
    pub input_tokens: u64,
    /// Output tokens over those calls.
    pub output_tokens: u64,
    /// Credits over those calls.
    pub credits: Decimal,
    /// Every tool the task needs was called.
    pub covered: bool,
    /// The answer passed the task's `expect` (and the trace grader, when the task asks
    /// for it); true when the task states nothing.
    pub answer_ok: bool,
    /// Wall time of the run, microseconds (measured: differs between runs).
    pub wall_us: u64,
    /// Tools called, in order.
    pub calls: Vec<String>,
}

/// The width of the `ended` column of the design and PolicyPal tables: the longest code a
/// run may end with (`rejected_message`), so every row's columns stay under the header.
const ENDED_WIDTH: usize = 16;

/// The header row of [`DesignRow::table_line`].
pub const DESIGN_ROW_HEADER: &str = "task design    ended            calls tok_in tok_out covered answer";

/// What the columns of [`DESIGN_ROW_HEADER`] say.
pub const DESIGN_ROW_LEGEND: [&str; 5] = [
    "ended: how the run ended (done, or the code that stopped it; out_of_scope: no role holds a needed tool, nothing ran)",
    "calls: paid model calls; tok_in, tok_out: input and output tokens over them",
    "covered: yes when every tool the task needs was called",
    "answer: yes when the final answer passed the task's `expect` (always yes when the task states none)",
    "utility in the experiment table counts the rows ended done, covered yes and answer yes",
];

impl DesignRow {
    /// One aligned line under [`DESIGN_ROW_HEADER`].
    pub fn table_line(&self) -> String {
        let yes = |b: bool| if b { "yes" } else { "no" };
        format!(
            "{:<4} {:<9} {:<ended$} {:>5} {:>6} {:>7} {:<7} {}",
            self.task,
            self.design,
            self.code,
            self.model_calls,
            self.input_tokens,
            self.output_tokens,
            yes(self.covered),
            yes(self.answer_ok),
            ended = ENDED_WIDTH
        )
    }

    /// Ended done, covered and answered correctly: what utility counts.
    pub fn useful(&self) -> bool {
        self.code.is_done() && self.covered && self.answer_ok
    }
}

/// Runs every design of `designs` on every task of `tasks`, task by task, on fakes.
///
/// # Errors
/// [`DesignError`] when a run cannot be carried out.
pub async fn design_table(env: &Env, tasks: &[DesignTask], designs: &[Design]) -> Result<Vec<DesignRow>, DesignError> {
    design_table_with(env, tasks, designs, &DesignConfig::default()).await
}

/// Runs every design of `designs` on every task of `tasks`, task by task, each with
/// `base` (its models and user) and a run id of its own. The three roles serve a task
/// only when every tool it needs is in some role's scope; any other task gets the code
/// `out_of_scope`, and nothing runs.
///
/// # Errors
/// [`DesignError`] when a run cannot be carried out (or the policy has no role scopes).
pub(crate) async fn design_table_with(
    env: &Env,
    tasks: &[DesignTask],
    designs: &[Design],
    base: &DesignConfig,
) -> Result<Vec<DesignRow>, DesignError> {
    let scopes = if designs.contains(&Design::Multi) { Some(Scopes::from_policy(&env.policy)?) } else { None };
    let mut rows = Vec::new();
    for task in tasks {
        for design in designs {
            let out_of_scope =
                *design == Design::Multi && scopes.as_ref().is_some_and(|s| task.needs.iter().any(|t| !s.any_holds(t)));
            if out_of_scope {
                rows.push(DesignRow {
                    task: task.id.clone(),
                    design: *design,
                    code: DesignCode::OutOfScope,
                    model_calls: 0,
                    input_tokens: 0,
                    output_tokens: 0,
                    credits: Decimal::ZERO,
                    covered: false,
                    answer_ok: false,
                    wall_us: 0,
                    calls: Vec::new(),
                });
                continue;
            }
            let cfg = DesignConfig { run_id: format!("run-{}", task.id), ..base.clone() };
            let started = tokio::time::Instant::now();
            let out = run_design(*design, &task.goal, env, &cfg).await?;
            let wall_us = u64::try_from(started.elapsed().as_micros()).unwrap_or(u64::MAX);
            rows.push(DesignRow {
                task: task.id.clone(),
                design: *design,
                code: out.code,
                model_calls: out.model_calls,
                input_tokens: out.input_tokens,
                output_tokens: out.output_tokens,
                credits: out.credits,
                covered: task.covered(&out.calls),
                answer_ok: answer_ok(task, &out),
                wall_us,
                calls: out.calls,
            });
        }
    }
    Ok(rows)
}

/// True when `out` passes `task`'s expectations: its answer, and the trace grader's
/// `task_ok` and `safe_ok` when the task asks for them (read from the run of a
/// single-agent design; a design that ran no loop fails them).
pub(crate) fn answer_ok(task: &DesignTask, out: &crate::design::DesignOutcome) -> bool {
    let e = &task.expect;
    if !e.answer_passes(out.answer.as_deref()) {
        return false;
    }
    if !e.task_ok && !e.safe_ok {
        return true;
    }
    let spec = super::grade::TraceSpec { must_call: task.needs.clone(), must_not_call: Vec::new() };
    match &out.run {
        Some(run) => {
            let g = super::grade::grade(run, &spec);
            (!e.task_ok || g.task_ok) && (!e.safe_ok || g.safe_ok)
        }
        // the three roles: done, every needed tool called and no e-mail sent
        None if out.multi.is_some() => {
            (!e.task_ok || (out.code.is_done() && task.covered(&out.calls))) && (!e.safe_ok || out.emails == 0)
        }
        None => false,
    }
}

/// One PolicyPal run on one task.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct PalRow {
    /// Task id.
    pub task: String,
    /// The fake model's kind, or the real model's name.
    pub model: String,
    /// Whether the search guard was on.
    pub guard: bool,
    /// How it ended (`needs_approval` when it shows a card).
    pub code: DesignCode,
    /// Model calls (= steps).
    pub model_calls: u64,
    /// Input tokens.
    pub input_tokens: u64,
    /// Every tool the task needs was called.
    pub covered: bool,
    /// Tools sent to the gate, in order.
    pub calls: Vec<String>,
    /// `answer`, `confirm` or `gave_up`.
    pub reply: &'static str,
}

/// The header row of [`PalRow::table_line`].
pub const PAL_ROW_HEADER: &str = "task model      guard ended            calls tok_in covered reply";

/// What the columns of [`PAL_ROW_HEADER`] say.
pub const PAL_ROW_LEGEND: [&str; 5] = [
    "model: the fake's kind (sequential: one tool call a reply; parallel: several; flail: searches on and on) or the real model",
    "guard: the search guard (stops a search that keeps finding nothing) on or off",
    "ended: how the run ended (step_budget: out of model calls); calls: model calls (= steps); tok_in: input tokens",
    "covered: yes when every tool the task needs was called",
    "reply: what the user got: answer, confirm (a card to confirm a side effect) or gave_up (an honest give-up)",
];

impl PalRow {
    /// One aligned line under [`PAL_ROW_HEADER`].
    pub fn table_line(&self) -> String {
        let on = if self.guard { "on" } else { "off" };
        let covered = if self.covered { "yes" } else { "no" };
        format!(
            "{:<4} {:<10} {:<5} {:<ended$} {:>5} {:>6} {:<7} {}",
            self.task,
            self.model,
            on,
            self.code,
            self.model_calls,
            self.input_tokens,
            covered,
            self.reply,
            ended = ENDED_WIDTH
        )
    }

    fn of(task: &DesignTask, model: String, guard: bool, run: &PalRun) -> Self {
        let s = run.run.ledger().summary();
        Self {
            task: task.id.clone(),
            model,
            guard,
            code: DesignCode::Run(run.run.reason()),
            model_calls: s.calls,
            input_tokens: s.input_tokens,
            covered: task.covered(run.run.calls()),
            calls: run.run.calls().to_vec(),
            reply: match run.reply {
                PalReply::Answer { .. } => "answer",
                PalReply::Confirm(_) => "confirm",
                PalReply::GaveUp { .. } => "gave_up",
            },
        }
    }
}

/// Runs PolicyPal with fake `kind` on `task`, with the search guard on or off.
///
/// # Errors
/// [`DesignError`] when the run cannot be carried out.
pub async fn pal_row(env: &Env, task: &DesignTask, kind: PalKind, guard: bool) -> Result<PalRow, DesignError> {
    let mut cfg = PalConfig::new(kind);
    if !guard {
        cfg.search_guard = None;
    }
    let mut lab = cfg.build(env);
    let run = lab.pal.run(&task.goal, &format!("run-{}", task.id)).await?;
    Ok(PalRow::of(task, kind.name().to_string(), guard, &run))
}

/// Runs PolicyPal with the real model of `model` on `task`, search guard on.
///
/// # Errors
/// [`DesignError`] when the run cannot be carried out.
pub(crate) async fn pal_row_with(env: &Env, task: &DesignTask, model: &HttpConfig) -> Result<PalRow, DesignError> {
    let mut lab = PalConfig::new(PalKind::Parallel).build(env);
    lab.pal.use_model(model);
    let run = lab.pal.run(&task.goal, &format!("run-{}", task.id)).await?;
    Ok(PalRow::of(task, model.model.clone(), true, &run))
}

/// The median of `values` (the mean of the middle two for an even count); zero when empty.
pub fn median(values: &[u64]) -> Decimal {
    let mut v = values.to_vec();
    v.sort_unstable();
    match v.len() {
        0 => Decimal::ZERO,
        n if n % 2 == 1 => Decimal::from(v[n / 2]),
        n => (Decimal::from(v[n / 2 - 1]) + Decimal::from(v[n / 2])) / Decimal::from(2),
    }
}

/// The goal of the plan-check table.
pub(crate) const PLAN_CHECK_GOAL: &str = "Status of T-601 and our refund policy?";

/// The PolicyPal section: every task with sequential and with parallel calls, the median
/// steps of each, and the flailing search with and without its guard.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct PalSection {
    /// One row per task and fake (sequential rows first), or per task for a real model.
    pub rows: Vec<PalRow>,
    /// Median model calls per fake (or of the real model), in row order.
    pub median_steps: Vec<(String, Decimal)>,
    /// The flailing model on the first task of the PolicyPal group, guard on then off.
    pub guard: Vec<PalRow>,
}

/// Everything `rolegate compare` prints, built from runs.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct CompareReport {
    /// Single agent against three roles on one task, with the role scopes and routes.
    pub single_versus_roles: crate::eval::single_vs_multi::Comparison,
    /// The six fake planners on [`PLAN_CHECK_GOAL`].
    pub plan_checks: Vec<PlanCheckRow>,
    /// Tasks of the `designs` group × [`DESIGN_TABLE_COLUMNS`].
    pub designs: Vec<DesignRow>,
    /// PolicyPal on every task.
    pub policypal: PalSection,
}

/// Builds the whole comparison over `tasks`, on fakes.
///
/// # Errors
/// [`DesignError`] when a run cannot be carried out.
pub async fn compare_report(env: &Env, tasks: &[DesignTask]) -> Result<CompareReport, DesignError> {
    compare_report_with(env, tasks, &CompareModels::default()).await
}

/// Builds the whole comparison over `tasks`, the model-driven designs on `models`.
///
/// # Errors
/// [`DesignError`] when a run cannot be carried out.
pub async fn compare_report_with(
    env: &Env,
    tasks: &[DesignTask],
    models: &CompareModels,
) -> Result<CompareReport, DesignError> {
    let plan_checks = plan_checks(env, PLAN_CHECK_GOAL).await?;
    let seed: Vec<DesignTask> =
        tasks.iter().filter(|t| t.group == crate::design::TaskGroup::Designs).cloned().collect();
    let base = DesignConfig { model: models.model.clone(), roles: models.roles.clone(), ..DesignConfig::default() };
    let designs = design_table_with(env, &seed, &DESIGN_TABLE_COLUMNS, &base).await?;
    let mut rows = Vec::new();
    let mut median_steps = Vec::new();
    match &models.model {
        Some(model) => {
            let mut calls = Vec::new();
            for task in tasks {
                let row = pal_row_with(env, task, model).await?;
                calls.push(row.model_calls);
                rows.push(row);
            }
            median_steps.push((model.model.clone(), median(&calls)));
        }
        None => {
            for kind in [PalKind::Sequential, PalKind::Parallel] {
                let mut calls = Vec::new();
                for task in tasks {
                    let row = pal_row(env, task, kind, true).await?;
                    calls.push(row.model_calls);
                    rows.push(row);
                }
                median_steps.push((kind.name().to_string(), median(&calls)));
            }
        }
    }
    let mut guard = Vec::new();
    if let Some(task) = tasks.iter().find(|t| t.group == crate::design::TaskGroup::Policypal) {
        for on in [true, false] {
            guard.push(pal_row(env, task, PalKind::Flail, on).await?);
        }
    }
    let single = match &models.model {
        Some(http) => {
            crate::lab::LabConfig { decider: crate::lab::DeciderSpec::Http(http.clone()), ..Default::default() }
        }
        None => crate::lab::LabConfig::default(),
    };
    Ok(CompareReport {
        single_versus_roles: crate::eval::single_vs_multi::compare_with(env, single, models.roles.models())
            .await
            .map_err(|e| DesignError::Compare(Box::new(e)))?,
        plan_checks,
        designs,
        policypal: PalSection { rows, median_steps, guard },
    })
}

impl CompareReport {
    /// The report as aligned text, section by section.
    pub fn table_lines(&self) -> Vec<String> {
        let mut out = vec!["== single versus three roles".to_string()];
        out.extend(self.single_versus_roles.lines());
        out.push(String::new());
        out.push(format!("== plan checks: {PLAN_CHECK_GOAL}"));
        out.push(PLAN_CHECK_HEADER.into());
        out.extend(self.plan_checks.iter().map(PlanCheckRow::table_line));
        out.push("legend: each fake planner writes one plan (1 model call); plan_rejected: code refused the plan and nothing ran".into());
        out.push(String::new());
        out.push("== designs, task by task".into());
        out.push(DESIGN_ROW_HEADER.into());
        out.extend(self.designs.iter().map(DesignRow::table_line));
        out.push("legend:".into());
        out.extend(DESIGN_ROW_LEGEND.iter().map(|l| format!("  {l}")));
        out.push(String::new());
        out.push("== policypal".into());
        out.push(PAL_ROW_HEADER.into());
        out.extend(self.policypal.rows.iter().map(PalRow::table_line));
        let medians: Vec<String> = self.policypal.median_steps.iter().map(|(k, m)| format!("{k} {m}")).collect();
        out.push(format!("median model calls per task: {}", medians.join(", ")));
        out.push(String::new());
        out.push("== policypal search guard: the flailing model, guard on then off".into());
        out.push(PAL_ROW_HEADER.into());
        out.extend(self.policypal.guard.iter().map(PalRow::table_line));
        out.push("legend:".into());
        out.extend(PAL_ROW_LEGEND.iter().map(|l| format!("  {l}")));
        out
    }
}
