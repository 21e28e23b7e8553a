//! The executor's integration suite.
//!
//! - `escape_*`: one test per attack a hostile tool makes on the sandbox, each asserting the
//!   refusal and its reason (errno, `error_kind`, message);
//! - `limits`: resource and lifetime limits (processes, memory, file size, output, time);
//! - `calls`: how `exec` reports protocol errors, bad arguments and unknown tools;
//! - `runs`: what must keep working (scratch dir, Python and shell tools, the examples);
//! - `egress`: a network call's namespace, proxy and relay, and the attacks on them;
//! - `relay`: `exec --stdio`, the request and capability traffic over stdin/stdout;
//! - `full_scratch`: calls back to back on a scratch tmpfs that each of them fills;
//! - `memory_cgroups`: a fresh memory cgroup per call, made ahead, at the call's limit;
//! - `spawn`: the clone-based spawn leaves the executor's own threads unchanged;
//! - `uid_ranges`: the default user ids of an executor in the host's PID namespace and in
//!   one of its own;
//! - `warm`: prestarted processes (warm starts); the key `escape_*` attacks run against a
//!   prestarted process too (`harness::Start`).
//!
//! Every test but a few of `warm` starts `skillbox-executor exec` as a separate process;
//! they run in parallel.

mod calls;
mod context_files;
mod context_shelf;
mod egress;
mod egress_attacks;
mod escape_env;
mod escape_files;
mod escape_kernel;
mod escape_network;
mod escape_proc;
mod full_scratch;
mod harness;
mod layers;
mod limits;
mod loopback;
mod memory_cgroups;
mod relay;
mod runs;
mod runtimes;
mod scratch_cleanup;
mod sessions;
mod spawn;
mod transparent_egress;
mod uid_ranges;
mod unix_sockets;
mod warm;
