//! Integration tests of the state store and the deployment lock, through the public
//! API only, on real files and real processes.

use std::collections::BTreeMap;
use std::fs;
use std::io::{BufRead, BufReader};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::json;
use srt::state::{
    LockInfo, ResourceState, Runtime, State, StateError, StateLock, StateStore, Status,
    FORMAT_VERSION,
};

/// A store in a fresh temporary directory (the deployment dir itself does not exist
/// yet, as for a first `srt plan`).
fn store() -> (tempfile::TempDir, StateStore) {
    let tmp = tempfile::tempdir().unwrap();
    let store = StateStore::new(tmp.path().join(".srt").join("demo"));
    (tmp, store)
}

fn resource(i: usize) -> ResourceState {
    ResourceState {
        kind: srt::graph::Kind::Worker,
        hash: blake3::hash(format!("worker {i}").as_bytes())
            .to_hex()
            .to_string(),
        dependencies: if i == 0 {
            vec![]
        } else {
            vec![format!("worker[{}]", i - 1), "allocation".into()]
        },
        spec: srt::graph::Spec::of(&json!({
            "argv": ["vllm", "serve", "/models/llama", "--port", 8000 + i, "--tensor-parallel-size", 2],
            "env": {"CUDA_VISIBLE_DEVICES": "0,1", "VLLM_LOGGING_LEVEL": "INFO", "HF_TOKEN": "***"},
            "devices": [0, 1],
        })),
        status: Status::Running,
        runtime: Some(Runtime::Local {
            pid: 10_000 + i as u32,
            start_time: 123_456 + i as u64,
            pgid: 10_000 + i as u32,
            host: "node1".into(),
            lease: None,
        }),
        node: Some(format!("node{}", i % 8)),
        ports: BTreeMap::from([("http".into(), 8000 + i as u16)]),
        // A recorded log path loads as the one derived from the directory (see
        // `recorded_paths_load_as_the_ones_derived_from_the_directory`).
        log_path: None,
        error: None,
        health: Some(srt::launch::Probe::Http {
            urls: vec![format!("http://<node{}-ip>:{}", i % 8, 8000 + i)],
            path: "/health".into(),
        }),
        deposed: Vec::new(),
    }
}

fn state_with(n: usize) -> State {
    let mut s = State::new("demo");
    s.recipe_hash = Some(blake3::hash(b"recipe").to_hex().to_string());
    for i in 0..n {
        s.resources.insert(format!("worker[{i}]"), resource(i));
    }
    s
}

#[test]
fn recorded_paths_load_as_the_ones_derived_from_the_directory() {
    let dir = tempfile::tempdir().unwrap();
    let store = StateStore::new(dir.path().join("demo"));
    let lock = store.lock("apply", None).unwrap();
    let mut s = state_with(2);
    let r = s.resources.get_mut("worker[0]").unwrap();
    r.log_path = Some(PathBuf::from("/etc/shadow"));
    if let Some(Runtime::Local { lease, .. }) = &mut r.runtime {
        *lease = Some(PathBuf::from("/etc/passwd"));
    }
    store.save(&lock, &mut s).unwrap();
    let loaded = store.load().unwrap().unwrap();
    let abs = std::path::absolute(store.dir()).unwrap();
    let r = &loaded.resources["worker[0]"];
    assert_eq!(
        r.log_path.as_deref(),
        Some(srt::state::log_file(&abs, "worker[0]").as_path())
    );
    assert!(
        matches!(&r.runtime, Some(Runtime::Local { lease: Some(l), .. })
        if *l == srt::state::lease_file(&abs, "worker[0]"))
    );
    // What had no path recorded still has none.
    assert_eq!(loaded.resources["worker[1]"].log_path, None);

    // An address that would name a file elsewhere: the state is refused.
    for bad in ["../../x", ".hidden", "a/b", ""] {
        let mut s = store.load().unwrap().unwrap();
        s.resources.insert(bad.to_string(), resource(9));
        store.save(&lock, &mut s).unwrap();
        let err = store.load().unwrap_err();
        assert!(
            matches!(&err, StateError::Corrupt { detail, .. } if detail.contains("not a name srt gives")),
            "{bad:?}: {err}"
        );
        s.resources.remove(bad);
        store.save(&lock, &mut s).unwrap();
    }
}

fn mode(path: &Path) -> u32 {
    fs::metadata(path).unwrap().permissions().mode() & 0o777
}

/// A state saved in `store` with `n` resources, and the lock it was saved under.
fn saved(store: &StateStore, n: usize) -> (StateLock, State) {
    let lock = store.lock("apply", None).unwrap();
    let mut s = state_with(n);
    assert!(store.save(&lock, &mut s).unwrap());
    (lock, s)
}

#[test]
fn load_of_a_missing_state_is_none_and_creates_nothing() {
    let (_tmp, store) = store();
    assert!(store.load().unwrap().is_none());
    assert!(!store.dir().exists(), "load must not create the directory");
}

#[test]
fn save_then_load_round_trips() {
    let (_tmp, store) = store();
    let (_lock, s) = saved(&store, 3);
    assert_eq!(s.serial, 1);
    let loaded = store.load().unwrap().expect("state exists after save");
    assert_eq!(loaded, s);
    assert_eq!(loaded.format_version, FORMAT_VERSION);
    assert_eq!(loaded.srt_version, env!("CARGO_PKG_VERSION"));
    // Human-readable, deterministic: saving the loaded state again writes the same bytes.
    let text = fs::read_to_string(store.state_path()).unwrap();
    assert!(text.starts_with("{\n  \"format_version\": 2,\n"), "{text}");
    assert!(text.contains("\"status\": \"running\""));
}

#[test]
fn serial_bumps_only_when_content_changes() {
    let (_tmp, store) = store();
    let (lock, mut s) = saved(&store, 2);
    assert_eq!(s.serial, 1);
    let before = fs::read(store.state_path()).unwrap();
    let mtime = fs::metadata(store.state_path())
        .unwrap()
        .modified()
        .unwrap();

    // No change: nothing written, serial kept.
    assert!(!store.save(&lock, &mut s).unwrap());
    assert_eq!(s.serial, 1);
    assert_eq!(fs::read(store.state_path()).unwrap(), before);
    assert_eq!(
        fs::metadata(store.state_path())
            .unwrap()
            .modified()
            .unwrap(),
        mtime
    );

    // A reloaded state is the same content too, whatever the map insertion order.
    let mut reloaded = store.load().unwrap().unwrap();
    assert!(!store.save(&lock, &mut reloaded).unwrap());
    assert_eq!(reloaded.serial, 1);

    // A change bumps the serial by one, on disk as in memory.
    s.resources.get_mut("worker[1]").unwrap().status = Status::Failed;
    assert!(store.save(&lock, &mut s).unwrap());
    assert_eq!(s.serial, 2);
    assert_eq!(store.load().unwrap().unwrap().serial, 2);
    assert!(!store.save(&lock, &mut s).unwrap());
    assert_eq!(s.serial, 2);
}

#[test]
fn backup_holds_the_previous_state() {
    let (_tmp, store) = store();
    let (lock, mut s) = saved(&store, 2);
    assert!(
        !store.backup_path().exists(),
        "the first save has nothing to back up"
    );
    let first = fs::read(store.state_path()).unwrap();

    s.resources.remove("worker[1]");
    assert!(store.save(&lock, &mut s).unwrap());
    assert_eq!(fs::read(store.backup_path()).unwrap(), first);
    let second = fs::read(store.state_path()).unwrap();

    // A no-op save leaves the backup alone.
    assert!(!store.save(&lock, &mut s).unwrap());
    assert_eq!(fs::read(store.backup_path()).unwrap(), first);

    s.recipe_hash = None;
    assert!(store.save(&lock, &mut s).unwrap());
    assert_eq!(fs::read(store.backup_path()).unwrap(), second);
    let backup: State = serde_json::from_slice(&second).unwrap();
    assert_eq!(backup.serial, 2);
    assert_eq!(s.serial, 3);
}

#[test]
fn files_are_private_to_the_user() {
    let (_tmp, store) = store();
    let (lock, mut s) = saved(&store, 1);
    s.resources.clear();
    assert!(store.save(&lock, &mut s).unwrap());
    assert_eq!(mode(store.dir()), 0o700);
    assert_eq!(mode(&store.state_path()), 0o600);
    assert_eq!(mode(&store.backup_path()), 0o600);
    assert_eq!(mode(&store.lock_path()), 0o600);
}

#[test]
fn a_failed_save_leaves_the_old_state_and_serial_untouched() {
    let (_tmp, store) = store();
    let (lock, mut s) = saved(&store, 2);
    let before = fs::read(store.state_path()).unwrap();

    // Block the temporary file's name with a non-empty directory: the write fails
    // (this works as root too, unlike a read-only directory).
    let blocker = store.dir().join("state.json.tmp");
    fs::create_dir(&blocker).unwrap();
    fs::write(blocker.join("x"), b"x").unwrap();
    s.resources.clear();
    let err = store.save(&lock, &mut s).unwrap_err();
    assert!(matches!(err, StateError::Io { .. }), "{err:?}");
    assert_eq!(s.serial, 1, "a failed save must not move the serial");
    assert_eq!(fs::read(store.state_path()).unwrap(), before);

    fs::remove_dir_all(&blocker).unwrap();
    assert!(store.save(&lock, &mut s).unwrap());
    assert_eq!(s.serial, 2);
    assert!(store.load().unwrap().unwrap().resources.is_empty());
}

/// Makes a directory read-only for this test, for root too: a read-only bind mount of
/// the directory onto itself (permissions do not stop root, a read-only mount does);
/// without root, its mode. Undone on drop.
struct ReadOnly {
    dir: std::path::PathBuf,
    mounted: bool,
}

impl ReadOnly {
    fn new(dir: &std::path::Path) -> Self {
        if !nix::unistd::geteuid().is_root() {
            fs::set_permissions(dir, fs::Permissions::from_mode(0o500)).unwrap();
            return ReadOnly {
                dir: dir.to_path_buf(),
                mounted: false,
            };
        }
        let run = |args: &[&str]| {
            let status = std::process::Command::new("mount")
                .args(args)
                .status()
                .unwrap();
            assert!(status.success(), "mount {args:?} failed");
        };
        let d = dir.to_str().unwrap();
        run(&["--bind", d, d]);
        let guard = ReadOnly {
            dir: dir.to_path_buf(),
            mounted: true,
        };
        run(&["-o", "remount,bind,ro", d]);
        guard
    }
}

impl Drop for ReadOnly {
    fn drop(&mut self) {
        if self.mounted {
            let _ = std::process::Command::new("umount").arg(&self.dir).status();
        } else {
            let _ = fs::set_permissions(&self.dir, fs::Permissions::from_mode(0o700));
        }
    }
}

#[test]
fn a_save_into_a_read_only_directory_fails_cleanly() {
    let (_tmp, store) = store();
    let (lock, mut s) = saved(&store, 2);
    let before = fs::read(store.state_path()).unwrap();
    let result = {
        let _ro = ReadOnly::new(store.dir());
        // The directory really refuses writes, whoever we are.
        assert!(fs::write(store.dir().join("probe"), b"x").is_err());
        s.resources.clear();
        store.save(&lock, &mut s)
    };
    assert!(matches!(result, Err(StateError::Io { .. })), "{result:?}");
    assert_eq!(fs::read(store.state_path()).unwrap(), before);
    assert_eq!(s.serial, 1);
}

#[test]
fn a_leftover_temporary_file_from_a_crash_is_ignored_then_replaced() {
    let (_tmp, store) = store();
    let (lock, mut s) = saved(&store, 2);
    fs::write(
        store.dir().join("state.json.tmp"),
        b"{\"format_version\": 1, \"ser",
    )
    .unwrap();
    assert_eq!(store.load().unwrap().unwrap(), s);
    s.resources.clear();
    assert!(store.save(&lock, &mut s).unwrap());
    assert!(!store.dir().join("state.json.tmp").exists());
    assert!(store.load().unwrap().unwrap().resources.is_empty());
}

#[test]
fn readers_always_see_a_complete_state_while_saves_run() {
    let (_tmp, store) = store();
    let (lock, mut s) = saved(&store, 200);
    let reader_store = store.clone();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let reader_stop = stop.clone();
    let reader = std::thread::spawn(move || {
        let mut loads = 0u32;
        let mut last_serial = 0;
        while !reader_stop.load(std::sync::atomic::Ordering::Relaxed) || loads == 0 {
            let state = reader_store
                .load()
                .expect("every load sees a whole file")
                .expect("the state exists");
            assert!(state.serial >= last_serial, "serial went backwards");
            last_serial = state.serial;
            loads += 1;
        }
        loads
    });
    for round in 0..60 {
        let r = s.resources.get_mut("worker[7]").unwrap();
        r.status = if round % 2 == 0 {
            Status::Failed
        } else {
            Status::Running
        };
        assert!(store.save(&lock, &mut s).unwrap());
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let loads = reader.join().unwrap();
    assert!(loads > 0);
    assert_eq!(store.load().unwrap().unwrap().serial, 61);
}

#[test]
fn corrupt_and_truncated_files_are_reported_and_left_untouched() {
    let (_tmp, store) = store();
    let (lock, mut s) = saved(&store, 3);
    s.resources.clear();
    assert!(store.save(&lock, &mut s).unwrap());
    let good = fs::read(store.state_path()).unwrap();
    drop(lock);

    let cases: [(&str, Vec<u8>); 3] = [
        ("truncated", good[..good.len() - 40].to_vec()),
        ("garbage", b"not json at all".to_vec()),
        ("empty", Vec::new()),
    ];
    for (name, bytes) in cases {
        fs::write(store.state_path(), &bytes).unwrap();
        let err = store.load().unwrap_err();
        let StateError::Corrupt {
            path,
            detail,
            backup,
        } = &err
        else {
            panic!("{name}: expected Corrupt, got {err:?}");
        };
        assert_eq!(path, &store.state_path(), "{name}");
        assert!(!detail.is_empty(), "{name}");
        assert_eq!(
            backup.as_deref(),
            Some(store.backup_path().as_path()),
            "{name}"
        );
        assert_eq!(
            fs::read(store.state_path()).unwrap(),
            bytes,
            "{name}: modified"
        );
        let help = miette::Diagnostic::help(&err).unwrap().to_string();
        let cp = format!(
            "cp {} {}",
            store.backup_path().display(),
            store.state_path().display()
        );
        assert!(help.contains(&cp), "{name}: {help}");
        assert_eq!(
            miette::Diagnostic::code(&err).unwrap().to_string(),
            "srt::state::corrupt"
        );
    }
    // The suggested command works.
    fs::copy(store.backup_path(), store.state_path()).unwrap();
    assert_eq!(store.load().unwrap().unwrap().resources.len(), 3);
}

#[test]
fn a_truncated_file_is_called_truncated() {
    let (_tmp, store) = store();
    let (_lock, _s) = saved(&store, 3);
    let good = fs::read(store.state_path()).unwrap();
    fs::write(store.state_path(), &good[..good.len() / 2]).unwrap();
    match store.load() {
        Err(StateError::Corrupt { detail, backup, .. }) => {
            assert!(detail.contains("truncated"), "{detail}");
            assert_eq!(backup, None, "no backup exists after a single save");
        }
        other => panic!("expected Corrupt, got {other:?}"),
    }
}

#[test]
fn a_corrupt_state_is_overwritten_by_a_save_but_the_good_backup_is_kept() {
    let (_tmp, store) = store();
    let (lock, mut s) = saved(&store, 3);
    s.resources.clear();
    assert!(store.save(&lock, &mut s).unwrap());
    let good_backup = fs::read(store.backup_path()).unwrap();
    fs::write(store.state_path(), b"{\"trunc").unwrap();
    s.resources.insert("worker[0]".into(), resource(0));
    assert!(store.save(&lock, &mut s).unwrap());
    assert_eq!(fs::read(store.backup_path()).unwrap(), good_backup);
    assert_eq!(store.load().unwrap().unwrap(), s);
}

#[test]
fn a_newer_format_is_refused_on_load_and_on_save() {
    let (_tmp, store) = store();
    let (lock, mut s) = saved(&store, 1);
    let mut newer: serde_json::Value =
        serde_json::from_slice(&fs::read(store.state_path()).unwrap()).unwrap();
    newer["format_version"] = json!(FORMAT_VERSION + 1);
    newer["srt_version"] = json!("9.9.9");
    let newer = serde_json::to_vec_pretty(&newer).unwrap();
    fs::write(store.state_path(), &newer).unwrap();

    let err = store.load().unwrap_err();
    match &err {
        StateError::NewerFormat {
            found,
            supported,
            written_by,
            ..
        } => {
            assert_eq!(*found, FORMAT_VERSION + 1);
            assert_eq!(*supported, FORMAT_VERSION);
            assert_eq!(written_by.as_deref(), Some("9.9.9"));
        }
        other => panic!("expected NewerFormat, got {other:?}"),
    }
    let help = miette::Diagnostic::help(&err).unwrap().to_string();
    assert!(help.contains("upgrade srt to 9.9.9"), "{help}");

    // A shape this build cannot parse at all is still a newer format, not corrupt.
    fs::write(
        store.state_path(),
        br#"{"format_version": 99, "shards": ["a", "b"]}"#,
    )
    .unwrap();
    assert!(matches!(
        store.load(),
        Err(StateError::NewerFormat { found: 99, .. })
    ));

    // Never overwrite a newer state.
    fs::write(store.state_path(), &newer).unwrap();
    s.resources.clear();
    assert!(matches!(
        store.save(&lock, &mut s),
        Err(StateError::NewerFormat { .. })
    ));
    assert_eq!(fs::read(store.state_path()).unwrap(), newer);
}

#[test]
fn save_refuses_another_lineage_and_an_older_serial() {
    let (_tmp, store) = store();
    let (lock, s) = saved(&store, 1);

    let mut stranger = State::new("demo");
    let err = store.save(&lock, &mut stranger).unwrap_err();
    assert!(matches!(err, StateError::LineageMismatch { .. }), "{err:?}");
    assert_eq!(stranger.serial, 0);

    // Another run saved after we loaded: our copy is stale.
    let mut stale = s.clone();
    let mut newer = s.clone();
    newer.resources.clear();
    assert!(store.save(&lock, &mut newer).unwrap());
    stale.recipe_hash = None;
    let err = store.save(&lock, &mut stale).unwrap_err();
    assert!(
        matches!(
            err,
            StateError::StaleSerial {
                on_disk: 2,
                ours: 1,
                ..
            }
        ),
        "{err:?}"
    );
    assert_eq!(store.load().unwrap().unwrap(), newer);
}

#[test]
fn save_refuses_the_lock_of_another_deployment() {
    let (_tmp, store) = store();
    let other = StateStore::new(store.dir().with_file_name("other"));
    let other_lock = other.lock("apply", None).unwrap();
    let mut s = State::new("demo");
    let err = store.save(&other_lock, &mut s).unwrap_err();
    assert!(matches!(err, StateError::WrongLock { .. }), "{err:?}");
    assert!(!store.state_path().exists());
}

// ---------------------------------------------------------------------------------
// Lock

#[test]
fn a_second_lock_fails_and_names_the_holder() {
    let (_tmp, store) = store();
    let first = store.lock("apply", None).unwrap();
    assert_eq!(first.previous_holder_died(), None);
    assert_eq!(store.read_lock_info().unwrap().as_ref(), Some(first.info()));

    let err = store.lock("plan", None).unwrap_err();
    let StateError::Locked { holder, waited, .. } = &err else {
        panic!("expected Locked, got {err:?}");
    };
    assert_eq!(holder.as_deref(), Some(first.info()));
    assert_eq!(*waited, None);
    let msg = err.to_string();
    let info = first.info();
    assert!(
        msg.contains(&format!("pid {}", std::process::id())),
        "{msg}"
    );
    assert!(
        msg.contains(&format!("{}@{}", info.user, info.host)),
        "{msg}"
    );
    assert!(msg.contains("`apply`") && msg.contains(" UTC"), "{msg}");
    assert_eq!(
        miette::Diagnostic::code(&err).unwrap().to_string(),
        "srt::state::locked"
    );

    // Released on drop, with the record erased: the next holder sees no dead holder.
    drop(first);
    assert_eq!(fs::read(store.lock_path()).unwrap(), b"");
    assert_eq!(store.read_lock_info().unwrap(), None);
    let second = store.lock("plan", None).unwrap();
    assert_eq!(second.previous_holder_died(), None);
    assert_eq!(second.info().operation, "plan");
    second.release().unwrap();
    assert_eq!(store.read_lock_info().unwrap(), None);
    store.lock("plan", None).unwrap();
}

/// A child process holding the lock file with the `flock` command, optionally writing a
/// lock record as srt would. Returns once the child holds the lock.
struct Holder {
    child: Child,
}

impl Holder {
    fn spawn(lock_path: &Path, record: Option<&str>) -> Holder {
        fs::create_dir_all(lock_path.parent().unwrap()).unwrap();
        // `$$` is the pid of the shell, which `exec sleep` keeps; fd 9 (and with it
        // the lock) is inherited by `sleep`.
        let script = r#"
            exec 9<>"$1" || exit 1
            flock -x 9 || exit 1
            if [ -n "$2" ]; then
                printf '%s' "$2" | sed "s/PID/$$/" >&9
            fi
            echo locked
            exec sleep 60
        "#;
        let mut child = Command::new("sh")
            .arg("-c")
            .arg(script)
            .arg("holder")
            .arg(lock_path)
            .arg(record.unwrap_or(""))
            .stdout(Stdio::piped())
            .spawn()
            .expect("sh and flock(1) are available");
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        assert_eq!(line.trim(), "locked", "holder failed to take the lock");
        Holder { child }
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }

    fn kill(mut self) {
        self.child.kill().unwrap();
        self.child.wait().unwrap();
    }
}

impl Drop for Holder {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

const RECORD: &str = r#"{"id":"3f1c9a2e-0000-4000-8000-000000000001","pid":PID,"host":"HOST","user":"alice","operation":"apply","started_at":1764433560}"#;

fn record_for_this_host() -> String {
    let host = nix::unistd::gethostname().unwrap();
    RECORD.replace("HOST", &host.to_string_lossy())
}

#[test]
fn a_lock_held_by_another_process_blocks_us_until_it_dies() {
    let (_tmp, store) = store();
    let holder = Holder::spawn(&store.lock_path(), Some(&record_for_this_host()));
    let holder_pid = holder.pid();

    let err = store.lock("apply", None).unwrap_err();
    let StateError::Locked {
        holder: Some(info), ..
    } = &err
    else {
        panic!("expected Locked with a holder, got {err:?}");
    };
    assert_eq!(info.pid, holder_pid);
    assert_eq!(info.user, "alice");
    assert_eq!(info.holder_alive(), Some(true));
    assert!(
        err.to_string().contains(&format!(
            "locked by pid {holder_pid} (alice@{}), running `apply` since 2025-11-29 16:26:00 UTC",
            info.host
        )),
        "{err}"
    );
    let help = miette::Diagnostic::help(&err).unwrap().to_string();
    assert!(help.contains(&format!("kill -INT {holder_pid}")), "{help}");

    // The holder dies without cleaning up: the kernel frees the lock, and the record it
    // left tells us whom we take over from.
    holder.kill();
    let lock = store.lock("apply", None).unwrap();
    let dead = lock
        .previous_holder_died()
        .expect("the dead holder's record is reported");
    assert_eq!(dead.pid, holder_pid);
    assert_eq!(dead.operation, "apply");
    assert_eq!(dead.holder_alive(), Some(false));
    assert_ne!(lock.info().id, dead.id);
    assert_eq!(lock.info().pid, std::process::id());
    // Our record replaced the dead one.
    assert_eq!(store.read_lock_info().unwrap().as_ref(), Some(lock.info()));
}

#[test]
fn a_holder_that_records_nothing_is_still_a_holder() {
    let (_tmp, store) = store();
    let holder = Holder::spawn(&store.lock_path(), None);
    let err = store.lock("apply", None).unwrap_err();
    assert!(
        matches!(err, StateError::Locked { holder: None, .. }),
        "{err:?}"
    );
    assert!(err.to_string().contains("did not record itself"), "{err}");
    holder.kill();
    let lock = store.lock("apply", None).unwrap();
    assert_eq!(lock.previous_holder_died(), None);
}

#[test]
fn waiting_for_the_lock_times_out() {
    let (_tmp, store) = store();
    let holder = Holder::spawn(&store.lock_path(), Some(&record_for_this_host()));
    let wait = Duration::from_millis(350);
    let start = Instant::now();
    let err = store.lock("apply", Some(wait)).unwrap_err();
    let elapsed = start.elapsed();
    let StateError::Locked {
        holder: Some(info),
        waited: Some(waited),
        ..
    } = &err
    else {
        panic!("expected Locked after waiting, got {err:?}");
    };
    assert_eq!(info.pid, holder.pid());
    assert!(*waited >= wait, "gave up after {waited:?}");
    assert!(elapsed >= wait, "returned after {elapsed:?}");
    assert!(elapsed < wait + Duration::from_secs(2), "took {elapsed:?}");
    assert!(err.to_string().contains("gave up after waiting"), "{err}");
    drop(holder);
}

#[test]
fn waiting_for_the_lock_succeeds_when_the_holder_exits() {
    let (_tmp, store) = store();
    let holder = Holder::spawn(&store.lock_path(), None);
    let pid = nix::unistd::Pid::from_raw(holder.pid() as i32);
    let killer = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(250));
        nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGKILL).unwrap();
        holder
    });
    let start = Instant::now();
    let lock = store
        .lock("apply", Some(Duration::from_secs(10)))
        .expect("the lock is taken once the holder exits");
    assert!(start.elapsed() >= Duration::from_millis(200));
    drop(killer.join().unwrap());
    drop(lock);
}

#[test]
fn lock_info_is_none_without_a_lock_file() {
    let (_tmp, store) = store();
    assert_eq!(store.read_lock_info().unwrap(), None::<LockInfo>);
}

// ---------------------------------------------------------------------------------
// Timing

/// Save and load times for a large state. Not an assertion: run with
/// `cargo test --release --test state -- --ignored --nocapture large_state_timing`.
#[test]
#[ignore = "timing report, run by hand"]
fn large_state_timing() {
    let (_tmp, store) = store();
    let lock = store.lock("apply", None).unwrap();
    let n = 50_000;
    let mut s = state_with(n);

    let t = Instant::now();
    assert!(store.save(&lock, &mut s).unwrap());
    let first_save = t.elapsed();
    let size = fs::metadata(store.state_path()).unwrap().len();

    let t = Instant::now();
    assert!(!store.save(&lock, &mut s).unwrap());
    let noop_save = t.elapsed();

    s.resources.get_mut("worker[25000]").unwrap().status = Status::Failed;
    let t = Instant::now();
    assert!(store.save(&lock, &mut s).unwrap());
    let changed_save = t.elapsed();

    let t = Instant::now();
    let loaded = store.load().unwrap().unwrap();
    let load = t.elapsed();
    assert_eq!(loaded.resources.len(), n);

    eprintln!(
        "{n} resources, {:.1} MB: first save {first_save:?}, no-op save {noop_save:?}, \
         changed save (with backup) {changed_save:?}, load {load:?}",
        size as f64 / 1e6
    );
}

/// Appends record only the changed resources in `state.journal`; a load replays them,
/// and the next save folds them into `state.json` and removes the journal.
#[test]
fn appends_journal_changed_records_and_a_save_folds_them_in() {
    let (_tmp, store) = store();
    let lock = store.lock("apply", None).unwrap();
    let mut state = state_with(50);
    store.save(&lock, &mut state).unwrap();
    let snapshot = fs::read(store.state_path()).unwrap();

    state.resources.get_mut("worker[3]").unwrap().status = Status::Failed;
    state.resources.remove("worker[7]");
    state.resources.insert("worker[99]".into(), resource(99));
    let before = state.serial;
    store
        .append(&lock, &mut state, &["worker[3]", "worker[7]", "worker[99]"])
        .unwrap();
    assert_eq!(state.serial, before + 1);
    // The state file is untouched; the journal holds one line with the three changes.
    assert_eq!(fs::read(store.state_path()).unwrap(), snapshot);
    let journal = fs::read_to_string(store.journal_path()).unwrap();
    assert_eq!(journal.lines().count(), 1, "{journal}");
    assert!(journal.len() < snapshot.len() / 10, "{journal}");
    let mode = fs::metadata(store.journal_path())
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600);
    assert_eq!(store.load().unwrap().unwrap(), state);

    state.resources.get_mut("worker[4]").unwrap().status = Status::Tainted;
    store.append(&lock, &mut state, &["worker[4]"]).unwrap();
    assert_eq!(store.load().unwrap().unwrap(), state);

    assert!(store.save(&lock, &mut state).unwrap());
    assert!(!store.journal_path().exists());
    assert_eq!(store.load().unwrap().unwrap(), state);
    assert_eq!(state.serial, before + 3);
}

/// An append cut short (no final newline) is ignored; a journal left behind by a save
/// cut short after writing `state.json` is skipped; a journal whose net effect is
/// nothing still gets folded (and removed) by the next save.
#[test]
fn torn_and_stale_journal_lines_are_ignored() {
    let (_tmp, store) = store();
    let lock = store.lock("apply", None).unwrap();
    let mut state = state_with(5);
    store.save(&lock, &mut state).unwrap();

    state.resources.get_mut("worker[1]").unwrap().status = Status::Pending;
    store.append(&lock, &mut state, &["worker[1]"]).unwrap();
    let appended = state.clone();
    let mut f = fs::OpenOptions::new()
        .append(true)
        .open(store.journal_path())
        .unwrap();
    std::io::Write::write_all(&mut f, br#"{"lineage":"#).unwrap();
    drop(f);
    assert_eq!(store.load().unwrap().unwrap(), appended);
    // The next append cuts the torn bytes off rather than gluing its line onto them.
    let mut appended = appended;
    appended.resources.get_mut("worker[3]").unwrap().status = Status::Failed;
    store.append(&lock, &mut appended, &["worker[3]"]).unwrap();
    assert_eq!(store.load().unwrap().unwrap(), appended);
    assert!(!fs::read_to_string(store.journal_path())
        .unwrap()
        .contains(r#"{"lineage":{"#));
    state = appended.clone();

    // The save writes state.json; put the old journal back as if the removal never ran.
    let journal = fs::read(store.journal_path()).unwrap();
    state.resources.get_mut("worker[1]").unwrap().status = Status::Running;
    store.save(&lock, &mut state).unwrap();
    fs::write(store.journal_path(), &journal).unwrap();
    assert_eq!(store.load().unwrap().unwrap(), state);

    // Set and put back: the content equals state.json, yet the save must move the
    // serial past the journal and remove it.
    fs::remove_file(store.journal_path()).unwrap();
    let serial = state.serial;
    state.resources.get_mut("worker[2]").unwrap().status = Status::Pending;
    store.append(&lock, &mut state, &["worker[2]"]).unwrap();
    state.resources.get_mut("worker[2]").unwrap().status = Status::Running;
    store.append(&lock, &mut state, &["worker[2]"]).unwrap();
    assert!(store.save(&lock, &mut state).unwrap());
    assert_eq!(state.serial, serial + 3);
    assert!(!store.journal_path().exists());
    assert_eq!(store.load().unwrap().unwrap(), state);
}

/// A damaged journal line, or one that does not continue the state, is refused as
/// corrupt (naming the journal), and loading changes nothing.
#[test]
fn a_damaged_journal_is_refused_as_corrupt() {
    let (_tmp, store) = store();
    let lock = store.lock("apply", None).unwrap();
    let mut state = state_with(3);
    store.save(&lock, &mut state).unwrap();
    for (bad, what) in [
        ("{not json}\n".to_string(), "line 1"),
        (
            format!(
                "{{\"lineage\":\"{}\",\"serial\":{},\"set\":{{}}}}\n",
                state.lineage,
                state.serial + 2
            ),
            "does not follow",
        ),
        (
            format!(
                "{{\"lineage\":\"other\",\"serial\":{},\"set\":{{}}}}\n",
                state.serial + 1
            ),
            "lineage other",
        ),
    ] {
        fs::write(store.journal_path(), &bad).unwrap();
        match store.load() {
            Err(e @ StateError::Corrupt { .. }) => {
                let StateError::Corrupt { path, detail, .. } = &e else {
                    unreachable!()
                };
                assert_eq!(*path, store.journal_path());
                assert!(detail.contains(what), "{detail}");
                // The way out sets the journal aside, falling back to state.json.
                let help = miette::Diagnostic::help(&e).unwrap().to_string();
                assert!(help.contains("state.journal.corrupt"), "{help}");
            }
            other => panic!("expected corrupt, got {other:?}"),
        }
        assert_eq!(fs::read_to_string(store.journal_path()).unwrap(), bad);
    }
}

/// Without a state file, an append is a whole save.
#[test]
fn the_first_append_writes_the_state_file() {
    let (_tmp, store) = store();
    let lock = store.lock("apply", None).unwrap();
    let mut state = state_with(2);
    store.append(&lock, &mut state, &["worker[0]"]).unwrap();
    assert!(!store.journal_path().exists());
    assert_eq!(store.load().unwrap().unwrap(), state);
}

/// Version 1 named resource kinds from a closed list; version 2 names a process by its
/// component. A version 1 file reads as it is, and is written back as version 2.
#[test]
fn a_version_1_state_with_routers_and_nginx_reads_as_components() {
    let (_tmp, store) = store();
    let (lock, s) = saved(&store, 2);
    let mut v1: serde_json::Value =
        serde_json::from_str(&fs::read_to_string(store.state_path()).unwrap()).unwrap();
    v1["format_version"] = json!(1);
    let resources = v1["resources"].as_object_mut().unwrap();
    let worker = resources.values().next().unwrap().clone();
    for (address, kind) in [("router[0]", "router"), ("nginx", "nginx")] {
        let mut r = worker.clone();
        r["kind"] = json!(kind);
        resources.insert(address.into(), r);
    }
    fs::write(store.state_path(), serde_json::to_vec_pretty(&v1).unwrap()).unwrap();
    let mut loaded = store.load().unwrap().unwrap();
    assert_eq!(loaded.format_version, 1);
    let kind = |a: &str| loaded.resources[a].kind.name();
    assert_eq!((kind("router[0]"), kind("nginx")), ("router", "nginx"));
    assert!(loaded.resources["nginx"].kind.is_process());
    assert_eq!(loaded.resources.len(), s.resources.len() + 2);
    assert!(store.save(&lock, &mut loaded).unwrap());
    let text = fs::read_to_string(store.state_path()).unwrap();
    assert!(text.starts_with("{\n  \"format_version\": 2,\n"), "{text}");
}

/// A kind no frontend of this srt has is a corrupt state, named, not a guess.
#[test]
fn a_resource_kind_no_frontend_has_is_refused_by_name() {
    let (_tmp, store) = store();
    let _saved = saved(&store, 1);
    let mut v: serde_json::Value =
        serde_json::from_str(&fs::read_to_string(store.state_path()).unwrap()).unwrap();
    let r = v["resources"]
        .as_object_mut()
        .unwrap()
        .values_mut()
        .next()
        .unwrap();
    r["kind"] = json!("teleporter");
    fs::write(store.state_path(), serde_json::to_vec_pretty(&v).unwrap()).unwrap();
    let e = store.load().unwrap_err().to_string();
    assert!(e.contains("unknown resource kind `teleporter`"), "{e}");
}

/// A state written before records held their health probe (no `health` key) reads,
/// each record without one (status and refresh then probe `GET /health` on its HTTP
/// port, as srt did), and is written back without inventing one; the format version
/// stays: the field is optional, and an older srt reading a newer file ignores it.
#[test]
fn a_state_without_recorded_probes_reads_and_is_written_back_as_it_was() {
    let (_tmp, store) = store();
    let (lock, s) = saved(&store, 3);
    let text = fs::read_to_string(store.state_path()).unwrap();
    assert!(text.contains("\"health\": {"), "{text}");
    let mut older: serde_json::Value = serde_json::from_str(&text).unwrap();
    for r in older["resources"].as_object_mut().unwrap().values_mut() {
        r.as_object_mut().unwrap().remove("health");
    }
    fs::write(
        store.state_path(),
        serde_json::to_vec_pretty(&older).unwrap(),
    )
    .unwrap();
    let mut loaded = store.load().unwrap().unwrap();
    assert_eq!(loaded.format_version, FORMAT_VERSION);
    assert!(loaded.resources.values().all(|r| r.health.is_none()));
    assert_eq!(loaded.resources.len(), s.resources.len());
    assert!(store.save(&lock, &mut loaded).unwrap());
    let text = fs::read_to_string(store.state_path()).unwrap();
    assert!(!text.contains("\"health\""), "{text}");
}

/// A recorded probe survives the journal too: an append and its replay keep it.
#[test]
fn a_recorded_probe_survives_an_append_and_its_replay() {
    let (_tmp, store) = store();
    let (lock, mut s) = saved(&store, 2);
    let probe = srt::launch::Probe::JsonItems {
        urls: vec!["http://<node0-ip>:8000".into()],
        path: "/health".into(),
        lists: vec![srt::launch::Listed {
            name: "`worker[1]` registered".into(),
            array: "/instances".into(),
            fields: vec![srt::launch::Field {
                pointer: "/transport/tcp".into(),
                value: "<node0-ip>:28100/".into(),
                prefix: true,
            }],
            at_least: 1,
        }],
    };
    s.resources.get_mut("worker[1]").unwrap().health = Some(probe.clone());
    store.append(&lock, &mut s, &["worker[1]"]).unwrap();
    assert!(store.journal_path().exists());
    let loaded = store.load().unwrap().unwrap();
    assert_eq!(loaded.resources["worker[1]"].health, Some(probe));
    assert_eq!(loaded, s);
}
