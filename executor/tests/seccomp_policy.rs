//! Behaviour of the tool seccomp policy in the real kernel.
//!
//! Seccomp filters apply per thread, so each test installs them in a thread of its own
//! (without `TSYNC`) and makes the attack's syscall there; the rest of the test binary stays
//! unfiltered. The i386 test forks instead, because the arch check kills the whole process.
//!
//! A separate test binary (not `tests/all.rs`) because it installs a counting global
//! allocator to prove that `ToolFilters::apply` does not allocate.
#![cfg(target_arch = "x86_64")]

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::io;
use std::process::{Command, Stdio};
use std::thread;

use skillbox_executor::sandbox::seccomp::{self, ToolFilters};

thread_local! {
    static ALLOCATIONS: Cell<usize> = const { Cell::new(0) };
}

/// Counts the allocations of the current thread, then defers to the system allocator.
struct CountingAllocator;

// SAFETY: every method forwards to `System` with the caller's arguments unchanged; the
// thread-local counter is a const-initialised `Cell` without destructor, so touching it
// never allocates or re-enters the allocator.
unsafe impl GlobalAlloc for CountingAllocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let _ = ALLOCATIONS.try_with(|count| count.set(count.get() + 1));
        // SAFETY: same contract as this method's caller upholds.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` was allocated by `System` through `alloc`/`realloc` above.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        let _ = ALLOCATIONS.try_with(|count| count.set(count.get() + 1));
        // SAFETY: same contract as this method's caller upholds.
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let _ = ALLOCATIONS.try_with(|count| count.set(count.get() + 1));
        // SAFETY: `ptr` came from `System`; the caller upholds `realloc`'s contract.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: CountingAllocator = CountingAllocator;

fn set_no_new_privs() {
    // SAFETY: PR_SET_NO_NEW_PRIVS takes integer arguments only and affects the calling thread.
    let rc = unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) };
    assert_eq!(rc, 0, "PR_SET_NO_NEW_PRIVS: {}", io::Error::last_os_error());
}

/// Runs `attack` in a new thread confined by the tool filters and returns its result; a
/// panic in the thread (a failed assertion) is re-raised here.
fn confined<T: Send + 'static>(attack: impl FnOnce() -> T + Send + 'static) -> T {
    let filters = seccomp::compile().unwrap_or_else(|error| panic!("compile: {error:?}"));
    thread::spawn(move || {
        set_no_new_privs();
        filters
            .apply()
            .unwrap_or_else(|error| panic!("apply: {error}"));
        attack()
    })
    .join()
    .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
}

/// [`confined`] under a network call's filters (`tool_network_allow`).
fn confined_network<T: Send + 'static>(attack: impl FnOnce() -> T + Send + 'static) -> T {
    let filters = seccomp::compile_network().unwrap_or_else(|error| panic!("{error:?}"));
    thread::spawn(move || {
        set_no_new_privs();
        filters
            .apply()
            .unwrap_or_else(|error| panic!("apply: {error}"));
        attack()
    })
    .join()
    .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
}

/// Result of a raw syscall: `Ok(return value)` or `Err(errno)`.
fn outcome(rc: libc::c_long) -> Result<libc::c_long, i32> {
    if rc < 0 {
        Err(io::Error::last_os_error()
            .raw_os_error()
            .unwrap_or_default())
    } else {
        Ok(rc)
    }
}

fn close(fd: libc::c_long) {
    // The kernel returns fds that fit a c_int.
    let Ok(fd) = libc::c_int::try_from(fd) else {
        return;
    };
    // SAFETY: `fd` was just returned to this test by the kernel and is closed once.
    unsafe { libc::close(fd) };
}

fn socket(domain: libc::c_int, kind: libc::c_int) -> Result<libc::c_long, i32> {
    // SAFETY: socket takes integers only; a returned fd is closed below.
    let result = outcome(unsafe { libc::socket(domain, kind, 0) }.into());
    if let Ok(fd) = result {
        close(fd);
    }
    result
}

#[test]
fn seccomp_apply_does_not_allocate() {
    let filters = seccomp::compile().unwrap();
    let allocations = thread::spawn(move || {
        set_no_new_privs();
        let before = ALLOCATIONS.with(Cell::get);
        let applied = filters.apply();
        let after = ALLOCATIONS.with(Cell::get);
        applied.unwrap();
        after - before
    })
    .join()
    .unwrap();
    assert_eq!(allocations, 0, "apply() allocated between fork and exec");
}

#[test]
fn network_filter_allows_ip_sockets_and_denies_packet_raw_netlink_and_unix() {
    for (domain, kind) in [
        (libc::AF_INET, libc::SOCK_STREAM),
        (libc::AF_INET6, libc::SOCK_STREAM | libc::SOCK_CLOEXEC),
        (libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_NONBLOCK),
    ] {
        let made = confined_network(move || socket(domain, kind));
        assert!(made.is_ok(), "socket({domain}, {kind}): {made:?}");
    }
    for (domain, kind) in [
        (libc::AF_PACKET, libc::SOCK_RAW),
        (libc::AF_INET, libc::SOCK_RAW),
        (libc::AF_NETLINK, libc::SOCK_RAW),
        (libc::AF_UNIX, libc::SOCK_STREAM),
    ] {
        assert_eq!(
            confined_network(move || socket(domain, kind)),
            Err(libc::EPERM),
            "socket({domain}, {kind})"
        );
    }
    // SAFETY: unshare takes an integer; refused before it changes anything.
    let unshare = confined_network(|| outcome(unsafe { libc::unshare(libc::CLONE_NEWNET) }.into()));
    assert_eq!(unshare, Err(libc::EPERM), "unshare stays denied");
}

#[test]
fn network_filter_apply_does_not_allocate() {
    let filters = seccomp::compile_network().unwrap();
    let allocations = thread::spawn(move || {
        set_no_new_privs();
        let before = ALLOCATIONS.with(Cell::get);
        let applied = filters.apply();
        let after = ALLOCATIONS.with(Cell::get);
        applied.unwrap();
        after - before
    })
    .join()
    .unwrap();
    assert_eq!(allocations, 0, "apply() allocated between clone and exec");
}

#[test]
fn seccomp_denies_inet_socket() {
    assert_eq!(
        confined(|| socket(libc::AF_INET, libc::SOCK_STREAM)),
        Err(libc::EPERM)
    );
    assert_eq!(
        confined(|| socket(libc::AF_INET6, libc::SOCK_DGRAM)),
        Err(libc::EPERM)
    );
}

#[test]
fn seccomp_denies_unix_socket() {
    assert_eq!(
        confined(|| socket(libc::AF_UNIX, libc::SOCK_STREAM)),
        Err(libc::EPERM)
    );
}

#[test]
fn seccomp_denies_netlink_socket() {
    assert_eq!(
        confined(|| socket(libc::AF_NETLINK, libc::SOCK_RAW)),
        Err(libc::EPERM)
    );
}

#[test]
fn seccomp_allows_unix_socketpair() {
    let pair = confined(|| {
        let mut fds = [0 as libc::c_int; 2];
        // SAFETY: `fds` has room for the two descriptors socketpair writes.
        let rc = unsafe { libc::socketpair(libc::AF_UNIX, libc::SOCK_STREAM, 0, fds.as_mut_ptr()) };
        let result = outcome(rc.into());
        if result.is_ok() {
            fds.iter().for_each(|fd| close((*fd).into()));
        }
        result
    });
    assert_eq!(pair, Ok(0));
}

#[test]
fn seccomp_denies_user_namespace_via_unshare() {
    // Unconfined, unshare(CLONE_NEWUSER) in a multi-threaded process fails with EINVAL.
    // SAFETY: unshare takes an integer; it fails before changing anything.
    let result = confined(|| outcome(unsafe { libc::unshare(libc::CLONE_NEWUSER) }.into()));
    assert_eq!(result, Err(libc::EPERM));
}

#[test]
fn seccomp_denies_every_namespace_flag_in_clone() {
    for flag in [
        libc::CLONE_NEWNS,
        libc::CLONE_NEWUTS,
        libc::CLONE_NEWIPC,
        libc::CLONE_NEWUSER,
        libc::CLONE_NEWPID,
        libc::CLONE_NEWNET,
        libc::CLONE_NEWCGROUP,
        libc::CLONE_NEWTIME,
    ] {
        // CLONE_THREAD without CLONE_SIGHAND makes the kernel refuse with EINVAL before
        // creating anything, so an unconfined run fails the test instead of forking it.
        let flags = libc::c_long::from(flag | libc::CLONE_THREAD);
        // SAFETY: the flags are invalid for the kernel, so no child is ever created.
        let result =
            confined(move || outcome(unsafe { libc::syscall(libc::SYS_clone, flags, 0, 0, 0, 0) }));
        assert_eq!(result, Err(libc::EPERM), "clone flag {flag:#x}");
    }
}

#[test]
fn seccomp_makes_clone3_fail_with_enosys() {
    // Unconfined, clone3(NULL, 0) fails with EINVAL.
    // SAFETY: a null argument of size 0 is rejected before any child is created.
    let result = confined(|| outcome(unsafe { libc::syscall(libc::SYS_clone3, 0usize, 0usize) }));
    assert_eq!(result, Err(libc::ENOSYS));
}

#[test]
fn seccomp_allows_thread_creation_through_clone_fallback() {
    // glibc tries clone3 first and falls back to clone on ENOSYS.
    let joined = confined(|| thread::spawn(|| 7).join().ok());
    assert_eq!(joined, Some(7));
}

#[test]
fn seccomp_allows_process_spawn_through_clone_fallback() {
    let exe = std::env::current_exe().unwrap();
    let status = confined(move || {
        Command::new(exe)
            .args(["--list", "--format", "terse"])
            .stdout(Stdio::null())
            .status()
            .map_err(|error| error.to_string())
    });
    assert!(status.unwrap().success());
}

#[test]
fn seccomp_denies_io_uring_setup() {
    // Unconfined, a null params pointer fails with EFAULT.
    // SAFETY: the kernel only reads the (null) params pointer, which it rejects.
    let result =
        confined(|| outcome(unsafe { libc::syscall(libc::SYS_io_uring_setup, 1, 0usize) }));
    assert_eq!(result, Err(libc::EPERM));
}

#[test]
fn seccomp_denies_ptrace_attach() {
    // Unconfined, attaching to pid 0 fails with ESRCH.
    // SAFETY: PTRACE_ATTACH takes integers; pid 0 names no process.
    let result =
        confined(|| outcome(unsafe { libc::ptrace(libc::PTRACE_ATTACH, 0, 0usize, 0usize) }));
    assert_eq!(result, Err(libc::EPERM));
}

#[test]
fn seccomp_denies_x32_syscalls() {
    let x32_getpid = libc::SYS_getpid | 0x4000_0000;
    // SAFETY: getpid through the x32 table takes no arguments.
    let result = confined(move || outcome(unsafe { libc::syscall(x32_getpid) }));
    assert_eq!(result, Err(libc::EPERM));
}

#[test]
fn seccomp_denies_open_tree_attr_by_number() {
    // Unconfined, dfd -1 with a null path fails with EBADF or EFAULT.
    // SAFETY: the arguments are invalid; the kernel rejects them without side effects.
    let result = confined(|| outcome(unsafe { libc::syscall(467, -1, 0usize, 0, 0usize, 0usize) }));
    assert_eq!(result, Err(libc::EPERM));
}

#[test]
fn seccomp_denies_tiocsti_terminal_injection() {
    // /dev/null, not stdin: should the filter be missing, the ioctl must not reach a terminal.
    let not_a_tty = std::fs::File::open("/dev/null").unwrap();
    let result = confined(move || {
        use std::os::fd::AsRawFd;
        let byte = b'x';
        // Unconfined, TIOCSTI on /dev/null fails with ENOTTY.
        // SAFETY: TIOCSTI reads one byte from the valid pointer `&byte`; the fd is open.
        outcome(unsafe { libc::ioctl(not_a_tty.as_raw_fd(), libc::TIOCSTI, &byte) }.into())
    });
    assert_eq!(result, Err(libc::EPERM));
}

#[test]
fn seccomp_denies_read_implies_exec_personality() {
    const READ_IMPLIES_EXEC: libc::c_ulong = 0x0040_0000;
    let (set, query) = confined(|| {
        // SAFETY: personality takes an integer; the query leaves the persona unchanged.
        let set = outcome(unsafe { libc::personality(READ_IMPLIES_EXEC) }.into());
        // SAFETY: as above.
        let query = outcome(unsafe { libc::personality(0xffff_ffff) }.into());
        (set, query)
    });
    assert_eq!(set, Err(libc::EPERM));
    assert!(
        query.is_ok(),
        "querying the persona must stay allowed: {query:?}"
    );
}

#[test]
fn seccomp_allows_getpid() {
    let own = std::process::id();
    // SAFETY: getpid has no preconditions.
    let pid = confined(|| unsafe { libc::getpid() });
    assert_eq!(u32::try_from(pid).ok(), Some(own));
}

/// Forks a child that installs `filters` (if any), as the launcher does between fork and exec,
/// then makes `getpid` through the i386 entry point `int 0x80`; returns the child's wait
/// status (exit 0 when the syscall returned a pid).
fn fork_int80_getpid(filters: Option<&ToolFilters>) -> libc::c_int {
    // SAFETY: the child only calls async-signal-safe code (prctl, `ToolFilters::apply`, which
    // does not allocate, an `int 0x80` and `_exit`) before it exits.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0, "fork: {}", io::Error::last_os_error());
    if pid == 0 {
        if let Some(filters) = filters {
            // SAFETY: integer arguments only.
            if unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) } != 0
                || filters.apply().is_err()
            {
                // SAFETY: _exit is async-signal-safe and never returns.
                unsafe { libc::_exit(2) };
            }
        }
        let ret: i32;
        // SAFETY: i386 getpid (20) takes no arguments and touches no memory; the kernel
        // preserves all registers but eax, r8-r11 are declared clobbered for older kernels.
        unsafe {
            std::arch::asm!(
                "int 0x80",
                inlateout("eax") 20i32 => ret,
                out("r8") _, out("r9") _, out("r10") _, out("r11") _,
                options(nostack),
            );
        }
        // SAFETY: as above.
        unsafe { libc::_exit(if ret > 0 { 0 } else { 3 }) };
    }
    let mut status = 0;
    // SAFETY: `pid` is our child and `status` is a valid out pointer.
    let waited = unsafe { libc::waitpid(pid, &mut status, 0) };
    assert_eq!(waited, pid, "waitpid: {}", io::Error::last_os_error());
    status
}

#[test]
fn seccomp_kills_i386_int80_syscall() {
    let unconfined = fork_int80_getpid(None);
    if !(libc::WIFEXITED(unconfined) && libc::WEXITSTATUS(unconfined) == 0) {
        eprintln!(
            "SKIPPED seccomp_kills_i386_int80_syscall: this kernel has no IA32 emulation \
             (int 0x80 ended with wait status {unconfined:#x}), so there is no i386 entry to block"
        );
        return;
    }
    let filters = seccomp::compile().unwrap();
    let confined = fork_int80_getpid(Some(&filters));
    assert!(
        libc::WIFSIGNALED(confined) && libc::WTERMSIG(confined) == libc::SIGSYS,
        "i386 syscall was not killed with SIGSYS: wait status {confined:#x}"
    );
}

#[test]
fn seccomp_denies_sysv_shared_memory_between_calls() {
    // Unconfined, IPC_PRIVATE with size 0 fails with EINVAL (nothing is created).
    // SAFETY: integer arguments only.
    let result = confined(|| outcome(unsafe { libc::shmget(libc::IPC_PRIVATE, 0, 0o600) }.into()));
    assert_eq!(result, Err(libc::EPERM));
}

#[test]
fn seccomp_denies_sysv_message_queues_between_calls() {
    // Unconfined, a key with flags 0 and no such queue fails with ENOENT (nothing is created).
    // SAFETY: integer arguments only.
    let result = confined(|| outcome(unsafe { libc::msgget(0x5ee0_0001, 0) }.into()));
    assert_eq!(result, Err(libc::EPERM));
}

#[test]
fn seccomp_denies_sysv_semaphores_between_calls() {
    // Unconfined, a key with flags 0 and no such set fails with ENOENT (nothing is created).
    // SAFETY: integer arguments only.
    let result = confined(|| outcome(unsafe { libc::semget(0x5ee0_0002, 1, 0) }.into()));
    assert_eq!(result, Err(libc::EPERM));
}

#[test]
fn seccomp_denies_posix_message_queues() {
    // Unconfined, a null name fails with EFAULT (nothing is created).
    // SAFETY: the kernel rejects the null pointer without reading memory.
    let result =
        confined(|| outcome(unsafe { libc::syscall(libc::SYS_mq_open, 0usize, 0, 0, 0usize) }));
    assert_eq!(result, Err(libc::EPERM));
}

#[test]
fn seccomp_denies_syscalls_the_policy_does_not_name() {
    // add_key with null arguments: unconfined it fails with EFAULT or EINVAL.
    let result = confined(|| {
        // SAFETY: the kernel rejects the null pointers without side effects.
        let rc = unsafe { libc::syscall(libc::SYS_add_key, 0usize, 0usize, 0usize, 0usize, 0) };
        outcome(rc)
    });
    assert_eq!(result, Err(libc::EPERM));
}

#[test]
fn seccomp_denies_making_sticky_folders() {
    // A sticky folder's entries could be removed only by their owner (or CAP_FOWNER, which
    // the executor's container lacks), so a tool could leave its scratch dir behind.
    let base = tempfile::tempdir().unwrap();
    let sticky = std::ffi::CString::new(base.path().join("sticky").to_str().unwrap()).unwrap();
    let plain = std::ffi::CString::new(base.path().join("plain").to_str().unwrap()).unwrap();
    let (made_sticky, made_plain, chmod_sticky) = confined(move || {
        // SAFETY: mkdir and chmod read NUL-terminated paths that live across the calls.
        let made_sticky = outcome(unsafe { libc::mkdir(sticky.as_ptr(), 0o1777) }.into());
        // SAFETY: as above.
        let made_plain = outcome(unsafe { libc::mkdir(plain.as_ptr(), 0o755) }.into());
        // SAFETY: as above.
        let chmod_sticky = outcome(unsafe { libc::chmod(plain.as_ptr(), 0o1777) }.into());
        (made_sticky, made_plain, chmod_sticky)
    });
    assert_eq!(made_sticky, Err(libc::EPERM));
    assert_eq!(made_plain, Ok(0));
    assert_eq!(chmod_sticky, Err(libc::EPERM));
}
