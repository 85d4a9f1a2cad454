//! Lists the SGLang flag catalogs srt ships (`crates/srt/src/engine/sglang/catalog/`)
//! for `srt-sglang-sim`, newest release first, so that a catalog added there is a
//! release the simulator parses too.

use std::path::Path;

fn main() {
    // Read when the script runs, not when it was compiled: a build script is not
    // rebuilt when the checkout moves under the same target directory.
    let manifest = std::env::var("CARGO_MANIFEST_DIR").expect("CARGO_MANIFEST_DIR");
    let dir = Path::new(&manifest).join("../srt/src/engine/sglang/catalog");
    println!("cargo:rerun-if-changed={}", dir.display());
    let mut files: Vec<(String, String)> = std::fs::read_dir(&dir)
        .expect("srt's SGLang catalogs")
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().into_string().ok()?;
            let release = name
                .strip_prefix("sglang-")?
                .strip_suffix(".json")?
                .to_string();
            let path = e.path().canonicalize().ok()?.display().to_string();
            Some((release, path))
        })
        .collect();
    files.sort_by_key(|(release, _)| std::cmp::Reverse(order(release)));
    let entries: String = files
        .iter()
        .map(|(release, path)| format!("    ({release:?}, include_str!({path:?})),\n"))
        .collect();
    let out = Path::new(&std::env::var("OUT_DIR").expect("OUT_DIR")).join("sglang_catalogs.rs");
    std::fs::write(
        out,
        format!("/// SGLang's catalogs by release, newest first.\nconst CATALOG_FILES: &[(&str, &str)] = &[\n{entries}];\n"),
    )
    .expect("write the catalog list");
}

/// A release as numbers to compare: `0.5.13.post1` is (0, 5, 13, 1).
fn order(release: &str) -> Vec<u64> {
    let (base, post) = release.split_once(".post").unwrap_or((release, "0"));
    base.split('.')
        .chain([post])
        .map(|n| n.parse().unwrap_or(0))
        .collect()
}
