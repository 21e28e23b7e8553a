//! Imports run one way inside the executor (docs/architecture.md, "Inside the executor"),
//! as inside the core: each top-level module of `executor/src` imports exactly the
//! modules its row of that table names, all below it, and no file imports, through any
//! chain, a file that imports it back. Read as text by the core's own reader
//! (`core/tests/suite/layers_graph.rs`, included by path so both crates hold one copy).

use std::path::{Path, PathBuf};

#[path = "../../../core/tests/suite/layers_graph.rs"]
mod layers_graph;

use layers_graph::{assert_matches_table, circles, documented, modules, top_level_imports};

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

#[test]
fn layers_each_executor_module_imports_exactly_what_docs_architecture_says_and_only_below_it() {
    let actual = top_level_imports(&modules(&src()));
    let docs = Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/architecture.md");
    let rows = documented(&docs, "### Inside the executor");
    if std::env::var_os("LAYERS_PRINT").is_some() {
        for (m, i) in &actual {
            eprintln!("{m}: {i:?}");
        }
    }
    assert_matches_table(&actual, &rows);
}

#[test]
fn layers_no_file_of_the_executor_imports_itself_back_through_a_chain() {
    let circles = circles(&modules(&src()));
    assert!(circles.is_empty(), "files in an import circle: {circles:?}");
}
