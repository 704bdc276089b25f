//! Processes, CPU affinity and /proc readings.

use std::fs;
use std::path::Path;
use std::process::{Child, Command};
use std::time::{Duration, Instant};

pub use nix::sys::signal::Signal;

/// Sends `sig` to our own child `pid` (one that has exited is no error worth telling).
pub fn signal(pid: u32, sig: Signal) {
    let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid as i32), sig);
}

/// Pins the calling thread (and so every thread or process it creates afterwards) to `cpus`.
pub fn pin(cpus: &[usize]) {
    use nix::sched::{CpuSet, sched_setaffinity};
    let mut set = CpuSet::new();
    for &c in cpus {
        set.set(c).expect("a CPU index within the set");
    }
    sched_setaffinity(nix::unistd::Pid::from_raw(0), &set)
        .unwrap_or_else(|e| panic!("sched_setaffinity({cpus:?}) failed: {e}"));
}

/// Gives the calling thread SCHED_FIFO priority 10 if the process may (root); else nothing.
pub fn realtime_priority() {
    use thread_priority::{
        RealtimeThreadSchedulePolicy, ThreadPriority, ThreadSchedulePolicy,
        set_thread_priority_and_policy, thread_native_id,
    };
    let priority = ThreadPriority::Crossplatform(10u8.try_into().expect("within 0..=99"));
    let fifo = ThreadSchedulePolicy::Realtime(RealtimeThreadSchedulePolicy::Fifo);
    let _ = set_thread_priority_and_policy(thread_native_id(), priority, fifo);
}

/// Waits (up to `max`) until the machine's CPUs are busy with less than `cores` of
/// anything; how busy they were at the end.
pub fn wait_for_quiet(cores: f64, max: Duration) -> f64 {
    let deadline = Instant::now() + max;
    loop {
        let (t0, c0) = (Instant::now(), system_cpu_ns());
        // The measurement's own window (CPU time over one second), not a wait for an event.
        std::thread::sleep(Duration::from_millis(1000));
        let busy = system_cpu_ns().saturating_sub(c0) as f64 / t0.elapsed().as_nanos() as f64;
        if busy < cores || Instant::now() >= deadline {
            return busy;
        }
    }
}

pub fn online_cpus() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// A child process that is stopped (SIGTERM, then SIGKILL) when dropped.
pub struct Proc {
    pub name: String,
    child: Child,
}

impl Proc {
    pub fn spawn(name: &str, cmd: &mut Command) -> Self {
        let child = cmd
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {name}: {e}"));
        Self {
            name: name.into(),
            child,
        }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub fn check_alive(&mut self) {
        if let Ok(Some(status)) = self.child.try_wait() {
            panic!("{} exited unexpectedly: {status}", self.name);
        }
    }

    pub fn stop(mut self) {
        self.terminate();
    }

    fn terminate(&mut self) {
        if let Ok(Some(_)) = self.child.try_wait() {
            return;
        }
        signal(self.child.id(), Signal::SIGTERM);
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        self.terminate();
    }
}

/// CPU time (user + system) a process has used so far, in nanoseconds: the sum of its
/// threads' schedstat run times (ns resolution), or utime + stime from /proc/PID/stat
/// (clock-tick resolution) where schedstat is missing.
pub fn cpu_ns(pid: u32) -> u64 {
    let mut total = 0u64;
    let mut found = false;
    if let Ok(tasks) = fs::read_dir(format!("/proc/{pid}/task")) {
        for task in tasks.flatten() {
            if let Ok(s) = fs::read_to_string(task.path().join("schedstat"))
                && let Some(ns) = s
                    .split_whitespace()
                    .next()
                    .and_then(|v| v.parse::<u64>().ok())
            {
                total += ns;
                found = true;
            }
        }
    }
    if found {
        return total;
    }
    stat_cpu_ns(pid)
}

fn stat_cpu_ns(pid: u32) -> u64 {
    let Ok(stat) = fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return 0;
    };
    let Some(rest) = stat.rsplit_once(')').map(|(_, r)| r) else {
        return 0;
    };
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks: u64 =
        fields[11].parse::<u64>().unwrap_or(0) + fields[12].parse::<u64>().unwrap_or(0);
    let hz = procfs::ticks_per_second().max(1);
    ticks * 1_000_000_000 / hz
}

/// CPU time of the whole machine (all CPUs, not idle or iowait), in nanoseconds.
pub fn system_cpu_ns() -> u64 {
    let stat = fs::read_to_string("/proc/stat").unwrap_or_default();
    let Some(line) = stat.lines().next() else {
        return 0;
    };
    let v: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .map(|x| x.parse().unwrap_or(0))
        .collect();
    // user nice system idle iowait irq softirq steal
    let busy: u64 = [0, 1, 2, 5, 6, 7].iter().filter_map(|&i| v.get(i)).sum();
    let hz = procfs::ticks_per_second().max(1);
    busy * 1_000_000_000 / hz
}

/// CPU time used so far by every process, summed by command name (`comm`), in
/// nanoseconds: where a burst's CPU went (API server, etcd, webhooks, the client).
pub fn cpu_ns_by_command() -> std::collections::BTreeMap<String, u64> {
    let mut by = std::collections::BTreeMap::new();
    for entry in fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|p| p.parse::<u32>().ok())
        else {
            continue;
        };
        // Kernel threads (no command line) rename themselves as they work: left out.
        let user = fs::read(entry.path().join("cmdline")).is_ok_and(|c| !c.is_empty());
        let Ok(comm) = fs::read_to_string(entry.path().join("comm")) else {
            continue;
        };
        if !user {
            continue;
        }
        *by.entry(comm.trim().to_string()).or_default() += stat_cpu_ns(pid);
    }
    by
}

/// CPU time of this process (all threads), in nanoseconds.
pub fn self_cpu_ns() -> u64 {
    cpu_ns(std::process::id())
}

/// `VmRSS` and `VmHWM` of a process, in KiB.
pub fn rss_kib(pid: u32) -> (u64, u64) {
    let status = fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.split_whitespace().next()?.parse().ok())
            .unwrap_or(0)
    };
    (field("VmRSS:"), field("VmHWM:"))
}

/// What the numbers were measured on.
pub fn machine() -> serde_json::Value {
    let cpuinfo = fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let model = cpuinfo
        .lines()
        .find_map(|l| l.strip_prefix("model name"))
        .map(|v| v.trim_start_matches([' ', '\t', ':']).to_string())
        .unwrap_or_default();
    let meminfo = fs::read_to_string("/proc/meminfo").unwrap_or_default();
    let mem_kib: u64 = meminfo
        .lines()
        .find_map(|l| l.strip_prefix("MemTotal:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or(0);
    let kernel = fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    let rustc = Command::new(std::env::var("RUSTC").unwrap_or_else(|_| "rustc".into()))
        .arg("--version")
        .output()
        .ok()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_default();
    serde_json::json!({
        "cpu": model,
        "cpus": online_cpus(),
        "memory_gib": (mem_kib as f64 / 1048576.0 * 10.0).round() / 10.0,
        "kernel": kernel.trim(),
        "rustc": rustc,
    })
}

pub fn wait_for_file(path: &Path, timeout: Duration, what: &mut Proc) {
    let deadline = Instant::now() + timeout;
    while !path.exists() {
        what.check_alive();
        assert!(
            Instant::now() < deadline,
            "{} did not write {} within {timeout:?}",
            what.name,
            path.display()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// `GET path` on a plain-HTTP address; the status code.
pub fn http_get_status(addr: std::net::SocketAddr, path: &str) -> Option<u16> {
    http_get(addr, path).map(|(status, _)| status)
}

/// `GET path` on a plain-HTTP address; the status code and the body.
pub fn http_get(addr: std::net::SocketAddr, path: &str) -> Option<(u16, String)> {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect_timeout(&addr, Duration::from_secs(1)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
    write!(s, "GET {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n").ok()?;
    let mut buf = Vec::new();
    s.read_to_end(&mut buf).ok()?;
    let text = String::from_utf8_lossy(&buf);
    let status = text.split_whitespace().nth(1)?.parse().ok()?;
    let body = text.split_once("\r\n\r\n").map_or("", |(_, b)| b);
    Some((status, body.to_string()))
}

pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .expect("binding an ephemeral port")
        .local_addr()
        .expect("local address")
        .port()
}
