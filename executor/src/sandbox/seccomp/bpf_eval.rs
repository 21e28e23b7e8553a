//! A classic BPF interpreter for the instructions seccomp filters use here (loads from
//! `struct seccomp_data`, ALU `AND`, conditional and unconditional jumps, returns), to run
//! two programs side by side in tests. Panics on anything else.

use seccompiler::sock_filter;

/// The input of a seccomp filter (`struct seccomp_data` on x86_64).
#[derive(Debug, Clone, Copy)]
pub struct Data {
    /// The syscall number.
    pub nr: u32,
    /// `AUDIT_ARCH_*`.
    pub arch: u32,
    /// The six arguments.
    pub args: [u64; 6],
}

impl Data {
    // Truncation is the point: an argument's word is its low or its high 32 bits.
    #[allow(clippy::cast_possible_truncation)]
    fn word(&self, offset: u32) -> u32 {
        match offset {
            0 => self.nr,
            4 => self.arch,
            // instruction_pointer: not used by the policy.
            8 | 12 => 0,
            16..=63 if offset % 4 == 0 => {
                let arg = self.args[((offset - 16) / 8) as usize];
                // x86_64 is little endian: the low word comes first.
                if (offset - 16) % 8 == 0 {
                    arg as u32
                } else {
                    (arg >> 32) as u32
                }
            }
            _ => panic!("load from offset {offset} of seccomp_data"),
        }
    }
}

/// Runs `program` on `data`; the value of the first return reached.
pub fn run(program: &[sock_filter], data: &Data) -> u32 {
    run_counting(program, data).0
}

/// Runs `program` on `data`: the value returned and how many instructions ran.
pub fn run_counting(program: &[sock_filter], data: &Data) -> (u32, usize) {
    let (mut acc, mut pc, mut steps) = (0u32, 0usize, 0usize);
    loop {
        let i = &program[pc];
        pc += 1;
        steps += 1;
        let class = i.code & 0x07;
        match class {
            // BPF_LD | BPF_W | BPF_ABS
            0x00 => {
                assert_eq!(i.code, 0x20, "load mode {:#x}", i.code);
                acc = data.word(i.k);
            }
            // BPF_ALU | BPF_AND | BPF_K
            0x04 => {
                assert_eq!(i.code, 0x54, "alu op {:#x}", i.code);
                acc &= i.k;
            }
            // BPF_JMP
            0x05 => {
                let op = i.code & 0xf0;
                assert_eq!(i.code & 0x08, 0, "jump with X operand {:#x}", i.code);
                if op == 0x00 {
                    pc += i.k as usize;
                    continue;
                }
                let taken = match op {
                    0x10 => acc == i.k,
                    0x20 => acc > i.k,
                    0x30 => acc >= i.k,
                    0x40 => acc & i.k != 0,
                    _ => panic!("jump op {:#x}", i.code),
                };
                pc += usize::from(if taken { i.jt } else { i.jf });
            }
            // BPF_RET | BPF_K
            0x06 => {
                assert_eq!(i.code, 0x06, "return of A or X {:#x}", i.code);
                return (i.k, steps);
            }
            _ => panic!("instruction class {:#x}", i.code),
        }
    }
}
