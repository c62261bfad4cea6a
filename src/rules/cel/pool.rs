//! The CEL compiler threads: a small fixed pool with big stacks.
//!
//! The generated ANTLR parser recurses per nesting level of the input:
//! past its limit of 96 it reports an error per level but keeps descending
//! (10,239 open `[` are 20,288 errors), with frames big enough that 20
//! levels overflow a 2 MiB stack unoptimized. A 64 MiB reservation
//! (address space; only the pages touched become memory) covers the
//! deepest 10 KiB selector. A thread per compile cost an OS thread
//! per concurrent unseen expression (2000 connections reached 1027
//! threads), so compiles queue for [`THREADS`] threads started on first use.
//!
//! A compile that cannot run — no thread could be started, the queue is
//! full, it waited too long to start, or the review's deadline passed — is
//! a [`NotRun`], which says nothing about the expression: the caller
//! reports it for this request only and never remembers it.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, SyncSender, TrySendError};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use super::CompileError;

/// Compiler threads: compiles are short, and the server's async workers
/// and blocking pool do the rest of a review.
pub const THREADS: usize = 2;
/// Stack of each compiler thread (see the module comment).
pub const STACK: usize = 64 << 20;
/// Compiles waiting for a thread, beyond which a compile is refused as
/// busy at once: each holds an expression of at most 10 KiB.
pub const QUEUE: usize = 32;
/// How long a compile with a deadline may wait for a thread to take it.
/// Past that the compiler is busy with something else (a flood of
/// pathological expressions, each bounded by its request's budget);
/// waiting longer would hold the review, and an async worker, for nothing.
pub const START_WAIT_MAX: Duration = Duration::from_secs(1);

/// Why a compile did not run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NotRun {
    /// The queue is full, or no thread took the compile in time.
    Busy,
    /// No compiler thread could be started.
    NoThread,
    /// The review's deadline passed before the compile finished.
    DeadlinePassed,
}

impl NotRun {
    /// The detail of the error the request gets.
    pub fn detail(self) -> &'static str {
        match self {
            NotRun::Busy => "selector not checked: the CEL compiler is busy; try again",
            NotRun::NoThread => "selector not checked: no CEL compiler thread could be started; try again",
            NotRun::DeadlinePassed => "selector not checked: the review's deadline passed",
        }
    }
}

/// A finished compile: the verdict, and how long the parser took (what
/// the request's time budget is charged).
#[derive(Debug)]
pub struct Compiled {
    pub result: Result<(), CompileError>,
    pub took: Duration,
}

enum Event {
    Started,
    Done(Compiled),
}

struct Job {
    expression: String,
    /// Set when the caller stopped waiting: a thread skips the job.
    abandoned: Arc<AtomicBool>,
    reply: mpsc::Sender<Event>,
}

pub struct CompilePool {
    threads: usize,
    stack: usize,
    start_wait: Duration,
    jobs: SyncSender<Job>,
    queue: Arc<Mutex<Receiver<Job>>>,
    /// Threads started so far; a failed start is tried again by the next
    /// compile, so a passing thread limit is not a lasting outage.
    started: Mutex<usize>,
}

impl CompilePool {
    /// A pool of `threads` threads with `stack` bytes of stack each, and
    /// room for `queue` waiting compiles. No thread starts before the
    /// first compile.
    pub fn new(threads: usize, stack: usize, queue: usize) -> Self {
        let (jobs, receiver) = mpsc::sync_channel(queue);
        CompilePool {
            threads,
            stack,
            start_wait: START_WAIT_MAX,
            jobs,
            queue: Arc::new(Mutex::new(receiver)),
            started: Mutex::new(0),
        }
    }

    /// Compiles `expression` on a pool thread, waiting at most until
    /// `deadline` (and, with one, [`START_WAIT_MAX`] for a thread to take it).
    pub fn compile(&self, expression: &str, deadline: Option<Instant>) -> Result<Compiled, NotRun> {
        let passed = || deadline.is_some_and(|d| Instant::now() >= d);
        if passed() {
            return Err(NotRun::DeadlinePassed);
        }
        self.start_threads()?;
        let (reply, events) = mpsc::channel();
        let abandoned = Arc::new(AtomicBool::new(false));
        let job = Job {
            expression: expression.to_owned(),
            abandoned: abandoned.clone(),
            reply,
        };
        // Without a deadline (the CLI, the only user of its pool) a wait is
        // for its own earlier work, and it waits; with one (the server), the
        // compile must find room in the queue, and a thread soon.
        let queued = match deadline {
            None => self.jobs.send(job).map_err(|_| NotRun::NoThread),
            Some(_) => self.jobs.try_send(job).map_err(|e| match e {
                TrySendError::Full(_) => NotRun::Busy,
                // Only when every thread is gone, which a live pool never sees.
                TrySendError::Disconnected(_) => NotRun::NoThread,
            }),
        };
        queued?;
        let started = match deadline {
            None => events.recv().map_err(|_| RecvTimeoutError::Disconnected),
            Some(d) => events.recv_timeout(self.start_wait.min(d.saturating_duration_since(Instant::now()))),
        };
        match started {
            Ok(Event::Started) => {}
            Ok(Event::Done(compiled)) => return Ok(compiled),
            Err(RecvTimeoutError::Timeout) => {
                abandoned.store(true, Ordering::Relaxed);
                return Err(if passed() { NotRun::DeadlinePassed } else { NotRun::Busy });
            }
            Err(RecvTimeoutError::Disconnected) => return Err(NotRun::Busy),
        }
        // Started: a compile always ends, so without a deadline it is
        // waited for; with one, the review stops there.
        let done = match deadline {
            None => events.recv().map_err(|_| RecvTimeoutError::Disconnected),
            Some(d) => events.recv_timeout(d.saturating_duration_since(Instant::now())),
        };
        match done {
            Ok(Event::Done(compiled)) => Ok(compiled),
            Ok(Event::Started) | Err(RecvTimeoutError::Disconnected) => Err(NotRun::Busy),
            Err(RecvTimeoutError::Timeout) => {
                abandoned.store(true, Ordering::Relaxed);
                Err(NotRun::DeadlinePassed)
            }
        }
    }

    /// Starts the threads not started yet; fails only when none runs.
    fn start_threads(&self) -> Result<(), NotRun> {
        let mut started = self.started.lock().unwrap_or_else(PoisonError::into_inner);
        while *started < self.threads {
            let queue = self.queue.clone();
            let spawned = std::thread::Builder::new()
                .name("cel-compile".into())
                .stack_size(self.stack)
                .spawn(move || work(&queue));
            match spawned {
                Ok(_) => *started += 1,
                Err(e) => {
                    tracing::warn!(error = %e, started = *started, "cannot start a CEL compiler thread");
                    break;
                }
            }
        }
        if *started == 0 { Err(NotRun::NoThread) } else { Ok(()) }
    }
}

/// A compiler thread: takes jobs until the pool is dropped.
fn work(queue: &Mutex<Receiver<Job>>) {
    loop {
        // The lock is held only while waiting for a job, not while compiling.
        let job = match queue.lock().unwrap_or_else(PoisonError::into_inner).recv() {
            Ok(job) => job,
            Err(_) => return,
        };
        if job.abandoned.load(Ordering::Relaxed) || job.reply.send(Event::Started).is_err() {
            continue;
        }
        let began = Instant::now();
        // A panic in the parser is a rejected expression, never a lost
        // thread or request.
        let result = catch_unwind(AssertUnwindSafe(|| super::parse_and_check(&job.expression).map(drop)))
            .unwrap_or_else(|_| Err(super::parser_failed()));
        let compiled = Compiled {
            result,
            took: began.elapsed(),
        };
        // The caller may have stopped waiting; the result is then dropped.
        let _ = job.reply.send(Event::Done(compiled));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compiles_on_a_pool_thread() {
        let pool = CompilePool::new(1, STACK, 4);
        let ok = pool.compile("device.driver == 'a'", None).expect("runs");
        assert_eq!(ok.result, Ok(()));
        let bad = pool.compile("device.driver ==", None).expect("runs");
        assert!(
            matches!(&bad.result, Err(CompileError::Invalid(d)) if d.starts_with("compilation failed: ERROR: <input>:1:17: ")),
            "{bad:?}"
        );
        assert_eq!(*pool.started.lock().unwrap(), 1, "one thread, reused");
    }

    /// With a deadline, a compile no thread takes in time, or that finds
    /// the queue full, is refused as busy; without one it waits its turn.
    #[test]
    fn a_busy_pool_refuses_compiles_with_a_deadline() {
        let mut pool = CompilePool::new(1, STACK, 1);
        pool.start_wait = Duration::from_millis(1);
        pool.start_threads().expect("a thread");
        // The only thread parses for a tenth of a second (more in a debug build).
        let slow = format!("{}3{}", "[".repeat(1000), "]".repeat(1000));
        let (reply, events) = mpsc::channel();
        let job = |expression: &str, reply| Job {
            expression: expression.to_owned(),
            abandoned: Arc::new(AtomicBool::new(false)),
            reply,
        };
        pool.jobs.try_send(job(&slow, reply)).expect("queued");
        assert!(matches!(events.recv(), Ok(Event::Started)));
        let far = Some(Instant::now() + Duration::from_secs(60));
        assert_eq!(pool.compile("true", far).map(|c| c.result).unwrap_err(), NotRun::Busy);
        // That compile, abandoned, holds the queue's one place: the next
        // is refused at once.
        assert_eq!(pool.compile("true", far).map(|c| c.result).unwrap_err(), NotRun::Busy);
        // Without a deadline a compile waits its turn: for the queue's
        // place, then for the thread (which skips the abandoned one).
        assert_eq!(pool.compile("true", None).expect("runs").result, Ok(()));
        assert!(matches!(events.recv(), Ok(Event::Done(_))));
    }

    /// A pool whose threads cannot start (none allowed here) refuses the
    /// compile as not run, at once.
    #[test]
    fn no_thread_is_not_run() {
        let pool = CompilePool::new(0, STACK, 4);
        assert_eq!(
            pool.compile("true", None).map(|c| c.result).unwrap_err(),
            NotRun::NoThread
        );
    }

    #[test]
    fn a_passed_deadline_is_not_run() {
        let pool = CompilePool::new(1, STACK, 4);
        let passed = Instant::now() - Duration::from_millis(1);
        assert_eq!(
            pool.compile("true", Some(passed)).map(|c| c.result).unwrap_err(),
            NotRun::DeadlinePassed
        );
    }

    /// A parser panic (the debug build's, on long ternary chains) is a
    /// rejected expression, and the thread lives on.
    #[test]
    fn a_parser_panic_is_a_rejected_expression() {
        let pool = CompilePool::new(1, STACK, 4);
        let ternaries = format!("{}true", "true ? true : ".repeat(500));
        let compiled = pool.compile(&ternaries, None).expect("runs");
        assert!(matches!(compiled.result, Err(CompileError::Invalid(_))), "{compiled:?}");
        assert_eq!(pool.compile("true", None).expect("runs").result, Ok(()));
    }
}
