//! Reading safetensors files with bounds, and atomic writes that leave no temporaries behind.
//!
//! A save writes `.{name}.tmp{pid}.{n}` beside the target, holding an exclusive lock on it
//! (`flock`, which the OS releases when the writer dies, even by SIGKILL), then fsync and rename.
//! Each save first removes the temporaries of the same target whose lock it can take: their
//! writer is gone. A live writer's temporary stays locked and is left alone, whatever its age or
//! pid (a pid test would misjudge reused pids and other pid namespaces on a shared disk; an age
//! test would delete a slow live writer's file). Off unix there are no such locks here, and no
//! temporary is ever judged stale.

use super::{bad, io_err};
use crate::{Device, Error, Result};
use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

/// Bytes of the little-endian header length that starts a safetensors file.
const LEN_BYTES: u64 = 8;

/// What kind of non-regular file `t` is, for the error message.
fn kind(t: std::fs::FileType) -> &'static str {
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        if t.is_char_device() {
            return "a character device";
        }
        if t.is_block_device() {
            return "a block device";
        }
        if t.is_fifo() {
            return "a FIFO";
        }
        if t.is_socket() {
            return "a socket";
        }
    }
    if t.is_dir() {
        "a directory"
    } else {
        "not a file"
    }
}

/// Read a whole safetensors file, refusing before any large allocation: anything but a regular
/// file (devices such as `/dev/zero` never end, FIFOs block), files shorter than the header
/// length, and header lengths past the end of the file.
pub(crate) fn read_safetensors(path: &Path) -> Result<Vec<u8>> {
    let not_regular = |t| {
        bad(
            path,
            format!(
                "not a regular file ({}); a safetensors file is expected",
                kind(t)
            ),
        )
    };
    // Checked before opening: opening a FIFO would wait for a writer.
    let meta = std::fs::metadata(path).map_err(|e| io_err(path, e))?;
    if !meta.is_file() {
        return Err(not_regular(meta.file_type()));
    }
    let mut f = File::open(path).map_err(|e| io_err(path, e))?;
    let meta = f.metadata().map_err(|e| io_err(path, e))?;
    if !meta.is_file() {
        return Err(not_regular(meta.file_type()));
    }
    let len = meta.len();
    if len < LEN_BYTES {
        return Err(bad(
            path,
            format!(
                "not a valid safetensors file: {len} bytes, shorter than its 8-byte header length"
            ),
        ));
    }
    let mut head = [0u8; LEN_BYTES as usize];
    f.read_exact(&mut head).map_err(|e| io_err(path, e))?;
    let header = u64::from_le_bytes(head);
    if header > len - LEN_BYTES {
        return Err(bad(
            path,
            format!(
                "not a valid safetensors file: header length {header} runs past the end of \
                 the file ({len} bytes); truncated?"
            ),
        ));
    }
    let mut bytes = Vec::new();
    usize::try_from(len)
        .ok()
        .and_then(|n| bytes.try_reserve_exact(n).ok())
        .ok_or_else(|| Error::oom("io::load", Device::Cpu, len))?;
    bytes.extend_from_slice(&head);
    // Bounded by the size seen above, should the file grow meanwhile.
    f.take(len - LEN_BYTES)
        .read_to_end(&mut bytes)
        .map_err(|e| io_err(path, e))?;
    Ok(bytes)
}

/// Whether `file` names a temporary of a save to `name` (today's `.{name}.tmp{pid}.{n}`, or the
/// `.{name}.tmp{pid}` of earlier versions).
fn is_temporary_of(file: &str, name: &str) -> bool {
    let Some(rest) = file
        .strip_prefix('.')
        .and_then(|f| f.strip_prefix(name))
        .and_then(|f| f.strip_prefix(".tmp"))
    else {
        return false;
    };
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    match rest.split_once('.') {
        Some((pid, n)) => digits(pid) && digits(n),
        None => digits(rest),
    }
}

/// Remove the temporaries of saves to `name` in `dir` whose writer is gone (their lock is free).
/// Best effort: a file that cannot be opened or locked is left alone.
fn remove_stale_temporaries(dir: &Path, name: &str) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        if !is_temporary_of(&entry.file_name().to_string_lossy(), name) {
            continue;
        }
        let path = entry.path();
        let Ok(f) = File::open(&path) else { continue };
        if lock(&f, false) {
            let _ = std::fs::remove_file(&path);
        }
    }
}

/// Take an exclusive advisory lock on `f`, held until `f` closes and released by the OS when the
/// holder dies. `wait`: block until it is free; else give up at once if it is held. False when
/// not taken, or where there are no such locks (every target but unix).
fn lock(f: &File, wait: bool) -> bool {
    #[cfg(unix)]
    {
        use std::os::unix::io::AsRawFd;
        let op = libc::LOCK_EX | if wait { 0 } else { libc::LOCK_NB };
        loop {
            // SAFETY: flock only reads the descriptor, which `f` keeps open during the call.
            if unsafe { libc::flock(f.as_raw_fd(), op) } == 0 {
                return true;
            }
            if std::io::Error::last_os_error().kind() != std::io::ErrorKind::Interrupted {
                return false;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = (f, wait);
        false
    }
}

/// Whether `f` is still the file at `path` (a cleaner may have removed the name between our
/// create and lock).
fn still_named(f: &File, path: &Path) -> bool {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        match (f.metadata(), std::fs::metadata(path)) {
            (Ok(a), Ok(b)) => a.dev() == b.dev() && a.ino() == b.ino(),
            _ => false,
        }
    }
    #[cfg(not(unix))]
    {
        let _ = f;
        path.exists()
    }
}

/// Create and lock a fresh temporary for a save to `name` in `dir`.
fn create_temporary(dir: &Path, name: &str) -> std::io::Result<(std::path::PathBuf, File)> {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let mut last = None;
    for _ in 0..64 {
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let tmp = dir.join(format!(".{name}.tmp{}.{n}", std::process::id()));
        let f = match OpenOptions::new().write(true).create_new(true).open(&tmp) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                last = Some(e);
                continue;
            }
            Err(e) => return Err(e),
        };
        // Where the file system has no locks, cleaners cannot take one either: write unlocked.
        if !lock(&f, true) || still_named(&f, &tmp) {
            return Ok((tmp, f));
        }
    }
    Err(last.unwrap_or_else(|| std::io::Error::other("could not create a temporary file")))
}

/// Write `bytes` to `path` atomically: a crash mid-write never damages an existing file there,
/// and the temporaries of saves that crashed earlier are removed. The bytes go to a locked
/// temporary beside `path`, are fsynced, then renamed over it. An I/O failure, or a `path`
/// without a file name, is an [`Error::Io`] naming the path.
///
/// ```
/// let dir = std::env::temp_dir().join(format!("wgtorch-doc-atomic-{}", std::process::id()));
/// std::fs::create_dir_all(&dir).unwrap();
/// let path = dir.join("notes.txt");
/// wgtorch::io::write_atomic(&path, b"first")?;
/// wgtorch::io::write_atomic(&path, b"second")?; // replaces it whole
/// assert_eq!(std::fs::read(&path).unwrap(), b"second");
/// assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 1); // no temporary left behind
/// std::fs::remove_dir_all(&dir).unwrap();
/// # Ok::<(), wgtorch::Error>(())
/// ```
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().to_string())
        .ok_or_else(|| bad(path, "cannot save: the path has no file name"))?;
    remove_stale_temporaries(dir, &name);
    let (tmp, mut f) = create_temporary(dir, &name).map_err(|e| io_err(path, e))?;
    let res = (|| -> std::io::Result<()> {
        f.write_all(bytes)?;
        f.sync_all()?;
        std::fs::rename(&tmp, path)?;
        if let Ok(d) = File::open(dir) {
            let _ = d.sync_all();
        }
        Ok(())
    })();
    if res.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    res.map_err(|e| io_err(path, e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn temporary_names() {
        for f in [".ck.tmp12", ".ck.tmp12.0", ".ck.tmp1.99"] {
            assert!(is_temporary_of(f, "ck"), "{f}");
        }
        for f in [
            ".ck.tmp",
            ".ck.tmp1.",
            ".ck.tmpx",
            ".ck.tmp1.tmp2.0",
            "ck.tmp1",
            ".cd.tmp1",
        ] {
            assert!(!is_temporary_of(f, "ck"), "{f}");
        }
    }

    #[cfg(unix)]
    #[test]
    fn live_writers_temporary_is_kept() {
        let dir = std::env::temp_dir().join(format!("wgtorch-io-live-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("mkdir");
        let path = dir.join("ck");
        // Held as a live writer holds it (another open file description, as another process).
        let (live, held) = create_temporary(&dir, "ck").expect("temporary");
        let stale = dir.join(".ck.tmp1.1");
        std::fs::write(&stale, b"x").expect("write");
        write_atomic(&path, b"saved").expect("save");
        assert!(live.exists(), "a live writer's temporary was removed");
        assert!(!stale.exists(), "a dead writer's temporary was kept");
        drop(held);
        write_atomic(&path, b"saved").expect("save");
        assert!(!live.exists(), "a temporary whose writer is gone was kept");
        std::fs::remove_dir_all(&dir).ok();
    }
}
