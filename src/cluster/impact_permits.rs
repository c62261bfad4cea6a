//! A cap on DeviceTaintRule impact computations running at once.
//!
//! One computation walks the indexes of every device and claim the rule
//! reaches, under their read locks, and holds a small entry per pod it
//! reaches (about 50 bytes; 5 MB for 100,000 pods). It is CPU-bound, so
//! more of them at once than the replica has cores only adds memory and
//! lengthens each. [`SLOTS`] run at once; a review that finds every slot
//! taken waits up to [`WAIT`] for one, then hears "busy" and says so (see
//! `review::taint_rule_impact` for what that means for the write).

use std::sync::{Condvar, Mutex, PoisonError};
use std::time::{Duration, Instant};

/// Computations at once: the deployment's CPU limit is 2 cores.
pub const SLOTS: usize = 2;

/// How long a review waits for a slot. A computation over 100,000 claims
/// takes tens of milliseconds; the DeviceTaintRule webhook's timeout is
/// 3 s (deploy/base/webhooks.yaml).
pub const WAIT: Duration = Duration::from_millis(250);

pub struct ImpactPermits {
    running: Mutex<usize>,
    freed: Condvar,
    slots: usize,
    wait: Duration,
}

/// A slot, given back when dropped.
pub struct Permit<'p>(&'p ImpactPermits);

impl Drop for Permit<'_> {
    fn drop(&mut self) {
        let mut running = self.0.running.lock().unwrap_or_else(PoisonError::into_inner);
        *running = running.saturating_sub(1);
        self.0.freed.notify_one();
    }
}

impl Default for ImpactPermits {
    fn default() -> Self {
        ImpactPermits::new(SLOTS, WAIT)
    }
}

impl ImpactPermits {
    pub fn new(slots: usize, wait: Duration) -> Self {
        ImpactPermits {
            running: Mutex::new(0),
            freed: Condvar::new(),
            slots: slots.max(1),
            wait,
        }
    }

    pub fn slots(&self) -> usize {
        self.slots
    }

    /// A slot only while no computation runs, without waiting: for work
    /// that must never make a review wait (`controllers::standing_taint_rules`
    /// retries next round). A review that comes meanwhile still finds the
    /// other slot free.
    pub fn acquire_if_idle(&self) -> Option<Permit<'_>> {
        let mut running = self.running.lock().unwrap_or_else(PoisonError::into_inner);
        if *running > 0 {
            return None;
        }
        *running += 1;
        Some(Permit(self))
    }

    /// A slot, waiting up to the configured time; `None` when none freed.
    pub fn acquire(&self) -> Option<Permit<'_>> {
        let until = Instant::now() + self.wait;
        let mut running = self.running.lock().unwrap_or_else(PoisonError::into_inner);
        while *running >= self.slots {
            let left = until.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return None;
            }
            running = self
                .freed
                .wait_timeout(running, left)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
        *running += 1;
        Some(Permit(self))
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;

    #[test]
    fn slots_are_capped_and_given_back() {
        let permits = ImpactPermits::new(2, Duration::from_millis(20));
        let a = permits.acquire().expect("first slot");
        let _b = permits.acquire().expect("second slot");
        let started = Instant::now();
        assert!(permits.acquire().is_none(), "a third waits, then is refused");
        assert!(started.elapsed() >= Duration::from_millis(20));
        drop(a);
        assert!(permits.acquire().is_some(), "a freed slot is taken again");
    }

    #[test]
    fn idle_work_takes_a_slot_only_while_none_is_taken_and_leaves_one_for_reviews() {
        let permits = ImpactPermits::new(2, Duration::from_millis(20));
        let review = permits.acquire().expect("a review's slot");
        assert!(permits.acquire_if_idle().is_none(), "a review runs: idle work waits");
        drop(review);
        let idle = permits.acquire_if_idle().expect("idle: a slot");
        assert!(permits.acquire().is_some(), "a review still gets the other slot");
        drop(idle);
    }

    #[test]
    fn a_waiter_gets_the_slot_freed_during_its_wait() {
        let permits = Arc::new(ImpactPermits::new(1, Duration::from_secs(10)));
        let held = permits.acquire().expect("slot");
        let waiter = {
            let permits = permits.clone();
            std::thread::spawn(move || permits.acquire().is_some())
        };
        std::thread::sleep(Duration::from_millis(20));
        drop(held);
        assert!(waiter.join().expect("waiter"), "woken by the freed slot");
    }
}
