//! The stack a child runs on between clone and exec.

use std::io;

use super::STACK_BYTES;

/// The child's stack: an anonymous mapping with a guard page below it, kept per thread
/// (a thread starts one child at a time and sleeps while it runs).
pub(super) struct ChildStack {
    base: *mut libc::c_void,
    len: usize,
}

thread_local! {
    pub(super) static STACK: std::cell::RefCell<Option<ChildStack>> = const { std::cell::RefCell::new(None) };
}

impl ChildStack {
    pub(super) fn new() -> io::Result<Self> {
        let page = 4096;
        let len = STACK_BYTES + page;
        // SAFETY: a new private anonymous mapping; its lowest page becomes inaccessible so
        // an overflow faults instead of writing into the executor's memory.
        unsafe {
            let base = libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_STACK,
                -1,
                0,
            );
            if base == libc::MAP_FAILED {
                return Err(io::Error::last_os_error());
            }
            if libc::mprotect(base, page, libc::PROT_NONE) < 0 {
                let e = io::Error::last_os_error();
                libc::munmap(base, len);
                return Err(e);
            }
            Ok(Self { base, len })
        }
    }

    /// The 16-byte aligned top (the stack grows down).
    pub(super) fn top(&mut self) -> *mut libc::c_void {
        ((self.base as usize + self.len) & !0xf) as *mut libc::c_void
    }
}

impl Drop for ChildStack {
    fn drop(&mut self) {
        // SAFETY: unmaps exactly the mapping made in `new`, used by no child any more.
        unsafe { libc::munmap(self.base, self.len) };
    }
}
