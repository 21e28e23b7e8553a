//! Imports run one way inside the core (docs/architecture.md, "Inside the core"): each
//! top-level folder of `core/src` imports exactly the folders its row of that table names,
//! all of them below it, and no file imports, through any chain of imports, a file that
//! imports it back. The code is read as text: every `crate::`, `super::` and `self::` path
//! outside comments and `mod tests` blocks names the module it reaches. A folder and its
//! own submodules may use each other (a `mod.rs` re-exporting a child that uses its
//! parent's types is one module, not a circle).

use std::path::{Path, PathBuf};

use super::layers_graph::{
    assert_matches_table, circles, documented, imports, modules, top_level_imports,
};

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

fn docs() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/architecture.md")
}

#[test]
fn layers_each_core_folder_imports_exactly_what_docs_architecture_says_and_only_below_it() {
    let actual = top_level_imports(&modules(&src()));
    assert_matches_table(&actual, &documented(&docs(), "### Inside the core"));
}

#[test]
fn layers_no_file_of_the_core_imports_itself_back_through_a_chain() {
    let circles = circles(&modules(&src()));
    assert!(circles.is_empty(), "files in an import circle: {circles:?}");
}

#[test]
fn layers_the_gateways_three_protocols_share_only_its_web_layer() {
    let protocols = ["rest", "mcp", "console"];
    let mut crossing = Vec::new();
    for (from, tos) in imports(&modules(&src())) {
        let Some(own) = from
            .get(1)
            .filter(|p| from[0] == "gateway" && protocols.contains(&p.as_str()))
        else {
            continue;
        };
        for to in tos {
            let other = to
                .get(1)
                .filter(|p| to[0] == "gateway" && *p != own && protocols.contains(&p.as_str()));
            if other.is_some() {
                crossing.push(format!("{} -> {}", from.join("/"), to.join("/")));
            }
        }
    }
    assert!(
        crossing.is_empty(),
        "a gateway protocol imports another: {crossing:?}"
    );
}
