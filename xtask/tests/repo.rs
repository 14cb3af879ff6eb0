//! Checks of the repository itself, as plain tests: the crates' layering, the code map
//! of docs/ARCHITECTURE.md against the source files, the files' length, files that
//! import each other, and the documentation's links (docs/ARCHITECTURE.md names them).

use std::path::{Component, Path, PathBuf};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_owned()
}

/// The layers, bottom first: a crate may depend only on crates before it. The two front
/// ends, the CLI and the Python package, are the top; neither depends on the other.
const LAYERS: [(&str, &str); 11] = [
    ("threadx-stats", "crates/stats"),
    ("threadx-telemetry", "crates/telemetry"),
    ("threadx-profile-store", "crates/profile-store"),
    ("threadx-dispatch", "crates/dispatch"),
    ("threadx-multi-gpu", "crates/multi-gpu"),
    ("threadx-indicators", "crates/indicators"),
    ("threadx-backtest", "crates/backtest"),
    ("threadx-sweep", "crates/sweep"),
    ("threadx-report", "crates/report"),
    ("threadx", "crates/cli"),
    ("threadx-python", "python"),
];

#[test]
fn crates_depend_only_on_the_layers_below() {
    let mut problems = Vec::new();
    for (level, (name, dir)) in LAYERS.iter().enumerate() {
        let text = std::fs::read_to_string(root().join(dir).join("Cargo.toml")).unwrap();
        let manifest: toml::Table = toml::from_str(&text).unwrap();
        assert_eq!(manifest["package"]["name"].as_str(), Some(*name), "{dir}/Cargo.toml");
        for section in ["dependencies", "dev-dependencies", "build-dependencies"] {
            let Some(deps) = manifest.get(section).and_then(|d| d.as_table()) else { continue };
            for dep in deps.keys().filter(|d| d.starts_with("threadx")) {
                match LAYERS.iter().position(|(n, _)| n == dep) {
                    Some(_) if dep == "threadx" => problems.push(format!("{name} ({section}) depends on the CLI")),
                    Some(l) if l < level => {}
                    Some(_) => problems.push(format!("{name} ({section}) depends on {dep}, which is not below it")),
                    None => problems.push(format!("{name} ({section}) depends on {dep}, which is in no layer")),
                }
            }
        }
    }
    // stats, profile-store and telemetry carry no GPU stack; the pool carries no telemetry stack.
    for (dir, forbidden) in [
        ("crates/stats", &["wgpu"][..]),
        ("crates/profile-store", &["wgpu"][..]),
        ("crates/telemetry", &["wgpu"][..]),
        ("crates/multi-gpu", &["nvml-wrapper", "sysinfo", "plotters"][..]),
    ] {
        let manifest: toml::Table =
            toml::from_str(&std::fs::read_to_string(root().join(dir).join("Cargo.toml")).unwrap()).unwrap();
        for section in ["dependencies", "dev-dependencies"] {
            let Some(deps) = manifest.get(section).and_then(|d| d.as_table()) else { continue };
            for dep in forbidden.iter().filter(|d| deps.contains_key(**d)) {
                problems.push(format!("{dir} ({section}) depends on {dep}"));
            }
        }
    }
    assert!(problems.is_empty(), "{problems:#?}");
}

/// The repository's own text files: what a clone holds, not what builds or tools made.
fn text_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        if path.is_dir() {
            if !name.starts_with('.') && !["target", "artifacts", ".venv"].contains(&name.as_str()) {
                text_files(&path, out);
            }
        } else if ["md", "rs", "toml", "sh", "py", "yaml", "wgsl", "txt"]
            .iter()
            .any(|ext| path.extension().is_some_and(|e| e == *ext))
        {
            out.push(path);
        }
    }
}

/// `path` joined onto `dir` without touching the file system; `None` when it climbs above `/`.
fn resolve(dir: &Path, path: &str) -> Option<PathBuf> {
    let mut out = dir.to_owned();
    for part in Path::new(path).components() {
        match part {
            Component::ParentDir if !out.pop() => return None,
            Component::Normal(p) => out.push(p),
            _ => {}
        }
    }
    Some(out)
}

#[test]
fn links_and_paths_stay_inside_the_repository() {
    let root = root();
    let mut files = Vec::new();
    text_files(&root, &mut files);
    files.push(root.join(".ci/run"));
    let mut problems = Vec::new();
    for file in &files {
        let text = std::fs::read_to_string(file).unwrap();
        let dir = file.parent().unwrap();
        let shown = file.strip_prefix(&root).unwrap().display().to_string();
        // The design notes ThreadX was started from live outside the repository; what they
        // said is in docs/ now.
        for outside in [["DESIGN", ".md"].concat(), ["GPU", ".md"].concat()] {
            if text.contains(&outside) {
                problems.push(format!("{shown}: names {outside}, a file outside the repository"));
            }
        }
        // Every relative path that climbs (`../…`) must land inside the repository.
        for (at, _) in text.match_indices("../") {
            let start = text[..at].rfind(|c: char| c.is_whitespace() || "\"'`(<=[".contains(c)).map_or(0, |i| i + 1);
            let end = at + text[at..].find(|c: char| c.is_whitespace() || "\"'`)>]#,;:".contains(c)).unwrap_or(0);
            let token = &text[start..end.max(at + 3)];
            if token.contains("://") || token.starts_with('$') {
                continue;
            }
            // Prose in Markdown names paths from the repository's root; links and code, from the file.
            let is_md = file.extension().is_some_and(|e| e == "md");
            let base = if is_md && !text[..start].ends_with("](") { root.as_path() } else { dir };
            match resolve(base, token.trim_start_matches("$(dirname \"$0\")/")) {
                Some(p) if p.starts_with(&root) => {}
                _ => problems.push(format!("{shown}: `{token}` points outside the repository")),
            }
        }
        // Every relative Markdown link must name a file that exists.
        if file.extension().is_some_and(|e| e == "md") {
            for (at, _) in text.match_indices("](") {
                let rest = &text[at + 2..];
                let target = &rest[..rest.find(')').unwrap_or(0)];
                let path = target.split('#').next().unwrap_or("");
                if path.is_empty() || target.contains("://") || target.starts_with("mailto:") {
                    continue;
                }
                match resolve(dir, path) {
                    Some(p) if p.starts_with(&root) && p.exists() => {}
                    Some(p) if p.starts_with(root.join("artifacts")) => {} // made by the xtask commands
                    _ => problems.push(format!("{shown}: link `{target}` does not name a file of the repository")),
                }
            }
        }
    }
    assert!(problems.is_empty(), "{problems:#?}");
}

/// The source files: Rust, WGSL and Python, tracked or not, outside build outputs.
fn source_files() -> Vec<String> {
    let root = root();
    let mut files = Vec::new();
    text_files(&root, &mut files);
    let mut out: Vec<String> = files
        .iter()
        .filter(|p| p.extension().is_some_and(|e| ["rs", "wgsl", "py", "pyi"].contains(&e.to_str().unwrap_or(""))))
        .map(|p| p.strip_prefix(&root).unwrap().to_string_lossy().replace('\\', "/"))
        .collect();
    out.sort();
    out
}

/// Every `file.rs::name` the docs cite in a code span names something in that file: a
/// path (`crates/x/src/y.rs::name`) or, for a bare file name, some file of that name.
#[test]
fn every_file_and_name_the_docs_cite_exists() {
    let sources = source_files();
    let mut docs = Vec::new();
    text_files(&root().join("docs"), &mut docs);
    docs.push(root().join("README.md"));
    let mut problems = Vec::new();
    for doc in docs.iter().filter(|d| d.extension().is_some_and(|e| e == "md")) {
        let text = std::fs::read_to_string(doc).unwrap();
        for span in text.split('`').skip(1).step_by(2) {
            let Some((file, name)) = span.split_once(".rs::") else { continue };
            let name: String = name.chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect();
            let file = format!("{file}.rs");
            let candidates: Vec<&String> =
                sources.iter().filter(|s| **s == file || s.ends_with(&format!("/{file}"))).collect();
            let names_it = |path: &String| {
                let code = std::fs::read_to_string(root().join(path)).unwrap();
                code.match_indices(name.as_str()).any(|(at, _)| {
                    let word = |c: Option<char>| c.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_');
                    !word(code[..at].chars().next_back()) && !word(code[at + name.len()..].chars().next())
                })
            };
            if name.is_empty() || !candidates.iter().any(|c| names_it(c)) {
                let shown = doc.strip_prefix(root()).unwrap().display();
                problems.push(format!("{shown}: `{span}` names nothing in {file}"));
            }
        }
    }
    assert!(problems.is_empty(), "{problems:#?}");
}

/// The paths the code map of docs/ARCHITECTURE.md names: the first code span of each
/// `- ` item under its `## Code map` heading.
fn code_map() -> Vec<String> {
    let text = std::fs::read_to_string(root().join("docs/ARCHITECTURE.md")).unwrap();
    let start = text.find("\n## Code map\n").expect("docs/ARCHITECTURE.md has a `## Code map` section");
    let section = &text[start + 1..];
    let section = &section[..section[1..].find("\n## ").map_or(section.len(), |e| e + 1)];
    section
        .lines()
        .filter_map(|line| line.strip_prefix("- `"))
        .map(|rest| rest[..rest.find('`').unwrap_or(0)].to_owned())
        .collect()
}

#[test]
fn the_code_map_names_every_source_file_and_only_those() {
    let map = code_map();
    let files = source_files();
    let mut problems = Vec::new();
    for (i, path) in map.iter().enumerate() {
        if !root().join(path).is_file() {
            problems.push(format!("the code map names `{path}`, which is not a file"));
        }
        if map[..i].contains(path) {
            problems.push(format!("the code map names `{path}` twice"));
        }
    }
    for file in files.iter().filter(|f| !map.contains(f)) {
        problems
            .push(format!("{file} is not in the code map of docs/ARCHITECTURE.md: add a line saying what lives there"));
    }
    assert!(problems.is_empty(), "{problems:#?}");
}

/// Files hold one concept; one that grows past this is split before it mixes several.
const MAX_LINES: usize = 600;

#[test]
fn no_source_file_passes_600_lines() {
    let long: Vec<String> = source_files()
        .into_iter()
        .filter_map(|f| {
            let lines = std::fs::read_to_string(root().join(&f)).unwrap().lines().count();
            (lines > MAX_LINES).then(|| format!("{f}: {lines} lines"))
        })
        .collect();
    assert!(long.is_empty(), "split these by concept (at most {MAX_LINES} lines each): {long:#?}");
}

/// The module path of a source file under `src` (`lib.rs`, `main.rs` and `mod.rs` name
/// their folder's module).
fn module_of(src: &Path, file: &Path) -> Vec<String> {
    let rel = file.strip_prefix(src).unwrap();
    let mut parts: Vec<String> = rel.iter().map(|p| p.to_string_lossy().into_owned()).collect();
    let last = parts.pop().unwrap_or_default();
    if !["lib.rs", "main.rs", "mod.rs"].contains(&last.as_str()) {
        parts.push(last.trim_end_matches(".rs").to_owned());
    }
    parts
}

/// The file of the longest prefix of `path` that is a module under `src`, if any.
fn module_file(src: &Path, path: &[String]) -> Option<PathBuf> {
    (1..=path.len()).rev().find_map(|k| {
        let dir: PathBuf = path[..k].iter().collect();
        [src.join(&dir).with_extension("rs"), src.join(&dir).join("mod.rs")].into_iter().find(|f| f.is_file())
    })
}

/// The other files of the crate under `src` that `file` imports through `crate::` and
/// `super::` paths in its code (comments and its `#[cfg(test)]` module left out: that
/// module's `super` is the file itself).
fn imports(src: &Path, file: &Path) -> std::collections::BTreeSet<PathBuf> {
    let text = std::fs::read_to_string(file).unwrap();
    let text = &text[..text.find("#[cfg(test)]\nmod tests").unwrap_or(text.len())];
    // Code only: a doc link to a twin (`[`crate::market`]`) is no import.
    let text: String = text.lines().filter(|l| !l.trim_start().starts_with("//")).map(|l| format!("{l}\n")).collect();
    let text = text.as_str();
    let own = module_of(src, file);
    let is_mod = file.file_name().is_some_and(|n| n == "mod.rs" || n == "lib.rs" || n == "main.rs");
    let mut found = std::collections::BTreeSet::new();
    for (prefix, base) in
        [("crate::", Vec::new()), ("super::", own[..own.len().saturating_sub(usize::from(!is_mod) + 1)].to_vec())]
    {
        for (at, _) in text.match_indices(prefix) {
            if at > 0 && text.as_bytes()[at - 1].is_ascii_alphanumeric() {
                continue;
            }
            let rest = &text[at + prefix.len()..];
            // `crate::{a::B, c}`: each item's first segments; `crate::a::b::C`: the path.
            let items: Vec<&str> = match rest.strip_prefix('{') {
                Some(group) => group[..group.find('}').unwrap_or(0)].split(',').collect(),
                None => vec![rest],
            };
            for item in items {
                // Each segment's identifier; the path ends where a segment has none (`*`, `{`).
                let path: Vec<String> = item
                    .trim()
                    .split("::")
                    .map(|s| s.chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect::<String>())
                    .take_while(|id| !id.is_empty())
                    .collect();
                let full: Vec<String> = base.iter().cloned().chain(path).collect();
                if let Some(target) = module_file(src, &full).filter(|t| t != file) {
                    found.insert(target);
                }
            }
        }
    }
    found
}

/// Files that import each other, as rust-analyzer's house rules forbid: each crate's
/// strongly connected sets of files (Tarjan), as `crate: a.rs, b.rs`.
fn import_circles() -> Vec<String> {
    let mut circles = Vec::new();
    let dirs: Vec<&str> = LAYERS.iter().map(|(_, d)| *d).collect();
    for dir in dirs {
        let src = root().join(dir).join("src");
        let mut files = Vec::new();
        text_files(&src, &mut files);
        files.retain(|f| f.extension().is_some_and(|e| e == "rs"));
        files.sort();
        let edges: Vec<Vec<usize>> = files
            .iter()
            .map(|f| imports(&src, f).iter().filter_map(|t| files.iter().position(|g| g == t)).collect())
            .collect();
        for set in strongly_connected(&edges).into_iter().filter(|s| s.len() > 1) {
            let mut names: Vec<String> = set
                .iter()
                .map(|&i| files[i].strip_prefix(&src).unwrap().to_string_lossy().replace('\\', "/"))
                .collect();
            names.sort();
            circles.push(format!("{dir}: {}", names.join(", ")));
        }
    }
    circles.sort();
    circles
}

/// Tarjan's strongly connected components of a graph given as adjacency lists.
fn strongly_connected(edges: &[Vec<usize>]) -> Vec<Vec<usize>> {
    struct State<'a> {
        edges: &'a [Vec<usize>],
        index: Vec<Option<usize>>,
        low: Vec<usize>,
        on_stack: Vec<bool>,
        stack: Vec<usize>,
        next: usize,
        out: Vec<Vec<usize>>,
    }
    fn visit(s: &mut State<'_>, v: usize) {
        s.index[v] = Some(s.next);
        s.low[v] = s.next;
        s.next += 1;
        s.stack.push(v);
        s.on_stack[v] = true;
        for &w in &s.edges[v] {
            match s.index[w] {
                None => {
                    visit(s, w);
                    s.low[v] = s.low[v].min(s.low[w]);
                }
                Some(i) if s.on_stack[w] => s.low[v] = s.low[v].min(i),
                Some(_) => {}
            }
        }
        if Some(s.low[v]) == s.index[v] {
            let mut set = Vec::new();
            while let Some(w) = s.stack.pop() {
                s.on_stack[w] = false;
                set.push(w);
                if w == v {
                    break;
                }
            }
            s.out.push(set);
        }
    }
    let n = edges.len();
    let mut s = State {
        edges,
        index: vec![None; n],
        low: vec![0; n],
        on_stack: vec![false; n],
        stack: Vec::new(),
        next: 0,
        out: Vec::new(),
    };
    for v in 0..n {
        if s.index[v].is_none() {
            visit(&mut s, v);
        }
    }
    s.out
}

/// No file imports, through others, a file that imports it: each crate's files form
/// layers, as rust-analyzer's house rules ask (what two files both need moves into a
/// third below them).
#[test]
fn no_files_import_each_other() {
    let found = import_circles();
    assert!(found.is_empty(), "files that import each other (move what both need into a file of its own): {found:#?}");
}

#[test]
fn strongly_connected_sets_are_tarjans() {
    // 0 <-> 1, 2 -> 0, 3 -> 4 -> 5 -> 3, 6 alone.
    let edges = vec![vec![1], vec![0], vec![0], vec![4], vec![5], vec![3], vec![]];
    let mut sets: Vec<Vec<usize>> = strongly_connected(&edges)
        .into_iter()
        .map(|mut s| {
            s.sort_unstable();
            s
        })
        .collect();
    sets.sort();
    assert_eq!(sets, [vec![0, 1], vec![2], vec![3, 4, 5], vec![6]]);
}
