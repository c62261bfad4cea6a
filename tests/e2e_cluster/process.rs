//! Long-running child processes (etcd, kube-apiserver,
//! kube-controller-manager, `draguard serve`) that never outlive the test:
//! killed on drop (a scenario that panics unwinds through it), and killed
//! by the kernel when the test process dies any other way (SIGKILL, a
//! Ctrl-C): the child asks for SIGKILL on its parent's death
//! (`PR_SET_PDEATHSIG`) before it execs.
//!
//! PDEATHSIG fires when the *thread* that forked the child exits, not the
//! process: spawn from the main thread (the runner runs every scenario
//! there) or from a thread that lives as long as the child.

use std::fs::File;
use std::io::{self, Read, Seek, SeekFrom};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use rustix::process::{Pid, Signal};

/// A child process whose output goes to a log file.
pub struct Daemon {
    pub name: String,
    child: Option<Child>,
    pub log: PathBuf,
}

impl Daemon {
    /// Starts `command`, stdout and stderr appended to `log`.
    pub fn spawn(name: &str, mut command: Command, log: &Path) -> Daemon {
        let out = File::options()
            .create(true)
            .append(true)
            .open(log)
            .unwrap_or_else(|e| panic!("log file {}: {e}", log.display()));
        let err = out.try_clone().expect("log file handle");
        command.stdin(Stdio::null()).stdout(out).stderr(err);
        die_with_parent(&mut command);
        let child = command
            .spawn()
            .unwrap_or_else(|e| panic!("{name} does not start ({:?}): {e}", command.get_program()));
        Daemon {
            name: name.to_owned(),
            child: Some(child),
            log: log.to_owned(),
        }
    }

    pub fn pid(&self) -> Pid {
        Pid::from_child(self.child.as_ref().expect("running until stopped"))
    }

    /// Whether it still runs (a stopped, SIGSTOPped process does).
    pub fn running(&mut self) -> bool {
        match self.child.as_mut() {
            Some(child) => matches!(child.try_wait(), Ok(None)),
            None => false,
        }
    }

    /// Sends `signal` (STOP to hang it, CONT to resume it).
    pub fn signal(&self, signal: Signal) {
        rustix::process::kill_process(self.pid(), signal)
            .unwrap_or_else(|e| panic!("signal {signal:?} to {}: {e}", self.name));
    }

    /// SIGKILL, and waits for it to be gone (its port then refuses).
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// The last `lines` lines of its log.
    pub fn tail(&self, lines: usize) -> String {
        tail(&self.log, lines)
    }

    /// Waits until `ready` holds, at most `timeout`, failing early (with the
    /// log's tail) if the process exits.
    pub fn wait_until(&mut self, timeout: Duration, what: &str, mut ready: impl FnMut() -> bool) {
        let start = Instant::now();
        loop {
            if ready() {
                return;
            }
            if !self.running() {
                panic!("{} exited while waiting for {what}:\n{}", self.name, self.tail(30));
            }
            if start.elapsed() > timeout {
                panic!("{} not {what} after {timeout:?}:\n{}", self.name, self.tail(30));
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Asks the kernel to SIGKILL the child when the thread that spawned it
/// exits, and exits at once if that happened before the request.
fn die_with_parent(command: &mut Command) {
    let parent = rustix::process::getpid();
    // SAFETY: the closure runs in the forked child before exec and makes
    // only two system calls (prctl, getppid), which are async-signal-safe;
    // it allocates nothing and takes no lock.
    unsafe {
        command.pre_exec(move || {
            rustix::process::set_parent_process_death_signal(Some(Signal::KILL)).map_err(io::Error::from)?;
            if rustix::process::getppid() != Some(parent) {
                return Err(io::Error::other("the test process is gone"));
            }
            Ok(())
        });
    }
}

/// The last `lines` lines of a file (at most its last 64 KiB are read).
pub fn tail(path: &Path, lines: usize) -> String {
    let Ok(mut file) = File::open(path) else {
        return format!("({} unreadable)", path.display());
    };
    let len = file.metadata().map(|m| m.len()).unwrap_or(0);
    let _ = file.seek(SeekFrom::Start(len.saturating_sub(64 * 1024)));
    let mut bytes = Vec::new();
    let _ = file.read_to_end(&mut bytes);
    let text = String::from_utf8_lossy(&bytes);
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

/// A loopback port nothing listens on now (the listener is dropped at
/// once; the kernel does not hand the same port out again soon).
pub fn free_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind a loopback port");
    listener.local_addr().expect("bound address").port()
}
