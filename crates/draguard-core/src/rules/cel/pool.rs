//! The CEL compiler threads: a small fixed pool with big stacks, and two
//! lanes.
//!
//! The generated ANTLR parser recurses per nesting level of the input,
//! with frames big enough that 20 levels overflow a 2 MiB stack
//! unoptimized. A 64 MiB reservation (address space; only the pages
//! touched become memory) covers the deepest 10 KiB selector. A thread per
//! compile cost an OS thread per concurrent unseen expression (2000
//! connections reached 1027 threads), so compiles queue for [`THREADS`]
//! threads started on first use.
//!
//! Most selectors parse in well under a millisecond, but some take the
//! parser a long time: an invalid 10 KiB selector nested 249 deep (within
//! cel-go's limit, so `nesting` lets it through) takes half a second.
//! Six connections sending such selectors kept both threads busy, and
//! legitimate claims waiting behind them were refused as busy. So each
//! compile goes in a [`Lane`]: short and shallow expressions (what real
//! selectors are) in [`Lane::Short`], the rest in [`Lane::Long`]; at most
//! [`LONG_AT_ONCE`] thread compiles a long one at a time, and the others
//! take short ones first. However many slow expressions arrive, a short
//! one waits only for other short ones (each a few milliseconds at most).
//!
//! A compile that cannot run — no thread could be started, its lane's
//! queue is full, it waited too long to start, or the review's deadline
//! passed — is a [`NotRun`], which says nothing about the expression: the
//! caller reports it for this request only and never remembers it.

use std::collections::VecDeque;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use super::CompileError;

/// Compiler threads: compiles are short, and the server's async workers
/// and blocking pool do the rest of a review.
pub const THREADS: usize = 2;
/// Threads that may compile [`Lane::Long`] expressions at once: with
/// [`THREADS`] 2, one is always left to short ones.
pub const LONG_AT_ONCE: usize = 1;
/// Stack of each compiler thread (see the module comment).
pub const STACK: usize = 64 << 20;
/// Short compiles waiting for a thread, beyond which a compile with a
/// deadline is refused as busy at once: each holds at most [`SHORT_MAX`]
/// bytes.
pub const QUEUE: usize = 32;
/// Long compiles waiting: each holds an expression of at most 10 KiB, and
/// takes its one thread up to half a second, so a longer queue would only
/// hold reviews until their deadline.
pub const LONG_QUEUE: usize = 4;
/// The longest expression in [`Lane::Short`]. Real selectors are a few
/// hundred bytes.
pub const SHORT_MAX: usize = 1024;
/// The deepest nesting in [`Lane::Short`] (as `nesting::depth` counts it).
/// The parser's time grows with depth × length: at 1 KiB, 64 levels (open
/// to the end) parse in under 10 ms (debug build, the parser optimized as
/// in Cargo.toml), 249 levels in 200 ms.
pub const SHALLOW_MAX: usize = 64;
/// How long a compile with a deadline may wait for a thread to take it.
/// Past that the compiler is busy with something else (a flood of
/// pathological expressions, each bounded by its request's budget);
/// waiting longer would hold the review, and an async worker, for nothing.
pub const START_WAIT_MAX: Duration = Duration::from_secs(1);

/// Which queue a compile waits in (see the module comment).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lane {
    Short,
    Long,
}

impl Lane {
    /// The lane of an expression of `len` bytes nested `depth` deep.
    pub fn of(len: usize, depth: usize) -> Lane {
        if len <= SHORT_MAX && depth <= SHALLOW_MAX {
            Lane::Short
        } else {
            Lane::Long
        }
    }
}

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

/// What a pool thread runs on an expression: the parser, or in tests a
/// stand-in that shows what the threads do.
type CompileFn = Arc<dyn Fn(&str) -> Result<(), CompileError> + Send + Sync>;

/// The two queues and who is on a long compile, under one lock.
#[derive(Default)]
struct Queues {
    short: VecDeque<Job>,
    long: VecDeque<Job>,
    long_running: usize,
    /// The pool was dropped: threads leave.
    closed: bool,
}

impl Queues {
    fn lane(&mut self, lane: Lane) -> &mut VecDeque<Job> {
        match lane {
            Lane::Short => &mut self.short,
            Lane::Long => &mut self.long,
        }
    }
}

struct Shared {
    queues: Mutex<Queues>,
    /// A job was queued, or a long compile ended.
    work: Condvar,
    /// A job left a queue.
    room: Condvar,
    long_at_once: usize,
}

impl Shared {
    fn queues(&self) -> MutexGuard<'_, Queues> {
        self.queues.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The next job a thread may take: a short one first, a long one only
    /// while fewer than `long_at_once` threads are on one. `None` once the
    /// pool is dropped.
    fn next(&self) -> Option<(Job, Lane)> {
        let mut queues = self.queues();
        loop {
            if queues.closed {
                return None;
            }
            if let Some(job) = queues.short.pop_front() {
                self.room.notify_all();
                return Some((job, Lane::Short));
            }
            if queues.long_running < self.long_at_once
                && let Some(job) = queues.long.pop_front()
            {
                queues.long_running += 1;
                self.room.notify_all();
                return Some((job, Lane::Long));
            }
            queues = self.work.wait(queues).unwrap_or_else(PoisonError::into_inner);
        }
    }

    /// A long compile ended: another may start.
    fn long_done(&self) {
        let mut queues = self.queues();
        queues.long_running = queues.long_running.saturating_sub(1);
        self.work.notify_all();
    }
}

/// Held by a thread on a long compile; gives the long slot back however
/// the compile ends.
struct LongSlot<'a>(&'a Shared);

impl Drop for LongSlot<'_> {
    fn drop(&mut self) {
        self.0.long_done();
    }
}

pub struct CompilePool {
    threads: usize,
    stack: usize,
    start_wait: Duration,
    queue_max: [usize; 2],
    shared: Arc<Shared>,
    compile: CompileFn,
    /// Threads started so far; a failed start is tried again by the next
    /// compile, so a passing thread limit is not a lasting outage.
    started: Mutex<usize>,
    /// Compiles the threads ran (not skipped): what tests count.
    ran: Arc<AtomicUsize>,
}

impl CompilePool {
    /// A pool of `threads` threads with `stack` bytes of stack each, room
    /// for `queue` waiting short compiles and [`LONG_QUEUE`] long ones, and
    /// [`LONG_AT_ONCE`] long compile at a time. No thread starts before
    /// the first compile.
    pub fn new(threads: usize, stack: usize, queue: usize) -> Self {
        Self::with_compiler(threads, stack, queue, Arc::new(|e| super::parse_and_check(e).map(drop)))
    }

    fn with_compiler(threads: usize, stack: usize, queue: usize, compile: CompileFn) -> Self {
        CompilePool {
            threads,
            stack,
            start_wait: START_WAIT_MAX,
            queue_max: [queue, LONG_QUEUE],
            shared: Arc::new(Shared {
                queues: Mutex::default(),
                work: Condvar::new(),
                room: Condvar::new(),
                long_at_once: LONG_AT_ONCE,
            }),
            compile,
            started: Mutex::new(0),
            ran: Arc::new(AtomicUsize::new(0)),
        }
    }

    /// How many compiles the threads ran.
    #[cfg(test)]
    pub fn ran(&self) -> usize {
        self.ran.load(Ordering::Relaxed)
    }

    /// Whether compiles wait in `lane`'s queue: a request that has had its
    /// share of the compiler yields to them (see `budget`).
    pub fn contended(&self, lane: Lane) -> bool {
        !self.shared.queues().lane(lane).is_empty()
    }

    /// Compiles `expression` on a pool thread in `lane`, waiting at most
    /// until `deadline` (and, with one, [`START_WAIT_MAX`] for a thread to
    /// take it).
    pub fn compile(&self, expression: &str, lane: Lane, deadline: Option<Instant>) -> Result<Compiled, NotRun> {
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
        self.queue(job, lane, deadline.is_none())?;
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

    /// Puts `job` in `lane`'s queue; when it is full, waits for room if
    /// `wait`, else refuses it as busy.
    fn queue(&self, job: Job, lane: Lane, wait: bool) -> Result<(), NotRun> {
        let max = match lane {
            Lane::Short => self.queue_max[0],
            Lane::Long => self.queue_max[1],
        };
        let mut queues = self.shared.queues();
        loop {
            if queues.closed {
                return Err(NotRun::NoThread);
            }
            let queue = queues.lane(lane);
            if queue.len() < max {
                queue.push_back(job);
                self.shared.work.notify_all();
                return Ok(());
            }
            if !wait {
                return Err(NotRun::Busy);
            }
            queues = self.shared.room.wait(queues).unwrap_or_else(PoisonError::into_inner);
        }
    }

    /// Starts the threads not started yet; fails only when none runs.
    fn start_threads(&self) -> Result<(), NotRun> {
        let mut started = self.started.lock().unwrap_or_else(PoisonError::into_inner);
        while *started < self.threads {
            let shared = self.shared.clone();
            let compile = self.compile.clone();
            let ran = self.ran.clone();
            let spawned = std::thread::Builder::new()
                .name("cel-compile".into())
                .stack_size(self.stack)
                .spawn(move || work(&shared, &*compile, &ran));
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

impl Drop for CompilePool {
    /// Its threads leave; compiles still queued are dropped, and whoever
    /// waits for them hears the pool is gone.
    fn drop(&mut self) {
        self.shared.queues().closed = true;
        self.shared.work.notify_all();
        self.shared.room.notify_all();
    }
}

/// A compiler thread: takes jobs until the pool is dropped.
fn work(shared: &Shared, compile: &(dyn Fn(&str) -> Result<(), CompileError> + Send + Sync), ran: &AtomicUsize) {
    // The lock is held only while taking a job, not while compiling.
    while let Some((job, lane)) = shared.next() {
        let _slot = (lane == Lane::Long).then(|| LongSlot(shared));
        if job.abandoned.load(Ordering::Relaxed) || job.reply.send(Event::Started).is_err() {
            continue;
        }
        ran.fetch_add(1, Ordering::Relaxed);
        let began = Instant::now();
        // A panic in the parser is a rejected expression, never a lost
        // thread or request.
        let result =
            catch_unwind(AssertUnwindSafe(|| compile(&job.expression))).unwrap_or_else(|_| Err(super::parser_failed()));
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
        let ok = pool.compile("device.driver == 'a'", Lane::Short, None).expect("runs");
        assert_eq!(ok.result, Ok(()));
        let bad = pool.compile("device.driver ==", Lane::Long, None).expect("runs");
        assert!(
            matches!(&bad.result, Err(CompileError::Invalid(d)) if d.starts_with("compilation failed: ERROR: <input>:1:17: ")),
            "{bad:?}"
        );
        assert_eq!(*pool.started.lock().unwrap(), 1, "one thread, reused");
        assert_eq!(pool.ran(), 2);
    }

    #[test]
    fn lanes_by_length_and_depth() {
        assert_eq!(Lane::of(SHORT_MAX, SHALLOW_MAX), Lane::Short);
        assert_eq!(Lane::of(SHORT_MAX + 1, 1), Lane::Long);
        assert_eq!(Lane::of(10, SHALLOW_MAX + 1), Lane::Long);
    }

    /// A stand-in compiler: an expression starting with `hold` reports
    /// that it started and waits until the test releases it (no timing);
    /// anything else compiles at once.
    struct Gate {
        started: Mutex<mpsc::Receiver<String>>,
        release: Mutex<mpsc::Sender<()>>,
    }

    fn gated(threads: usize, queue: usize) -> (CompilePool, Gate) {
        let (started_tx, started_rx) = mpsc::channel::<String>();
        let (release_tx, release_rx) = mpsc::channel::<()>();
        let (started_tx, release_rx) = (Mutex::new(started_tx), Mutex::new(release_rx));
        let compile: CompileFn = Arc::new(move |e: &str| {
            if e.starts_with("hold") {
                let _ = started_tx.lock().unwrap().send(e.to_owned());
                let _ = release_rx.lock().unwrap().recv();
            }
            Ok(())
        });
        let mut pool = CompilePool::with_compiler(threads, STACK, queue, compile);
        // Long enough never to be what a test waits for.
        pool.start_wait = Duration::from_secs(60);
        let gate = Gate {
            started: Mutex::new(started_rx),
            release: Mutex::new(release_tx),
        };
        (pool, gate)
    }

    /// The finding: slow compiles took both threads, and a short one
    /// waited behind them until it was refused. Now a long compile holds
    /// one thread, a second long one waits for it, and a short one runs on
    /// the other thread meanwhile.
    #[test]
    fn a_long_compile_cannot_block_a_short_one() {
        let (pool, gate) = gated(2, 4);
        let far = Some(Instant::now() + Duration::from_secs(600));
        std::thread::scope(|scope| {
            let first = scope.spawn(|| pool.compile("hold 1", Lane::Long, far).map(|c| c.result));
            assert_eq!(gate.started.lock().unwrap().recv().unwrap(), "hold 1");
            let second = scope.spawn(|| pool.compile("hold 2", Lane::Long, far).map(|c| c.result));
            // The second is queued (or about to be): the short one runs
            // while the first holds its thread and the second waits.
            assert_eq!(
                pool.compile("device.driver == 'a'", Lane::Short, far).map(|c| c.result),
                Ok(Ok(()))
            );
            assert_eq!(
                pool.ran(),
                2,
                "the first long one and the short one; not the second long one"
            );
            assert!(matches!(
                gate.started.lock().unwrap().try_recv(),
                Err(mpsc::TryRecvError::Empty)
            ));
            // Released, the first ends and the second starts on its slot.
            gate.release.lock().unwrap().send(()).unwrap();
            assert_eq!(first.join().unwrap(), Ok(Ok(())));
            assert_eq!(gate.started.lock().unwrap().recv().unwrap(), "hold 2");
            gate.release.lock().unwrap().send(()).unwrap();
            assert_eq!(second.join().unwrap(), Ok(Ok(())));
        });
        assert_eq!(pool.ran(), 3);
    }

    /// With a deadline, a compile that finds its lane's queue full, or
    /// that no thread takes in time, is refused as busy; without one it
    /// waits its turn. The other lane is not affected.
    #[test]
    fn a_busy_lane_refuses_compiles_with_a_deadline() {
        let (mut pool, gate) = gated(2, 1);
        let far = Some(Instant::now() + Duration::from_secs(600));
        std::thread::scope(|scope| {
            let holding = scope.spawn(|| pool.compile("hold", Lane::Long, far).map(|c| c.result));
            assert_eq!(gate.started.lock().unwrap().recv().unwrap(), "hold");
            // The long lane's queue holds LONG_QUEUE compiles; its thread is busy.
            let waiting: Vec<_> = (0..LONG_QUEUE)
                .map(|i| {
                    let (reply, _events) = mpsc::channel();
                    let job = Job {
                        expression: format!("queued {i}"),
                        abandoned: Arc::new(AtomicBool::new(true)),
                        reply,
                    };
                    pool.queue(job, Lane::Long, false)
                })
                .collect();
            assert!(waiting.iter().all(Result::is_ok), "{waiting:?}");
            assert_eq!(
                pool.compile("long", Lane::Long, far).map(|c| c.result).unwrap_err(),
                NotRun::Busy
            );
            assert!(pool.contended(Lane::Long));
            assert!(!pool.contended(Lane::Short));
            // The short lane still runs.
            assert_eq!(pool.compile("short", Lane::Short, far).map(|c| c.result), Ok(Ok(())));
            gate.release.lock().unwrap().send(()).unwrap();
            assert_eq!(holding.join().unwrap(), Ok(Ok(())));
        });
        // The abandoned queued ones were skipped, not run.
        assert_eq!(pool.ran(), 2);
        // A compile no thread takes within the start wait is busy.
        let (mut slow, gate) = gated(1, 4);
        slow.start_wait = Duration::from_millis(1);
        std::thread::scope(|scope| {
            let holding = scope.spawn(|| slow.compile("hold", Lane::Short, None).map(|c| c.result));
            assert_eq!(gate.started.lock().unwrap().recv().unwrap(), "hold");
            assert_eq!(
                slow.compile("short", Lane::Short, far).map(|c| c.result).unwrap_err(),
                NotRun::Busy
            );
            gate.release.lock().unwrap().send(()).unwrap();
            assert_eq!(holding.join().unwrap(), Ok(Ok(())));
            // Without a deadline a compile waits its turn.
            assert_eq!(slow.compile("short", Lane::Short, None).map(|c| c.result), Ok(Ok(())));
        });
        pool.start_wait = START_WAIT_MAX;
    }

    /// A pool whose threads cannot start (none allowed here) refuses the
    /// compile as not run, at once.
    #[test]
    fn no_thread_is_not_run() {
        let pool = CompilePool::new(0, STACK, 4);
        assert_eq!(
            pool.compile("true", Lane::Short, None).map(|c| c.result).unwrap_err(),
            NotRun::NoThread
        );
    }

    #[test]
    fn a_passed_deadline_is_not_run() {
        let pool = CompilePool::new(1, STACK, 4);
        let passed = Instant::now() - Duration::from_millis(1);
        assert_eq!(
            pool.compile("true", Lane::Short, Some(passed))
                .map(|c| c.result)
                .unwrap_err(),
            NotRun::DeadlinePassed
        );
    }

    /// A parser panic is a rejected expression, and the thread lives on;
    /// a long compile that panicked gives its slot back.
    #[test]
    fn a_parser_panic_is_a_rejected_expression() {
        let compile: CompileFn = Arc::new(|e: &str| if e == "panic" { panic!("parser") } else { Ok(()) });
        let pool = CompilePool::with_compiler(1, STACK, 4, compile);
        let compiled = pool.compile("panic", Lane::Long, None).expect("runs");
        assert_eq!(compiled.result, Err(super::super::parser_failed()));
        assert_eq!(pool.compile("true", Lane::Long, None).expect("runs").result, Ok(()));
        assert_eq!(pool.compile("true", Lane::Short, None).expect("runs").result, Ok(()));
    }
}
