//! Room on a full scratch file system. A bounded tmpfs that a call filled is freed only
//! after that call's answer is sent (its release moves its folder aside, the sweeper
//! removes it), so the next call may find it full for a moment: every write a call makes
//! into its scratch goes through [`when_room`], which waits for those removals.

use std::time::{Duration, Instant};

use super::reaper::Releaser;
use super::remove_tree::Sweeper;

/// Longest a call waits for room that ended calls are still freeing.
pub const ROOM_WAIT: Duration = Duration::from_secs(2);

/// How long to sleep when nothing is queued yet: an ended call's release is queued only
/// after its answer is sent, so a call arriving at once may find nothing to wait for.
const PAUSE: Duration = Duration::from_millis(5);

/// Runs `op`, and while it fails with "no space left on device", waits for the ended
/// calls' releases and folder removals and runs it again, until [`ROOM_WAIT`] passes.
/// `op` must be safe to run again after it failed (leave nothing half-made).
pub fn when_room<T>(op: impl FnMut() -> std::io::Result<T>) -> std::io::Result<T> {
    when_room_within(ROOM_WAIT, op)
}

fn when_room_within<T>(
    wait: Duration,
    mut op: impl FnMut() -> std::io::Result<T>,
) -> std::io::Result<T> {
    let deadline = Instant::now() + wait;
    loop {
        match op() {
            Err(e) if e.raw_os_error() == Some(libc::ENOSPC) => {
                let left = deadline.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    return Err(e);
                }
                let released = Releaser::global().wait_one(deadline);
                let left = deadline.saturating_duration_since(Instant::now());
                Sweeper::global().wait_idle_for(left);
                if !released {
                    std::thread::sleep(PAUSE.min(left));
                }
            }
            done => return done,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn full() -> std::io::Error {
        std::io::Error::from_raw_os_error(libc::ENOSPC)
    }

    #[test]
    fn a_full_file_system_is_tried_again_until_it_has_room() {
        let mut tries = 0;
        let made = when_room(|| {
            tries += 1;
            if tries < 4 {
                Err(full())
            } else {
                Ok(tries)
            }
        });
        assert_eq!(made.unwrap(), 4);
    }

    #[test]
    fn a_file_system_that_stays_full_fails_with_no_space_once_the_wait_is_over() {
        let mut tries = 0;
        let made: std::io::Result<()> = when_room_within(Duration::from_millis(30), || {
            tries += 1;
            Err(full())
        });
        assert_eq!(made.unwrap_err().raw_os_error(), Some(libc::ENOSPC));
        assert!(tries > 1, "tried once only");
    }

    #[test]
    fn any_other_failure_is_not_tried_again() {
        let mut tries = 0;
        let made: std::io::Result<()> = when_room(|| {
            tries += 1;
            Err(std::io::Error::from_raw_os_error(libc::EACCES))
        });
        assert_eq!(made.unwrap_err().raw_os_error(), Some(libc::EACCES));
        assert_eq!(tries, 1);
    }
}
