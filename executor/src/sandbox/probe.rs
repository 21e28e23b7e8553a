//! What the running kernel can enforce, probed rather than assumed.

use serde::Serialize;

/// Lowest Landlock ABI the sandbox accepts: 4 adds TCP bind/connect control to the file
/// system rules of 1-3. Newer ABIs add scoping of abstract UNIX sockets and signals (6),
/// which is used when present.
pub const MIN_LANDLOCK_ABI: u32 = 4;

const LANDLOCK_CREATE_RULESET_VERSION: libc::c_uint = 1;
const SECCOMP_GET_ACTION_AVAIL: libc::c_uint = 2;
const SECCOMP_RET_ERRNO: u32 = 0x0005_0000;

/// Kernel features the sandbox relies on.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct KernelSupport {
    /// Landlock ABI version, 0 when Landlock is unavailable.
    pub landlock_abi: u32,
    /// Whether seccomp filters with an errno action can be installed.
    pub seccomp: bool,
    /// Whether the executor runs as root and so can give each call its own user id.
    pub user_switch: bool,
    /// Whether the executor can give a network call a namespace of its own
    /// ([`super::netns`]); without it the programs of skills that declare network get no
    /// network at all (their fetch capability still works), the rest of the sandbox is
    /// unaffected.
    pub network_namespaces: bool,
    /// Whether a network call's namespace also takes the connections of programs that
    /// ignore the proxy variables (its name server and listeners need ports below 1024:
    /// root or `CAP_NET_BIND_SERVICE`); without it such programs get no network.
    pub transparent_egress: bool,
    /// Whether a call can have a `/tmp` of its own ([`super::mntns`]), which UNIX sockets
    /// need (`execution.unix_sockets`); probed with the scratch root at startup
    /// ([`KernelSupport::probe_unix_sockets`]), false until then.
    pub unix_sockets: bool,
    /// How a call's memory is limited ([`super::memcg`]): a cgroup per call where the
    /// executor can have a subtree, rlimits otherwise. The probe judges whether the
    /// executor's cgroup offers the memory controller and is writable; a sandbox that then
    /// fails to make its subtree records `rlimit`.
    pub memory_limit: super::memcg::MemoryMode,
    /// Kernel release.
    pub kernel: String,
}

impl KernelSupport {
    /// What is missing for the full sandbox; empty when everything is enforceable.
    pub fn problems(&self) -> Vec<String> {
        let mut out = Vec::new();
        if self.landlock_abi < MIN_LANDLOCK_ABI {
            out.push(format!(
                "Landlock ABI {} is below the required {MIN_LANDLOCK_ABI} (Linux 6.7+ with landlock in the lsm= boot list)",
                self.landlock_abi
            ));
        }
        if !self.seccomp {
            out.push(
                "seccomp filters are unavailable (kernel built without CONFIG_SECCOMP_FILTER)"
                    .into(),
            );
        }
        out
    }

    /// Sets [`KernelSupport::unix_sockets`]: a call's mount namespace made and joined with
    /// `scratch_root` as its `/tmp` (it needs a network namespace too); logs why not.
    pub fn probe_unix_sockets(&mut self, scratch_root: &std::path::Path) {
        self.unix_sockets = self.network_namespaces
            && match super::mntns::probe(scratch_root) {
                Ok(()) => true,
                Err(e) => {
                    tracing::warn!(error = %e, "{}", super::mntns::UNAVAILABLE);
                    false
                }
            };
    }

    /// Whether the full sandbox can be applied.
    pub fn is_enforceable(&self) -> bool {
        self.problems().is_empty()
    }
}

/// Probes the running kernel.
pub fn probe() -> KernelSupport {
    let namespaces = network_namespaces();
    KernelSupport {
        landlock_abi: landlock_abi(),
        seccomp: seccomp_available(),
        user_switch: nix::unistd::geteuid().is_root(),
        network_namespaces: namespaces.is_some(),
        transparent_egress: namespaces == Some(true),
        unix_sockets: false,
        memory_limit: super::memcg::probe_mode(),
        kernel: nix::sys::utsname::uname()
            .map(|u| u.release().to_string_lossy().into_owned())
            .unwrap_or_default(),
    }
}

/// Whether a call's network namespace can be made here ([`super::netns::probe`]), and if
/// so whether it takes connections around the proxy; logs why not.
fn network_namespaces() -> Option<bool> {
    match super::netns::probe() {
        Ok(transparent) => Some(transparent),
        Err(e) => {
            tracing::warn!(error = %e, "{}", super::netns::UNAVAILABLE);
            None
        }
    }
}

/// The kernel's Landlock ABI version, 0 without Landlock.
pub fn landlock_abi() -> u32 {
    // SAFETY: landlock_create_ruleset with a null attr, size 0 and the VERSION flag only
    // returns the ABI version (or -1); it reads no memory and creates no fd.
    let v = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<libc::c_void>(),
            0usize,
            LANDLOCK_CREATE_RULESET_VERSION,
        )
    };
    u32::try_from(v).unwrap_or(0)
}

fn seccomp_available() -> bool {
    let action: u32 = SECCOMP_RET_ERRNO;
    // SAFETY: SECCOMP_GET_ACTION_AVAIL reads one u32 from the pointer, which points at a
    // live local; it changes no state.
    let r = unsafe {
        libc::syscall(
            libc::SYS_seccomp,
            SECCOMP_GET_ACTION_AVAIL,
            0u32,
            &action as *const u32,
        )
    };
    r == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn problems_name_what_is_missing() {
        let k = KernelSupport {
            landlock_abi: 3,
            seccomp: false,
            user_switch: false,
            network_namespaces: false,
            transparent_egress: false,
            unix_sockets: false,
            memory_limit: crate::sandbox::memcg::MemoryMode::Rlimit,
            kernel: "x".into(),
        };
        let p = k.problems();
        assert_eq!(p.len(), 2);
        assert!(p[0].contains("Landlock ABI 3"));
        assert!(!k.is_enforceable());
    }
}
