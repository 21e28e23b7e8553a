//! The security properties of the rendered manifests, each a function from the objects to
//! the list of what violates it (empty: it holds). docs/kubernetes.md lists them.

use std::collections::BTreeSet;

use serde_json::Value;

/// The executor Deployment, its headless Service and everything that targets it.
pub const EXECUTOR: &str = "skillbox-executor";
/// The core Deployment and its Service.
pub const CORE: &str = "skillbox-core";
/// The only capabilities an executor keeps (docker/README.md, "What the executor
/// container gets"): SYS_ADMIN and NET_ADMIN make each network call's namespace,
/// NET_BIND_SERVICE its name server and listeners below 1024, SYS_CHROOT joins a call's
/// mount namespace.
pub const EXECUTOR_CAPS: [&str; 9] = [
    "SETUID",
    "SETGID",
    "SETPCAP",
    "CHOWN",
    "DAC_OVERRIDE",
    "SYS_ADMIN",
    "NET_ADMIN",
    "NET_BIND_SERVICE",
    "SYS_CHROOT",
];
/// The core's user id (docker/core.Dockerfile).
pub const CORE_UID: i64 = 10001;

/// The object of `kind` named `name`.
pub fn find<'a>(objects: &'a [Value], kind: &str, name: &str) -> Option<&'a Value> {
    objects
        .iter()
        .find(|o| o["kind"] == kind && o["metadata"]["name"] == name)
}

/// The object of `kind` whose name is `prefix` plus a generator's suffix (or exactly it).
pub fn find_generated<'a>(objects: &'a [Value], kind: &str, prefix: &str) -> Option<&'a Value> {
    objects.iter().find(|o| {
        let name = o["metadata"]["name"].as_str().unwrap_or_default();
        o["kind"] == kind
            && (name == prefix
                || name
                    .strip_prefix(prefix)
                    .is_some_and(|rest| rest.len() == 11 && rest.starts_with('-')))
    })
}

fn deployments(objects: &[Value]) -> impl Iterator<Item = &Value> {
    objects.iter().filter(|o| o["kind"] == "Deployment")
}

fn name(o: &Value) -> &str {
    o["metadata"]["name"].as_str().unwrap_or("?")
}

fn pod(deployment: &Value) -> &Value {
    &deployment["spec"]["template"]["spec"]
}

fn containers(deployment: &Value) -> Vec<&Value> {
    let pod = pod(deployment);
    ["initContainers", "containers"]
        .iter()
        .flat_map(|k| pod[*k].as_array().into_iter().flatten())
        .collect()
}

/// A container's setting `key`, else the pod's.
fn effective<'a>(deployment: &'a Value, container: &'a Value, key: &str) -> &'a Value {
    match &container["securityContext"][key] {
        Value::Null => &pod(deployment)["securityContext"][key],
        v => v,
    }
}

fn strings(v: &Value) -> BTreeSet<String> {
    v.as_array()
        .into_iter()
        .flatten()
        .filter_map(|s| s.as_str().map(str::to_string))
        .collect()
}

/// Every container of every Deployment drops ALL capabilities; only the executor adds
/// any, exactly the nine it needs.
pub fn capabilities(objects: &[Value]) -> Vec<String> {
    let mut bad = Vec::new();
    for d in deployments(objects) {
        for c in containers(d) {
            let caps = &c["securityContext"]["capabilities"];
            let id = format!("{}/{}", name(d), c["name"].as_str().unwrap_or("?"));
            if !strings(&caps["drop"]).contains("ALL") {
                bad.push(format!("{id} does not drop ALL capabilities"));
            }
            let added = strings(&caps["add"]);
            let allowed: BTreeSet<String> = if name(d) == EXECUTOR {
                EXECUTOR_CAPS.iter().map(|s| s.to_string()).collect()
            } else {
                BTreeSet::new()
            };
            for extra in added.difference(&allowed) {
                bad.push(format!("{id} adds capability {extra}"));
            }
            if name(d) == EXECUTOR {
                for missing in allowed.difference(&added) {
                    bad.push(format!(
                        "{id} lacks capability {missing} (docker/README.md says what fails without it)"
                    ));
                }
            }
        }
    }
    if find(objects, "Deployment", EXECUTOR).is_none() {
        bad.push(format!("no Deployment {EXECUTOR}"));
    }
    bad
}

/// Every container runs under seccomp RuntimeDefault, with a read-only root, no privilege
/// escalation, not privileged; no pod shares the host's namespaces or mounts host paths.
pub fn container_walls(objects: &[Value]) -> Vec<String> {
    let mut bad = Vec::new();
    for d in deployments(objects) {
        let p = pod(d);
        for key in ["hostNetwork", "hostPID", "hostIPC"] {
            if p[key] == true {
                bad.push(format!("{} sets {key}", name(d)));
            }
        }
        for v in p["volumes"].as_array().into_iter().flatten() {
            if !v["hostPath"].is_null() {
                bad.push(format!("{} mounts hostPath volume {}", name(d), v["name"]));
            }
        }
        for c in containers(d) {
            let id = format!("{}/{}", name(d), c["name"].as_str().unwrap_or("?"));
            let seccomp = &effective(d, c, "seccompProfile")["type"];
            if seccomp != "RuntimeDefault" {
                bad.push(format!(
                    "{id} runs with seccomp profile {seccomp}, not RuntimeDefault"
                ));
            }
            let sc = &c["securityContext"];
            if sc["readOnlyRootFilesystem"] != true {
                bad.push(format!("{id} has a writable root filesystem"));
            }
            if sc["allowPrivilegeEscalation"] != false {
                bad.push(format!(
                    "{id} allows privilege escalation (no no_new_privs)"
                ));
            }
            if sc["privileged"] == true {
                bad.push(format!("{id} is privileged"));
            }
        }
    }
    bad
}

/// The core runs as uid 10001, non-root, as one replica recreated on update, with its state
/// on the PersistentVolumeClaim and probes on `/healthz`.
pub fn core_pod(objects: &[Value]) -> Vec<String> {
    let Some(d) = find(objects, "Deployment", CORE) else {
        return vec![format!("no Deployment {CORE}")];
    };
    let mut bad = Vec::new();
    let spec = &d["spec"];
    if spec["replicas"] != 1 {
        bad.push(format!("{CORE} replicas is {}, not 1", spec["replicas"]));
    }
    if spec["strategy"]["type"] != "Recreate" {
        bad.push(format!(
            "{CORE} strategy is {}, not Recreate",
            spec["strategy"]["type"]
        ));
    }
    for c in containers(d) {
        if effective(d, c, "runAsNonRoot") != true {
            bad.push(format!("{CORE} container {} may run as root", c["name"]));
        }
        if effective(d, c, "runAsUser") != CORE_UID {
            bad.push(format!(
                "{CORE} container {} runs as uid {}, not {CORE_UID}",
                c["name"],
                effective(d, c, "runAsUser")
            ));
        }
        for probe in ["readinessProbe", "livenessProbe"] {
            if c[probe]["httpGet"]["path"] != "/healthz" {
                bad.push(format!("{CORE} {probe} does not GET /healthz"));
            }
        }
    }
    let claim = pod(d)["volumes"]
        .as_array()
        .into_iter()
        .flatten()
        .find_map(|v| v["persistentVolumeClaim"]["claimName"].as_str());
    match claim {
        Some(c) if find(objects, "PersistentVolumeClaim", c).is_some() => {}
        other => bad.push(format!(
            "{CORE} state is not on a PersistentVolumeClaim of the render ({other:?})"
        )),
    }
    bad
}

/// The PodDisruptionBudget and the HorizontalPodAutoscaler act on the executor
/// Deployment, and the autoscaler's floor stays above the budget (so a node can drain).
pub fn disruption_and_scaling(objects: &[Value]) -> Vec<String> {
    let mut bad = Vec::new();
    let Some(d) = find(objects, "Deployment", EXECUTOR) else {
        return vec![format!("no Deployment {EXECUTOR}")];
    };
    let pdb = objects.iter().find(|o| o["kind"] == "PodDisruptionBudget");
    let hpa = objects
        .iter()
        .find(|o| o["kind"] == "HorizontalPodAutoscaler");
    match pdb {
        Some(p) if p["spec"]["selector"] == d["spec"]["selector"] => {}
        Some(p) => bad.push(format!(
            "PodDisruptionBudget selects {}, not the executor pods",
            p["spec"]["selector"]
        )),
        None => bad.push("no PodDisruptionBudget".into()),
    }
    match hpa {
        Some(h) => {
            let t = &h["spec"]["scaleTargetRef"];
            if t["kind"] != "Deployment" || t["name"] != EXECUTOR || t["apiVersion"] != "apps/v1" {
                bad.push(format!(
                    "HorizontalPodAutoscaler targets {t}, not Deployment {EXECUTOR}"
                ));
            }
            let floor = h["spec"]["minReplicas"].as_i64().unwrap_or(1);
            let kept = pdb
                .and_then(|p| p["spec"]["minAvailable"].as_i64())
                .unwrap_or(0);
            if floor <= kept {
                bad.push(format!("HorizontalPodAutoscaler minReplicas {floor} <= PodDisruptionBudget minAvailable {kept}: no executor could ever be evicted"));
            }
            if !d["spec"]["replicas"].is_null() {
                bad.push(format!(
                    "{EXECUTOR} sets replicas; every apply would reset the autoscaler's count"
                ));
            }
        }
        None => bad.push("no HorizontalPodAutoscaler".into()),
    }
    for c in containers(d) {
        if c["resources"]["requests"]["cpu"].is_null() {
            bad.push(format!(
                "{EXECUTOR} container {} has no CPU request to scale on",
                c["name"]
            ));
        }
    }
    bad
}

pub use super::network::{executor_isolation, wiring};
