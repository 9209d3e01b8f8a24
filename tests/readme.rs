//! The README stays true: its complete scenario example runs as it says,
//! and its first commands are the ones the newcomer check types.

use crate::common::run_clean;

fn readme() -> String {
    std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md")).expect("README.md")
}

#[test]
fn the_readme_scenario_example_runs_as_it_expects() {
    let text = readme();
    let start = text.find("```toml\n").expect("a TOML example") + "```toml\n".len();
    let end = start + text[start..].find("```").expect("the example ends");
    let scenario = sim::scenario::parse::parse(&text[start..end], None)
        .unwrap_or_else(|error| panic!("{error}"));
    assert!(
        !scenario.requests.is_empty()
            && !scenario.faults.is_empty()
            && !scenario.expect.facts.is_empty()
    );
    let finished = run_clean(&scenario);
    assert!(
        finished.world.faults.unfired().is_empty(),
        "every fault of the example fires"
    );
}

#[test]
fn the_readme_names_every_invariant_and_fault() {
    let text = readme();
    for invariant in sim::invariants::INVARIANTS {
        assert!(text.contains(invariant.id), "{}", invariant.id);
    }
    for site in sim::faults::Site::ALL {
        assert!(
            text.contains(&format!("`{}`", site.as_str())),
            "{}",
            site.as_str()
        );
    }
    for (site, kind) in sim::faults::catalogue() {
        assert!(
            text.contains(kind.as_str()),
            "{}/{}",
            site.as_str(),
            kind.as_str()
        );
    }
}
