//! A network namespace owned by one worker thread, kept alive while the bench needs it.
//!
//! The thread calls `unshare(CLONE_NEWNET)` (through `netprobe::ns::run_in_fresh_netns`) and
//! then runs the jobs it is sent, in that netns. Peers (`ip`) reach the same netns through
//! `/proc/<pid>/task/<tid>/ns/net`, which exists as long as the thread does — no bind mount,
//! nothing to clean up: when the thread ends (drop, error or panic) the netns and every veth
//! pair in it die with it.

use std::path::PathBuf;
use std::sync::mpsc::{Receiver, Sender, channel};
use std::thread::JoinHandle;

type Job = Box<dyn FnOnce() + Send>;

/// A fresh netns held by a dedicated thread.
pub struct NetnsThread {
    tx: Option<Sender<Job>>,
    handle: Option<JoinHandle<()>>,
    tid: i32,
}

impl NetnsThread {
    /// Spawns the thread, which unshares a fresh netns (only `lo`, DOWN) and waits for jobs.
    pub fn fresh() -> Result<NetnsThread, String> {
        let (tx, rx) = channel::<Job>();
        let (ready_tx, ready_rx) = channel::<Result<i32, String>>();
        let handle = std::thread::Builder::new()
            .name("bench-netns".into())
            .spawn(move || serve(rx, ready_tx))
            .map_err(|e| format!("spawn netns thread: {e}"))?;
        match ready_rx.recv() {
            Ok(Ok(tid)) => Ok(NetnsThread {
                tx: Some(tx),
                handle: Some(handle),
                tid,
            }),
            Ok(Err(e)) => {
                let _ = handle.join();
                Err(e)
            }
            Err(_) => {
                let _ = handle.join();
                Err("netns thread ended before it was ready".into())
            }
        }
    }

    /// Runs `f` in the netns (on the worker thread) and returns its value. A panic in `f` ends
    /// the worker (and with it the netns) and is re-raised here.
    pub fn run<T: Send + 'static>(&self, f: impl FnOnce() -> T + Send + 'static) -> T {
        let (rtx, rrx) = channel();
        let job: Job = Box::new(move || {
            let _ = rtx.send(f());
        });
        self.tx
            .as_ref()
            .expect("worker alive")
            .send(job)
            .expect("netns worker gone");
        match rrx.recv() {
            Ok(v) => v,
            Err(_) => panic!("netns job panicked (the netns is gone)"),
        }
    }

    /// Lets the kernel finish the deferred work of a bulk link creation (RCU frees, sysfs,
    /// workqueues) before anything is timed: raw link dumps, untimed, for at least 300 ms
    /// and 5 dumps. Measured here: right after adding 990 veth links the first dumps run
    /// ~2x slower and settle within ~150 ms, which otherwise lands on the first timed runs.
    pub fn settle(&self) {
        self.run(|| {
            let start = std::time::Instant::now();
            let mut n = 0;
            while n < 5 || start.elapsed() < std::time::Duration::from_millis(300) {
                let _ = std::hint::black_box(crate::rawdump::raw_link_dump());
                n += 1;
            }
        })
    }

    /// `/proc/<pid>/task/<tid>/ns/net`: the netns, for `nsenter --net=`.
    pub fn path(&self) -> PathBuf {
        PathBuf::from(format!(
            "/proc/{}/task/{}/ns/net",
            std::process::id(),
            self.tid
        ))
    }

    /// The worker's thread id (usable as `nsenter -t TID -n`: `/proc/<tid>/ns/net` is the
    /// thread's netns).
    pub fn tid(&self) -> i32 {
        self.tid
    }
}

impl Drop for NetnsThread {
    fn drop(&mut self) {
        self.tx.take();
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

fn serve(rx: Receiver<Job>, ready: Sender<Result<i32, String>>) {
    let ready2 = ready.clone();
    let r = netprobe::ns::run_in_fresh_netns(move || {
        // SAFETY: gettid has no preconditions.
        let tid = unsafe { libc::gettid() };
        let _ = ready2.send(Ok(tid));
        for job in rx {
            job();
        }
    });
    if let Err(e) = r {
        let _ = ready.send(Err(format!("fresh netns: {e}")));
    }
}
