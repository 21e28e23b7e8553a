//! A session's output between two answers, bounded: the first and the last halves of
//! `output_kept_bytes` are kept, the bytes between them are counted and replaced by a
//! marker line when the output is taken. One answer is bounded the same way by its
//! `max_output_bytes`.

/// Output kept between answers (see the module docs).
#[derive(Debug)]
pub struct Kept {
    head: Vec<u8>,
    tail: std::collections::VecDeque<u8>,
    half: usize,
    elided: u64,
}

/// The marker put where output was elided.
pub fn marker(elided: u64) -> String {
    format!("\n[... {elided} bytes of output elided ...]\n")
}

impl Kept {
    /// Keeps at most `cap` bytes (half head, half tail; at least 2).
    pub fn new(cap: u64) -> Self {
        let half = usize::try_from(cap / 2).unwrap_or(usize::MAX / 4).max(1);
        Self {
            head: Vec::new(),
            tail: std::collections::VecDeque::new(),
            half,
            elided: 0,
        }
    }

    /// Adds output.
    pub fn push(&mut self, mut bytes: &[u8]) {
        if self.elided == 0 && self.tail.is_empty() && self.head.len() < self.half {
            let room = (self.half - self.head.len()).min(bytes.len());
            self.head.extend_from_slice(&bytes[..room]);
            bytes = &bytes[room..];
        }
        self.tail.extend(bytes);
        if self.tail.len() > self.half {
            let cut = self.tail.len() - self.half;
            self.tail.drain(..cut);
            self.elided += cut as u64;
        }
    }

    /// Whether nothing is kept.
    pub fn is_empty(&self) -> bool {
        self.head.is_empty() && self.tail.is_empty() && self.elided == 0
    }

    /// Takes what is kept as text, at most `max` bytes of output (head and tail of it,
    /// the middle elided), and the bytes elided in all; the buffer is empty after.
    pub fn take(&mut self, max: u64) -> (String, u64) {
        let head = std::mem::take(&mut self.head);
        let tail: Vec<u8> = std::mem::take(&mut self.tail).into();
        let elided = std::mem::take(&mut self.elided);
        let mut bounded = Kept::new(max);
        bounded.push(&head);
        // Where the gap was, roughly: the marker goes after the answer's head.
        bounded.elided += elided;
        bounded.push(&tail);
        let total = bounded.elided;
        let mut text = String::from_utf8_lossy(&bounded.head).into_owned();
        if total > 0 {
            text.push_str(&marker(total));
        }
        text.push_str(&String::from_utf8_lossy(bounded.tail.make_contiguous()));
        (text, total)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_output_is_kept_whole() {
        let mut k = Kept::new(100);
        k.push(b"hello\n");
        assert_eq!(k.take(100), ("hello\n".to_string(), 0));
        assert!(k.is_empty());
    }

    #[test]
    fn the_middle_is_elided_and_counted_with_a_marker() {
        let mut k = Kept::new(10);
        k.push(b"HEADx");
        k.push(&[b'm'; 1000]);
        k.push(b"yTAIL");
        let (text, elided) = k.take(1000);
        assert!(text.starts_with("HEADx"), "{text}");
        assert!(text.ends_with("yTAIL"), "{text}");
        assert_eq!(elided, 1000);
        assert!(text.contains("1000 bytes of output elided"), "{text}");
    }

    #[test]
    fn one_answer_is_bounded_by_its_max() {
        let mut k = Kept::new(1000);
        k.push(&[b'a'; 600]);
        k.push(&[b'b'; 300]);
        let (text, elided) = k.take(100);
        assert_eq!(elided, 800);
        assert!(text.starts_with(&"a".repeat(50)) && text.ends_with(&"b".repeat(50)));
    }
}
