//! Running many rows or matrix cells without starting them all at once: at most a fixed
//! number are in flight, the rest wait their turn, and the results come back in the order
//! the work was given.

use std::collections::HashMap;
use std::future::Future;
use tokio::task::JoinSet;

/// How many rows or matrix runs are in flight at once.
pub(crate) const MAX_IN_FLIGHT: usize = 64;

/// Runs every future of `work` on the current runtime, at most `limit` at a time (at least
/// one), and returns their outputs in the order given; a task that panicked or was
/// cancelled gives `Err` with what tokio said.
pub(crate) async fn run_bounded<T, F>(work: impl IntoIterator<Item = F>, limit: usize) -> Vec<Result<T, String>>
where
    T: Send + 'static,
    F: Future<Output = T> + Send + 'static,
{
    let mut pending = work.into_iter().enumerate();
    let mut set = JoinSet::new();
    let mut index_of = HashMap::new();
    let mut out: Vec<Option<Result<T, String>>> = Vec::new();
    loop {
        while set.len() < limit.max(1) {
            let Some((i, fut)) = pending.next() else { break };
            out.push(None);
            let handle = set.spawn(fut);
            index_of.insert(handle.id(), i);
        }
        let Some(joined) = set.join_next_with_id().await else { break };
        let (id, result) = match joined {
            Ok((id, value)) => (id, Ok(value)),
            Err(e) => (e.id(), Err(e.to_string())),
        };
        if let Some(slot) = index_of.remove(&id).and_then(|i| out.get_mut(i)) {
            *slot = Some(result);
        }
    }
    out.into_iter().map(|r| r.unwrap_or_else(|| Err("the task was never joined".to_string()))).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Duration;

    #[tokio::test(start_paused = true)]
    async fn at_most_limit_run_at_once_and_results_keep_their_order() {
        let running = Arc::new(AtomicUsize::new(0));
        let most = Arc::new(AtomicUsize::new(0));
        let work = (0..40u64).map(|i| {
            let (running, most) = (running.clone(), most.clone());
            async move {
                let now = running.fetch_add(1, Ordering::SeqCst) + 1;
                most.fetch_max(now, Ordering::SeqCst);
                // later items finish first: the order of results must not follow finishing
                tokio::time::sleep(Duration::from_millis(100 - i)).await;
                running.fetch_sub(1, Ordering::SeqCst);
                if i == 7 {
                    panic!("row 7 fails");
                }
                i * 2
            }
        });
        let out = run_bounded(work, 5).await;
        assert_eq!(most.load(Ordering::SeqCst), 5, "never more than the limit in flight");
        assert_eq!(out.len(), 40);
        for (i, r) in out.iter().enumerate() {
            if i == 7 {
                assert!(r.as_ref().is_err_and(|e| e.contains("panicked")), "{r:?}");
            } else {
                assert_eq!(r.as_ref().ok(), Some(&(i as u64 * 2)));
            }
        }
        assert_eq!(run_bounded(Vec::<std::future::Ready<u8>>::new(), 0).await, Vec::new());
    }
}
