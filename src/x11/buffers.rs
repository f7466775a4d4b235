//! Whole-screen image buffers made ready before the display they serve is up: a populated
//! MIT-SHM memfd ([`super::shm::prepare`]) and RGB buffers whose pages are touched. A restore
//! prepares them on a thread while CRIU restores the X server, so the first screenshots after
//! it do not pay for fresh memory: on the 2-core test machine a page fault costs ~3 µs, and a
//! 1920x1080 screen is 8 MB of ZPixmap plus 6 MB of RGB per image (~10 ms of faults for the
//! two images of the restore gates).
//!
//! Using them changes nothing but where the memory comes from ([`super::Display::adopt_buffers`]).

use super::shm::PreparedShm;

/// Buffers for the whole-screen images of one [`super::Display`] connection.
pub struct ScreenBuffers {
    /// The segment for MIT-SHM images (`Err`: why it could not be made; then the display makes
    /// its own at the first image, as without buffers).
    shm: Option<Result<PreparedShm, super::ShmError>>,
    /// RGB buffers of exactly `width * height * 3` bytes, each used by one image.
    rgb: Vec<Vec<u8>>,
}

impl std::fmt::Debug for ScreenBuffers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ScreenBuffers")
            .field(
                "shm_bytes",
                &self.shm.as_ref().map(|r| r.as_ref().map(PreparedShm::len)),
            )
            .field("rgb_buffers", &self.rgb.len())
            .finish()
    }
}

impl ScreenBuffers {
    /// No buffers: every image allocates its own memory (what a connection starts with).
    pub fn none() -> ScreenBuffers {
        ScreenBuffers {
            shm: None,
            rgb: Vec::new(),
        }
    }

    /// Buffers for a `width` x `height` screen (pixels, 32 bits per pixel as the display gates
    /// require): one shared-memory segment of `width * height * 4` bytes and `images` RGB
    /// buffers of `width * height * 3` bytes, every page touched. Takes ~10–15 ms for
    /// 1920x1080 and two images on the test machine; meant for a thread that would otherwise
    /// wait.
    pub fn prepare(width: u32, height: u32, images: usize) -> ScreenBuffers {
        let px = width as usize * height as usize;
        ScreenBuffers {
            shm: Some(super::shm::prepare(px * 4)),
            // Written, not only allocated: `vec![0; n]` would be untouched zero pages.
            rgb: (0..images).map(|_| vec![0xa5u8; px * 3]).collect(),
        }
    }

    /// Why the segment could not be prepared, if it was asked for and failed.
    pub fn shm_error(&self) -> Option<String> {
        match &self.shm {
            Some(Err(e)) => Some(e.to_string()),
            _ => None,
        }
    }

    /// The prepared segment when it holds at least `len` bytes (taken: used once).
    pub(crate) fn take_shm(&mut self, len: usize) -> Option<PreparedShm> {
        match self.shm.take() {
            Some(Ok(p)) if p.len() >= len => Some(p),
            other => {
                self.shm = other;
                None
            }
        }
    }

    /// An RGB buffer of exactly `len` bytes if one is left, else an empty vector (the
    /// conversion then allocates).
    pub(crate) fn take_rgb(&mut self, len: usize) -> Vec<u8> {
        match self.rgb.iter().position(|b| b.len() == len) {
            Some(i) => self.rgb.swap_remove(i),
            None => Vec::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prepared_buffers_are_taken_once_and_only_at_their_size() {
        let mut b = ScreenBuffers::prepare(64, 32, 2);
        assert!(b.shm_error().is_none(), "{:?}", b.shm_error());
        assert!(b.take_shm(64 * 32 * 4 + 1).is_none(), "too small a segment");
        assert_eq!(b.take_shm(64 * 32 * 4).map(|p| p.len()), Some(64 * 32 * 4));
        assert!(b.take_shm(1).is_none(), "the segment is used once");
        assert!(
            b.take_rgb(5).is_empty(),
            "a region's image allocates its own"
        );
        assert_eq!(b.take_rgb(64 * 32 * 3).len(), 64 * 32 * 3);
        assert_eq!(b.take_rgb(64 * 32 * 3).len(), 64 * 32 * 3);
        assert!(
            b.take_rgb(64 * 32 * 3).is_empty(),
            "two images, two buffers"
        );
        let mut n = ScreenBuffers::none();
        assert!(n.take_shm(1).is_none() && n.take_rgb(3).is_empty());
    }
}
