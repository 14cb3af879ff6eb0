//! The bytes under the CSV loader, checked as they are read: a compressed or binary file
//! and an overlong line are refused at once, naming the line, instead of being read whole
//! into memory and quoted back.

use std::io::{self, Read};

/// The longest line a CSV of bars may have. A bar is a few dozen bytes; a longer line is
/// not a row of bars (a binary file, a file without line breaks).
const MAX_LINE_BYTES: usize = 1 << 16;

/// A reader that counts lines and refuses what cannot be a CSV of bars.
pub(crate) struct CheckedInput<R> {
    inner: R,
    /// 1-based line of the next byte, and the bytes read of it so far.
    line: usize,
    line_bytes: usize,
    started: bool,
}

impl<R: Read> CheckedInput<R> {
    pub(crate) fn new(inner: R) -> Self {
        Self { inner, line: 1, line_bytes: 0, started: false }
    }
}

fn refuse(problem: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, problem)
}

/// What the first bytes of a file say it is, when it is not text.
fn format_of(start: &[u8]) -> Option<&'static str> {
    const MAGIC: [(&[u8], &str); 7] = [
        (b"\x1f\x8b", "gzip-compressed: decompress it first (gunzip)"),
        (b"PK\x03\x04", "a zip archive: extract the CSV first"),
        (b"\x28\xb5\x2f\xfd", "zstd-compressed: decompress it first (unzstd)"),
        (b"BZh", "bzip2-compressed: decompress it first (bunzip2)"),
        (b"\xfd7zXZ", "xz-compressed: decompress it first (unxz)"),
        (b"PAR1", "a Parquet file, not CSV (`--data` and `Ohlcv::load` read it as Parquet)"),
        (b"ARROW1", "an Arrow IPC (Feather) file, not CSV (`--data` and `Ohlcv::load` read it as Arrow)"),
    ];
    MAGIC.iter().find(|(magic, _)| start.starts_with(magic)).map(|&(_, what)| what)
}

impl<R: Read> Read for CheckedInput<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        let bytes = &buf[..n];
        if !self.started && n > 0 {
            self.started = true;
            if let Some(what) = format_of(bytes) {
                return Err(refuse(format!("the file is {what}")));
            }
        }
        if let Some(at) = memchr::memchr(0, bytes) {
            // The line of the first NUL: this read's line breaks before it.
            let line = self.line + memchr::memchr_iter(b'\n', &bytes[..at]).count();
            return Err(refuse(format!("line {line}: a NUL byte: this is binary data, not a CSV text file")));
        }
        // Every line's length: the pieces between line breaks (the first continues the
        // line the last read ended in).
        let mut start = 0;
        for end in memchr::memchr_iter(b'\n', bytes).chain(std::iter::once(n)) {
            self.line_bytes += end - start;
            if self.line_bytes > MAX_LINE_BYTES {
                return Err(refuse(format!(
                    "line {} is longer than {MAX_LINE_BYTES} bytes: not a row of bars (no line breaks, or binary data?)",
                    self.line
                )));
            }
            if end < n {
                self.line += 1;
                self.line_bytes = 0;
            }
            start = end + 1;
        }
        Ok(n)
    }
}

/// `text` for an error message: in backquotes, cut to about 80 characters.
pub(crate) fn quoted(text: &str) -> String {
    format!("`{}`", cut(text))
}

/// `text` cut to about 80 characters, saying how long it was.
pub(crate) fn cut(text: &str) -> String {
    const MAX: usize = 80;
    match text.char_indices().nth(MAX) {
        Some((at, _)) => format!("{}… ({} bytes)", &text[..at], text.len()),
        None => text.to_owned(),
    }
}
