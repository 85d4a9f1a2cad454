//! The files and directories srt writes: never through a symbolic link, never in a
//! directory another user can write.
//!
//! Everything srt keeps for a deployment (state, journal, lock, leases, logs, generated
//! run files, benchmark results, saved plans) goes through this module:
//!
//! - every file is opened with `O_NOFOLLOW` (a link planted at its name is refused,
//!   never followed), files it creates fresh with `O_EXCL` too, and a file it opens
//!   must be a regular file owned by the user running srt;
//! - a directory srt writes in ([`private_dir`]) is created with mode 0700, and is
//!   refused when it is a link, is not owned by the user, or can be written by group or
//!   others; each directory above it must belong to the user or to root and, if group
//!   or others can write it, carry the sticky bit (as `/tmp` does), so nobody else can
//!   swap it for one of their own;
//! - temporary files get an unpredictable name ([`write_atomic`]).
//!
//! A refusal is an [`io::Error`] of kind `PermissionDenied` whose inner error is an
//! [`Untrusted`]: callers keep their own error types, and the message names the path
//! and what is wrong with it.

use std::fs::{DirBuilder, File, Metadata, OpenOptions};
use std::io::{self, Read, Write};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use nix::libc;

/// Flags added to every open: links are refused, descriptors never leak into children.
const SAFE_FLAGS: i32 = libc::O_NOFOLLOW | libc::O_CLOEXEC;

/// Mode bits that let group or others write.
const WRITABLE_BY_OTHERS: u32 = 0o022;

/// A path srt refuses to use, and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{} {why}", path.display())]
pub struct Untrusted {
    /// The file or directory.
    pub path: PathBuf,
    /// What is wrong with it.
    pub why: Why,
}

/// Why a path is not trusted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Why {
    /// Owned by another user.
    #[error("is owned by uid {owner}, not by uid {uid} running srt")]
    Owner {
        /// Its owner.
        owner: u32,
        /// The effective uid of srt.
        uid: u32,
    },
    /// Group or others may write it.
    #[error("can be written by other users (mode {mode:04o})")]
    Writable {
        /// Its permission bits.
        mode: u32,
    },
    /// A symbolic link where srt expects a directory of its own.
    #[error("is a symbolic link")]
    Link,
    /// Not a directory.
    #[error("is not a directory")]
    NotDirectory,
    /// Not a regular file (a device, a FIFO, a directory).
    #[error("is not a regular file")]
    NotFile,
}

impl Untrusted {
    /// What srt trusts, and the ways out: the help of every refusal.
    pub const HELP: &'static str = "srt keeps state, logs and leases only in a directory \
        that you own and nobody else can write, under directories that are yours or \
        root's (sticky where others can write, as /tmp is), and never follows a link at \
        a file it writes. Fix the directory (`chown` it, `chmod go-w` it) or pass another \
        --state-dir";

    fn new(path: &Path, why: Why) -> Self {
        Untrusted {
            path: path.to_path_buf(),
            why,
        }
    }

    /// The refusal inside `error`, if it is one.
    pub fn of(error: &io::Error) -> Option<&Untrusted> {
        error.get_ref()?.downcast_ref::<Untrusted>()
    }
}

impl From<Untrusted> for io::Error {
    fn from(u: Untrusted) -> Self {
        io::Error::new(io::ErrorKind::PermissionDenied, u)
    }
}

/// The effective uid of this process.
fn euid() -> u32 {
    nix::unistd::geteuid().as_raw()
}

/// Creates `dir` and its missing parents (mode 0700) and checks that srt may write in
/// it: see the module docs.
pub fn private_dir(dir: &Path) -> io::Result<()> {
    DirBuilder::new().recursive(true).mode(0o700).create(dir)?;
    check_dir(dir)
}

/// Checks an existing directory srt writes in, and the directories above it.
pub fn check_dir(dir: &Path) -> io::Result<()> {
    let dir = std::path::absolute(dir)?;
    own_dir(&dir, &std::fs::symlink_metadata(&dir)?)?;
    for above in dir.ancestors().skip(1) {
        ancestor(above, &std::fs::metadata(above)?)?;
    }
    Ok(())
}

/// A directory srt writes in: a real directory of the user's that nobody else writes.
fn own_dir(path: &Path, meta: &Metadata) -> Result<(), Untrusted> {
    if meta.file_type().is_symlink() {
        return Err(Untrusted::new(path, Why::Link));
    }
    if !meta.is_dir() {
        return Err(Untrusted::new(path, Why::NotDirectory));
    }
    owned(path, meta, &[euid()])?;
    if meta.mode() & WRITABLE_BY_OTHERS != 0 {
        return Err(Untrusted::new(
            path,
            Why::Writable {
                mode: meta.mode() & 0o7777,
            },
        ));
    }
    Ok(())
}

/// A directory above one srt writes in: the user's or root's, and if others may write
/// it, sticky (they cannot rename or remove what is not theirs).
fn ancestor(path: &Path, meta: &Metadata) -> Result<(), Untrusted> {
    owned(path, meta, &[euid(), 0])?;
    let sticky = meta.mode() & 0o1000 != 0;
    if meta.mode() & WRITABLE_BY_OTHERS != 0 && !sticky {
        return Err(Untrusted::new(
            path,
            Why::Writable {
                mode: meta.mode() & 0o7777,
            },
        ));
    }
    Ok(())
}

/// Checks a file srt reads but did not write, to run what it holds (a recipe's setup
/// script): `meta` (of the opened file) must be a regular file of the user's or root's
/// that group and others cannot write, and every directory above `path` and above the
/// file it resolves to the user's or root's, sticky where others can write (so nobody
/// else can change what it holds, or put another file in its place).
pub fn check_foreign_file(path: &Path, meta: &Metadata) -> io::Result<()> {
    if !meta.is_file() {
        return Err(Untrusted::new(path, Why::NotFile).into());
    }
    owned(path, meta, &[euid(), 0])?;
    if meta.mode() & WRITABLE_BY_OTHERS != 0 {
        return Err(Untrusted::new(
            path,
            Why::Writable {
                mode: meta.mode() & 0o7777,
            },
        )
        .into());
    }
    let written = std::path::absolute(path)?;
    let real = std::fs::canonicalize(path)?;
    for above in written.ancestors().skip(1).chain(real.ancestors().skip(1)) {
        ancestor(above, &std::fs::metadata(above)?)?;
    }
    Ok(())
}

fn owned(path: &Path, meta: &Metadata, owners: &[u32]) -> Result<(), Untrusted> {
    if owners.contains(&meta.uid()) {
        Ok(())
    } else {
        Err(Untrusted::new(
            path,
            Why::Owner {
                owner: meta.uid(),
                uid: euid(),
            },
        ))
    }
}

/// An opened file srt keeps: a regular file of the user's.
fn own_file(path: &Path, file: File) -> io::Result<File> {
    let meta = file.metadata()?;
    if !meta.is_file() {
        return Err(Untrusted::new(path, Why::NotFile).into());
    }
    owned(path, &meta, &[euid()])?;
    Ok(file)
}

/// Opens `path` for appending, creating it (mode 0600) if missing; an existing file is
/// made 0600 (logs can hold tokens and prompts).
pub fn open_append(path: &Path) -> io::Result<File> {
    let file = OpenOptions::new()
        .append(true)
        .create(true)
        .mode(0o600)
        .custom_flags(SAFE_FLAGS)
        .open(path)?;
    let file = own_file(path, file)?;
    if file.metadata()?.mode() & 0o777 != 0o600 {
        file.set_permissions(std::fs::Permissions::from_mode(0o600))?;
    }
    Ok(file)
}

/// Opens `path` for reading and writing, creating it (mode 0600) if missing, without
/// truncating it.
pub fn open_rw(path: &Path) -> io::Result<File> {
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        .custom_flags(SAFE_FLAGS)
        .open(path)?;
    own_file(path, file)
}

/// Opens `path` for writing from empty, creating it (mode 0600) if missing.
pub fn open_truncate(path: &Path) -> io::Result<File> {
    let file = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .custom_flags(SAFE_FLAGS)
        .open(path)?;
    own_file(path, file)
}

/// Creates `path` (mode 0600); fails if anything, a link included, is already there.
pub fn create_new(path: &Path) -> io::Result<File> {
    OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(SAFE_FLAGS)
        .open(path)
}

/// Opens an existing file of srt's for reading.
pub fn open_read(path: &Path) -> io::Result<File> {
    let file = OpenOptions::new()
        .read(true)
        .custom_flags(SAFE_FLAGS)
        .open(path)?;
    own_file(path, file)
}

/// Reads an existing file of srt's whole.
pub fn read(path: &Path) -> io::Result<Vec<u8>> {
    let mut bytes = Vec::new();
    open_read(path)?.read_to_end(&mut bytes)?;
    Ok(bytes)
}

/// Writes `bytes` to `path` atomically with mode 0600: a temporary file of an
/// unpredictable name in the same directory (created with `O_EXCL | O_NOFOLLOW`),
/// fsynced, renamed over `path` (a rename replaces a link at `path`, never follows it).
pub fn write_atomic(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let name = path.file_name().map(|n| n.to_string_lossy());
    let tmp = dir.join(format!(
        ".{}.{}.tmp",
        name.unwrap_or_default(),
        uuid::Uuid::new_v4().simple()
    ));
    let written = create_new(&tmp).and_then(|mut f| {
        f.write_all(bytes)?;
        f.sync_all()
    });
    let renamed = written.and_then(|()| std::fs::rename(&tmp, path));
    if renamed.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    renamed
}

/// Whether an I/O error means the filesystem is full (no space, or over quota).
pub fn is_no_space(error: &io::Error) -> bool {
    matches!(
        error.raw_os_error(),
        Some(libc::ENOSPC) | Some(libc::EDQUOT)
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    fn mode(path: &Path, mode: u32) {
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
    }

    fn why(result: io::Result<impl Sized>) -> Why {
        let error = result.err().expect("refused");
        Untrusted::of(&error)
            .unwrap_or_else(|| panic!("not a refusal: {error}"))
            .why
            .clone()
    }

    #[test]
    fn a_private_dir_is_created_0700_and_accepted() {
        let t = tempfile::tempdir().unwrap();
        let d = t.path().join("a/b");
        private_dir(&d).unwrap();
        let m = std::fs::metadata(&d).unwrap().mode() & 0o777;
        assert_eq!(m, 0o700);
        private_dir(&d).unwrap();
    }

    #[test]
    fn a_directory_others_can_write_is_refused() {
        let t = tempfile::tempdir().unwrap();
        let d = t.path().join("shared");
        std::fs::create_dir(&d).unwrap();
        mode(&d, 0o777);
        assert_eq!(why(private_dir(&d)), Why::Writable { mode: 0o777 });
        mode(&d, 0o770);
        assert_eq!(why(check_dir(&d)), Why::Writable { mode: 0o770 });
        // Below it, even a private directory is refused: the one above can be swapped.
        mode(&d, 0o777);
        let inner = d.join("inner");
        std::fs::create_dir(&inner).unwrap();
        mode(&inner, 0o700);
        assert_eq!(why(check_dir(&inner)), Why::Writable { mode: 0o777 });
        // Sticky above is fine, as /tmp is.
        mode(&d, 0o1777);
        check_dir(&inner).unwrap();
    }

    #[test]
    fn a_link_where_a_directory_goes_is_refused() {
        let t = tempfile::tempdir().unwrap();
        let real = t.path().join("real");
        std::fs::create_dir(&real).unwrap();
        let link = t.path().join("link");
        symlink(&real, &link).unwrap();
        assert_eq!(why(private_dir(&link)), Why::Link);
    }

    #[test]
    fn links_at_file_names_are_never_followed() {
        let t = tempfile::tempdir().unwrap();
        let target = t.path().join("target");
        std::fs::write(&target, "keep\n").unwrap();
        mode(&target, 0o644);
        let link = t.path().join("link");
        symlink(&target, &link).unwrap();
        assert!(open_append(&link).is_err());
        assert!(open_rw(&link).is_err());
        assert!(open_truncate(&link).is_err());
        assert!(create_new(&link).is_err());
        assert!(read(&link).is_err());
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "keep\n");
        let m = std::fs::metadata(&target).unwrap().mode() & 0o777;
        assert_eq!(m, 0o644, "the target's mode is untouched");
    }

    #[test]
    fn a_device_is_not_a_file_of_srt() {
        assert_eq!(why(read(Path::new("/dev/null"))), Why::NotFile);
    }

    #[test]
    fn atomic_writes_go_through_a_fresh_name_and_replace_a_link() {
        let t = tempfile::tempdir().unwrap();
        let target = t.path().join("secret-target");
        std::fs::write(&target, "keep\n").unwrap();
        let plan = t.path().join("plan.json");
        symlink(&target, &plan).unwrap();
        write_atomic(&plan, b"{}\n").unwrap();
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "keep\n");
        let m = std::fs::symlink_metadata(&plan).unwrap();
        assert!(m.is_file(), "the link itself was replaced by the file");
        assert_eq!(m.mode() & 0o777, 0o600);
        let names: Vec<_> = std::fs::read_dir(t.path()).unwrap().flatten().collect();
        assert_eq!(names.len(), 2, "no temporary file is left");
    }
}
