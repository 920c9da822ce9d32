//! Compensation, kept small: run steps in order; when one fails, undo the finished ones in
//! reverse. A step without an undo cannot be taken back, so it belongs last, after every
//! step that can still fail; [`order_problems`] finds the ones that are not. An undo can
//! fail too, and some effects have none: the last resort is a person (`needs_human`).

use serde::Serialize;

/// An action of a step: `Ok(())` or a failure message.
pub(crate) type Action<'a> = Box<dyn FnMut() -> Result<(), String> + 'a>;

/// One step of a saga.
pub struct Step<'a> {
    /// A short name for reports.
    pub name: String,
    /// Does the effect.
    pub run: Action<'a>,
    /// Takes it back, if it can be taken back.
    pub undo: Option<Action<'a>>,
}

impl std::fmt::Debug for Step<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Step").field("name", &self.name).field("undo", &self.undo.is_some()).finish()
    }
}

impl<'a> Step<'a> {
    /// A step that can be undone.
    pub fn new(
        name: &str,
        run: impl FnMut() -> Result<(), String> + 'a,
        undo: impl FnMut() -> Result<(), String> + 'a,
    ) -> Self {
        Self { name: name.to_string(), run: Box::new(run), undo: Some(Box::new(undo)) }
    }

    /// A step that cannot be undone (e.g. an e-mail).
    pub fn final_step(name: &str, run: impl FnMut() -> Result<(), String> + 'a) -> Self {
        Self { name: name.to_string(), run: Box::new(run), undo: None }
    }
}

/// What a saga did.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct SagaReport {
    /// The steps that finished, in order.
    pub done: Vec<String>,
    /// The step that failed, if one did.
    pub failed: Option<String>,
    /// Finished steps that were undone, in the order they were undone.
    pub undone: Vec<String>,
    /// Finished steps nobody could take back (no undo, or the undo failed): a person must.
    pub needs_human: Vec<String>,
}

/// Runs `steps` in order; on the first failure, undoes the finished steps in reverse.
pub fn run_saga(steps: &mut [Step<'_>]) -> SagaReport {
    let mut report = SagaReport::default();
    let mut finished: Vec<usize> = Vec::new();
    for (i, step) in steps.iter_mut().enumerate() {
        match (step.run)() {
            Ok(()) => {
                report.done.push(step.name.clone());
                finished.push(i);
            }
            Err(_) => {
                report.failed = Some(step.name.clone());
                break;
            }
        }
    }
    if report.failed.is_none() {
        return report;
    }
    for i in finished.into_iter().rev() {
        let step = &mut steps[i];
        match step.undo.as_mut().map(|undo| undo()) {
            Some(Ok(())) => report.undone.push(step.name.clone()),
            Some(Err(_)) | None => report.needs_human.push(step.name.clone()),
        }
    }
    report
}

/// Steps that cannot be undone but are followed by a step that can still fail, one line
/// per pair, in order.
pub fn order_problems(steps: &[Step<'_>]) -> Vec<String> {
    let mut problems = Vec::new();
    for (i, step) in steps.iter().enumerate() {
        if step.undo.is_some() {
            continue;
        }
        for later in &steps[i + 1..] {
            problems.push(format!("{} cannot be undone but is followed by {}", step.name, later.name));
        }
    }
    problems
}
