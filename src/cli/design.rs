//! `rolegate run --design …`: one goal under any single-agent design, with its trace. The
//! default design (`single`) is the original single-agent run, unchanged.

use clap::ValueEnum;

use super::{EXIT_OK, EXIT_USAGE, out, suite};
use crate::design::{Design, DesignConfig, DesignOutcome, PalConfig, PalKind, PalReply, PalRun, run_design};
use crate::eval::Env;

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
}

fn fail(message: impl std::fmt::Display) -> u8 {
    eprintln!("rolegate: {message}");
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
    let Some(fake) = args.model.strip_prefix("fake:") else {
        return fail("--model must be fake:<kind>");
    };
    let env = match Env::bundled() {
        Ok(e) => e,
        Err(e) => return fail(e),
    };
    if design == Design::PolicyPal {
        return policypal(&args, fake, &env).await;
    }
    let cfg = DesignConfig {
        user: args.user.clone(),
        task: args.task.clone(),
        fake: fake.to_string(),
        grants: args.grants.clone(),
        ..DesignConfig::default()
    };
    match run_design(design, &args.goal, &env, &cfg).await {
        Ok(outcome) => {
            print_outcome(&outcome);
            EXIT_OK
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
        out(a);
    }
}

async fn policypal(args: &RunArgs, fake: &str, env: &Env) -> u8 {
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
    print_outcome(&crate::design::DesignOutcome { emails: lab.world.outbox.len(), ..outcome });
    EXIT_OK
}
