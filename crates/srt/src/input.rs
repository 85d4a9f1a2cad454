//! Files srt reads whole that the user points it at but does not write for it: a model's
//! `config.json`, a benchmark's tokenizer and dataset. Each is read only when it is a
//! regular file, and only up to a limit of its [`Input`] kind: a FIFO or a device such
//! as `/dev/zero` would never end, and a file of many gigabytes would be held in memory
//! whole. The limits are far above any real file of the kind
//! (`docs/reliability.md`, "Bounded inputs and env").

use std::io::Read;
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

/// A kind of file srt reads whole, with its limit and the key that names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Input {
    /// What the file is, for messages (`the model's config.json`).
    pub what: &'static str,
    /// The most bytes srt reads of it.
    pub limit: u64,
    /// The recipe key that names the file, for the help.
    pub key: &'static str,
}

/// A model's `config.json` (real ones are a few KiB; multimodal ones tens of KiB).
pub const MODEL_CONFIG: Input = Input {
    what: "the model's config.json",
    limit: 16 << 20,
    key: "model.path",
};

/// A `tokenizer.json` (the largest vocabularies make files of about 35 MiB).
pub const TOKENIZER: Input = Input {
    what: "the tokenizer",
    limit: 256 << 20,
    key: "benchmark.tokenizer",
};

/// A tokenizer's `tokenizer_config.json`, read for its chat template and special
/// tokens (real ones are KiB to a few MiB, those listing many added tokens the most).
pub const TOKENIZER_CONFIG: Input = Input {
    what: "the tokenizer's config",
    limit: 64 << 20,
    key: "benchmark.tokenizer",
};

/// A tokenizer's `chat_template.jinja` (real ones are a few KiB).
pub const CHAT_TEMPLATE: Input = Input {
    what: "the tokenizer's chat template",
    limit: 16 << 20,
    key: "benchmark.tokenizer",
};

/// A ShareGPT-style benchmark dataset (the usual ShareGPT V3 file is about 670 MB).
pub const DATASET: Input = Input {
    what: "the dataset",
    limit: 1 << 30,
    key: "benchmark.dataset_path",
};

/// A script a recipe runs before its processes' programs (`setup_script`,
/// `host_setup`): real ones are a few KiB.
pub const SETUP_SCRIPT: Input = Input {
    what: "the setup script",
    limit: 1 << 20,
    key: "setup_script",
};

/// Why a file was not read.
#[derive(Debug, thiserror::Error, miette::Diagnostic)]
pub enum InputError {
    /// It cannot be opened or read.
    #[error("cannot read {what} {}: {source}", path.display())]
    #[diagnostic(
        code(srt::input::read),
        help("check `{key}` and the file's permissions")
    )]
    Read {
        /// What it is.
        what: &'static str,
        /// The file.
        path: PathBuf,
        /// The recipe key naming it.
        key: &'static str,
        /// The error.
        source: std::io::Error,
    },
    /// It is a directory, a FIFO, a socket or a device, not a regular file.
    #[error("{what} {} is a {kind}, not a regular file", path.display())]
    #[diagnostic(
        code(srt::input::not_a_file),
        help("set `{key}` to a regular file: srt reads it whole, and a FIFO or a device such as /dev/zero may never end")
    )]
    NotAFile {
        /// What it is.
        what: &'static str,
        /// The file.
        path: PathBuf,
        /// The recipe key naming it.
        key: &'static str,
        /// What it is instead.
        kind: &'static str,
    },
    /// Someone else could change what it holds (its owner, its mode, a directory
    /// above it), and srt would run it.
    #[error("{what} {}: {source}", path.display())]
    #[diagnostic(
        code(srt::input::untrusted),
        help("srt runs `{key}` in every process that uses it: it must be a file of yours (or root's) that nobody else can write, in directories nobody else can change (`chmod go-w` it and the directories above it)")
    )]
    Untrusted {
        /// What it is.
        what: &'static str,
        /// The file.
        path: PathBuf,
        /// The recipe key naming it.
        key: &'static str,
        /// What is wrong.
        source: std::io::Error,
    },
    /// It is longer than its kind's limit.
    #[error("{what} {} is larger than {} MiB, the most srt reads of it", path.display(), limit >> 20)]
    #[diagnostic(
        code(srt::input::too_large),
        help("set `{key}` to the intended file, or a smaller one; no real file of this kind comes near the limit")
    )]
    TooLarge {
        /// What it is.
        what: &'static str,
        /// The file.
        path: PathBuf,
        /// The recipe key naming it.
        key: &'static str,
        /// The limit, in bytes.
        limit: u64,
    },
}

impl InputError {
    /// The message and its help on one line, for callers whose errors are text.
    pub fn with_help(&self) -> String {
        match miette::Diagnostic::help(self) {
            Some(help) => format!("{self}; {help}"),
            None => self.to_string(),
        }
    }
}

/// The bytes of the regular file at `path`, at most `input.limit` of them. The type is
/// that of the opened file (no race with a rename), opened without blocking so that a
/// FIFO without a writer is refused rather than waited on.
pub fn read(path: &Path, input: Input) -> Result<Vec<u8>, InputError> {
    let io = |source| InputError::Read {
        what: input.what,
        path: path.to_path_buf(),
        key: input.key,
        source,
    };
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(nix::libc::O_NONBLOCK)
        .open(path)
        .map_err(io)?;
    let kind = file.metadata().map_err(io)?.file_type();
    if !kind.is_file() {
        return Err(InputError::NotAFile {
            what: input.what,
            path: path.to_path_buf(),
            key: input.key,
            kind: kind_name(kind),
        });
    }
    let mut bytes = Vec::new();
    // One byte past the limit at most: enough to tell an oversized file apart.
    Read::take(&file, input.limit + 1)
        .read_to_end(&mut bytes)
        .map_err(io)?;
    if bytes.len() as u64 > input.limit {
        return Err(InputError::TooLarge {
            what: input.what,
            path: path.to_path_buf(),
            key: input.key,
            limit: input.limit,
        });
    }
    Ok(bytes)
}

/// [`read_text`] of a file srt will run: refused, before anything is read, unless only
/// the user (or root) can change it ([`crate::files::check_foreign_file`]).
pub fn read_trusted(path: &Path, input: Input) -> Result<String, InputError> {
    let untrusted = |source| InputError::Untrusted {
        what: input.what,
        path: path.to_path_buf(),
        key: input.key,
        source,
    };
    if let Ok(meta) = std::fs::metadata(path) {
        if meta.is_file() {
            crate::files::check_foreign_file(path, &meta).map_err(untrusted)?;
        }
    }
    read_text(path, input)
}

/// [`read`], as UTF-8 text.
pub fn read_text(path: &Path, input: Input) -> Result<String, InputError> {
    let bytes = read(path, input)?;
    String::from_utf8(bytes).map_err(|e| InputError::Read {
        what: input.what,
        path: path.to_path_buf(),
        key: input.key,
        source: std::io::Error::new(std::io::ErrorKind::InvalidData, e.utf8_error()),
    })
}

fn kind_name(kind: std::fs::FileType) -> &'static str {
    if kind.is_dir() {
        "directory"
    } else if kind.is_fifo() {
        "FIFO"
    } else if kind.is_char_device() {
        "character device"
    } else if kind.is_block_device() {
        "block device"
    } else if kind.is_socket() {
        "socket"
    } else {
        "special file"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SMALL: Input = Input {
        what: "the test file",
        limit: 8,
        key: "test.path",
    };

    #[test]
    fn a_regular_file_under_the_limit_is_read() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        std::fs::write(&path, b"12345678").unwrap();
        assert_eq!(read(&path, SMALL).unwrap(), b"12345678");
    }

    #[test]
    fn a_file_past_the_limit_is_refused_naming_it_and_the_limit() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        std::fs::write(&path, b"123456789").unwrap();
        let e = read(&path, SMALL).unwrap_err();
        assert!(matches!(e, InputError::TooLarge { limit: 8, .. }), "{e}");
        assert!(e.to_string().contains(&path.display().to_string()), "{e}");
    }

    #[test]
    fn devices_fifos_and_directories_are_refused_without_reading() {
        let t = std::time::Instant::now();
        let e = read(Path::new("/dev/zero"), MODEL_CONFIG).unwrap_err();
        assert!(e.to_string().contains("character device"), "{e}");
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("fifo");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::S_IRWXU).unwrap();
        let e = read(&fifo, DATASET).unwrap_err();
        assert!(e.to_string().contains("FIFO"), "{e}");
        let e = read(dir.path(), TOKENIZER).unwrap_err();
        assert!(e.to_string().contains("directory"), "{e}");
        assert!(t.elapsed().as_secs() < 2, "nothing was waited on");
    }

    #[test]
    fn a_missing_file_says_so() {
        let e = read(Path::new("/nonexistent/config.json"), MODEL_CONFIG).unwrap_err();
        assert!(
            matches!(e, InputError::Read { ref source, .. } if source.kind() == std::io::ErrorKind::NotFound),
            "{e}"
        );
    }
}
