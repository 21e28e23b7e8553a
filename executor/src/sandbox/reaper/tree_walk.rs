//! Killing without a user switch (the executor is not root): the tool's process group and
//! every descendant found by walking parent ids in `/proc`. A process that double-forked
//! out of the tree is not found this way (the documented limit of that mode).

use std::collections::{HashMap, VecDeque};

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;

/// Kills `pid`, its process group and every descendant found through parent ids.
pub fn kill_tree(pid: u32) {
    let Ok(root) = i32::try_from(pid) else { return };
    let _ = kill(Pid::from_raw(-root), Signal::SIGKILL);
    for p in descendants(root) {
        let _ = kill(Pid::from_raw(p), Signal::SIGKILL);
    }
    let _ = kill(Pid::from_raw(root), Signal::SIGKILL);
}

fn descendants(root: i32) -> Vec<i32> {
    let mut children: HashMap<i32, Vec<i32>> = HashMap::new();
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    for entry in dir.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<i32>().ok())
        else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        // The command name may hold spaces and parentheses: fields follow the last ')'.
        let ppid = stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().nth(1))
            .and_then(|p| p.parse::<i32>().ok());
        if let Some(ppid) = ppid {
            children.entry(ppid).or_default().push(pid);
        }
    }
    let mut out = Vec::new();
    let mut queue = VecDeque::from([root]);
    while let Some(p) = queue.pop_front() {
        for c in children.get(&p).into_iter().flatten() {
            out.push(*c);
            queue.push_back(*c);
        }
    }
    out
}
