//! The documents stay true to the code: the README's metrics table is the
//! registry's, the README stays a short page for users, and every relative
//! link in the README, `docs/` and BENCHMARKS.md points at a file (and a
//! heading) that exists inside the repository.

use std::path::{Path, PathBuf};

use blindspot::metrics::registry;

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The README's text between `<!-- metrics:start -->` and `<!-- metrics:end -->`.
fn metrics_section(readme: &str) -> &str {
    let start = "<!-- metrics:start -->\n";
    let from = readme
        .find(start)
        .expect("README has <!-- metrics:start -->")
        + start.len();
    let to = readme[from..]
        .find("<!-- metrics:end -->")
        .expect("README has <!-- metrics:end -->");
    &readme[from..from + to]
}

#[test]
fn the_readme_metrics_table_is_the_registry() {
    let readme = read(&root().join("README.md"));
    assert_eq!(
        metrics_section(&readme),
        registry::markdown_table(),
        "README.md's metrics table differs from the registry: paste \
         `blindspot metrics --format markdown` between its markers"
    );
}

#[test]
fn the_readme_stays_short() {
    let lines = read(&root().join("README.md")).lines().count();
    assert!(
        lines <= 400,
        "README.md has {lines} lines: it is the users' front page; \
         conventions and design go to docs/, figures to BENCHMARKS.md"
    );
}

/// A heading's GitHub anchor: lowercase, punctuation dropped, spaces to `-`.
fn anchor(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || *c == ' ' || *c == '-' || *c == '_')
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

/// The anchors of a Markdown file's headings (outside code blocks).
fn anchors(text: &str) -> Vec<String> {
    let mut fenced = false;
    let mut out = Vec::new();
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
        } else if !fenced && line.starts_with('#') {
            out.push(anchor(line.trim_start_matches('#')));
        }
    }
    out
}

/// The targets of `[text](target)` links in `text`, code blocks and inline
/// code left out.
fn link_targets(text: &str) -> Vec<String> {
    let mut fenced = false;
    let mut out = Vec::new();
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if fenced {
            continue;
        }
        // Drop inline code spans.
        let prose: String = line.split('`').step_by(2).collect::<Vec<_>>().join(" ");
        let mut rest = prose.as_str();
        while let Some(i) = rest.find("](") {
            rest = &rest[i + 2..];
            if let Some(end) = rest.find(')') {
                out.push(rest[..end].to_string());
                rest = &rest[end..];
            }
        }
    }
    out
}

fn documents() -> Vec<PathBuf> {
    let mut files = vec![root().join("README.md"), root().join("BENCHMARKS.md")];
    for entry in std::fs::read_dir(root().join("docs")).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "md") {
            files.push(path);
        }
    }
    files.sort();
    files
}

#[test]
fn relative_links_resolve() {
    let mut broken = Vec::new();
    let docs = documents();
    assert!(docs.len() >= 4, "README, BENCHMARKS and docs/");
    for doc in &docs {
        let text = read(doc);
        for target in link_targets(&text) {
            if target.contains("://") || target.starts_with("mailto:") {
                continue;
            }
            let (file, fragment) = match target.split_once('#') {
                Some((f, a)) => (f, Some(a)),
                None => (target.as_str(), None),
            };
            let path = if file.is_empty() {
                doc.clone()
            } else {
                doc.parent().unwrap().join(file)
            };
            let name = format!("{}: {target}", doc.strip_prefix(root()).unwrap().display());
            if !path.exists() {
                broken.push(format!("{name} (no such file)"));
                continue;
            }
            // A clone has only the repository: a link out of it breaks there.
            let inside = path
                .canonicalize()
                .is_ok_and(|p| p.starts_with(root().canonicalize().unwrap()));
            if !inside {
                broken.push(format!("{name} (outside the repository)"));
                continue;
            }
            if let Some(fragment) = fragment
                && path.extension().is_some_and(|e| e == "md")
                && !anchors(&read(&path)).iter().any(|a| a == fragment)
            {
                broken.push(format!("{name} (no such heading)"));
            }
        }
    }
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
}

#[test]
fn anchors_follow_github() {
    assert_eq!(anchor(" The CLI"), "the-cli");
    assert_eq!(anchor(" Shards, merge and SLURM"), "shards-merge-and-slurm");
    assert_eq!(anchor(" BERTScore (P, R, F)"), "bertscore-p-r-f");
    assert_eq!(
        link_targets("see [a](docs/a.md#x) and `[b](nope)` and [c](c.md)"),
        ["docs/a.md#x", "c.md"]
    );
}
