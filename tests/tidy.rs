//! Tidiness the architecture depends on: no hash-ordered containers, wall
//! clocks or OS randomness in `src/` (the wall clock lives in one file that
//! only reports speed; the one hash table, in one file that offers lookups
//! and a walk in key order only; the one hash set, the model checker's
//! fingerprints, in one file that offers membership only), and every file
//! says what lives there.

use std::path::PathBuf;

fn sources() -> Vec<PathBuf> {
    let sources = crate::common::files_under("src", "rs");
    assert!(!sources.is_empty(), "src/ is readable");
    sources
}

#[test]
fn src_names_no_hash_map_clock_or_os_randomness() {
    let forbidden = [
        "HashMap",
        "HashSet",
        "Instant",
        "SystemTime",
        "thread_rng",
        "from_os_rng",
    ];
    let mut found = Vec::new();
    for path in sources() {
        let text = std::fs::read_to_string(&path).expect("readable");
        let stopwatch = path.ends_with("stopwatch.rs");
        let keymap = path.ends_with("world/engine/keymap.rs");
        let fingerprints = path.ends_with("check/fingerprint.rs");
        for word in forbidden {
            let allowed = (stopwatch && word == "Instant")
                || (keymap && word == "HashMap")
                || (fingerprints && word == "HashSet");
            if text.contains(word) && !allowed {
                found.push(format!("{} names {word}", path.display()));
            }
        }
    }
    assert!(found.is_empty(), "{found:#?}");
}

#[test]
fn the_simulation_never_reads_the_stopwatch() {
    for path in sources() {
        let text = std::fs::read_to_string(&path).expect("readable");
        let inside = ["world", "task", "invariants.rs", "trace.rs", "simulate.rs"]
            .iter()
            .any(|part| path.to_string_lossy().contains(&format!("src/{part}")));
        assert!(
            !(inside && text.contains("stopwatch")),
            "{} reads the wall clock",
            path.display()
        );
    }
}

#[test]
fn every_source_file_opens_with_a_doc_line() {
    for path in sources() {
        let text = std::fs::read_to_string(&path).expect("readable");
        assert!(
            text.starts_with("//!"),
            "{} does not open with `//!`",
            path.display()
        );
    }
}

/// `println!` and `eprintln!` panic when a stream cannot be written (a
/// reader gone, a full disk); output goes through `sim::output` (`out!`,
/// `outln!`, `errln!`) instead.
#[test]
fn output_never_goes_through_println() {
    let mut found = Vec::new();
    for path in sources() {
        let text = std::fs::read_to_string(&path).expect("readable");
        for (number, line) in text.lines().enumerate() {
            if line.contains("println!(") || line.contains("print!(") {
                found.push(format!("{}:{}", path.display(), number + 1));
            }
        }
    }
    assert!(found.is_empty(), "{found:#?}");
}
