//! Permission rules: env names, network patterns, workspace globs.

use skillbox_protocol::skill::Severity;
use tempfile::tempdir;

use super::common::*;

fn with_permissions(root: &std::path::Path, permissions: &str) -> std::path::PathBuf {
    write_skill(
        root,
        "p",
        &[(
            "skill.yaml",
            &skill_yaml("p", &format!("permissions: {permissions}\n")),
        )],
    )
}

#[test]
fn permissions_env_valid_names_load() {
    let root = tempdir().unwrap();
    let dir = with_permissions(root.path(), "{ env: [COINGECKO_API_KEY, _private, a1] }");
    assert_eq!(
        clean(&dir).permissions.env,
        ["COINGECKO_API_KEY", "_private", "a1"]
    );
}

#[test]
fn permissions_env_invalid_name_is_refused() {
    let root = tempdir().unwrap();
    for name in ["1BAD", "A-B", "\"A B\"", "\"\""] {
        let dir = with_permissions(root.path(), &format!("{{ env: [OK, {name}] }}"));
        assert_skipped_for(
            &dir,
            "skill.yaml",
            "permissions.env[1]",
            "is not an env name",
        );
    }
}

#[test]
fn permissions_env_reserved_name_is_refused() {
    let root = tempdir().unwrap();
    for name in [
        "LD_PRELOAD",
        "PATH",
        "SKILLBOX_X",
        "HOME",
        "NODE_OPTIONS",
        "DYLD_INSERT_LIBRARIES",
    ] {
        let dir = with_permissions(root.path(), &format!("{{ env: [{name}] }}"));
        assert_skipped_for(&dir, "skill.yaml", "permissions.env[0]", "is reserved");
    }
}

#[test]
fn permissions_network_valid_patterns_load() {
    let root = tempdir().unwrap();
    let dir = with_permissions(
        root.path(),
        r#"{ network: ["api.x.com", "*.example.org:8443", "http://127.0.0.1:8080", "https://[::1]"] }"#,
    );
    assert_eq!(clean(&dir).permissions.network.len(), 4);
}

#[test]
fn permissions_network_invalid_patterns_are_refused() {
    let root = tempdir().unwrap();
    for (pattern, needle) in [
        ("*", "wildcard"),
        ("a.com/path", "no path"),
        ("*.com", "at least two labels"),
        ("ftp://a.com", "scheme"),
        ("a.com:0", "port"),
    ] {
        let dir = with_permissions(root.path(), &format!("{{ network: [\"{pattern}\"] }}"));
        assert_skipped_for(&dir, "skill.yaml", "permissions.network[0]", needle);
    }
}

#[test]
fn permissions_workspace_read_globs_load() {
    let root = tempdir().unwrap();
    let dir = with_permissions(
        root.path(),
        r#"{ workspace: { read: ["notes/**", "*.md", "data/{a,b}.csv"] } }"#,
    );
    assert_eq!(clean(&dir).permissions.workspace.read.len(), 3);
}

#[test]
fn permissions_workspace_read_escaping_or_invalid_globs_are_refused() {
    let root = tempdir().unwrap();
    for (glob, needle) in [
        ("../x", "\"..\" is not allowed"),
        ("notes/../../x", "\"..\" is not allowed"),
        ("/abs", "absolute paths are not allowed"),
        ("a[b", "not a valid glob"),
        ("", "empty"),
    ] {
        let dir = with_permissions(
            root.path(),
            &format!("{{ workspace: {{ read: [\"{glob}\"] }} }}"),
        );
        assert_skipped_for(&dir, "skill.yaml", "permissions.workspace.read[0]", needle);
    }
}

#[test]
fn permissions_workspace_read_of_the_whole_workspace_warns() {
    let root = tempdir().unwrap();
    for glob in ["**", "**/*", "*/**", "./**"] {
        let dir = with_permissions(
            root.path(),
            &format!("{{ workspace: {{ read: [\"notes/**\", \"{glob}\"] }} }}"),
        );
        let skill = loaded(&dir);
        assert_diag(
            &skill.warnings,
            Severity::Warning,
            "skill.yaml",
            "permissions.workspace.read[1]",
            "asks to read every workspace file",
        );
        assert_no_diag(&skill.warnings, "permissions.workspace.read[0]");
        // A warning, not an error: the skill still loads with its globs.
        assert_eq!(skill.permissions.workspace.read.len(), 2, "{glob}");
    }
    // Two globs that only together cover everything.
    let dir = with_permissions(root.path(), r#"{ workspace: { read: ["*/*", "*/*/**"] } }"#);
    assert_diag(
        &loaded(&dir).warnings,
        Severity::Warning,
        "skill.yaml",
        "permissions.workspace.read",
        "together cover the whole workspace",
    );
}

#[test]
fn permissions_secrets_bind_names_to_hosts_and_count_as_network() {
    let root = tempdir().unwrap();
    let dir = with_permissions(
        root.path(),
        "{ secrets: [{ name: OPENAI_API_KEY, hosts: [api.openai.com] }] }",
    );
    let skill = clean(&dir);
    let s = &skill.permissions.secrets;
    assert_eq!(s.len(), 1);
    assert_eq!(
        (s[0].name.as_str(), s[0].hosts.as_slice()),
        ("OPENAI_API_KEY", &["api.openai.com".to_string()][..])
    );
    assert!(
        skill.permissions.is_network(),
        "a binding reaches its hosts"
    );
    assert_eq!(skill.permissions.reachable(), ["api.openai.com"]);
}

#[test]
fn permissions_secrets_bad_bindings_are_refused_with_their_reason() {
    let root = tempdir().unwrap();
    for (secrets, field, why) in [
        (
            "[{ name: K, hosts: [] }]",
            "permissions.secrets[0]",
            "bound to no host",
        ),
        (
            "[{ name: LD_PRELOAD, hosts: [a.test] }]",
            "permissions.secrets[0]",
            "is reserved",
        ),
        (
            "[{ name: SSL_CERT_FILE, hosts: [a.test] }]",
            "permissions.secrets[0]",
            "is reserved",
        ),
        (
            "[{ name: 1BAD, hosts: [a.test] }]",
            "permissions.secrets[0]",
            "is not an env name",
        ),
        (
            "[{ name: K, hosts: [\"*\"] }]",
            "permissions.secrets[0].hosts[0]",
            "",
        ),
        (
            "[{ name: K, hosts: [a.test] }, { name: K, hosts: [b.test] }]",
            "permissions.secrets[1]",
            "bound twice",
        ),
    ] {
        let dir = with_permissions(root.path(), &format!("{{ secrets: {secrets} }}"));
        assert_skipped_for(&dir, "skill.yaml", field, why);
    }
    let dir = with_permissions(
        root.path(),
        "{ env: [K], secrets: [{ name: K, hosts: [a.test] }] }",
    );
    assert_skipped_for(
        &dir,
        "skill.yaml",
        "permissions.secrets[0]",
        "also in permissions.env",
    );
    let dir = with_permissions(
        root.path(),
        "{ secrets: [{ name: K, hosts: [a.test], extra: 1 }] }",
    );
    let skipped = skipped(&dir);
    assert!(
        skipped
            .diagnostics
            .iter()
            .any(|d| d.message.contains("extra")),
        "{skipped:?}"
    );
}

#[test]
fn validate_advises_binding_a_credential_looking_env_name() {
    let root = tempdir().unwrap();
    let dir = with_permissions(root.path(), "{ env: [OPENAI_API_KEY, REGION] }");
    let skill = clean(&dir);
    let advice = skillbox_protocol::skill::validate::advice(&skill);
    assert_eq!(advice.len(), 1, "{advice:?}");
    assert!(advice[0].contains("OPENAI_API_KEY") && advice[0].contains("permissions.secrets"));
}

#[test]
fn permissions_delegate_names_skills_or_tools_and_never_the_skill_itself() {
    let root = tempdir().unwrap();
    let dir = with_permissions(
        root.path(),
        "{ delegate: [weather, \"calendar:list_events\"] }",
    );
    let skill = clean(&dir);
    assert!(skill.permissions.may_delegate("weather", "forecast"));
    assert!(skill.permissions.may_delegate("calendar", "list_events"));
    assert!(!skill.permissions.may_delegate("calendar", "delete_event"));
    assert!(!skill.permissions.may_delegate("mail", "send"));
    for (delegate, why) in [
        ("[p]", "is the skill itself"),
        ("[\"p:run\"]", "is the skill itself"),
        ("[Weather]", "is not a skill name or skill:tool"),
        ("[\"weather:Get\"]", "is not a skill name or skill:tool"),
        ("[\"weather:\"]", "is not a skill name or skill:tool"),
    ] {
        let dir = with_permissions(root.path(), &format!("{{ delegate: {delegate} }}"));
        assert_skipped_for(&dir, "skill.yaml", "permissions.delegate[0]", why);
    }
}
