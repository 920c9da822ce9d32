//! `rolegate run`: one goal, as a row with defense switches, a durable run on a store, a
//! design, or the single agent (parked on a store when it may need a person).

use super::model_args::{ModelArgs, RoleModelArgs};
use super::{DurabilityArg, EXIT_USAGE, design, durable, parked, run_checks, run_row};

/// The arguments of `run`.
#[derive(Debug, clap::Args)]
pub struct RunArgs {
    /// The goal.
    pub goal: String,
    /// The design: single (the ReAct-style loop), fixed, plan, policypal or multi
    /// (planner, researcher and reviewer behind a coordinator; see --planner,
    /// --researcher, --reviewer, --claims).
    #[arg(long, default_value = "single")]
    pub design: String,
    /// The model. single: `fake:KIND` (sensible, obey, loop, wander, hallucinate,
    /// garbage, early_finish), `openai:NAME` (a model behind an OpenAI-compatible
    /// server), `scripted:research`, or `auto` (the research script for the reply task,
    /// which parks its e-mail for a person; fake:sensible otherwise); plan: fake
    /// sensible, prose, long, bad_tool, bad_args, write, or openai:NAME; policypal: fake
    /// sensible (= parallel), sequential, flail, or openai:NAME; multi: openai:NAME for
    /// every role (the fakes are --planner, --researcher, --reviewer); fixed: ignored.
    #[arg(long, default_value = "auto")]
    pub model: String,
    /// How to reach an openai: model.
    #[command(flatten)]
    pub model_args: ModelArgs,
    /// multi: a model per role (default: --model).
    #[command(flatten)]
    pub role_models: RoleModelArgs,
    /// The signed-in user.
    #[arg(long, default_value = "kwame")]
    pub user: String,
    /// The task (default: triage; helpdesk for policypal).
    #[arg(long)]
    pub task: Option<String>,
    /// Write tools to grant (repeatable).
    #[arg(long)]
    pub grant: Vec<String>,
    /// policypal: what to do with a confirmation card (default: show it and stop).
    /// `confirm` files the card as an approval request in the store and approves it
    /// with the approver's key (`--key`); without a key it is refused.
    #[arg(long, value_enum)]
    pub card: Option<super::design::CardChoice>,
    /// policypal --card confirm: the approver's private key file; the decision is
    /// signed with it and passes every rule (not the requester, registered key).
    #[arg(long, value_name = "FILE")]
    pub key: Option<std::path::PathBuf>,
    /// Keep the run in this store (default for runs that may park: rolegate.db).
    #[arg(long, value_name = "PATH")]
    pub store: Option<std::path::PathBuf>,
    /// With a store: `step` (default) commits every step before the next one starts,
    /// so a run whose process died continues with `rolegate resume RUN`; `exit` writes
    /// the run once, when the command ends (single design only).
    #[arg(long, value_enum)]
    pub durability: Option<DurabilityArg>,
    /// multi: the planner's fake behaviour: sensible, grant, delegate.
    #[arg(long, default_value = "sensible")]
    pub planner: rolegate::multi::PlannerKind,
    /// multi: the researcher's fake behaviour: sensible, relay, paraphrase, obey,
    /// forge_sender, spawn, made_up_source.
    #[arg(long, default_value = "sensible")]
    pub researcher: rolegate::multi::ResearcherKind,
    /// multi: the reviewer's fake behaviour: sensible, obey, never_approve.
    #[arg(long, default_value = "sensible")]
    pub reviewer: rolegate::multi::ReviewerKind,
    /// multi: claims strict (rebuilt from observations) or free.
    #[arg(long, default_value = "strict")]
    pub claims: rolegate::multi::ClaimMode,
    /// The defense switches, `--attack` and `--html`: any of them makes the run a row.
    #[command(flatten)]
    pub row: run_row::RowFlags,
}

/// Runs one goal: names checked first, then the first path that takes the run (a row,
/// a durable run, a design other than single, the single agent).
pub(crate) async fn run(args: RunArgs) -> u8 {
    // unknown names are unusable input: refused before anything runs
    if let Err(e) = run_checks::known_names(&args.user, args.task.as_deref(), &args.grant, &args.model_args.data) {
        eprintln!("rolegate: {e}");
        return EXIT_USAGE;
    }
    if args.row.any() {
        return as_row(args).await;
    }
    if let Some(code) = as_durable(&args).await {
        return code;
    }
    if args.design != "single" {
        let model = if args.model == "auto" { "fake:sensible".to_string() } else { args.model.clone() };
        return design::run(args.into_design(model)).await;
    }
    single(args).await
}

impl RunArgs {
    /// The fake roles' behaviours.
    fn roles(&self) -> rolegate::multi::Behaviours {
        rolegate::multi::Behaviours { planner: self.planner, researcher: self.researcher, reviewer: self.reviewer }
    }

    /// The arguments of a design's run, with `model` as its model.
    fn into_design(self, model: String) -> design::RunArgs {
        let roles = self.roles();
        design::RunArgs {
            goal: self.goal,
            design: self.design,
            model,
            model_args: self.model_args,
            user: self.user,
            task: self.task,
            grants: self.grant,
            card: self.card,
            key: self.key,
            store: self.store,
            roles,
            claims: self.claims,
            role_models: self.role_models,
        }
    }
}

/// The row path: the bundled world, policy and prices with the fakes, as a table row runs.
async fn as_row(args: RunArgs) -> u8 {
    // the row path runs the bundled world, policy and prices (a row checks its payload
    // and targets against them): flags that change them are refused, not ignored
    let data = &args.model_args.data;
    let changes_data =
        data.world.is_some() || data.policy.is_some() || data.call_graph.is_some() || args.model_args.prices.is_some();
    if args.store.is_some()
        || args.card.is_some()
        || args.key.is_some()
        || args.model.starts_with("openai:")
        || changes_data
    {
        eprintln!(
            "rolegate: the defense switches, --attack and --html run the fakes as a row does; --store, --card, --key, openai: models, --world, --policy, --call-graph and --prices are not taken with them"
        );
        return EXIT_USAGE;
    }
    let r = run_row::RowRun {
        design: &args.design,
        goal: &args.goal,
        model: &args.model,
        user: &args.user,
        task: args.task.as_deref(),
        grants: &args.grant,
        roles: args.roles(),
        claims: args.claims,
    };
    run_row::run(r, args.row).await
}

/// A run kept on a store step by step, when the arguments ask for one: `None` when they
/// do not.
async fn as_durable(args: &RunArgs) -> Option<u8> {
    let durable = durable::Wanted {
        design: &args.design,
        store: args.store.as_deref(),
        durability: args.durability,
        card: args.card.is_some(),
        model_args: &args.model_args,
        role_models: &args.role_models,
    };
    let task = args.task.as_deref();
    match durable.spec(&args.goal, &args.model, &args.user, task, &args.grant, args.roles(), args.claims) {
        Ok(Some((path, spec))) => Some(match args.model_args.stored_env() {
            Ok(env) => durable::run(&path, &spec, env).await,
            Err(e) => {
                eprintln!("rolegate: {e}");
                EXIT_USAGE
            }
        }),
        Ok(None) => None,
        Err(e) => {
            eprintln!("rolegate: {e}");
            Some(EXIT_USAGE)
        }
    }
}

/// The single agent: parked on a store (the given one, or the default one when it was
/// granted a write), else run in memory.
async fn single(args: RunArgs) -> u8 {
    let task_name = args.task.clone().unwrap_or_else(|| "triage".to_string());
    let spec = rolegate::store::RunSpec::new(&args.model, &args.user, &task_name, &args.grant);
    let path = match &args.store {
        Some(path) => path.as_path(),
        None if !spec.grants.is_empty() => std::path::Path::new(rolegate::store::DEFAULT_STORE),
        None => return design::run(args.into_design(spec.model)).await,
    };
    match args.model_args.stored_env() {
        Ok(env) => parked::run_stored(path, &spec, &args.goal, env).await,
        Err(e) => {
            eprintln!("rolegate: {e}");
            EXIT_USAGE
        }
    }
}
