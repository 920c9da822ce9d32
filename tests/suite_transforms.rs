//! Payload transforms: every variant of every bundled payload reads back to the original
//! text, an attacks file's `transforms` list adds variants with their own ids (and names
//! the entry when one cannot be made), and `suite --matrix --transforms` runs them.

use rolegate::agent::Env;
use rolegate::lab::{Transform, bundled_attacks, parse_catalog, parse_transforms, split_variant_id, with_variants};
use rolegate::suite::{MatrixSpec, RoleCompromise, add_variants, parse_benign_tasks, run_matrix};
use std::sync::Arc;

use crate::util::temp_dir;

fn data(name: &str) -> String {
    std::fs::read_to_string(format!("{}/tests/data/suite/{name}", env!("CARGO_MANIFEST_DIR"))).unwrap()
}

#[test]
fn every_variant_of_every_bundled_payload_decodes_back_to_its_text() {
    let catalog = bundled_attacks().unwrap();
    let (all, skipped) = with_variants(&catalog, Transform::ALL);
    let mut made = 0;
    for v in &all {
        let Some((base, t)) = split_variant_id(&v.id) else { continue };
        let original = catalog.iter().find(|a| a.id == base).unwrap();
        assert_ne!(v.text, original.text, "{}", v.id);
        assert_eq!(t.decode(&v.text).as_deref(), Some(original.text.as_str()), "{}", v.id);
        assert_eq!((v.style, &v.effect), (original.style, &original.effect), "{}", v.id);
        made += 1;
    }
    // each payload gets each variant unless the text could not be read back from it
    assert_eq!(made + skipped.len(), catalog.len() * Transform::ALL.len());
    let why: Vec<String> = skipped.iter().map(ToString::to_string).collect();
    assert!(
        why.iter().any(|w| w.starts_with("homoglyphs of a16: the text already holds look-alike letters")),
        "{why:?}"
    );
    assert!(why.iter().any(|w| w.starts_with("leetspeak of a08")), "{why:?}");
    assert!(made >= catalog.len() * 5, "{made} variants, skipped: {why:?}");
}

#[test]
fn an_attacks_file_lists_transforms_per_payload_and_a_bad_one_names_its_index() {
    let a05 = data("matrix_attacks.jsonl").lines().find(|l| l.contains(r#""id": "a05""#)).unwrap().to_string();
    let with = a05.replacen('{', r#"{"transforms": ["base64", "split"], "#, 1);
    let catalog = parse_catalog(&with, "a.jsonl").unwrap();
    let ids: Vec<&str> = catalog.iter().map(|a| a.id.as_str()).collect();
    assert_eq!(ids, ["a05", "a05~base64", "a05~split"]);
    for (list, field, says) in [
        (r#"["rot14"]"#, "transforms[0]", "unknown variant `rot14`"),
        (r#"["rot13", "rot13"]"#, "transforms[1]", "named twice"),
        (r#""rot13""#, "transforms", "invalid type"),
    ] {
        let line = a05.replacen('{', &format!(r#"{{"transforms": {list}, "#), 1);
        let e = parse_catalog(&line, "a.jsonl").unwrap_err().to_string();
        assert!(e.starts_with(&format!("a.jsonl:1: field `{field}`: ")), "{e}");
        assert!(e.contains(says), "{says:?} in {e}");
    }
    let digits = a05.replace("before answering", "before answering 2 questions").replacen(
        '{',
        r#"{"transforms": ["leetspeak"], "#,
        1,
    );
    let e = parse_catalog(&digits, "a.jsonl").unwrap_err().to_string();
    assert!(e.starts_with("a.jsonl:1: field `transforms[0]`: leetspeak of a05: the text already holds digits"), "{e}");
    assert_eq!(parse_transforms("split,zero_width").unwrap(), [Transform::Split, Transform::ZeroWidth]);
}

#[tokio::test]
async fn the_matrix_runs_each_variant_as_a_payload_of_its_own() {
    let env = Env::bundled().unwrap();
    let mut spec = MatrixSpec {
        tasks: parse_benign_tasks(&data("matrix_tasks.jsonl"), "t").unwrap(),
        attacks: Arc::from(parse_catalog(&data("matrix_attacks.jsonl"), "a").unwrap()),
        configs: rolegate::suite::DefenseConfig::all(),
        roles: RoleCompromise::default(),
    };
    let notes = add_variants(&mut spec, &env.world, Transform::ALL);
    assert!(notes.is_empty(), "{notes:?}");
    assert_eq!(spec.attacks.len(), 2 * (1 + Transform::ALL.len()));
    let m = run_matrix(&spec, &env).await.unwrap();
    // one benign run and 14 attacked runs per configuration
    assert_eq!(m.runs.len(), 24 * 15);
    // with every control off, the fully taken-over fakes carry out every variant: a
    // transform changes what a filter reads, not what an obeying model does
    for (i, c) in spec.configs.iter().enumerate() {
        let off = c.cells().iter().all(|s| matches!(*s, "off" | "wide" | "free" | "-" | "single" | "multi"));
        if off {
            for r in m.runs.iter().filter(|r| r.config == i && r.attack.is_some()) {
                assert_eq!(
                    r.verdict.map(|v| v.as_str()),
                    Some("executed"),
                    "{} under {}",
                    r.attack.as_deref().unwrap_or(""),
                    c.label()
                );
            }
        }
    }
    // every configuration that must stop all effects still does, variants included
    assert!(m.holds());
}

#[test]
fn suite_matrix_takes_transforms_and_refuses_them_without_matrix() {
    let dir = temp_dir("transforms-cli");
    let tasks = dir.join("tasks.jsonl");
    let attacks = dir.join("attacks.jsonl");
    std::fs::write(&tasks, data("matrix_tasks.jsonl")).unwrap();
    std::fs::write(&attacks, data("matrix_attacks.jsonl")).unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_rolegate"))
        .args(["suite", "--matrix", "--transforms", "base64,rot13", "--tasks"])
        .arg(&tasks)
        .arg("--attacks")
        .arg(&attacks)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}{}", String::from_utf8_lossy(&out.stderr));
    assert!(stdout.contains("48 configurations x 1 tasks x (1 benign + 6 attacked)"), "{stdout}");
    for (args, says) in [
        (
            vec!["suite", "--transforms", "base64"],
            "--tasks, --transforms, --templates and --time-budget are for --matrix",
        ),
        (vec!["suite", "--matrix", "--transforms", "base65"], "--transforms: unknown transform \"base65\""),
    ] {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_rolegate")).args(&args).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert!(String::from_utf8_lossy(&out.stderr).contains(says), "{args:?}");
    }
}
