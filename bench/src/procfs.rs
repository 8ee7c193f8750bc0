//! Process figures from Linux's `/proc`: CPU time used and resident memory.

use std::sync::OnceLock;
use std::time::Duration;

use anyhow::Context;

/// Clock ticks per second of `/proc/<pid>/stat` times (almost always 100).
fn ticks_per_second() -> u64 {
    static TICKS: OnceLock<u64> = OnceLock::new();
    *TICKS.get_or_init(|| {
        std::process::Command::new("getconf")
            .arg("CLK_TCK")
            .output()
            .ok()
            .and_then(|output| String::from_utf8(output.stdout).ok())
            .and_then(|text| text.trim().parse().ok())
            .filter(|ticks| *ticks > 0)
            .unwrap_or(100)
    })
}

fn cpu_time_of(stat_path: &str) -> anyhow::Result<Duration> {
    let stat = std::fs::read_to_string(stat_path)
        .with_context(|| format!("could not read {stat_path}"))?;
    // The command name (field 2) may hold spaces; the fields after its closing parenthesis start
    // at field 3 (state). utime and stime are fields 14 and 15.
    let after_name = stat
        .rsplit_once(')')
        .map(|(_, rest)| rest)
        .context("malformed stat")?;
    let fields: Vec<&str> = after_name.split_whitespace().collect();
    let ticks = |index: usize| -> anyhow::Result<u64> {
        Ok(fields
            .get(index - 3)
            .context("short stat")?
            .parse::<u64>()?)
    };
    let total = ticks(14)? + ticks(15)?;
    Ok(Duration::from_micros(
        total * 1_000_000 / ticks_per_second(),
    ))
}

/// User + system CPU time used so far by every thread of a process.
pub fn cpu_time(pid: u32) -> anyhow::Result<Duration> {
    cpu_time_of(&format!("/proc/{pid}/stat"))
}

/// User + system CPU time used so far by this process.
pub fn cpu_time_self() -> anyhow::Result<Duration> {
    cpu_time_of("/proc/self/stat")
}

/// Resident memory of a process in KiB: (peak `VmHWM`, current `VmRSS`).
pub fn rss_kib(pid: u32) -> anyhow::Result<(u64, u64)> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    let field = |name: &str| -> anyhow::Result<u64> {
        let line = status
            .lines()
            .find(|line| line.starts_with(name))
            .with_context(|| format!("no {name} in status"))?;
        Ok(line
            .trim_start_matches(name)
            .trim()
            .trim_end_matches("kB")
            .trim()
            .parse()?)
    };
    Ok((field("VmHWM:")?, field("VmRSS:")?))
}

/// Context switches (voluntary + involuntary) so far, summed over a process's live threads. Each
/// hand-off between a tokio worker and another thread (such as an SQLite connection's own thread)
/// costs one or two.
pub fn context_switches(pid: u32) -> anyhow::Result<u64> {
    let mut total = 0;
    for task in std::fs::read_dir(format!("/proc/{pid}/task"))? {
        let Ok(status) = std::fs::read_to_string(task?.path().join("status")) else {
            continue; // the thread ended meanwhile
        };
        for line in status.lines() {
            if let Some(count) = line
                .strip_prefix("voluntary_ctxt_switches:")
                .or_else(|| line.strip_prefix("nonvoluntary_ctxt_switches:"))
            {
                total += count.trim().parse::<u64>()?;
            }
        }
    }
    Ok(total)
}
