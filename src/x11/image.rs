//! Screenshots as RGB pixel buffers: PNG encode/decode (png crate), sha256, and the pixel diff
//! used by the display gates (count of differing pixels, bounding box, a diff PNG).

use std::path::Path;

use crate::evidence::sha256_hex;

use super::error::{Result, X11Error};

/// An RGB image, 8 bits per channel, rows top to bottom, no padding:
/// `rgb.len() == width * height * 3`.
#[derive(Clone, PartialEq, Eq)]
pub struct Screenshot {
    /// Width in pixels.
    pub width: u32,
    /// Height in pixels.
    pub height: u32,
    /// Pixel bytes R, G, B per pixel.
    pub rgb: Vec<u8>,
}

impl std::fmt::Debug for Screenshot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "Screenshot {}x{} sha256(pixels)={}",
            self.width,
            self.height,
            &self.pixel_sha256()[..16]
        )
    }
}

/// A rectangle in pixels: top-left corner (x, y), width and height.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Rect {
    /// Left column, pixels from the left edge.
    pub x: u32,
    /// Top row, pixels from the top edge.
    pub y: u32,
    /// Width, pixels.
    pub width: u32,
    /// Height, pixels.
    pub height: u32,
}

impl std::fmt::Display for Rect {
    /// `x 30 y 5, 20x10`: top-left corner, then width x height, pixels.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "x {} y {}, {}x{}",
            self.x, self.y, self.width, self.height
        )
    }
}

/// `r` as [`Rect`]'s `Display` writes it, or `none` (nothing differs).
pub fn rect_text(r: Option<Rect>) -> String {
    r.map_or_else(|| "none".to_string(), |r| r.to_string())
}

/// The outcome of comparing two screenshots of the same size.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct PixelDiff {
    /// Number of pixels whose RGB differs.
    pub differing: u64,
    /// Total pixels compared (width * height).
    pub total: u64,
    /// Smallest rectangle holding every differing pixel; None when equal.
    pub bbox: Option<Rect>,
}

impl PixelDiff {
    /// True when no pixel differs.
    pub fn is_equal(&self) -> bool {
        self.differing == 0
    }
}

impl Screenshot {
    /// Builds a screenshot from RGB bytes.
    ///
    /// Errors: [`X11Error::Png`] when `rgb.len() != width * height * 3`.
    pub fn new(width: u32, height: u32, rgb: Vec<u8>) -> Result<Self> {
        if rgb.len() as u64 != u64::from(width) * u64::from(height) * 3 {
            return Err(X11Error::Png {
                what: "build image".into(),
                reason: format!("{} bytes for {width}x{height} RGB", rgb.len()),
            });
        }
        Ok(Screenshot { width, height, rgb })
    }

    /// The RGB triple at (x, y). Panics when out of bounds.
    pub fn pixel(&self, x: u32, y: u32) -> [u8; 3] {
        let i = ((y * self.width + x) * 3) as usize;
        [self.rgb[i], self.rgb[i + 1], self.rgb[i + 2]]
    }

    /// The pixels of `rect` (clipped to the image) as an image of their own, as
    /// [`super::Display::region`] reads the same rectangle from a display.
    pub fn crop(&self, rect: Rect) -> Result<Screenshot> {
        let x = rect.x.min(self.width);
        let y = rect.y.min(self.height);
        let w = rect.width.min(self.width - x);
        let h = rect.height.min(self.height - y);
        let mut rgb = Vec::with_capacity((w * h * 3) as usize);
        for row in y..y + h {
            let s = ((row * self.width + x) * 3) as usize;
            rgb.extend_from_slice(&self.rgb[s..s + (w * 3) as usize]);
        }
        Screenshot::new(w, h, rgb)
    }

    /// sha256 of the raw RGB bytes (independent of PNG encoding).
    pub fn pixel_sha256(&self) -> String {
        sha256_hex(&self.rgb)
    }

    /// Encodes as an 8-bit RGB PNG (deterministic: same pixels, same bytes).
    ///
    /// Errors: [`X11Error::Png`].
    pub fn to_png(&self) -> Result<Vec<u8>> {
        let mut out = Vec::new();
        {
            let mut enc = png::Encoder::new(&mut out, self.width, self.height);
            enc.set_color(png::ColorType::Rgb);
            enc.set_depth(png::BitDepth::Eight);
            enc.set_compression(png::Compression::Fast);
            let png_err = |e: png::EncodingError| X11Error::Png {
                what: "encode".into(),
                reason: e.to_string(),
            };
            let mut w = enc.write_header().map_err(png_err)?;
            w.write_image_data(&self.rgb).map_err(png_err)?;
        }
        Ok(out)
    }

    /// Writes the PNG to `path` (temporary name + rename) and returns its sha256 (of the file's
    /// bytes).
    ///
    /// Errors: [`X11Error::Png`], [`X11Error::Io`].
    pub fn write_png(&self, path: &Path) -> Result<String> {
        let bytes = self.to_png()?;
        let tmp = path.with_extension("png.tmp");
        std::fs::write(&tmp, &bytes).map_err(|source| X11Error::Io {
            what: "write",
            path: tmp.clone(),
            source,
        })?;
        std::fs::rename(&tmp, path).map_err(|source| X11Error::Io {
            what: "rename into",
            path: path.to_path_buf(),
            source,
        })?;
        Ok(sha256_hex(&bytes))
    }

    /// Reads an 8-bit RGB or RGBA PNG (alpha dropped).
    ///
    /// Errors: [`X11Error::Io`], [`X11Error::Png`] (other colour types or bit depths).
    pub fn read_png(path: &Path) -> Result<Self> {
        let file = std::fs::File::open(path).map_err(|source| X11Error::Io {
            what: "open",
            path: path.to_path_buf(),
            source,
        })?;
        Screenshot::decode_png(std::io::BufReader::new(file), path)
    }

    /// [`Screenshot::read_png`] of bytes already read from `path` (named in errors).
    ///
    /// Errors: [`X11Error::Png`].
    pub fn png_from_bytes(bytes: &[u8], path: &Path) -> Result<Self> {
        Screenshot::decode_png(std::io::Cursor::new(bytes), path)
    }

    fn decode_png(r: impl std::io::BufRead + std::io::Seek, path: &Path) -> Result<Self> {
        let perr = |e: png::DecodingError| X11Error::Png {
            what: format!("decode {}", path.display()),
            reason: e.to_string(),
        };
        let mut dec = png::Decoder::new(r).read_info().map_err(perr)?;
        let mut buf = vec![0; dec.output_buffer_size().unwrap_or(0)];
        let info = dec.next_frame(&mut buf).map_err(perr)?;
        let channels = match (info.color_type, info.bit_depth) {
            (png::ColorType::Rgb, png::BitDepth::Eight) => 3,
            (png::ColorType::Rgba, png::BitDepth::Eight) => 4,
            (c, d) => {
                return Err(X11Error::Png {
                    what: format!("decode {}", path.display()),
                    reason: format!("{c:?} at {d:?} bits; expected 8-bit RGB or RGBA"),
                });
            }
        };
        let mut rgb = Vec::with_capacity((info.width * info.height * 3) as usize);
        for row in buf[..info.buffer_size()].chunks(info.line_size) {
            for px in row.chunks(channels).take(info.width as usize) {
                rgb.extend_from_slice(&px[..3]);
            }
        }
        Screenshot::new(info.width, info.height, rgb)
    }
}

/// Compares two screenshots pixel for pixel.
///
/// Errors: [`X11Error::SizeMismatch`] when their sizes differ.
pub fn diff(a: &Screenshot, b: &Screenshot) -> Result<PixelDiff> {
    same_size(a, b)?;
    let total = u64::from(a.width) * u64::from(a.height);
    // Equal screens (every restore that passes) take one memcmp, ~4x faster than the scan.
    if a.rgb == b.rgb {
        return Ok(PixelDiff {
            differing: 0,
            total,
            bbox: None,
        });
    }
    // Row by row: an equal row (most of them after a key or a moved window) is one memcmp;
    // only the rows that differ are scanned pixel by pixel.
    let (mut n, mut x0, mut y0, mut x1, mut y1) = (0u64, u32::MAX, u32::MAX, 0u32, 0u32);
    let row = a.width as usize * 3;
    for (y, (ra, rb)) in a
        .rgb
        .chunks_exact(row)
        .zip(b.rgb.chunks_exact(row))
        .enumerate()
    {
        if ra == rb {
            continue;
        }
        for (x, (pa, pb)) in ra.chunks_exact(3).zip(rb.chunks_exact(3)).enumerate() {
            if pa != pb {
                let (x, y) = (x as u32, y as u32);
                n += 1;
                x0 = x0.min(x);
                y0 = y0.min(y);
                x1 = x1.max(x);
                y1 = y1.max(y);
            }
        }
    }
    Ok(PixelDiff {
        differing: n,
        total,
        bbox: (n > 0).then(|| Rect {
            x: x0,
            y: y0,
            width: x1 - x0 + 1,
            height: y1 - y0 + 1,
        }),
    })
}

/// Colour of a changed pixel in [`diff_image`]: pure red.
pub const DIFF_MARK: [u8; 3] = [255, 0, 0];

/// The diff picture: `after` in dimmed grey (each pixel's luma / 3, so marks stand out),
/// every differing pixel in [`DIFF_MARK`] red.
///
/// Errors: [`X11Error::SizeMismatch`].
pub fn diff_image(before: &Screenshot, after: &Screenshot) -> Result<Screenshot> {
    same_size(before, after)?;
    let mut rgb = Vec::with_capacity(after.rgb.len());
    for (pa, pb) in before.rgb.chunks_exact(3).zip(after.rgb.chunks_exact(3)) {
        if pa != pb {
            rgb.extend_from_slice(&DIFF_MARK);
        } else {
            let luma =
                (u32::from(pb[0]) * 299 + u32::from(pb[1]) * 587 + u32::from(pb[2]) * 114) / 1000;
            let g = (luma / 3) as u8;
            rgb.extend_from_slice(&[g, g, g]);
        }
    }
    Screenshot::new(after.width, after.height, rgb)
}

/// True when every pixel inside `rect` (clipped to the image) equals between `a` and `b`.
///
/// Errors: [`X11Error::SizeMismatch`].
pub fn region_equal(a: &Screenshot, b: &Screenshot, rect: Rect) -> Result<bool> {
    same_size(a, b)?;
    let x_end = (rect.x + rect.width).min(a.width);
    let y_end = (rect.y + rect.height).min(a.height);
    for y in rect.y..y_end {
        let s = ((y * a.width + rect.x) * 3) as usize;
        let e = ((y * a.width + x_end) * 3) as usize;
        if s < e && a.rgb[s..e] != b.rgb[s..e] {
            return Ok(false);
        }
    }
    Ok(true)
}

/// The colours inside `rect` of `shot` (clipped to the image): how many pixels differ from
/// the region's first one, and that colour. `None` when the clipped region is empty. A region
/// of one colour only (`Some((0, _))`) holds nothing drawn: what an application's unmapped
/// window leaves is the root window's background.
pub fn region_other_pixels(shot: &Screenshot, rect: Rect) -> Option<(u64, [u8; 3])> {
    let x_end = (rect.x.saturating_add(rect.width)).min(shot.width);
    let y_end = (rect.y.saturating_add(rect.height)).min(shot.height);
    if rect.x >= x_end || rect.y >= y_end {
        return None;
    }
    let first = shot.pixel(rect.x, rect.y);
    let mut other = 0u64;
    for y in rect.y..y_end {
        let s = ((y * shot.width + rect.x) * 3) as usize;
        let e = ((y * shot.width + x_end) * 3) as usize;
        other += shot.rgb[s..e]
            .chunks_exact(3)
            .filter(|p| *p != first)
            .count() as u64;
    }
    Some((other, first))
}

fn same_size(a: &Screenshot, b: &Screenshot) -> Result<()> {
    if (a.width, a.height) != (b.width, b.height) {
        return Err(X11Error::SizeMismatch {
            a_w: a.width,
            a_h: a.height,
            b_w: b.width,
            b_h: b.height,
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn solid(w: u32, h: u32, c: [u8; 3]) -> Screenshot {
        Screenshot::new(w, h, c.repeat((w * h) as usize)).unwrap()
    }

    fn set(s: &mut Screenshot, x: u32, y: u32, c: [u8; 3]) {
        let i = ((y * s.width + x) * 3) as usize;
        s.rgb[i..i + 3].copy_from_slice(&c);
    }

    #[test]
    fn crop_takes_the_clipped_rectangle() {
        let mut a = solid(10, 6, [0, 0, 0]);
        set(&mut a, 8, 4, [7, 7, 7]);
        let r = |x, y, width, height| Rect {
            x,
            y,
            width,
            height,
        };
        let c = a.crop(r(7, 3, 2, 2)).unwrap();
        assert_eq!((c.width, c.height), (2, 2));
        assert_eq!(c.pixel(1, 1), [7, 7, 7]);
        assert_eq!(c.pixel(0, 0), [0, 0, 0]);
        // Clipped at the right and bottom edges, as the display clips a region.
        let c = a.crop(r(8, 4, 5, 5)).unwrap();
        assert_eq!((c.width, c.height), (2, 2));
        assert_eq!(c.pixel(0, 0), [7, 7, 7]);
    }

    #[test]
    fn equal_images_have_no_diff() {
        let a = solid(8, 4, [10, 20, 30]);
        let d = diff(&a, &a.clone()).unwrap();
        assert!(d.is_equal());
        assert_eq!((d.differing, d.total, d.bbox), (0, 32, None));
    }

    #[test]
    fn diff_counts_pixels_and_bounds_them() {
        let a = solid(10, 6, [0, 0, 0]);
        let mut b = a.clone();
        set(&mut b, 2, 1, [1, 0, 0]);
        set(&mut b, 7, 4, [0, 0, 9]);
        set(&mut b, 3, 3, [0, 5, 0]);
        let d = diff(&a, &b).unwrap();
        assert_eq!(d.differing, 3);
        assert_eq!(
            d.bbox,
            Some(Rect {
                x: 2,
                y: 1,
                width: 6,
                height: 4
            })
        );
        let img = diff_image(&a, &b).unwrap();
        assert_eq!(img.pixel(2, 1), DIFF_MARK);
        assert_eq!(img.pixel(7, 4), DIFF_MARK);
        assert_eq!(img.pixel(0, 0), [0, 0, 0]);
        assert_eq!(
            img.rgb.chunks(3).filter(|p| *p == DIFF_MARK).count(),
            3,
            "only changed pixels are marked"
        );
    }

    #[test]
    fn size_mismatch_is_an_error() {
        let e = diff(&solid(2, 2, [0; 3]), &solid(3, 2, [0; 3])).unwrap_err();
        assert!(e.to_string().contains("2x2") && e.to_string().contains("3x2"));
    }

    #[test]
    fn png_round_trip_is_lossless_and_deterministic() {
        let mut a = solid(33, 17, [200, 100, 50]);
        set(&mut a, 32, 16, [1, 2, 3]);
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("a.png");
        let sha = a.write_png(&p).unwrap();
        assert_eq!(sha, sha256_hex(&std::fs::read(&p).unwrap()));
        assert_eq!(
            sha,
            sha256_hex(&a.to_png().unwrap()),
            "same pixels, same bytes"
        );
        let b = Screenshot::read_png(&p).unwrap();
        assert_eq!(a, b);
        assert!(!dir.path().join("a.png.tmp").exists());
    }

    #[test]
    fn region_equal_ignores_outside_changes() {
        let a = solid(10, 10, [0; 3]);
        let mut b = a.clone();
        set(&mut b, 9, 9, [1, 1, 1]);
        let r = Rect {
            x: 0,
            y: 0,
            width: 5,
            height: 5,
        };
        assert!(region_equal(&a, &b, r).unwrap());
        let r2 = Rect {
            x: 5,
            y: 5,
            width: 10,
            height: 10,
        };
        assert!(!region_equal(&a, &b, r2).unwrap());
    }

    #[test]
    fn bad_length_is_rejected() {
        assert!(Screenshot::new(2, 2, vec![0; 11]).is_err());
    }
}
