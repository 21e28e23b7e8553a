//! Route latency over 63 (the real corpus), 1,000 and 10,000 generated skills: index
//! build time, then median and p99 of `Router::route` over a fixed query mix, by words
//! alone and with recall by meaning (the sentence encoder), in the same run. With meaning,
//! the query's embedding (`Router::embed_query`, the encoder's run) and the scoring
//! (`Router::route_embedded`: recall, the z-scores over every skill, phase 2, the plan)
//! are timed apart, each with its median and p99, and meaning's own share of the scoring
//! (every skill's cosine, the z-scores, the top 3) alone.
//! `cargo bench -p skillbox-core --bench route`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use skillbox_core::router::meaning::{body_text, QueryVector, SemanticIndex, SkillText};
use skillbox_core::router::{AssumeReady, RouteInputs, Router, RoutingConfig, StatsMap};
use skillbox_protocol::skill::{discover, Catalog, DiscoveryOptions};

const WORDS: &[&str] = &[
    "weather",
    "forecast",
    "notes",
    "email",
    "calendar",
    "music",
    "lights",
    "camera",
    "pdf",
    "diagram",
    "debug",
    "python",
    "node",
    "github",
    "issues",
    "tickets",
    "invoice",
    "price",
    "crypto",
    "translate",
    "summarize",
    "video",
    "audio",
    "speech",
    "search",
    "places",
    "orders",
    "reminders",
    "tasks",
    "slides",
    "theme",
    "poster",
    "art",
    "deploy",
    "server",
    "firewall",
    "backup",
    "database",
    "sql",
    "charts",
];
const ZH: &[&str] = &[
    "天气", "笔记", "邮件", "日历", "音乐", "价格", "发票", "翻译",
];

const QUERIES: [&str; 8] = [
    "what's the weather forecast for Lisbon tomorrow",
    "debug my python script with breakpoints",
    "merge these pdf invoices and email them",
    "明天北京天气怎么样",
    "tell me a joke about programmers",
    "$skill-00042 run it",
    "search github issues about the database backup",
    "play some music and dim the lights",
];

fn generated(n: usize) -> (tempfile::TempDir, Arc<Catalog>) {
    let dir = tempfile::tempdir().unwrap();
    for i in 0..n {
        let w = |k: usize| WORDS[(i * 7 + k * 13) % WORDS.len()];
        let name = format!("skill-{i:05}");
        let d = dir.path().join(&name);
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(
            d.join("SKILL.md"),
            format!(
                "---\nname: {name}\ndescription: \"Work with {} and {} for {} using tool{i}.\"\ntriggers: [{}, {}]\n---\nbody\n",
                w(0), w(1), w(2), w(3), ZH[i % ZH.len()]
            ),
        )
        .unwrap();
    }
    let c = discover(
        &[dir.path().to_path_buf()],
        DiscoveryOptions {
            max_folders: n * 2 + 10,
            ..DiscoveryOptions::default()
        },
    );
    assert_eq!(c.skills.len(), n, "{:?}", c.skipped.first());
    (dir, Arc::new(c))
}

/// The real corpus: `$SKILLBOX_CORPUS`, else `../shared/corpus` beside the repository, else
/// `None` (the corpus row is skipped and says so).
fn corpus() -> Option<Arc<Catalog>> {
    let root = match std::env::var_os("SKILLBOX_CORPUS") {
        Some(dir) => PathBuf::from(dir),
        None => PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../shared/corpus"),
    };
    if !root.is_dir() {
        println!(
            "SKIPPED corpus: no corpus at {} (set SKILLBOX_CORPUS or put the corpus at ../shared/corpus)",
            root.display()
        );
        return None;
    }
    Some(Arc::new(discover(
        &[root.join("openclaw"), root.join("anthropic")],
        DiscoveryOptions::default(),
    )))
}

fn bench(label: &str, catalog: Arc<Catalog>, config: RoutingConfig) {
    let n = catalog.skills.len();
    let label = if config.semantic {
        format!("{label}+meaning")
    } else {
        format!("{label}, words")
    };
    let config_semantic = config.semantic;
    let t = Instant::now();
    let router = Router::new(catalog, config);
    let build = t.elapsed();
    let queries = QUERIES;
    let stats = StatsMap::new();
    let inputs = RouteInputs {
        context_id: None,
        readiness: &AssumeReady,
        stats: &stats,
    };
    let mut times = Vec::new();
    let mut embedding = Vec::new();
    let mut by_query: Vec<Vec<f64>> = vec![Vec::new(); queries.len()];
    for round in 0..250 {
        for (k, q) in queries.iter().enumerate() {
            let t = Instant::now();
            let vector = router.embed_query(q);
            let embedded = t.elapsed();
            let t = Instant::now();
            let plan = router
                .route_embedded(q, vector.as_ref(), &inputs)
                .expect("a route id");
            let e = t.elapsed();
            std::hint::black_box(plan);
            if round >= 10 {
                times.push(e.as_nanos() as f64 / 1e3);
                embedding.push(embedded.as_nanos() as f64 / 1e3);
                by_query[k].push(e.as_nanos() as f64 / 1e3);
            }
        }
    }
    // The slowest query of the mix, by its median: what the p99 is made of.
    let slowest = by_query
        .iter_mut()
        .zip(queries)
        .map(|(t, q)| {
            t.sort_by(f64::total_cmp);
            (t[t.len() / 2], q)
        })
        .max_by(|a, b| a.0.total_cmp(&b.0));
    times.sort_by(f64::total_cmp);
    embedding.sort_by(f64::total_cmp);
    // `p` is a fraction in 0..=1, so the index lies in 0..len.
    #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
    let at = |t: &[f64], p: f64| t[((t.len() as f64 - 1.0) * p) as usize];
    println!(
        "{label:<18} {n:>6} skills  build {:>8.2} ms  route median {:>7.1} µs  p99 {:>7.1} µs",
        build.as_secs_f64() * 1e3,
        at(&times, 0.5),
        at(&times, 0.99)
    );
    if config_semantic {
        println!(
            "{:<26} query embedding median {:>7.1} µs  p99 {:>7.1} µs (before the route)",
            "",
            at(&embedding, 0.5),
            at(&embedding, 0.99)
        );
    }
    if let Some((median, q)) = slowest {
        println!("{:<26} slowest query {q:?}: median {median:.1} µs", "");
    }
}

/// Recall by meaning's own share of a route: every skill's cosine to the embedded query,
/// the z-scores and the top 3 (`SemanticIndex::score` and `Scored::top`), over the same
/// skill vectors the router holds (taken from the cache by their text's digest).
fn scoring_alone(catalog: &Catalog, queries: &[&str]) {
    let texts: Vec<(String, String)> = (catalog.skills.iter())
        .map(|s| {
            let head = format!("{}. {}", s.name.replace('-', " "), s.description);
            (head, body_text(&s.read_body().unwrap_or_default()))
        })
        .collect();
    let index = SemanticIndex::build(texts.iter().map(|(head, body)| SkillText { head, body }));
    let vectors: Vec<QueryVector> = queries
        .iter()
        .filter_map(|q| QueryVector::embed(q))
        .collect();
    let floor = RoutingConfig::default().semantic_z_floor;
    let mut times = Vec::new();
    for round in 0..250 {
        for v in &vectors {
            let t = Instant::now();
            let top = index.score(v).map(|s| s.top(3, floor));
            let e = t.elapsed();
            std::hint::black_box(top);
            if round >= 10 {
                times.push(e.as_nanos() as f64 / 1e3);
            }
        }
    }
    times.sort_by(f64::total_cmp);
    // `p` is a fraction in 0..=1, so the index lies in 0..len.
    #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
    let at = |p: f64| times[((times.len() as f64 - 1.0) * p) as usize];
    println!(
        "{:<26} meaning's scoring alone median {:>7.1} µs  p99 {:>7.1} µs ({} skills)",
        "",
        at(0.5),
        at(0.99),
        catalog.skills.len()
    );
}

/// Each catalogue routed by words alone (the baseline: recall before meaning) and with
/// recall by meaning, in the same run.
fn both(label: &str, catalog: &Arc<Catalog>) {
    let words = RoutingConfig {
        semantic: false,
        ..RoutingConfig::default()
    };
    bench(label, Arc::clone(catalog), words);
    bench(label, Arc::clone(catalog), RoutingConfig::default());
    scoring_alone(catalog, &QUERIES);
}

fn main() {
    if let Some(c) = corpus() {
        both("corpus", &c);
    }
    for n in [1_000, 10_000] {
        let (_dir, c) = generated(n);
        both("generated", &c);
    }
}
