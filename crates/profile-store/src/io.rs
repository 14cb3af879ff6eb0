//! Locked, atomic reads and updates of a JSON profile file.
//!
//! Readers never lock: a file is only ever replaced whole by a rename. Writers take an
//! exclusive lock on `<file>.lock`, re-read the file, apply their change, write a
//! temporary file beside it, sync it and rename it over the original.

use crate::error::{ProfileError, Result};
use serde::Serialize;
use std::fs::{self, File, OpenOptions};
use std::io::{ErrorKind, Write};
use std::path::{Path, PathBuf};
use std::time::SystemTime;

/// A profile file format: parsed leniently (older layouts included), written canonically.
pub(crate) trait ProfileFile: Default + Serialize {
    fn parse(text: &str) -> serde_json::Result<Self>;
    /// Called before each write, to stamp the time and the writer's identity.
    fn before_write(&mut self, now: &str);
}

pub(crate) fn now_rfc3339() -> String {
    humantime::format_rfc3339_seconds(SystemTime::now()).to_string()
}

fn io_err(path: &Path) -> impl FnOnce(std::io::Error) -> ProfileError + '_ {
    move |error| ProfileError::Io { path: path.to_owned(), error }
}

enum Read<T> {
    Missing,
    Parsed(T),
    Corrupt(serde_json::Error),
}

fn read<T: ProfileFile>(path: &Path) -> Result<Read<T>> {
    match fs::read_to_string(path) {
        Ok(text) => Ok(match T::parse(&text) {
            Ok(v) => Read::Parsed(v),
            Err(e) => Read::Corrupt(e),
        }),
        Err(e) if e.kind() == ErrorKind::NotFound => Ok(Read::Missing),
        Err(e) if e.kind() == ErrorKind::InvalidData => Ok(Read::Corrupt(serde_json::Error::io(e))),
        Err(e) => Err(io_err(path)(e)),
    }
}

/// Holds the exclusive lock on `<file>.lock` while alive.
struct FileLock(File);

impl FileLock {
    fn acquire(path: &Path) -> Result<Self> {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            fs::create_dir_all(dir).map_err(io_err(dir))?;
        }
        let lock_path = sibling(path, ".lock");
        let file =
            OpenOptions::new().create(true).truncate(false).write(true).open(&lock_path).map_err(io_err(&lock_path))?;
        file.lock().map_err(io_err(&lock_path))?;
        Ok(Self(file))
    }
}

impl Drop for FileLock {
    fn drop(&mut self) {
        let _ = self.0.unlock();
    }
}

fn sibling(path: &Path, suffix: &str) -> PathBuf {
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(suffix);
    path.with_file_name(name)
}

/// Moves an unparseable file to `<name>.corrupt-<timestamp>`. Caller holds the lock.
fn move_aside(path: &Path, error: &serde_json::Error) -> Result<()> {
    let stamp: String = humantime::format_rfc3339_nanos(SystemTime::now())
        .to_string()
        .chars()
        .filter(char::is_ascii_alphanumeric)
        .collect();
    let target = sibling(path, &format!(".corrupt-{stamp}"));
    fs::rename(path, &target).map_err(io_err(path))?;
    tracing::warn!(
        "profile {} is corrupt ({error}); moved it to {} and started a fresh profile",
        path.display(),
        target.display()
    );
    Ok(())
}

/// Reads a profile; a missing file reads as empty, a corrupt one is moved aside.
pub(crate) fn load<T: ProfileFile>(path: &Path) -> Result<T> {
    match read(path)? {
        Read::Missing => Ok(T::default()),
        Read::Parsed(v) => Ok(v),
        // Decide about corruption under the lock: a writer may have just replaced it.
        Read::Corrupt(_) => {
            let _lock = FileLock::acquire(path)?;
            load_locked(path)
        }
    }
}

fn load_locked<T: ProfileFile>(path: &Path) -> Result<T> {
    match read(path)? {
        Read::Missing => Ok(T::default()),
        Read::Parsed(v) => Ok(v),
        Read::Corrupt(e) => {
            move_aside(path, &e)?;
            Ok(T::default())
        }
    }
}

/// Locked read-modify-write. Returns the file as written.
pub(crate) fn update<T: ProfileFile, F: FnOnce(&mut T)>(path: &Path, change: F) -> Result<T> {
    let _lock = FileLock::acquire(path)?;
    let mut file = load_locked::<T>(path)?;
    change(&mut file);
    file.before_write(&now_rfc3339());
    write_atomic(path, &file)?;
    Ok(file)
}

fn write_atomic<T: Serialize>(path: &Path, value: &T) -> Result<()> {
    let mut text =
        serde_json::to_string_pretty(value).map_err(|source| ProfileError::Encode { path: path.to_owned(), source })?;
    text.push('\n');
    write_file_atomic(path, text.as_bytes()).map_err(io_err(path))
}

/// Writes `bytes` to `path` so that readers and crashes see the old file or the whole new
/// one, never a part: a temporary file beside it, fsync, then rename over it. The one way
/// ThreadX writes any output file (profiles, indicator and result CSVs, reports).
pub fn write_file_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    write_file_staged(path, bytes)?.commit()
}

/// Writes `bytes` to `path` in a folder that one process holds (a run's checkpoint), for a
/// reader that checks what it reads (a checksum) and makes it again when it fails: written
/// in place, not synced, with no temporary file, rename or scan of the folder. A crash may
/// leave the file short, empty or zeroed, which its reader refuses and makes again.
/// [`write_file_atomic`]'s scan for other writers' temporary files read the whole folder
/// per file (quadratic in a checkpoint's thousands of chunks), and its fsync and rename
/// are directory and disk work per chunk that the checksum makes needless: a GPU
/// dispatch of 1M-bar data hands back 1,612 chunks at once.
pub fn write_held_file(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    fs::write(path, bytes)
}

/// Writes `bytes` beside `path`, synced, without putting them in its place yet: a run
/// stages every output first and renames them all at its end ([`Staged::commit`]), so a
/// full disk leaves the old set whole, never new results beside an old summary.
pub fn write_file_staged(path: &Path, bytes: &[u8]) -> std::io::Result<Staged> {
    let mut file = AtomicFile::create(path)?;
    file.write_all(bytes)?;
    file.stage()
}

/// Whether `path` can be written, asked before any work so that a long computation does
/// not end in an unwritable path: its folder must exist and not be read-only, and it must
/// not be a folder itself. A symbolic link is judged by its target; a character device or
/// FIFO is written in place, so only its kind is checked. The error says which.
pub fn check_writable(path: &Path) -> std::result::Result<(), String> {
    if path.as_os_str().to_string_lossy().ends_with(std::path::is_separator) {
        return Err(format!(
            "cannot write {}: it names a folder (it ends with a separator), not a file",
            path.display()
        ));
    }
    let target = resolve_links(path).map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    match output_kind(&target) {
        Ok(OutputKind::Special) => return Ok(()),
        Ok(OutputKind::Regular) => {}
        Err(e) => return Err(format!("cannot write {}: {e}", path.display())),
    }
    let parent = parent_dir(&target);
    if !parent.is_dir() {
        return Err(format!("cannot write {}: folder {} does not exist", path.display(), parent.display()));
    }
    // The temporary file beside it adds `.tmp-` and a process id to the name.
    let name = target.file_name().map_or(0, |n| n.len());
    if name + TMP_SUFFIX_MAX > NAME_MAX {
        return Err(format!(
            "cannot write {}: its file name is {name} bytes, and the temporary file written beside it needs \
             {TMP_SUFFIX_MAX} more of the {NAME_MAX} a name may have: choose a shorter name",
            path.display()
        ));
    }
    if let Err(e) = check_replaceable(&target) {
        return Err(format!("cannot write {}: {e}", path.display()));
    }
    match parent.metadata() {
        Ok(m) if m.permissions().readonly() => {
            Err(format!("cannot write {}: folder {} is read-only", path.display(), parent.display()))
        }
        Ok(_) => Ok(()),
        Err(e) => Err(format!("cannot write into {}: {e}", parent.display())),
    }
}

/// The bytes an unprivileged writer may still put on the file system that would hold
/// `path` (its folder's, links resolved), as `statvfs` tells; None where it cannot tell.
pub fn free_bytes(path: &Path) -> Option<u64> {
    use std::os::unix::ffi::OsStrExt;
    let target = resolve_links(path).ok()?;
    let folder = std::ffi::CString::new(parent_dir(&target).as_os_str().as_bytes()).ok()?;
    let mut stats = std::mem::MaybeUninit::<libc::statvfs>::uninit();
    // SAFETY: `folder` is a NUL-terminated path and `stats` a buffer of the type statvfs
    // fills; it is read only when the call says it filled it.
    #[allow(unsafe_code)]
    let stats = unsafe {
        if libc::statvfs(folder.as_ptr(), stats.as_mut_ptr()) != 0 {
            return None;
        }
        stats.assume_init()
    };
    (stats.f_blocks > 0).then(|| stats.f_bavail.saturating_mul(stats.f_frsize))
}

/// Whether `path` is (or links to) something other than a regular file or nothing: a
/// character device such as `/dev/null` or a FIFO, which outputs write in place.
pub fn is_special_file(path: &Path) -> bool {
    resolve_links(path).is_ok_and(|target| matches!(output_kind(&target), Ok(OutputKind::Special)))
}

/// Refuses any of `outputs` that is the same file as one of `inputs` (the same device
/// and inode, or the same path once links are resolved), naming both: a command must
/// never overwrite what it reads. Paths that do not exist yet cannot be the same file.
pub fn refuse_output_over_input(outputs: &[&Path], inputs: &[&Path]) -> std::result::Result<(), String> {
    for output in outputs {
        for input in inputs {
            if same_file(output, input) {
                return Err(format!(
                    "the output {} is the input {}: choose another output, or it would overwrite what it reads",
                    output.display(),
                    input.display()
                ));
            }
        }
    }
    Ok(())
}

/// Refuses two of `outputs` (each with what it is: a flag, or a file named after one) that
/// name one file, whether or not it exists yet: the later write would replace the earlier.
/// Called before any work. A device or FIFO may take several outputs.
pub fn refuse_colliding_outputs(outputs: &[(&str, &Path)]) -> std::result::Result<(), String> {
    for (i, (first, a)) in outputs.iter().enumerate() {
        for (second, b) in &outputs[i + 1..] {
            if !is_special_file(a) && !is_special_file(b) && (same_file(a, b) || destination(a) == destination(b)) {
                return Err(format!(
                    "{second} {} and {first} {} are one file: each output needs a file of its own",
                    b.display(),
                    a.display()
                ));
            }
        }
    }
    Ok(())
}

/// Where writing `path` lands: its links followed, its folder resolved (`..`, links) where
/// that folder exists, and its file name as given.
fn destination(path: &Path) -> PathBuf {
    let path = resolve_links(path).unwrap_or_else(|_| path.to_path_buf());
    let folder = parent_dir(&path);
    match (fs::canonicalize(folder), path.file_name()) {
        (Ok(folder), Some(name)) => folder.join(name),
        _ => std::path::absolute(&path).unwrap_or(path),
    }
}

/// Whether `path` is this process's standard output (`/dev/stdout`, or the file, pipe or
/// terminal it is): a command writing data there keeps its messages off it.
pub fn is_standard_output(path: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    let (Ok(a), Ok(b)) = (fs::metadata(path), fs::metadata("/dev/stdout")) else { return false };
    (a.dev(), a.ino(), a.rdev()) == (b.dev(), b.ino(), b.rdev())
}

fn same_file(a: &Path, b: &Path) -> bool {
    let (Ok(ma), Ok(mb)) = (fs::metadata(a), fs::metadata(b)) else { return false };
    // Devices and FIFOs are streams, not data that writing would destroy.
    if !ma.is_file() || !mb.is_file() {
        return false;
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        if (ma.dev(), ma.ino()) == (mb.dev(), mb.ino()) {
            return true;
        }
    }
    matches!((fs::canonicalize(a), fs::canonicalize(b)), (Ok(x), Ok(y)) if x == y)
}

/// What an output path is: a regular file (or nothing yet), replaced atomically, or a
/// device or FIFO, written in place.
enum OutputKind {
    Regular,
    Special,
}

fn output_kind(target: &Path) -> std::io::Result<OutputKind> {
    let meta = match fs::metadata(target) {
        Ok(m) => m,
        Err(e) if e.kind() == ErrorKind::NotFound => return Ok(OutputKind::Regular),
        Err(e) => return Err(e),
    };
    if meta.is_file() {
        return Ok(OutputKind::Regular);
    }
    if meta.is_dir() {
        return Err(std::io::Error::new(ErrorKind::IsADirectory, "it is a folder"));
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        let kind = meta.file_type();
        if kind.is_char_device() || kind.is_fifo() {
            return Ok(OutputKind::Special);
        }
        if kind.is_block_device() {
            return Err(std::io::Error::new(ErrorKind::InvalidInput, "it is a block device (a disk): refused"));
        }
        if kind.is_socket() {
            return Err(std::io::Error::new(
                ErrorKind::InvalidInput,
                "it is a socket, which cannot be opened as a file",
            ));
        }
    }
    Err(std::io::Error::new(ErrorKind::InvalidInput, "it is not a regular file"))
}

/// `path` with every symbolic link followed to the file it names (which may not exist
/// yet): an output replaces the link's target, and the link stays a link.
fn resolve_links(path: &Path) -> std::io::Result<PathBuf> {
    let mut current = path.to_path_buf();
    for _ in 0..40 {
        match fs::symlink_metadata(&current) {
            Ok(m) if m.file_type().is_symlink() => {
                let target = fs::read_link(&current)?;
                let next = if target.is_absolute() { target } else { parent_dir(&current).join(target) };
                // A link whose text names nothing that the kernel still opens: /dev/stdout's
                // /proc/self/fd/1 when it is a pipe (`pipe:[…]`). It is written as itself.
                if fs::symlink_metadata(&next).is_err() && fs::metadata(&current).is_ok() {
                    return Ok(current);
                }
                current = next;
            }
            _ => return Ok(current),
        }
    }
    Err(std::io::Error::new(ErrorKind::InvalidInput, "too many levels of symbolic links"))
}

/// Opens a device or FIFO to write in place. A FIFO with no reader is an error at once,
/// not an open that waits forever.
fn open_special(target: &Path) -> std::io::Result<File> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
        if fs::metadata(target)?.file_type().is_fifo() {
            // Non-blocking, the open fails (ENXIO) when nobody reads; the reader it finds
            // lets the blocking open below return at once.
            let _probe = OpenOptions::new().write(true).custom_flags(libc::O_NONBLOCK).open(target).map_err(|e| {
                if e.raw_os_error() == Some(libc::ENXIO) {
                    std::io::Error::other("it is a FIFO that no process is reading (start the reader first)")
                } else {
                    e
                }
            })?;
            return OpenOptions::new().write(true).open(target);
        }
    }
    OpenOptions::new().write(true).open(target)
}

/// Whether an existing file at `path` may be replaced: the user must be able to write
/// to it (a read-only file is refused, even for root: replacing it would drop the mode
/// its owner chose). A missing file may be created.
fn check_replaceable(path: &Path) -> std::io::Result<Option<fs::Permissions>> {
    let permissions = match fs::metadata(path) {
        Ok(m) => m.permissions(),
        Err(e) if e.kind() == ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    };
    if permissions.readonly() {
        return Err(std::io::Error::new(ErrorKind::PermissionDenied, "the file is read-only"));
    }
    OpenOptions::new().append(true).open(path)?;
    Ok(Some(permissions))
}

/// The folder `path` is in (`.` for a bare file name).
fn parent_dir(path: &Path) -> &Path {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    }
}

/// The longest file name most file systems take (Linux's NAME_MAX), in bytes.
const NAME_MAX: usize = 255;
/// What [`AtomicFile`]'s temporary name adds to its target's: `.tmp-` and a process id.
const TMP_SUFFIX_MAX: usize = ".tmp-".len() + 10;

/// The prefix of the temporary files [`AtomicFile`] writes beside `path`.
fn tmp_prefix(path: &Path) -> std::ffi::OsString {
    let mut prefix = path.file_name().unwrap_or_default().to_os_string();
    prefix.push(".tmp-");
    prefix
}

/// Removes temporary files beside `path` that no live writer holds: those of a writer
/// killed before its commit. A writer locks its temporary file for its whole life, so a
/// file whose lock can be taken is stale.
fn remove_stale_tmp(path: &Path) {
    let prefix = tmp_prefix(path);
    let Ok(entries) = fs::read_dir(parent_dir(path)) else { return };
    for entry in entries.flatten() {
        if !entry.file_name().as_encoded_bytes().starts_with(prefix.as_encoded_bytes()) {
            continue;
        }
        let stale = OpenOptions::new().write(true).open(entry.path()).is_ok_and(|f| f.try_lock().is_ok());
        if stale && fs::remove_file(entry.path()).is_ok() {
            tracing::info!("removed {}, left by an interrupted run", entry.path().display());
        }
    }
}

/// A file written in pieces that appears at its path whole or not at all: writes go to a
/// temporary file beside it, [`AtomicFile::commit`] syncs it and renames it over `path`;
/// dropped without a commit, the temporary file is removed and `path` is untouched.
/// For outputs too large to hold in memory; [`write_file_atomic`] is the one-buffer form.
///
/// A file that exists keeps its permissions; one the user cannot write to is refused.
/// The temporary file (`<name>.tmp-<pid>`) is locked while written, so that temporary
/// files of killed writers are recognised and removed by the next writer of `path`.
///
/// Only regular files are replaced: a symbolic link is followed and its target replaced
/// (the link stays), and a character device (`/dev/null`) or a FIFO is written in place.
#[derive(Debug)]
pub struct AtomicFile {
    path: PathBuf,
    /// The temporary file; `None` when writing a device or FIFO in place.
    tmp: Option<PathBuf>,
    permissions: Option<fs::Permissions>,
    file: Option<std::io::BufWriter<File>>,
}

impl AtomicFile {
    pub fn create(path: &Path) -> std::io::Result<Self> {
        let target = resolve_links(path)?;
        if let OutputKind::Special = output_kind(&target)? {
            let file = open_special(&target)?;
            return Ok(Self {
                path: target,
                tmp: None,
                permissions: None,
                file: Some(std::io::BufWriter::with_capacity(1 << 20, file)),
            });
        }
        let permissions = check_replaceable(&target)
            .map_err(|e| std::io::Error::new(e.kind(), format!("cannot replace {}: {e}", path.display())))?;
        remove_stale_tmp(&target);
        let mut name = tmp_prefix(&target);
        name.push(std::process::id().to_string());
        let tmp = target.with_file_name(name);
        let file = File::create(&tmp).map_err(|e| {
            std::io::Error::new(e.kind(), format!("cannot create the temporary file {} beside it: {e}", tmp.display()))
        })?;
        file.lock()?;
        Ok(Self {
            path: target,
            tmp: Some(tmp),
            permissions,
            file: Some(std::io::BufWriter::with_capacity(1 << 20, file)),
        })
    }

    /// Syncs the data and renames it over the destination (a device or FIFO: flushes).
    pub fn commit(self) -> std::io::Result<()> {
        self.stage()?.commit()
    }

    /// Syncs the data beside the destination, its rename left to [`Staged::commit`] (a
    /// device or FIFO: flushed, written already).
    pub fn stage(mut self) -> std::io::Result<Staged> {
        let tmp = self.tmp.take();
        let result = (|| {
            let file = self.file.take().expect("an uncommitted file").into_inner().map_err(|e| e.into_error())?;
            if tmp.is_none() {
                return Ok(None);
            }
            if let Some(permissions) = self.permissions.take() {
                file.set_permissions(permissions)?;
            }
            file.sync_all()?;
            Ok(Some(file))
        })();
        match result {
            Ok(file) => Ok(Staged { path: self.path.clone(), tmp, _file: file }),
            Err(e) => {
                if let Some(tmp) = &tmp {
                    let _ = fs::remove_file(tmp);
                }
                Err(e)
            }
        }
    }
}

/// An output written whole beside its destination and not yet in its place
/// ([`AtomicFile::stage`]): [`Staged::commit`] renames it over the destination; dropped
/// uncommitted, it is removed and the destination keeps its old bytes. Its temporary file
/// stays locked until then, so no other writer takes it for stale.
#[derive(Debug)]
#[must_use = "a staged file reaches its destination only when committed"]
pub struct Staged {
    path: PathBuf,
    /// None: a device or FIFO, written in place already.
    tmp: Option<PathBuf>,
    _file: Option<File>,
}

impl Staged {
    /// Renames the file over its destination.
    pub fn commit(mut self) -> std::io::Result<()> {
        match self.tmp.take() {
            Some(tmp) => fs::rename(&tmp, &self.path).inspect_err(|_| {
                let _ = fs::remove_file(&tmp);
            }),
            None => Ok(()),
        }
    }

    /// Where the file goes.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Where its bytes are now: the temporary file beside the destination (a device or
    /// FIFO: the destination itself, already written).
    pub fn written(&self) -> &Path {
        self.tmp.as_deref().unwrap_or(&self.path)
    }
}

impl Drop for Staged {
    fn drop(&mut self) {
        if let Some(tmp) = &self.tmp {
            let _ = fs::remove_file(tmp);
        }
    }
}

impl AtomicFile {
    /// Appends the rest of `from`, copied by the kernel where it can
    /// (`copy_file_range`): the bytes never pass through this process.
    pub fn append_file(&mut self, from: &mut File) -> std::io::Result<u64> {
        std::io::copy(from, self.file.as_mut().expect("an uncommitted file"))
    }
}

impl Write for AtomicFile {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.file.as_mut().expect("an uncommitted file").write(buf)
    }

    fn write_all(&mut self, buf: &[u8]) -> std::io::Result<()> {
        self.file.as_mut().expect("an uncommitted file").write_all(buf)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.file.as_mut().expect("an uncommitted file").flush()
    }
}

impl Drop for AtomicFile {
    fn drop(&mut self) {
        if let (Some(_), Some(tmp)) = (self.file.take(), &self.tmp) {
            let _ = fs::remove_file(tmp);
        }
    }
}
