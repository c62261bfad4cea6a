//! The server's CEL compiler: the process's compiler pool and memo
//! (`rules::cel::shared`), waited for without holding up an async worker.
//!
//! The server reviews short requests inline on its async workers, and a
//! compile is the one step of a review that can take milliseconds. On a
//! worker of a multi-threaded tokio runtime the wait for the compiler pool
//! therefore hands the worker's other tasks to another thread
//! (`block_in_place`); anywhere else (a `spawn_blocking` thread, a
//! single-threaded runtime) it just waits. The judgement knows none of
//! this: it sees a [`CelCompiler`].

use std::time::{Duration, Instant};

use crate::rules::cel::{self, CelCompiler, CompileError};

/// The process's compiler, waited for off the async worker.
pub(crate) struct OffTheAsyncWorker;

impl CelCompiler for OffTheAsyncWorker {
    fn contended(&self, expression: &str) -> bool {
        cel::shared().contended(expression)
    }

    fn check(&self, expression: &str, deadline: Option<Instant>) -> (Result<(), CompileError>, Duration) {
        cel::shared().check_waiting(expression, deadline, &mut |wait| off_the_async_worker(wait))
    }

    fn remembered(&self, expression: &str) -> bool {
        CelCompiler::remembered(cel::shared(), expression)
    }
}

fn off_the_async_worker(work: &mut dyn FnMut()) {
    use tokio::runtime::{Handle, RuntimeFlavor};
    match Handle::try_current() {
        Ok(handle) if handle.runtime_flavor() == RuntimeFlavor::MultiThread => tokio::task::block_in_place(work),
        _ => work(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn compile(expression: &str) -> Result<(), CompileError> {
        OffTheAsyncWorker.check(expression, None).0
    }

    /// Each place a review runs: an async worker of the server's runtime,
    /// its blocking pool, a single-threaded runtime, no runtime at all. An
    /// unseen expression compiles (and a bad one is rejected) in every one,
    /// without `block_in_place`'s panic outside a multi-threaded worker.
    #[test]
    fn compiles_wherever_a_review_runs() {
        let multi = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .build()
            .expect("runtime");
        let on_worker = multi.block_on(async {
            tokio::spawn(async { compile("device.driver == \"on-a-worker.example.com\"") })
                .await
                .expect("task")
        });
        assert_eq!(on_worker, Ok(()));
        let on_blocking_pool = multi.block_on(async {
            tokio::task::spawn_blocking(|| compile("device.driver == \"in-the-pool.example.com\""))
                .await
                .expect("task")
        });
        assert_eq!(on_blocking_pool, Ok(()));
        let single = tokio::runtime::Builder::new_current_thread().build().expect("runtime");
        let on_single = single.block_on(async { compile("device.driver == ") });
        assert!(
            matches!(on_single, Err(CompileError::Invalid(ref m)) if m.starts_with("compilation failed: ERROR: <input>:1:18")),
            "{on_single:?}"
        );
        assert_eq!(compile("device.driver == \"no-runtime.example.com\""), Ok(()));
    }
}
