//! `skillbox.toml` parsing: defaults, each section, and the refusals of bad files.

use super::*;

#[test]
fn missing_file_gives_defaults() {
    let dir = tempfile::tempdir().unwrap();
    assert_eq!(Config::load(dir.path()).unwrap(), Config::default());
}

#[test]
fn internal_listeners_of_up_take_free_ports_unless_set() {
    let default = ExecutorConfig::default();
    assert_eq!(default.executor_listen(), "127.0.0.1:0");
    assert_eq!(default.callback_listen_for(true), "127.0.0.1:0");
    assert_eq!(default.callback_listen_for(false), SERVE_CALLBACK_LISTEN);
    let set = ExecutorConfig {
        listen: "127.0.0.1:9071".into(),
        callback_listen: "0.0.0.0:9072".into(),
        ..ExecutorConfig::default()
    };
    assert_eq!(set.executor_listen(), "127.0.0.1:9071");
    assert_eq!(set.callback_listen_for(true), "0.0.0.0:9072");
    assert_eq!(set.callback_listen_for(false), "0.0.0.0:9072");
}

#[test]
fn unknown_key_is_refused_with_its_name() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join(CONFIG_FILE), "[fetch]\nallow_privat = []\n").unwrap();
    let err = Config::load(dir.path()).unwrap_err().to_string();
    assert!(err.contains("allow_privat"), "{err}");
}

#[test]
fn executor_and_docker_limits_out_of_range_are_refused_with_the_key() {
    let dir = tempfile::tempdir().unwrap();
    for (toml, key) in [
        (
            "[executor]\nhealth_interval_ms = 0\n",
            "executor.health_interval_ms",
        ),
        (
            "[executor]\nscratch_tmpfs_mb = 2000000\n",
            "executor.scratch_tmpfs_mb",
        ),
        (
            "[executor]\nblob_cache_mb = 2000000\n",
            "executor.blob_cache_mb",
        ),
        (
            "[docker]\nrestart_after_ms = 10\n",
            "docker.restart_after_ms",
        ),
        ("[docker]\ninterval_ms = 0\n", "docker.interval_ms"),
        ("[docker]\ncontainer_pids = -1\n", "docker.container_pids"),
        ("[docker]\ncontainer_cpus = -1.0\n", "docker.container_cpus"),
        ("[docker]\ncontainer_cpus = nan\n", "docker.container_cpus"),
        (
            "[docker]\ncontainer_memory_overhead_mb = 0\n",
            "docker.container_memory_overhead_mb",
        ),
        ("[docker]\nmax_containers = 0\n", "docker.max_containers"),
        ("[exec]\nquiet_ms = 0\n", "exec.quiet_ms"),
        ("[exec]\nquiet_ms = 1001\n", "exec.quiet_ms"),
    ] {
        std::fs::write(dir.path().join(CONFIG_FILE), toml).unwrap();
        let err = Config::load(dir.path()).unwrap_err().to_string();
        assert!(
            err.contains(key) && err.contains("out of range"),
            "{toml}: {err}"
        );
    }
    std::fs::write(
        dir.path().join(CONFIG_FILE),
        "[docker]\nsocket = \"off\"\ncontainer_cpus = 0.5\n[executor]\nurls = [\"https://executor:7071\"]\n",
    )
    .unwrap();
    let c = Config::load(dir.path()).unwrap();
    assert_eq!(c.docker.socket, "off");
    assert_eq!(c.executor.urls, vec!["https://executor:7071"]);
}

#[test]
fn partial_sections_keep_other_defaults() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join(CONFIG_FILE),
        "[fetch]\nallow_private = [\"127.0.0.1:8080\"]\n",
    )
    .unwrap();
    let c = Config::load(dir.path()).unwrap();
    assert_eq!(c.fetch.allow_private, vec!["127.0.0.1:8080"]);
    assert_eq!(c.fetch.timeout_ms, 15_000);
    assert_eq!(c.gateway, GatewayConfig::default());
    assert!(!c.trust.require_signed);
}

#[test]
fn repair_section_is_read_with_defaults() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join(CONFIG_FILE),
        "[repair]\nattempts_per_run = 1\n",
    )
    .unwrap();
    let c = Config::load(dir.path()).unwrap();
    assert_eq!(c.repair.attempts_per_run, 1);
    assert_eq!(c.repair.budget().hunks_per_attempt, 8);
    assert_eq!(c.repair.budget().added_doc_tokens, 300);
}

#[test]
fn trust_require_signed_is_read() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join(CONFIG_FILE),
        "[trust]\nrequire_signed = true\n",
    )
    .unwrap();
    assert!(Config::load(dir.path()).unwrap().trust.require_signed);
}

/// `[fetch]` and `[approvals]` are read straight into the proxy's and the approvals'
/// own settings: every key of theirs is a config key, with the same defaults.
#[test]
fn fetch_and_approvals_sections_are_the_runtime_settings() {
    let dir = tempfile::tempdir().unwrap();
    assert_eq!(
        Config::load(dir.path()).unwrap().fetch,
        crate::proxy::fetch::FetchConfig::default()
    );
    std::fs::write(
        dir.path().join(CONFIG_FILE),
        "[fetch]\nmax_redirects = 2\nmax_request_bytes = 10\n[approvals]\ntimeout_ms = 5\nauto_approve = [\"a:b\"]\n",
    )
    .unwrap();
    let c = Config::load(dir.path()).unwrap();
    assert_eq!(c.fetch.max_redirects, 2);
    assert_eq!(c.fetch.max_request_bytes, 10);
    assert_eq!(c.fetch.timeout_ms, 15_000);
    assert_eq!(c.approvals.timeout_ms, 5);
    assert_eq!(c.approvals.auto_approve, vec!["a:b"]);
    std::fs::write(dir.path().join(CONFIG_FILE), "[fetch]\nmax_redirect = 2\n").unwrap();
    let err = Config::load(dir.path()).unwrap_err().to_string();
    assert!(err.contains("max_redirect"), "{err}");
}

#[test]
fn gateway_connection_limits_are_read_and_out_of_range_refused_with_the_key() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join(CONFIG_FILE),
        "[gateway]\nheader_timeout_ms = 2000\nbody_timeout_ms = 3000\nidle_timeout_ms = 4000\nmax_connections = 10\nhealthz_reserve_connections = 2\n",
    )
    .unwrap();
    let g = Config::load(dir.path()).unwrap().gateway;
    assert_eq!(
        (g.header_timeout_ms, g.body_timeout_ms, g.idle_timeout_ms),
        (2000, 3000, 4000)
    );
    assert_eq!(
        (g.max_connections, g.healthz_reserve_connections),
        (Some(10), 2)
    );
    for (toml, key) in [
        (
            "[gateway]\nheader_timeout_ms = 0\n",
            "gateway.header_timeout_ms",
        ),
        (
            "[gateway]\nbody_timeout_ms = 0\n",
            "gateway.body_timeout_ms",
        ),
        (
            "[gateway]\nidle_timeout_ms = 0\n",
            "gateway.idle_timeout_ms",
        ),
        (
            "[gateway]\nmax_connections = 0\n",
            "gateway.max_connections",
        ),
        (
            "[gateway]\nhealthz_reserve_connections = 0\n",
            "gateway.healthz_reserve_connections",
        ),
        (
            "[gateway]\nheader_timeout_under_load_ms = 10\n",
            "gateway.header_timeout_under_load_ms",
        ),
        (
            "[gateway]\nmax_connections_per_peer = 0\n",
            "gateway.max_connections_per_peer",
        ),
        (
            "[gateway]\nhigh_water_connections = 0\n",
            "gateway.high_water_connections",
        ),
    ] {
        std::fs::write(dir.path().join(CONFIG_FILE), toml).unwrap();
        let err = Config::load(dir.path()).unwrap_err().to_string();
        assert!(
            err.contains(key) && err.contains("out of range"),
            "{toml}: {err}"
        );
    }
}

#[test]
fn gateway_flood_limits_default_from_the_fd_limit_and_an_explicit_value_wins() {
    let d = GatewayConfig::default();
    assert_eq!(d.header_timeout_under_load_ms, 1000);
    // Half the open-file limit, at most 16384.
    assert_eq!(d.max_connections_for(1024), 512);
    assert_eq!(d.max_connections_for(20_000), 10_000);
    assert_eq!(d.max_connections_for(1_048_576), 16_384);
    assert_eq!(d.max_connections_for(1), 1);
    // Per peer: 1024, or half the cap when smaller; high water: half the cap.
    assert_eq!(d.max_connections_per_peer_for(16_384), 1024);
    assert_eq!(d.max_connections_per_peer_for(512), 256);
    assert_eq!(d.max_connections_per_peer_for(1), 1);
    assert_eq!(d.high_water_for(10_000), 5_000);
    assert_eq!(d.high_water_for(1), 1);
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join(CONFIG_FILE),
        "[gateway]\nmax_connections = 100\nmax_connections_per_peer = 7\n\
         high_water_connections = 90\nheader_timeout_under_load_ms = 500\n",
    )
    .unwrap();
    let g = Config::load(dir.path()).unwrap().gateway;
    assert_eq!(g.max_connections_for(1_048_576), 100);
    assert_eq!(g.max_connections_per_peer_for(100), 7);
    assert_eq!(g.high_water_for(100), 90);
    assert_eq!(g.header_timeout_under_load_ms, 500);
}

#[test]
fn grants_are_read_per_skill_and_a_bad_one_stops_the_load_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join(CONFIG_FILE),
        "[grants.weather]\nnetwork = [\"wttr.in\"]\nenv = [\"WEATHER_KEY\"]\n",
    )
    .unwrap();
    let c = Config::load(dir.path()).unwrap();
    assert_eq!(c.grants["weather"].network, ["wttr.in"]);
    assert_eq!(c.grants["weather"].env, ["WEATHER_KEY"]);
    std::fs::write(
        dir.path().join(CONFIG_FILE),
        "[grants.weather]\nenv = [\"LD_PRELOAD\"]\n",
    )
    .unwrap();
    let e = Config::load(dir.path()).unwrap_err().to_string();
    assert!(e.contains("[grants.weather] env[0]"), "{e}");
    assert!(e.contains("reserved"), "{e}");
}

#[test]
fn egress_section_reads_limits_and_pinned_names() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join(CONFIG_FILE),
        "[egress]\nmax_bytes_per_call = 1000\nmax_connections_per_call = 2\n\
         connect_timeout_ms = 500\nidle_timeout_ms = 700\n\
         resolve = { \"api.example.test\" = \"127.0.0.1\", \"v6.test\" = \"::1\" }\n",
    )
    .unwrap();
    let egress = Config::load(dir.path()).unwrap().egress;
    assert_eq!(
        (
            egress.max_bytes_per_call,
            egress.max_connections_per_call,
            egress.connect_timeout_ms,
            egress.idle_timeout_ms
        ),
        (1000, 2, 500, 700)
    );
    assert_eq!(
        egress.resolve["api.example.test"],
        "127.0.0.1".parse::<std::net::IpAddr>().unwrap()
    );
    assert_eq!(egress.resolve.len(), 2);
    let defaults = egress::EgressConfig::default();
    assert_eq!(defaults.max_bytes_per_call, 256 * 1024 * 1024);
    assert_eq!(defaults.max_connections_per_call, 64);
}

#[test]
fn egress_bad_values_are_refused_with_the_key() {
    let dir = tempfile::tempdir().unwrap();
    for (toml, key) in [
        (
            "[egress]\nresolve = { \"a.test\" = \"not-an-ip\" }\n",
            "resolve",
        ),
        (
            "[egress]\nmax_connections_per_call = 0\n",
            "egress.max_connections_per_call",
        ),
        ("[egress]\nidle_timeout_ms = 0\n", "egress.idle_timeout_ms"),
    ] {
        std::fs::write(dir.path().join(CONFIG_FILE), toml).unwrap();
        let err = Config::load(dir.path()).unwrap_err().to_string();
        assert!(err.contains(key), "{toml}: {err}");
    }
}
