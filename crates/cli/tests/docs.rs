//! Every shell block of README.md and docs/*.md runs as written, each in a scratch folder
//! that holds `examples/` (and `donchian.toml`, which writing-strategies.md has the reader
//! save): `threadx` is the binary under test, and so is `cargo run --release -p threadx --`.
//! Installing and testing commands (`pip`, `cargo install|build|test`, a venv, `pytest`)
//! and Python one-liners are not run here: the Python suite runs the Python blocks
//! (python/tests/test_docs.py), and CI runs the rest.

use crate::common;

use common::{text, without_user_settings};
use std::path::{Path, PathBuf};
use std::process::Command;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The pages whose blocks run: the README and every page under docs/.
fn pages() -> Vec<PathBuf> {
    let mut pages: Vec<PathBuf> = std::fs::read_dir(root().join("docs"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    pages.sort();
    pages.insert(0, root().join("README.md"));
    pages
}

/// The fenced blocks of `page` whose language is one of `languages`: (first line, text).
pub fn blocks(page: &Path, languages: &[&str]) -> Vec<(usize, String)> {
    let text = std::fs::read_to_string(page).unwrap();
    let mut found = Vec::new();
    let mut open: Option<(usize, bool, String)> = None;
    for (i, line) in text.lines().enumerate() {
        match (&mut open, line.strip_prefix("```")) {
            (None, Some(info)) => {
                let language = info.split_whitespace().next().unwrap_or("");
                open = Some((i + 1, languages.contains(&language), String::new()));
            }
            (Some(_), Some(_)) => {
                let (at, wanted, body) = open.take().unwrap();
                if wanted {
                    found.push((at, body));
                }
            }
            (Some((_, _, body)), None) => {
                body.push_str(line);
                body.push('\n');
            }
            (None, None) => {}
        }
    }
    found
}

/// Commands a reader runs once to install or test, not examples of ThreadX itself.
const NOT_RUN_HERE: [&str; 8] =
    ["pip ", "python ", "python3 ", ".venv/bin/pytest ", "cargo install ", "cargo build ", "cargo test ", "cd "];

/// The block's command lines, continuations joined, with those [`NOT_RUN_HERE`] left out.
fn runnable(block: &str) -> (Vec<String>, Vec<String>) {
    let joined = block.replace("\\\n", " ");
    let lines = joined.lines().map(str::trim).filter(|l| !l.is_empty() && !l.starts_with('#'));
    lines.map(str::to_owned).partition(|l| !NOT_RUN_HERE.iter().any(|p| l.starts_with(p)))
}

/// What a block runs after: stop at the first failure; `threadx` and `cargo run --release
/// -p threadx --` are the binary under test.
const PRELUDE: &str = r#"set -euo pipefail
threadx() { "$THREADX_BIN" "$@"; }
cargo() {
    if [ "$1 $2 $3 $4 $5" = "run --release -p threadx --" ]; then shift 5; threadx "$@"
    else echo "cargo $*: not run by the docs test" >&2; return 9; fi
}
"#;

#[test]
fn every_shell_block_in_the_docs_runs_as_written() {
    let mut ran = 0;
    for page in pages() {
        let name = page.strip_prefix(root()).unwrap_or(&page).display().to_string();
        for (at, block) in blocks(&page, &["bash", "sh"]) {
            let (commands, _) = runnable(&block);
            if commands.is_empty() {
                continue;
            }
            let (ok, printed) = run_in_scratch(&commands.join("\n"), None);
            assert!(ok, "{name}:{at}: the block failed:\n{}\n{printed}", commands.join("\n"));
            ran += commands.len();
        }
    }
    assert!(ran >= 30, "the docs' shell blocks hold {ran} commands of threadx");
}

/// `script` run through the [`PRELUDE`] in a scratch folder holding `examples/` and
/// `donchian.toml` (`edit` first: a line number and its new text): what it printed on
/// both streams, and whether it succeeded.
fn run_in_scratch(script: &str, edit: Option<(usize, &str)>) -> (bool, String) {
    let dir = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(root().join("examples"), dir.path().join("examples")).unwrap();
    let mut donchian: Vec<String> = std::fs::read_to_string(root().join("examples/strategies/donchian.toml"))
        .unwrap()
        .lines()
        .map(str::to_owned)
        .collect();
    if let Some((line, new)) = edit {
        donchian[line - 1] = new.to_owned();
    }
    std::fs::write(dir.path().join("donchian.toml"), donchian.join("\n") + "\n").unwrap();
    let mut bash = Command::new("bash");
    bash.arg("-c").arg(format!("{PRELUDE}{script}\n"));
    let out = without_user_settings(bash)
        .current_dir(dir.path())
        .env("THREADX_BIN", env!("CARGO_BIN_EXE_threadx"))
        .env("THREADX_GPU_THRESHOLD_PATH", dir.path().join("profile.json"))
        .env("THREADX_MULTIGPU_PROFILE_PATH", dir.path().join("multigpu.json"))
        .output()
        .unwrap();
    (out.status.success(), format!("{}{}", text(&out.stdout), text(&out.stderr)))
}

/// A `text` block that opens with `$ threadx …` shows what that command prints: each
/// shown line (`...` elides some) is a line of its output, in order. An error excerpt's
/// `N | source` line is put into the file first, as the page has the reader write it.
#[test]
fn the_output_the_docs_show_is_what_the_commands_print() {
    let mut checked = 0;
    for page in pages() {
        let name = page.strip_prefix(root()).unwrap_or(&page).display().to_string();
        for (at, block) in blocks(&page, &["text"]) {
            let Some((command, shown)) = block.strip_prefix("$ ").and_then(|b| b.split_once('\n')) else { continue };
            let edit = shown.lines().find_map(|l| {
                let (number, source) = l.split_once(" | ")?;
                Some((number.trim().parse::<usize>().ok()?, source))
            });
            let (_, printed) = run_in_scratch(command, edit);
            let mut lines = printed.lines().map(str::trim_end);
            for want in shown.lines().map(str::trim_end).filter(|l| !l.is_empty() && *l != "...") {
                assert!(
                    lines.any(|got| got == want),
                    "{name}:{at}: `{command}` does not print `{want}` where the page shows it; it printed:\n{printed}"
                );
            }
            checked += 1;
        }
    }
    assert!(checked >= 2, "{checked} shown outputs checked");
}
