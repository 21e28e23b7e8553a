//! The allow list as a binary search over syscall numbers instead of seccompiler's one
//! linear chain.
//!
//! Why: when a filter is installed the kernel emulates it once for every syscall number to
//! build its cache of always-allowed syscalls, and a linear chain of ~240 syscalls walks up
//! to ~1,200 instructions per number; that cost about 1 ms per tool spawn
//! (docs/spawn-benchmark.md, "seccomp install time"). A search tree walks about eight
//! comparisons and the one syscall's rules. seccompiler 0.5 only emits the chain, so the
//! tree is built here from its output — each syscall's rules are still compiled by
//! seccompiler, from the same policy file:
//!
//! 1. For each syscall the filter names, the policy's rules of that syscall alone are
//!    compiled as a filter of their own. Its program is the architecture check, `LD nr`,
//!    one block "if nr == N: evaluate the rules and return; else go on", and the mismatch
//!    return. The block is position independent (only relative jumps inside it).
//! 2. The blocks, sorted by number, become the leaves of a balanced tree of `JGE`
//!    comparisons (each followed by a `JA` to the right half, since `JGE`'s own offsets are
//!    8 bits); a leaf is its block followed by the mismatch return, except that runs of
//!    consecutive syscalls allowed whatever their arguments become one range check each,
//!    which keeps the program short (the kernel converts and JIT-compiles every
//!    instruction at install).
//! 3. The program is the architecture check, `LD nr` and the tree.
//!
//! Every step checks the shape it expects of seccompiler's output and fails closed (the
//! executor does not start) if it differs. The tests run the linear program and the tree
//! side by side in a BPF interpreter over every syscall number and many arguments.

use seccompiler::{sock_filter, BpfProgram, TargetArch};
use serde_json::{Map, Value};

use super::SeccompError;

// Classic BPF opcodes (linux/bpf_common.h); seccompiler keeps its own private.
const BPF_LD_W_ABS: u16 = 0x20;
const BPF_JMP_JA: u16 = 0x05;
const BPF_JMP_JEQ_K: u16 = 0x05 | 0x10;
const BPF_JMP_JGE_K: u16 = 0x05 | 0x30;
const BPF_JMP_JGT_K: u16 = 0x05 | 0x20;
const BPF_RET_K: u16 = 0x06;
/// Offset of the syscall number in `struct seccomp_data`.
const SECCOMP_DATA_NR_OFFSET: u32 = 0;

/// One syscall's block: "if nr == number: its rules; else fall through".
struct Block {
    number: u32,
    code: Vec<sock_filter>,
}

/// A leaf of the tree.
enum Leaf {
    /// A syscall with argument rules: its block.
    Rules(Block),
    /// Consecutive syscall numbers `lo..=hi` allowed whatever their arguments: one range
    /// check instead of a block each.
    Run {
        lo: u32,
        hi: u32,
        allow: sock_filter,
    },
}

impl Leaf {
    fn lo(&self) -> u32 {
        match self {
            Leaf::Rules(b) => b.number,
            Leaf::Run { lo, .. } => *lo,
        }
    }
}

/// The return of an unconditional block (`JEQ n; JA 1; JA 2; RET match; RET mismatch`, as
/// seccompiler 0.5 emits a syscall without rules), or `None` for any other shape.
fn unconditional(block: &Block, mismatch: &sock_filter) -> Option<sock_filter> {
    match block.code.as_slice() {
        [_, ja1, ja2, allow, last]
            if *ja1 == stmt(BPF_JMP_JA, 1)
                && *ja2 == stmt(BPF_JMP_JA, 2)
                && allow.code == BPF_RET_K
                && last == mismatch =>
        {
            Some(allow.clone())
        }
        _ => None,
    }
}

/// The leaves: syscalls with rules keep their blocks; runs of consecutive numbers with the
/// same unconditional return become one range.
fn leaves(blocks: Vec<Block>, mismatch: &sock_filter) -> Vec<Leaf> {
    let mut out: Vec<Leaf> = Vec::new();
    for block in blocks {
        match unconditional(&block, mismatch) {
            Some(allow) => match out.last_mut() {
                Some(Leaf::Run { hi, allow: a, .. })
                    if hi.checked_add(1) == Some(block.number) && *a == allow =>
                {
                    *hi = block.number;
                }
                _ => out.push(Leaf::Run {
                    lo: block.number,
                    hi: block.number,
                    allow,
                }),
            },
            None => out.push(Leaf::Rules(block)),
        }
    }
    out
}

/// Compiles `filter` of `policy` as a binary search tree over syscall numbers.
pub fn compile(policy: &Value, filter: &'static str) -> Result<BpfProgram, SeccompError> {
    let spec = policy
        .get(filter)
        .and_then(Value::as_object)
        .ok_or(SeccompError::MissingFilter { name: filter })?;
    let rules = spec
        .get("filter")
        .and_then(Value::as_array)
        .ok_or(SeccompError::MissingFilter { name: filter })?;

    // The prologue and the mismatch return, from the filter with no rules at all.
    let empty = compile_one(spec, Vec::new())?;
    let (mismatch, prologue) = empty
        .split_last()
        .ok_or_else(|| shape("an empty program"))?;
    if mismatch.code != BPF_RET_K {
        return Err(shape("a rule-less filter that does not end in a return"));
    }

    let mut names: Vec<&str> = rules
        .iter()
        .filter_map(|r| r.get("syscall").and_then(Value::as_str))
        .collect();
    names.sort_unstable();
    names.dedup();
    let mut blocks = Vec::with_capacity(names.len());
    for name in names {
        let own: Vec<Value> = (rules.iter())
            .filter(|r| r.get("syscall").and_then(Value::as_str) == Some(name))
            .cloned()
            .collect();
        let program = compile_one(spec, own)?;
        blocks.push(block_of(&program, prologue, mismatch)?);
    }
    blocks.sort_by_key(|b| b.number);
    if blocks.windows(2).any(|w| w[0].number == w[1].number) {
        return Err(shape("two syscall names with one number"));
    }

    let leaves = leaves(blocks, mismatch);
    let mut out = prologue.to_vec();
    out.push(stmt(BPF_LD_W_ABS, SECCOMP_DATA_NR_OFFSET));
    tree(&leaves, mismatch, &mut out);
    if out.len() > usize::from(u16::MAX) || out.len() >= 4096 {
        return Err(shape("a program over the kernel's 4,096 instructions"));
    }
    Ok(out)
}

/// Compiles a copy of `spec` whose rules are `rules`.
fn compile_one(spec: &Map<String, Value>, rules: Vec<Value>) -> Result<BpfProgram, SeccompError> {
    let mut one = spec.clone();
    one.insert("filter".into(), Value::Array(rules));
    let json = serde_json::json!({ "one": one }).to_string();
    let mut map = seccompiler::compile_from_json(json.as_bytes(), TargetArch::x86_64)
        .map_err(|source| SeccompError::CompilePolicy { source })?;
    map.remove("one")
        .ok_or_else(|| shape("no program for a one-syscall filter"))
}

/// The block of a one-syscall program: `prologue`, `LD nr`, the block, `mismatch`.
fn block_of(
    program: &[sock_filter],
    prologue: &[sock_filter],
    mismatch: &sock_filter,
) -> Result<Block, SeccompError> {
    let rest = program
        .strip_prefix(prologue)
        .ok_or_else(|| shape("a program without the architecture check"))?;
    let (load, rest) = rest.split_first().ok_or_else(|| shape("no syscall load"))?;
    if *load != stmt(BPF_LD_W_ABS, SECCOMP_DATA_NR_OFFSET) {
        return Err(shape("no syscall number load after the architecture check"));
    }
    let code = rest
        .strip_suffix(std::slice::from_ref(mismatch))
        .ok_or_else(|| shape("a program that does not end in the mismatch return"))?;
    let first = code
        .first()
        .ok_or_else(|| shape("an empty syscall block"))?;
    if first.code != BPF_JMP_JEQ_K || first.jt != 0 {
        return Err(shape("a syscall block that does not start with `JEQ nr`"));
    }
    Ok(Block {
        number: first.k,
        code: code.to_vec(),
    })
}

/// Appends the search tree over `leaves` (sorted, not empty) to `out`.
fn tree(leaves: &[Leaf], mismatch: &sock_filter, out: &mut Vec<sock_filter>) {
    if let [leaf] = leaves {
        match leaf {
            Leaf::Rules(block) => out.extend_from_slice(&block.code),
            Leaf::Run { lo, hi, allow } => {
                // Below `lo` (the leftmost leaf has no lower bound on its path) or above
                // `hi`: the mismatch return; else the run's return.
                out.push(jump(BPF_JMP_JGE_K, *lo, 0, 2));
                out.push(jump(BPF_JMP_JGT_K, *hi, 1, 0));
                out.push(allow.clone());
            }
        }
        out.push(mismatch.clone());
        return;
    }
    let (left, right) = leaves.split_at(leaves.len() / 2);
    // nr >= first number on the right: take the `JA` to the right half; else skip it.
    out.push(jump(BPF_JMP_JGE_K, right[0].lo(), 0, 1));
    let ja = out.len();
    out.push(stmt(BPF_JMP_JA, 0));
    let left_start = out.len();
    tree(left, mismatch, out);
    // Every path of a subtree ends in a return, so the left half never runs into the right.
    out[ja].k = u32::try_from(out.len() - left_start).unwrap_or(u32::MAX);
    tree(right, mismatch, out);
}

fn stmt(code: u16, k: u32) -> sock_filter {
    sock_filter {
        code,
        jt: 0,
        jf: 0,
        k,
    }
}

fn jump(code: u16, k: u32, jt: u8, jf: u8) -> sock_filter {
    sock_filter { code, jt, jf, k }
}

fn shape(what: &'static str) -> SeccompError {
    SeccompError::UnexpectedShape { what }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn ret(k: u32) -> sock_filter {
        stmt(BPF_RET_K, k)
    }

    fn shape_of(e: SeccompError) -> &'static str {
        match e {
            SeccompError::UnexpectedShape { what } => what,
            other => panic!("not a shape refusal: {other}"),
        }
    }

    /// seccompiler's output in another shape (an upgrade would do this) stops the build of
    /// the tree with a reason instead of producing a wrong program.
    #[test]
    fn a_block_of_another_shape_is_refused() {
        let prologue = [stmt(BPF_LD_W_ABS, 4), ret(0)];
        let mismatch = ret(0x0005_0001);
        let load = stmt(BPF_LD_W_ABS, SECCOMP_DATA_NR_OFFSET);
        let good_jeq = jump(BPF_JMP_JEQ_K, 39, 0, 1);

        let no_prologue = [load.clone(), good_jeq.clone(), mismatch.clone()];
        let what = shape_of(block_of(&no_prologue, &prologue, &mismatch).err().unwrap());
        assert!(what.contains("architecture check"), "{what}");

        let no_load = [
            prologue[0].clone(),
            prologue[1].clone(),
            good_jeq.clone(),
            mismatch.clone(),
        ];
        let what = shape_of(block_of(&no_load, &prologue, &mismatch).err().unwrap());
        assert!(what.contains("syscall number load"), "{what}");

        let other_end = [
            prologue[0].clone(),
            prologue[1].clone(),
            load.clone(),
            good_jeq.clone(),
            ret(7),
        ];
        let what = shape_of(block_of(&other_end, &prologue, &mismatch).err().unwrap());
        assert!(what.contains("mismatch return"), "{what}");

        let no_jeq = [
            prologue[0].clone(),
            prologue[1].clone(),
            load.clone(),
            ret(1),
            mismatch.clone(),
        ];
        let what = shape_of(block_of(&no_jeq, &prologue, &mismatch).err().unwrap());
        assert!(what.contains("JEQ nr"), "{what}");

        let good = [
            prologue[0].clone(),
            prologue[1].clone(),
            load,
            good_jeq,
            mismatch.clone(),
        ];
        assert_eq!(
            block_of(&good, &prologue, &mismatch).ok().unwrap().number,
            39
        );
    }

    #[test]
    fn a_filter_missing_from_the_policy_is_refused() {
        let policy = serde_json::json!({ "other": { "filter": [] } });
        assert!(matches!(
            compile(&policy, "tool_allow"),
            Err(SeccompError::MissingFilter { name: "tool_allow" })
        ));
    }
}
