//! `rolegate run --design …`: one goal under any design, with its trace (for the three
//! roles, their envelope log). The default design (`single`) is the original single-agent
//! run, unchanged. A model-driven design runs its fake or, with `--model openai:NAME`, a
//! real model (for the three roles, per role with `--planner-model` and so on).

use clap::ValueEnum;

use super::{EXIT_MISMATCH, EXIT_OK, EXIT_USAGE, RoleModelArgs, out, run_multi, suite};
use rolegate::agent::Env;
use rolegate::design::{Design, DesignConfig, DesignOutcome, PalConfig, PalKind, PalReply, PalRun, run_design};
use rolegate::human::{ApproverKey, DecisionCode};
use rolegate::model::http::HttpConfig;
use rolegate::model::{FakeKind, ModelSpec};
use rolegate::multi::{Behaviours, ClaimMode, RoleSetup};
use rolegate::store::{DEFAULT_STORE, DeskError, POLICYPAL_MODEL, RunSpec};

/// What to do with a PolicyPal confirmation card.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum CardChoice {
    /// Run exactly the arguments on the card.
    Confirm,
    /// Run nothing; the model is told "cancelled by user".
    Cancel,
}

/// What `rolegate run` was asked.
#[derive(Clone, Debug)]
pub(crate) struct RunArgs {
    pub goal: String,
    pub design: String,
    pub model: String,
    pub model_args: super::ModelArgs,
    pub user: String,
    pub task: Option<String>,
    pub grants: Vec<String>,
    pub card: Option<CardChoice>,
    pub key: Option<std::path::PathBuf>,
    pub store: Option<std::path::PathBuf>,
    /// multi: the fake behaviour of each role without a real model.
    pub roles: Behaviours,
    /// multi: strict or free claims.
    pub claims: ClaimMode,
    /// multi: a model per role.
    pub role_models: RoleModelArgs,
}

fn fail(message: impl std::fmt::Display) -> u8 {
    eprintln!("rolegate: {}", rolegate::security::redact(&message.to_string()));
    EXIT_USAGE
}

/// Runs one goal under the chosen design and prints trace and outcome.
pub(crate) async fn run(args: RunArgs) -> u8 {
    let design: Design = match args.design.parse() {
        Ok(d) => d,
        Err(e) => return fail(e),
    };
    if design == Design::React {
        let task = args.task.as_deref().unwrap_or("triage");
        return suite::run_one(&args.goal, &args.model, &args.model_args, &args.user, task, &args.grants).await;
    }
    if design == Design::Multi {
        return multi(&args).await;
    }
    // a fake kind of this design (planner kinds, PolicyPal kinds), or a real model
    let (fake, http, env) = match args.model.strip_prefix("fake:") {
        Some(fake) => match args.model_args.env(&[]) {
            Ok(env) => (fake.to_string(), None, env),
            Err(e) => return fail(e),
        },
        None => match real_model(&args) {
            Ok((http, env)) => ("sensible".to_string(), http, env),
            Err(e) => return fail(e),
        },
    };
    if design == Design::PolicyPal {
        return policypal(&args, &fake, http.as_ref(), &env).await;
    }
    let cfg = DesignConfig {
        user: args.user.clone(),
        task: args.task.clone(),
        fake,
        model: http,
        grants: args.grants.clone(),
        ..DesignConfig::default()
    };
    match run_design(design, &args.goal, &env, &cfg).await {
        Ok(outcome) => {
            print_outcome(&outcome);
            super::run_checks::exit_for(outcome.code.as_str())
        }
        Err(e) => fail(e),
    }
}

/// The real model `--model openai:NAME` names, and the environment priced for it.
fn real_model(args: &RunArgs) -> Result<(Option<HttpConfig>, Env), String> {
    let spec: ModelSpec =
        args.model.parse().map_err(|e| format!("{e} (this design takes fake:<kind> or openai:<name>)"))?;
    let endpoint = args.model_args.endpoint(&[&spec])?;
    let env = args.model_args.env(&[&spec])?;
    let http = spec.http_config(endpoint.as_ref()).map_err(|e| e.to_string())?;
    Ok((http, env))
}

/// The roles' models: a role on `openai:NAME` asks that model, a role on `fake:sensible`
/// (the default) keeps its behaviour; any other fake is a single-agent fake, which has no
/// role form.
///
/// # Errors
/// A readable message for a value that does not parse or does not fit.
pub(crate) fn role_setup(
    model: &ModelSpec,
    role_models: &RoleModelArgs,
    behaviours: Behaviours,
    model_args: &super::ModelArgs,
) -> Result<(RoleSetup, Env), String> {
    let specs = role_models.resolve(model)?;
    for (role, spec) in specs.all() {
        if matches!(spec, ModelSpec::Fake(k) if *k != FakeKind::Sensible) {
            return Err(format!(
                "{role}: {spec} is a single-agent fake; a role takes openai:NAME, and its fake behaviour \
                 comes from --planner, --researcher or --reviewer"
            ));
        }
    }
    let all: Vec<&ModelSpec> = specs.all().into_iter().map(|(_, m)| m).collect();
    let endpoint = model_args.endpoint(&all)?;
    let env = model_args.env(&all)?;
    let setup = RoleSetup::from_specs(behaviours, &specs, endpoint.as_ref()).map_err(|e| e.to_string())?;
    Ok((role_models.with_max_tokens(setup)?, env))
}

/// `--design multi`: three roles, printed as the envelope log.
async fn multi(args: &RunArgs) -> u8 {
    if args.task.is_some() {
        return fail("--task does not apply to --design multi: each role runs in its own scope");
    }
    if !args.grants.is_empty() {
        return fail("--grant does not apply to --design multi: no role may hold a write tool");
    }
    let model: ModelSpec = match args.model.parse() {
        Ok(m) => m,
        Err(e) => return fail(e),
    };
    let (roles, env) = match role_setup(&model, &args.role_models, args.roles, &args.model_args) {
        Ok(r) => r,
        Err(e) => return fail(e),
    };
    let cfg = DesignConfig { user: args.user.clone(), roles, claims: args.claims, ..DesignConfig::default() };
    match run_design(Design::Multi, &args.goal, &env, &cfg).await {
        Ok(DesignOutcome { multi: Some(run), .. }) => {
            for l in run_multi::log(&run) {
                if !out(&l) {
                    break;
                }
            }
            super::run_checks::exit_for(run.reason.as_str())
        }
        Ok(other) => {
            print_outcome(&other);
            super::run_checks::exit_for(other.code.as_str())
        }
        Err(e) => fail(e),
    }
}

fn print_outcome(o: &DesignOutcome) {
    for l in o.lines() {
        out(&l);
    }
}

async fn policypal(args: &RunArgs, fake: &str, http: Option<&HttpConfig>, env: &Env) -> u8 {
    let kind: PalKind = match fake.parse() {
        Ok(k) => k,
        Err(e) => return fail(e),
    };
    // no blind confirmation: a card that would write is an approval request, decided with
    // an approver's key; without one nothing runs
    let approver = match (args.card, &args.key) {
        (Some(CardChoice::Confirm), None) => {
            return fail(
                "--card confirm: refused: no_key: a card that would write is an approval request; confirm it with \
                 the approver's key file (--key FILE); nothing ran",
            );
        }
        (Some(CardChoice::Confirm), Some(file)) => match ApproverKey::read(file) {
            Ok(k) => Some(k),
            Err(e) => return fail(format!("--card confirm: refused: {e}; nothing ran")),
        },
        _ => None,
    };
    let mut cfg = PalConfig::new(kind);
    cfg.user = args.user.clone();
    if let Some(t) = &args.task {
        cfg.task = t.clone();
    }
    cfg.grants.extend(args.grants.iter().cloned());
    let mut lab = cfg.build(env);
    if let Some(http) = http {
        lab.pal.use_model(http);
    }
    let Some(approver) = approver else {
        let mut run: PalRun = match lab.pal.run(&args.goal, "run-1").await {
            Ok(r) => r,
            Err(e) => return fail(e),
        };
        if let (Some(CardChoice::Cancel), PalReply::Confirm(card)) = (args.card, &run.reply) {
            for line in card.render() {
                out(&line);
            }
            let user = lab.pal.session.user_id.clone();
            run = match lab.pal.cancel_card(run, &user).await {
                Ok(r) => r,
                Err(e) => return fail(e),
            };
        }
        let outcome = run.outcome();
        let code = outcome.code;
        print_outcome(&rolegate::design::DesignOutcome { emails: lab.world.outbox.len(), ..outcome });
        // 0 only for an answer or a card waiting on the user, as for every design
        return super::run_checks::exit_for(code.as_str());
    };
    confirm_with_key(args, &mut lab, &cfg, &approver).await
}

/// `--card confirm --key FILE`: the run is kept in the store; its card is filed as an
/// approval request and approved with the approver's key, through the same rules as any
/// parked write; approving runs exactly the card's call.
async fn confirm_with_key(
    args: &RunArgs,
    lab: &mut rolegate::design::PalLab,
    cfg: &PalConfig,
    approver: &ApproverKey,
) -> u8 {
    let path = args.store.clone().unwrap_or_else(|| std::path::PathBuf::from(DEFAULT_STORE));
    let mut desk = match super::desk::open(&path) {
        Ok(d) => d,
        Err(e) => return fail(e),
    };
    let model = if args.model.starts_with("fake:") { args.model.replace("fake:", "") } else { args.model.clone() };
    let spec = RunSpec {
        model: format!("{POLICYPAL_MODEL}{model}"),
        user: cfg.user.clone(),
        task: cfg.task.clone(),
        grants: cfg.grants.to_vec(),
        durable: None,
        data: None,
    };
    let (run_id, sent) = match desk.reserve_run(&spec).and_then(|id| Ok((id, desk.outbox()?))) {
        Ok(r) => r,
        Err(e) => return fail(e),
    };
    let sent_before = sent.len();
    // the lab's world is the gate's: one outbox, filled in place
    lab.world.outbox.load(sent);
    let mut run: PalRun = match lab.pal.run(&args.goal, &run_id).await {
        Ok(r) => r,
        Err(e) => return fail(e),
    };
    let mut code = EXIT_OK;
    if let PalReply::Confirm(card) = &run.reply {
        for line in card.render() {
            out(&line);
        }
        let decided = match desk.decide_card(&run.run, &mut lab.pal.gate, sent_before, approver) {
            Ok(d) => d,
            Err(e @ DeskError::Identity(_)) => {
                eprintln!("rolegate: --card confirm: {e}");
                return EXIT_MISMATCH;
            }
            Err(e) => return fail(e),
        };
        let id = &decided.request.id;
        let ran = if decided.code == DecisionCode::Ok { "" } else { " (refused: nothing ran)" };
        out(&format!("{id} approve by {}: {}{ran}", approver.name(), decided.code.as_str()));
        match (decided.code, &decided.outcome) {
            (DecisionCode::Ok, Some(outcome)) => {
                super::committed(format!("{id} approved by {}, e-mails sent: {}", approver.name(), decided.sent_now));
                run = match lab.pal.approved(run, approver.name(), outcome).await {
                    Ok(r) => r,
                    Err(e) => {
                        eprintln!("rolegate: {id} was approved and ran (kept in the store); the run then failed: {e}");
                        return EXIT_MISMATCH;
                    }
                };
            }
            _ => code = EXIT_MISMATCH,
        }
    }
    let outcome = run.outcome();
    // a card shown for the user's decision is a parked run, like an approval
    if code == EXIT_OK && !matches!(run.reply, PalReply::Confirm(_)) {
        code = super::run_checks::exit_for(outcome.code.as_str());
    }
    let emails = lab.world.outbox.len().saturating_sub(sent_before);
    print_outcome(&rolegate::design::DesignOutcome { emails, ..outcome });
    code
}
