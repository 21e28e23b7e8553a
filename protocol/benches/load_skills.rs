//! Discovery over 1,000 generated skill folders: a third `SKILL.md` with a ~20 KiB body,
//! a third `skill.yaml` with a tool and a parameters schema, a third `package.json`
//! (OwliaBot style). The folders are written once; each sample runs `discover` over all.
//!
//! `cargo bench -p skillbox-protocol --bench load_skills`

use std::hint::black_box;
use std::path::Path;
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, Criterion};
use skillbox_protocol::skill::{discover, DiscoveryOptions};

const SKILLS: usize = 1_000;
const BODY_BYTES: usize = 20 * 1024;

fn write(path: &Path, text: &str) -> std::io::Result<()> {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent)?;
    }
    std::fs::write(path, text)
}

fn generate(root: &Path) -> std::io::Result<()> {
    let paragraph =
        "Step: run the tool, read its JSON answer, and report the result to the user.\n";
    let body = paragraph.repeat(BODY_BYTES / paragraph.len() + 1);
    for i in 0..SKILLS {
        let name = format!("skill-{i:04}");
        let dir = root.join(&name);
        match i % 3 {
            0 => write(
                &dir.join("SKILL.md"),
                &format!(
                    "---\nname: {name}\ndescription: Generated skill {i}. Use when the user asks about topic {i}.\n\
                     license: Apache-2.0\nmetadata:\n  skillbox:\n    triggers: [topic{i}, t{i}]\n    cost_hint: low\n\
                     \x20 openclaw: {{ \"requires\": {{ \"bins\": [\"python3\"], }}, \"os\": [\"linux\"], }}\n---\n# {name}\n\n{body}"
                ),
            )?,
            1 => {
                write(
                    &dir.join("skill.yaml"),
                    &format!(
                        "name: {name}\nversion: 1.{i}.0\ndescription: Generated tool skill {i}\n\
                         triggers: [price{i}]\npermissions:\n  env: [API_KEY_{i}]\n  network: [\"api{i}.example.com\", \"*.example.org:8443\"]\n\
                         \x20 workspace: {{ read: [\"notes/**\"] }}\nexecution: {{ timeout_ms: 10000, memory_mb: 128 }}\n\
                         tools:\n  - name: get_{i}\n    description: Tool {i}\n    command: [\"python3\", \"scripts/run.py\"]\n\
                         \x20   parameters:\n      type: object\n      properties: {{ coin: {{ type: string, minLength: 1 }}, n: {{ type: integer, minimum: 0 }} }}\n\
                         \x20     required: [coin]\n"
                    ),
                )?;
                write(&dir.join("scripts/run.py"), "print('{}')\n")?;
            }
            _ => {
                write(
                    &dir.join("package.json"),
                    &format!(
                        r#"{{ "name": "{name}", "version": "0.{i}.0", "description": "Generated JS skill {i}", "main": "index.js",
  "dependencies": {{ "x": "1" }},
  "owliabot": {{ "requires": {{ "env": ["TOKEN_{i}"] }},
    "tools": [{{ "name": "js_{i}", "description": "JS tool", "parameters": {{ "type": "object", "properties": {{ "q": {{ "type": "string" }} }} }},
                "security": {{ "level": "write" }}, "timeout": 5000 }}] }} }}"#
                    ),
                )?;
                write(&dir.join("index.js"), "exports.tools = {};\n")?;
            }
        }
    }
    Ok(())
}

fn bench_discover(c: &mut Criterion) {
    let tmp = match tempfile::tempdir() {
        Ok(t) => t,
        Err(e) => panic!("cannot create a temporary directory: {e}"),
    };
    if let Err(e) = generate(tmp.path()) {
        panic!("cannot generate skill folders: {e}");
    }
    let roots = vec![tmp.path().to_path_buf()];
    let opts = DiscoveryOptions::default();

    // One checked run: everything loads, and the per-skill cost in plain words.
    let start = Instant::now();
    let catalog = discover(&roots, opts);
    let elapsed = start.elapsed();
    assert_eq!(
        catalog.skills.len(),
        SKILLS,
        "skipped: {:?}",
        catalog.skipped
    );
    println!(
        "discover: {SKILLS} skills in {elapsed:?} (first run), {:?} per skill",
        elapsed.div_f64(SKILLS as f64)
    );

    let mut group = c.benchmark_group("load_skills");
    group.sample_size(10);
    group.warm_up_time(Duration::from_secs(1));
    group.measurement_time(Duration::from_secs(12));
    group.bench_function("discover_1000", |b| {
        b.iter(|| black_box(discover(black_box(&roots), opts)))
    });
    group.finish();

    let runs: u32 = 5;
    let start = Instant::now();
    for _ in 0..runs {
        black_box(discover(&roots, opts));
    }
    let per_skill = start.elapsed().div_f64(f64::from(runs) * SKILLS as f64);
    println!("discover: {per_skill:?} per skill (mean of {runs} warm runs over {SKILLS} skills)");
}

criterion_group!(benches, bench_discover);
criterion_main!(benches);
