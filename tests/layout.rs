//! The architecture the folders promise, held: no import cycle between
//! files, the world names none of its drivers, the pure state machine names
//! nothing of the world, and only the command line prints.
//!
//! A file's imports are read from its text: every `use` path (braces
//! expanded) and every `crate::`/`super::` path in its code, each resolved
//! to the file of the deepest module it names. Comments and string literals
//! are blanked first, and `pub(in crate::…)` is a visibility, not an import.
//! A `mod x;` declaration is not an import: a method defined in a child file
//! (`impl World` blocks of an actor's steps) is called without naming it.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// Module path (`["world", "actors", "worker"]`) of a file under `src/`.
fn module_of(relative: &str) -> Vec<String> {
    let mut parts: Vec<String> = relative
        .trim_end_matches(".rs")
        .split('/')
        .map(str::to_string)
        .collect();
    if matches!(parts.last().map(String::as_str), Some("mod" | "lib")) {
        parts.pop();
    }
    parts
}

/// The source text with comments and string and char literals blanked.
fn code_of(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    let mut at = 0;
    while at < bytes.len() {
        let rest = &text[at..];
        if rest.starts_with("//") {
            let end = rest.find('\n').unwrap_or(rest.len());
            at += end;
        } else if rest.starts_with("/*") {
            let end = rest.find("*/").map_or(rest.len(), |end| end + 2);
            at += end;
        } else if let Some(raw) = rest.strip_prefix("r#\"") {
            let end = raw.find("\"#").map_or(rest.len(), |end| end + 5);
            out.push_str("\"\"");
            at += end;
        } else if rest.starts_with('"') {
            let mut end = 1;
            while end < rest.len() {
                match rest.as_bytes()[end] {
                    b'\\' => end += 2,
                    b'"' => break,
                    _ => end += 1,
                }
            }
            out.push_str("\"\"");
            at += end + 1;
        } else if let Some(len) = char_literal(rest) {
            out.push_str("' '");
            at += len;
        } else {
            let ch = rest.chars().next().expect("not at the end");
            out.push(ch);
            at += ch.len_utf8();
        }
    }
    // `pub(in crate::world)` is a visibility, not an import.
    while let Some(start) = out.find("pub(in ") {
        let end = start + out[start..].find(')').expect("a visibility closes");
        out.replace_range(start..=end, "pub");
    }
    out
}

/// The length of a char literal at the start of `text` (`'x'`, `'\n'`,
/// `'{'`), or `None` for a lifetime or anything else.
fn char_literal(text: &str) -> Option<usize> {
    let mut chars = text.char_indices();
    if chars.next()?.1 != '\'' {
        return None;
    }
    let (_, first) = chars.next()?;
    if first == '\\' {
        let close = text[2..].find('\'')?;
        return Some(close + 3);
    }
    let (at, second) = chars.next()?;
    (second == '\'').then_some(at + 1)
}

/// Expands a `use` tree (`a::{b, c::{d, e}}`) into its paths.
fn expand(tree: &str) -> Vec<String> {
    let mut items = Vec::new();
    let (mut depth, mut current) = (0, String::new());
    for ch in tree.chars() {
        match ch {
            '{' => depth += 1,
            '}' => depth -= 1,
            _ => {}
        }
        if ch == ',' && depth == 0 {
            items.push(std::mem::take(&mut current));
        } else {
            current.push(ch);
        }
    }
    items.push(current);
    let mut paths = Vec::new();
    for item in items
        .iter()
        .map(|item| item.trim())
        .filter(|item| !item.is_empty())
    {
        match item.find('{') {
            Some(open) => {
                let close = item.rfind('}').expect("a use tree closes its braces");
                for inner in expand(&item[open + 1..close]) {
                    paths.push(format!("{}{inner}", item[..open].trim()));
                }
            }
            None => paths.push(item.to_string()),
        }
    }
    paths
}

/// The inline modules (`mod tests { … }`) of a file: their span and name.
fn inline_modules(code: &str) -> Vec<(usize, usize, String)> {
    let mut spans = Vec::new();
    let mut from = 0;
    while let Some(found) = code[from..].find("mod ") {
        let start = from + found;
        from = start + 4;
        let before_ok = start == 0 || !code.as_bytes()[start - 1].is_ascii_alphanumeric();
        let rest = &code[from..];
        let name: String = rest
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect();
        if !before_ok || name.is_empty() || !rest[name.len()..].trim_start().starts_with('{') {
            continue;
        }
        let open = from + name.len() + rest[name.len()..].find('{').expect("checked");
        let mut depth = 0;
        let mut end = code.len();
        for (offset, byte) in code.as_bytes()[open..].iter().enumerate() {
            match byte {
                b'{' => depth += 1,
                b'}' => {
                    depth -= 1;
                    if depth == 0 {
                        end = open + offset;
                        break;
                    }
                }
                _ => {}
            }
        }
        spans.push((start, end, name));
    }
    spans
}

struct Graph {
    /// File (relative to `src/`) → the files it imports.
    edges: BTreeMap<String, BTreeSet<String>>,
}

impl Graph {
    fn of_src() -> Graph {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
        let files: Vec<String> = crate::common::files_under("src", "rs")
            .iter()
            .map(|path| {
                path.strip_prefix(&root)
                    .expect("under src/")
                    .to_string_lossy()
                    .replace('\\', "/")
            })
            // The binary's own crate root names the library as `sim::`.
            .filter(|file| file != "main.rs")
            .collect();
        let modules: BTreeMap<Vec<String>, String> = files
            .iter()
            .map(|file| (module_of(file), file.clone()))
            .collect();
        let resolve = |here: &[String], path: &str| -> Option<String> {
            let segments: Vec<&str> = path
                .split(" as ")
                .next()
                .expect("a path")
                .split("::")
                .filter(|s| !s.is_empty() && *s != "*")
                .collect();
            let (mut module, rest): (Vec<String>, &[&str]) = match segments.first()? {
                &"crate" => (Vec::new(), &segments[1..]),
                &"self" => (here.to_vec(), &segments[1..]),
                &"super" => (
                    here[..here.len().saturating_sub(1)].to_vec(),
                    &segments[1..],
                ),
                first => {
                    let mut child = here.to_vec();
                    child.push(first.to_string());
                    if !modules.contains_key(&child) {
                        return None; // another crate (std, serde, …)
                    }
                    (here.to_vec(), &segments[..])
                }
            };
            let mut rest = rest;
            while rest.first() == Some(&"super") {
                module.pop();
                rest = &rest[1..];
            }
            for segment in rest {
                let mut child = module.clone();
                child.push(segment.to_string());
                if !modules.contains_key(&child) {
                    break;
                }
                module = child;
            }
            modules.get(&module).cloned()
        };
        let mut edges = BTreeMap::new();
        for file in &files {
            let text = std::fs::read_to_string(root.join(file)).expect("readable");
            let code = code_of(&text);
            let spans = inline_modules(&code);
            let module = module_of(file);
            let module_at = |at: usize| -> Vec<String> {
                let mut here = module.clone();
                here.extend(
                    spans
                        .iter()
                        .filter(|(start, end, _)| *start <= at && at <= *end)
                        .map(|(_, _, name)| name.clone()),
                );
                here
            };
            let mut imports = BTreeSet::new();
            let mut add = |target: Option<String>| {
                if let Some(target) = target
                    && target != *file
                {
                    imports.insert(target);
                }
            };
            let mut from = 0;
            while let Some(found) = code[from..].find("use ") {
                let start = from + found;
                from = start + 4;
                let word_start = start == 0 || !code.as_bytes()[start - 1].is_ascii_alphanumeric();
                if !word_start {
                    continue;
                }
                let Some(end) = code[from..].find(';') else {
                    break;
                };
                let here = module_at(start);
                for path in expand(&code[from..from + end]) {
                    add(resolve(&here, &path));
                }
            }
            for anchor in ["crate::", "super::"] {
                let mut from = 0;
                while let Some(found) = code[from..].find(anchor) {
                    let start = from + found;
                    from = start + anchor.len();
                    if start > 0 {
                        let before = code.as_bytes()[start - 1];
                        if before.is_ascii_alphanumeric() || before == b'_' {
                            continue;
                        }
                    }
                    let path: String = code[start..]
                        .chars()
                        .take_while(|c| c.is_alphanumeric() || *c == '_' || *c == ':')
                        .collect();
                    add(resolve(&module_at(start), &path));
                }
            }
            edges.insert(file.clone(), imports);
        }
        Graph { edges }
    }

    /// The strongly connected groups of more than one file (Tarjan).
    fn cycles(&self) -> Vec<Vec<String>> {
        struct State<'a> {
            graph: &'a Graph,
            index: BTreeMap<&'a str, usize>,
            low: BTreeMap<&'a str, usize>,
            stack: Vec<&'a str>,
            on_stack: BTreeSet<&'a str>,
            groups: Vec<Vec<String>>,
        }
        fn visit<'a>(state: &mut State<'a>, file: &'a str) {
            let next = state.index.len();
            state.index.insert(file, next);
            state.low.insert(file, next);
            state.stack.push(file);
            state.on_stack.insert(file);
            for target in &state.graph.edges[file] {
                let target = target.as_str();
                if !state.index.contains_key(target) {
                    visit(state, target);
                    let low = state.low[file].min(state.low[target]);
                    state.low.insert(file, low);
                } else if state.on_stack.contains(target) {
                    let low = state.low[file].min(state.index[target]);
                    state.low.insert(file, low);
                }
            }
            if state.low[file] == state.index[file] {
                let mut group = Vec::new();
                loop {
                    let member = state.stack.pop().expect("on the stack");
                    state.on_stack.remove(member);
                    group.push(member.to_string());
                    if member == file {
                        break;
                    }
                }
                if group.len() > 1 {
                    group.sort();
                    state.groups.push(group);
                }
            }
        }
        let mut state = State {
            graph: self,
            index: BTreeMap::new(),
            low: BTreeMap::new(),
            stack: Vec::new(),
            on_stack: BTreeSet::new(),
            groups: Vec::new(),
        };
        for file in self.edges.keys() {
            if !state.index.contains_key(file.as_str()) {
                visit(&mut state, file);
            }
        }
        state.groups
    }

    /// Every file reachable from `file` through imports.
    fn reachable(&self, file: &str) -> BTreeSet<String> {
        let mut seen = BTreeSet::new();
        let mut todo = vec![file.to_string()];
        while let Some(next) = todo.pop() {
            for target in &self.edges[&next] {
                if seen.insert(target.clone()) {
                    todo.push(target.clone());
                }
            }
        }
        seen
    }
}

#[test]
fn the_reader_sees_imports_that_a_file_really_has() {
    let graph = Graph::of_src();
    let worker_finish = &graph.edges["world/actors/worker/finish.rs"];
    for expected in [
        "world/mod.rs",
        "world/actors/fence.rs",
        "world/actors/worker.rs",
        "world/stores/db.rs",
    ] {
        assert!(
            worker_finish.contains(expected),
            "{expected}: {worker_finish:?}"
        );
    }
    assert!(graph.edges["cli/mod.rs"].contains("cli/run.rs"));
    assert_eq!(
        expand("a::{b, c::{\n    d,\n    e as f,\n}, g::*}"),
        ["a::b", "a::c::d", "a::c::e as f", "a::g::*"]
    );
    assert_eq!(
        code_of("let x = \"crate::a\"; // crate::b\nlet c = '{';"),
        "let x = \"\"; \nlet c = ' ';"
    );
}

#[test]
fn cycles_are_found_in_a_graph_made_by_hand() {
    let edges = [
        ("a.rs", &["b.rs"][..]),
        ("b.rs", &["c.rs"][..]),
        ("c.rs", &["a.rs"][..]),
        ("d.rs", &["a.rs", "e.rs"][..]),
        ("e.rs", &["d.rs"][..]),
        ("f.rs", &[][..]),
    ];
    let graph = Graph {
        edges: edges
            .iter()
            .map(|(file, imports)| {
                let imports = imports.iter().map(|i| i.to_string()).collect();
                (file.to_string(), imports)
            })
            .collect(),
    };
    let mut cycles = graph.cycles();
    cycles.sort();
    assert_eq!(cycles, [vec!["a.rs", "b.rs", "c.rs"], vec!["d.rs", "e.rs"]]);
    assert_eq!(graph.reachable("e.rs").len(), 5);
}

#[test]
fn no_import_cycle_between_files() {
    let cycles = Graph::of_src().cycles();
    assert!(
        cycles.is_empty(),
        "files that import each other: {cycles:#?}"
    );
}

#[test]
fn the_world_names_none_of_its_drivers() {
    let graph = Graph::of_src();
    let drivers = [
        "fuzz/",
        "scenario/",
        "cli/",
        "run.rs",
        "report.rs",
        "simulate.rs",
        "dump.rs",
    ];
    let mut found = Vec::new();
    for (file, imports) in &graph.edges {
        if !file.starts_with("world/") {
            continue;
        }
        for import in imports {
            if drivers.iter().any(|driver| import.starts_with(driver)) {
                found.push(format!("{file} names {import}"));
            }
        }
    }
    assert!(found.is_empty(), "{found:#?}");
}

#[test]
fn the_state_machine_names_nothing_of_the_world() {
    let graph = Graph::of_src();
    for file in graph.edges.keys().filter(|file| file.starts_with("task/")) {
        let reached: Vec<_> = graph
            .reachable(file)
            .into_iter()
            .filter(|target| !target.starts_with("task/") && target != "hash.rs")
            .collect();
        assert!(reached.is_empty(), "{file} reaches {reached:?}");
    }
}

/// Printing belongs to the commands: the simulation, its checks and its
/// reports return text and errors, and `src/cli/` says them.
#[test]
fn only_the_command_line_prints() {
    let mut found = Vec::new();
    for path in crate::common::files_under("src", "rs") {
        let text = std::fs::read_to_string(&path).expect("readable");
        let relative = path.to_string_lossy().replace('\\', "/");
        if relative.contains("/src/cli/")
            || relative.ends_with("/src/output.rs")
            || relative.ends_with("/src/main.rs")
        {
            continue;
        }
        let code = code_of(&text);
        for word in [
            "out!(",
            "outln!(",
            "errln!(",
            "output::print",
            "stdout()",
            "stderr()",
        ] {
            if code.contains(word) {
                found.push(format!("{relative} calls {word}"));
            }
        }
    }
    assert!(found.is_empty(), "{found:#?}");
}

/// `report::SITUATIONS` is every name the world passes to `sometimes`: a
/// situation added to the world is held to the campaign's floor
/// (`tests/detect.rs`), and one removed leaves the list.
#[test]
fn the_situations_list_is_what_the_world_marks() {
    let mut named = BTreeSet::new();
    let mut texts = Vec::new();
    for path in crate::common::files_under("src/world", "rs") {
        let text = std::fs::read_to_string(&path).expect("readable");
        for (index, _) in text.match_indices("sometimes(\"") {
            let rest = &text[index + "sometimes(\"".len()..];
            let end = rest.find('"').expect("a closed literal");
            named.insert(rest[..end].to_string());
        }
        texts.push(text);
    }
    let declared: BTreeSet<String> = sim::report::SITUATIONS
        .iter()
        .map(|name| name.to_string())
        .collect();
    let undeclared: Vec<_> = named.difference(&declared).collect();
    assert!(
        undeclared.is_empty(),
        "marked but not in SITUATIONS: {undeclared:?}"
    );
    let unused: Vec<_> = declared
        .iter()
        .filter(|name| {
            !texts
                .iter()
                .any(|text| text.contains(&format!("\"{name}\"")))
        })
        .collect();
    assert!(
        unused.is_empty(),
        "in SITUATIONS but named nowhere in src/world: {unused:?}"
    );
}
