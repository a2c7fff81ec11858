//! The worker threads of CPU kernel launches, kept between launches.
//!
//! A launch runs its grid's blocks on `workers` threads, each taking block
//! indices from an atomic counter ([`super::HostModule::launch_slots`]).
//! Starting those threads for every launch (`std::thread::scope`) cost
//! ~10-30 µs per thread, serially on the launching thread: on 16 cores a
//! few hundred µs of a launch that runs for a few ms. The pool starts them
//! once; a launch hands them its worker function, runs it on the calling
//! thread too, and returns when every worker that took it has finished —
//! so the function may borrow the launch's stack (its lifetime is erased
//! while the workers run it, and never outlives the call).
//!
//! One launch at a time uses the pool; a launch that finds it busy (another
//! Python thread launching) or wants more workers than it holds starts its
//! own threads as before.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex, OnceLock};

type Job = &'static (dyn Fn() + Sync);

#[derive(Default)]
struct State {
    /// Bumped for each job: a worker takes each job at most once.
    generation: u64,
    job: Option<Job>,
    /// Workers the job still wants; workers still running it.
    wanted: usize,
    running: usize,
}

struct Pool {
    busy: Mutex<()>,
    state: Mutex<State>,
    wake: Condvar,
    done: Condvar,
    /// Workers started (a failed start leaves fewer).
    threads: AtomicUsize,
}

fn pool() -> &'static Pool {
    static POOL: OnceLock<&'static Pool> = OnceLock::new();
    POOL.get_or_init(|| {
        let threads = std::thread::available_parallelism().map_or(1, |n| n.get()) - 1;
        let p: &'static Pool = Box::leak(Box::new(Pool {
            busy: Mutex::new(()),
            state: Mutex::new(State::default()),
            wake: Condvar::new(),
            done: Condvar::new(),
            threads: AtomicUsize::new(0),
        }));
        for k in 0..threads {
            let spawned = std::thread::Builder::new()
                .name(format!("zyntax-cpu-{k}"))
                .spawn(move || worker(p));
            if spawned.is_ok() {
                p.threads.fetch_add(1, Ordering::Relaxed);
            }
        }
        p
    })
}

fn worker(p: &'static Pool) {
    let mut seen = 0;
    let mut s = p.state.lock().unwrap_or_else(|e| e.into_inner());
    loop {
        while s.generation == seen {
            s = p.wake.wait(s).unwrap_or_else(|e| e.into_inner());
        }
        seen = s.generation;
        let Some(job) = s.job.filter(|_| s.wanted > 0) else {
            continue;
        };
        s.wanted -= 1;
        drop(s);
        // A panic would leave the launch waiting for this worker forever.
        let _ = catch_unwind(AssertUnwindSafe(job));
        s = p.state.lock().unwrap_or_else(|e| e.into_inner());
        s.running -= 1;
        if s.running == 0 {
            p.done.notify_all();
        }
    }
}

/// Run `job` on `workers` threads (the calling thread one of them) and
/// return when all have finished.
pub fn run(workers: usize, job: &(dyn Fn() + Sync)) {
    if workers <= 1 {
        job();
        return;
    }
    let p = pool();
    let extra = workers - 1;
    let held = p.threads.load(Ordering::Relaxed);
    let guard = (extra <= held).then(|| p.busy.try_lock().ok()).flatten();
    let Some(_guard) = guard else {
        std::thread::scope(|s| {
            for _ in 0..workers {
                s.spawn(job);
            }
        });
        return;
    };
    // SAFETY: the workers run `job` only between the publication below and
    // `running` reaching 0, which this function waits for before it
    // returns; `job` outlives this call.
    let erased: Job = unsafe { std::mem::transmute::<&(dyn Fn() + Sync), Job>(job) };
    {
        let mut s = p.state.lock().unwrap_or_else(|e| e.into_inner());
        s.generation += 1;
        s.job = Some(erased);
        s.wanted = extra;
        s.running = extra;
        p.wake.notify_all();
    }
    // The calling thread is a worker too (a panic here must still wait).
    let r = catch_unwind(AssertUnwindSafe(job));
    let mut s = p.state.lock().unwrap_or_else(|e| e.into_inner());
    while s.running > 0 {
        s = p.done.wait(s).unwrap_or_else(|e| e.into_inner());
    }
    s.job = None;
    drop(s);
    if let Err(e) = r {
        std::panic::resume_unwind(e);
    }
}
