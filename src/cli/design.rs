//! `rolegate run --design …`: one goal under any design, with its trace (for the three
//! roles, their envelope log). The default design (`single`) is the original single-agent
//! run, unchanged. A model-driven design runs its fake or, with `--model openai:NAME`, a
//! real model (for the three roles, per role with `--planner-model` and so on).

use clap::ValueEnum;

use super::{EXIT_OK, EXIT_USAGE, RoleModelArgs, out, run_multi, suite};
use crate::design::{Design, DesignConfig, DesignOutcome, PalConfig, PalKind, PalReply, PalRun, run_design};
use crate::eval::Env;
use crate::model::http::HttpConfig;
use crate::model::{FakeKind, ModelSpec};
use crate::multi::{Behaviours, ClaimMode, RoleSetup};

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
    /// multi: the fake behaviour of each role without a real model.
    pub roles: Behaviours,
    /// multi: strict or free claims.
    pub claims: ClaimMode,
    /// multi: a model per role.
    pub role_models: RoleModelArgs,
}

fn fail(message: impl std::fmt::Display) -> u8 {
    eprintln!("rolegate: {}", crate::security::redact(&message.to_string()));
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
    Ok((setup, env))
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
    for l in o.trace.lines() {
        out(&l);
    }
    if !o.problems.is_empty() {
        out(&format!("problems: {:?}", o.problems));
    }
    out(&format!(
        "{} {} calls={:?} model_calls={} input_tokens={} emails={}",
        o.design, o.code, o.calls, o.model_calls, o.input_tokens, o.emails
    ));
    if let Some(a) = &o.answer {
        out(&crate::security::redact(a));
    }
}

async fn policypal(args: &RunArgs, fake: &str, http: Option<&HttpConfig>, env: &Env) -> u8 {
    let kind: PalKind = match fake.parse() {
        Ok(k) => k,
        Err(e) => return fail(e),
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
    let mut run: PalRun = match lab.pal.run(&args.goal, "run-1").await {
        Ok(r) => r,
        Err(e) => return fail(e),
    };
    if let (Some(choice), PalReply::Confirm(card)) = (args.card, &run.reply) {
        for line in card.render() {
            out(&line);
        }
        let user = lab.pal.session.user_id.clone();
        let decided = match choice {
            CardChoice::Confirm => lab.pal.confirm(run, &user).await,
            CardChoice::Cancel => lab.pal.cancel_card(run, &user).await,
        };
        run = match decided {
            Ok(r) => r,
            Err(e) => return fail(e),
        };
    }
    let outcome = run.outcome();
    // a card shown for the user's decision is a parked run, like an approval
    let code = match &run.reply {
        PalReply::Confirm(_) => EXIT_OK,
        _ => super::run_checks::exit_for(outcome.code.as_str()),
    };
    print_outcome(&crate::design::DesignOutcome { emails: lab.world.outbox.len(), ..outcome });
    code
}
