//! The durable step writer under load, through the library: a thousand three-role runs in
//! flight in one process, every step committed by the group-commit writer before the run
//! goes on. The store then holds every step of every run (read back and verified), `store
//! check` finds nothing wrong, and steps shared commits. A store of the issue-13 format
//! (no journal table) opens and gains it.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use rolegate::agent::Durable;
use rolegate::cost::SystemClock;
use rolegate::design::{Design, DesignCode, DesignConfig, run_design};
use rolegate::multi::MultiReason;
use rolegate::store::{Desk, StepWriter, Store};

use crate::util::{env, key, temp_dir};

const RUNS: usize = 1000;
const GOAL: &str = "Status of T-601 and our refund policy?";

fn config(run_id: String, durable: Durable) -> DesignConfig {
    DesignConfig { run_id, durable, ..DesignConfig::default() }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thousand_durable_runs_in_flight_keep_every_step_and_share_commits() {
    let path = temp_dir("durable-thousand").join("rolegate.db");
    let writer = StepWriter::start(&path, key()).unwrap();
    let env = Arc::new(env());
    let runs: Vec<_> = (0..RUNS)
        .map(|i| {
            let (env, sink) = (env.clone(), Durable::to(writer.clone()));
            tokio::spawn(async move { run_design(Design::Multi, GOAL, &env, &config(format!("run-{i}"), sink)).await })
        })
        .collect();
    for r in runs {
        let outcome = r.await.unwrap().unwrap();
        assert_eq!(outcome.code, DesignCode::Multi(MultiReason::Done));
    }
    let (commits, steps) =
        (writer.stats().commits.load(Ordering::Relaxed), writer.stats().steps.load(Ordering::Relaxed));
    drop(writer);
    // what one run writes, alone
    let alone = temp_dir("durable-alone").join("rolegate.db");
    let one = StepWriter::start(&alone, key()).unwrap();
    run_design(Design::Multi, GOAL, &env, &config("run-0".into(), Durable::to(one.clone()))).await.unwrap();
    let per_run = one.stats().steps.load(Ordering::Relaxed);
    assert!(per_run >= 5, "three hand-offs and the researcher's steps ({per_run})");
    assert_eq!(steps, per_run * RUNS as u64, "every step of every run was committed");
    // how many share one commit depends on scheduling (about 60 on an idle machine, 2.5
    // with other builds running): the claim held here is that commits are shared at all
    assert!(commits < steps, "steps share commits: {steps} steps in {commits} commits");

    let store = Store::open_existing(&path).unwrap();
    let c = store.conn();
    for i in 0..RUNS {
        let run = format!("run-{i}");
        let count = |table: &str| {
            c.query_row(&format!("SELECT count(*) FROM {table} WHERE run_id = ?1"), [&run], |r| r.get::<_, i64>(0))
                .unwrap()
        };
        assert_eq!(count("checkpoints") + count("steps"), per_run as i64, "{run}");
        let mut st = c.prepare("SELECT seq, kind, step, body FROM steps WHERE run_id = ?1 ORDER BY seq").unwrap();
        let handoffs: Vec<(i64, String, u32, String)> = st
            .query_map([&run], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))
            .unwrap()
            .map(Result::unwrap)
            .collect();
        let kinds: Vec<(i64, &str, u32)> = handoffs.iter().map(|(s, k, n, _)| (*s, k.as_str(), *n)).collect();
        assert_eq!(kinds, [(1, "handoff", 1), (2, "handoff", 2), (3, "handoff", 3)], "{run}: the hand-offs in order");
        for (n, (_, _, _, body)) in handoffs.iter().enumerate() {
            let record: serde_json::Value = serde_json::from_str(body).unwrap();
            assert_eq!(record["envelope"]["id"], format!("m{}", n + 1), "{run}");
        }
    }
    let desk = Desk::new(store, key(), env.as_ref().clone(), Arc::new(SystemClock));
    assert_eq!(desk.check().unwrap(), [], "every checkpoint and record verifies");
}

#[test]
fn a_store_of_the_issue_13_format_opens_and_gains_the_journal_table() {
    let path = temp_dir("durable-old-store").join("rolegate.db");
    drop(Store::open(&path).unwrap());
    {
        let c = rusqlite::Connection::open(&path).unwrap();
        c.execute_batch("DROP TABLE steps").unwrap();
        let format: String = c.query_row("SELECT value FROM meta WHERE key = 'format'", [], |r| r.get(0)).unwrap();
        assert_eq!(format, "rolegate-store/2");
    }
    let store = Store::open_existing(&path).unwrap();
    let n: i64 = store.conn().query_row("SELECT count(*) FROM steps", [], |r| r.get(0)).unwrap();
    assert_eq!(n, 0);
}

#[test]
fn an_edited_journal_record_is_set_aside_by_store_check() {
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let path = temp_dir("durable-edited").join("rolegate.db");
    let writer = StepWriter::start(&path, key()).unwrap();
    rt.block_on(run_design(Design::Multi, GOAL, &env(), &config("run-1".into(), Durable::to(writer.clone())))).unwrap();
    drop(writer);
    let c = rusqlite::Connection::open(&path).unwrap();
    c.execute("UPDATE steps SET body = replace(body, 'm2', 'm9') WHERE run_id = 'run-1' AND seq = 2", []).unwrap();
    let desk = Desk::new(Store::open_existing(&path).unwrap(), key(), env(), Arc::new(SystemClock));
    let bad = desk.check().unwrap();
    assert_eq!(bad.len(), 1, "{bad:?}");
    assert_eq!((bad[0].table, bad[0].id.as_str(), bad[0].code.as_str()), ("steps", "run-1#2", "bad_signature"));
}

#[test]
fn a_durable_three_role_run_prints_its_outcome_line_as_the_run_without_a_store_does() {
    let store = temp_dir("durable-multi-outcome").join("rolegate.db");
    let args = ["run", "--design", "multi", GOAL];
    let durable = crate::util::run_binary(&store, "durable-multi test key, not a real secret", &args);
    let text = crate::util::stdout(&durable);
    assert_eq!(durable.status.code(), Some(0), "{text}");
    let plain = std::process::Command::new(env!("CARGO_BIN_EXE_rolegate")).args(args).output().unwrap();
    let plain = crate::util::stdout(&plain);
    let outcome = |t: &str| t.lines().find(|l| l.starts_with("outcome: ")).map(str::to_string);
    assert_eq!(
        outcome(&text).as_deref(),
        Some(
            "outcome: done | messages 3 | rejected 0 | denied 0 | role calls 5 | rounds 1 | tools planner [], \
             researcher [get_ticket, lookup_document], reviewer [lookup_document] | e-mails 0"
        ),
        "{text}"
    );
    assert_eq!(outcome(&text), outcome(&plain), "the same outcome line as without a store:\n{text}\n{plain}");
    assert!(text.lines().any(|l| l.starts_with("usage    researcher: calls 3 |")), "{text}");
}
