//! Heap bytes per m01 run parked inside the researcher, counted by the allocator rather
//! than read from VmRSS: `cargo run --release --example parked_bytes -- [RUNS]`.
//!
//! It parks `RUNS` runs (default 10,000) at the researcher's first model call with the
//! bench's own [`ParkingGate`](rolegate::eval::ParkingGate), as `rolegate bench` does, and prints the live heap bytes and allocations per parked run,
//! then a histogram of the live blocks by size. The allocator is the system one wrapped in
//! a counter (so `valgrind --tool=dhat` can also attribute every byte to a call site);
//! `rolegate bench`'s VmRSS figure adds the task stacks' pages and the allocator's own
//! slack on top of these bytes.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};

use rolegate::agent::Env;
use rolegate::eval::{ParkingGate, bundled_multi};
use rolegate::multi::{MultiEnv, RoleModels, start};
use tokio_util::sync::CancellationToken;

/// Live bytes and blocks, and a histogram of live blocks by size class while `TRACK` is on.
struct Counting;

static LIVE_BYTES: AtomicI64 = AtomicI64::new(0);
static LIVE_BLOCKS: AtomicI64 = AtomicI64::new(0);
/// Size classes: up to 16, 32, 64, …, 8192 bytes, and larger.
const CLASSES: usize = 11;
static CLASS_BLOCKS: [AtomicI64; CLASSES] = [const { AtomicI64::new(0) }; CLASSES];
static CLASS_BYTES: [AtomicI64; CLASSES] = [const { AtomicI64::new(0) }; CLASSES];

fn class(size: usize) -> usize {
    let mut c = 0;
    let mut top = 16;
    while size > top && c < CLASSES - 1 {
        top *= 2;
        c += 1;
    }
    c
}

fn count(size: usize, sign: i64) {
    let s = i64::try_from(size).unwrap_or(i64::MAX);
    LIVE_BYTES.fetch_add(sign * s, Ordering::Relaxed);
    LIVE_BLOCKS.fetch_add(sign, Ordering::Relaxed);
    CLASS_BLOCKS[class(size)].fetch_add(sign, Ordering::Relaxed);
    CLASS_BYTES[class(size)].fetch_add(sign * s, Ordering::Relaxed);
}

// SAFETY: every call is passed on to the system allocator unchanged; only counters move.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count(layout.size(), 1);
        // SAFETY: the caller's contract is passed on
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        count(layout.size(), -1);
        // SAFETY: the caller's contract is passed on
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        count(layout.size(), -1);
        count(new_size, 1);
        // SAFETY: the caller's contract is passed on
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

fn snapshot() -> (i64, i64, Vec<(i64, i64)>) {
    let classes = (0..CLASSES)
        .map(|c| (CLASS_BLOCKS[c].load(Ordering::Relaxed), CLASS_BYTES[c].load(Ordering::Relaxed)))
        .collect();
    (LIVE_BYTES.load(Ordering::Relaxed), LIVE_BLOCKS.load(Ordering::Relaxed), classes)
}

static QUIET: AtomicBool = AtomicBool::new(false);

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let k: usize = std::env::args().nth(1).map(|a| a.parse()).transpose()?.unwrap_or(10_000);
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    rt.block_on(async move {
        let env = MultiEnv::new(&Env::bundled()?)?;
        let row = bundled_multi()?.into_iter().find(|r| r.id == "m01").ok_or("no row m01")?;
        // one run first, so every lazily compiled pattern and table is built
        let warm =
            start(&env, row.config(), RoleModels::fakes(row.roles), &row.goal, "warm-1", CancellationToken::new())?;
        warm.finish().await?;
        let gate = ParkingGate::new();
        let mut handles = Vec::with_capacity(k);
        let before = snapshot();
        for i in 0..k {
            let mut models = RoleModels::fakes(row.roles);
            models.researcher = gate.park(models.researcher);
            handles.push(start(
                &env,
                row.config(),
                models,
                &row.goal,
                &format!("bench-{i}"),
                CancellationToken::new(),
            )?);
        }
        while gate.arrived() < k {
            tokio::task::yield_now().await;
        }
        // let every actor reach its inbox
        for _ in 0..100 {
            tokio::task::yield_now().await;
        }
        let parked = snapshot();
        // the handles themselves are the bench's, not the runs'
        let handle_bytes = (handles.capacity() * std::mem::size_of::<rolegate::multi::MultiHandle>()) as f64;
        let per = |a: i64, b: i64| (a - b) as f64 / k as f64;
        if !QUIET.load(Ordering::Relaxed) {
            println!(
                "{k} runs parked: {:.0} heap bytes per run ({:.0} without the bench's handles), {:.1} blocks per run",
                per(parked.0, before.0),
                per(parked.0, before.0) - handle_bytes / k as f64,
                per(parked.1, before.1)
            );
            println!("{:>12} {:>14} {:>14}", "block size", "blocks/run", "bytes/run");
            let mut top = 16;
            for (c, ((b1, y1), (b0, y0))) in parked.2.iter().zip(&before.2).enumerate() {
                let label = if c == CLASSES - 1 { format!("> {}", top / 2) } else { format!("<= {top}") };
                println!("{label:>12} {:>14.2} {:>14.0}", per(*b1, *b0), per(*y1, *y0));
                top *= 2;
            }
        }
        gate.open();
        for h in handles {
            h.finish().await?;
        }
        Ok::<_, Box<dyn std::error::Error>>(())
    })
}
