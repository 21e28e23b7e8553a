//! The network side of the rendered manifests: who may talk to the executors, and how the
//! core, the Services, the configuration and the PKI Secrets fit together.

use std::collections::BTreeSet;

use serde_json::Value;

use super::checks::{find, find_generated, CORE, EXECUTOR};

/// Default `[executor] call_timeout_ms` (core/src/state/config.rs).
const DEFAULT_CALL_TIMEOUT_MS: i64 = 300_000;

fn labels_of(deployment: &Value) -> &serde_json::Map<String, Value> {
    deployment["spec"]["template"]["metadata"]["labels"]
        .as_object()
        .expect("pod labels")
}

/// Whether `selector` (a `matchLabels` selector; empty selects all) selects pods with `labels`.
fn selects(selector: &Value, labels: &serde_json::Map<String, Value>) -> bool {
    if !selector["matchExpressions"].is_null() {
        return true; // judged as selecting: the rules below must then hold for it too
    }
    selector["matchLabels"]
        .as_object()
        .map(|m| m.iter().all(|(k, v)| labels.get(k) == Some(v)))
        .unwrap_or(true)
}

fn ports(rule: &Value) -> BTreeSet<String> {
    rule["ports"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|p| format!("{}/{}", p["protocol"].as_str().unwrap_or("TCP"), p["port"]))
        .collect()
}

fn is_dns(peer: &Value) -> bool {
    peer["namespaceSelector"]["matchLabels"]["kubernetes.io/metadata.name"] == "kube-system"
        && peer["podSelector"]["matchLabels"]["k8s-app"] == "kube-dns"
}

/// Every NetworkPolicy that selects executor pods (policies add up, so all of them)
/// denies by default in both directions and allows only: ingress from the core on 7071,
/// egress to the core on 7072 and to the cluster DNS on 53.
pub fn executor_isolation(objects: &[Value]) -> Vec<String> {
    let (Some(exec), Some(core)) = (
        find(objects, "Deployment", EXECUTOR),
        find(objects, "Deployment", CORE),
    ) else {
        return vec!["the render lacks a Deployment".into()];
    };
    let (exec_labels, core_labels) = (labels_of(exec), labels_of(core));
    let is_core = |peer: &Value| {
        peer["namespaceSelector"].is_null()
            && peer["ipBlock"].is_null()
            && peer["podSelector"]["matchLabels"].as_object() == Some(core_labels)
    };
    let mut bad = Vec::new();
    let policies: Vec<&Value> = objects
        .iter()
        .filter(|o| o["kind"] == "NetworkPolicy" && selects(&o["spec"]["podSelector"], exec_labels))
        .collect();
    if policies.is_empty() {
        bad.push("no NetworkPolicy selects the executor pods".into());
    }
    for p in &policies {
        let id = p["metadata"]["name"].as_str().unwrap_or("?");
        let types = p["spec"]["policyTypes"].to_string();
        for t in ["Ingress", "Egress"] {
            if !types.contains(t) {
                bad.push(format!(
                    "NetworkPolicy {id} does not restrict {t} of the executors"
                ));
            }
        }
        for rule in p["spec"]["ingress"].as_array().into_iter().flatten() {
            let from = rule["from"].as_array().cloned().unwrap_or_default();
            if from.is_empty() || !from.iter().all(is_core) {
                bad.push(format!(
                    "NetworkPolicy {id} lets executors be reached from {}",
                    rule["from"]
                ));
            }
            if ports(rule) != BTreeSet::from(["TCP/7071".to_string()]) {
                bad.push(format!(
                    "NetworkPolicy {id} opens executor ports {:?}, not only TCP/7071",
                    ports(rule)
                ));
            }
        }
        for rule in p["spec"]["egress"].as_array().into_iter().flatten() {
            let to = rule["to"].as_array().cloned().unwrap_or_default();
            let allowed = if !to.is_empty() && to.iter().all(is_core) {
                BTreeSet::from(["TCP/7072".to_string()])
            } else if !to.is_empty() && to.iter().all(is_dns) {
                BTreeSet::from(["UDP/53".to_string(), "TCP/53".to_string()])
            } else {
                bad.push(format!(
                    "NetworkPolicy {id} lets executors reach {}",
                    rule["to"]
                ));
                continue;
            };
            if ports(rule).is_empty() || !ports(rule).is_subset(&allowed) {
                bad.push(format!(
                    "NetworkPolicy {id} lets executors reach {} on {:?}",
                    rule["to"],
                    ports(rule)
                ));
            }
        }
    }
    bad
}

/// `https://host:port` → (host, port).
fn host_port(url: &str) -> Option<(&str, i64)> {
    let rest = url.strip_prefix("https://")?;
    let (host, port) = rest.split_once(':')?;
    Some((host, port.trim_end_matches('/').parse().ok()?))
}

/// The Service `name` exposes `port` and selects the pods of Deployment `target`.
fn serves(objects: &[Value], name: &str, port: i64, target: &str) -> Result<(), String> {
    let svc = find(objects, "Service", name).ok_or(format!("no Service {name}"))?;
    let d = find(objects, "Deployment", target).ok_or(format!("no Deployment {target}"))?;
    if !selects(
        &serde_json::json!({"matchLabels": svc["spec"]["selector"]}),
        labels_of(d),
    ) {
        return Err(format!("Service {name} does not select the {target} pods"));
    }
    let has_port = svc["spec"]["ports"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|p| p["port"] == port);
    if !has_port {
        return Err(format!("Service {name} has no port {port}"));
    }
    Ok(())
}

/// The core's `[executor] url` names the executors' headless Service, `callback_url` the
/// core's Service, the executor's `--core-url` equals `callback_url`; each side mounts its
/// own PKI Secret (the executor's holds only its own key); the executor's termination
/// grace period covers the longest call it may be draining.
pub fn wiring(objects: &[Value]) -> Vec<String> {
    let mut bad = Vec::new();
    let Some(cm) = find_generated(objects, "ConfigMap", "skillbox-config") else {
        return vec!["no skillbox-config ConfigMap".into()];
    };
    let config: toml::Table = match cm["data"]["skillbox.toml"]
        .as_str()
        .unwrap_or_default()
        .parse()
    {
        Ok(t) => t,
        Err(e) => return vec![format!("skillbox.toml does not parse: {e}")],
    };
    let executor = &config["executor"];
    let url = executor
        .get("url")
        .and_then(|v| v.as_str())
        .unwrap_or_default();
    match host_port(url) {
        Some((host, port)) => {
            if let Err(e) = serves(objects, host, port, EXECUTOR) {
                bad.push(format!("[executor] url {url}: {e}"));
            }
            if find(objects, "Service", host).is_some_and(|s| s["spec"]["clusterIP"] != "None") {
                bad.push(format!("[executor] url {url}: Service {host} is not headless (one address, not one per pod)"));
            }
        }
        None => bad.push(format!("[executor] url {url:?} is not https://host:port")),
    }
    let callback = executor
        .get("callback_url")
        .and_then(|v| v.as_str())
        .unwrap_or_default();
    match host_port(callback) {
        Some((host, port)) => {
            if let Err(e) = serves(objects, host, port, CORE) {
                bad.push(format!("[executor] callback_url {callback}: {e}"));
            }
        }
        None => bad.push(format!(
            "[executor] callback_url {callback:?} is not https://host:port"
        )),
    }
    let (Some(core), Some(exec)) = (
        find(objects, "Deployment", CORE),
        find(objects, "Deployment", EXECUTOR),
    ) else {
        bad.push("the render lacks a Deployment".into());
        return bad;
    };
    let args: Vec<&str> = exec["spec"]["template"]["spec"]["containers"][0]["args"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    let core_url = args
        .iter()
        .position(|a| *a == "--core-url")
        .and_then(|i| args.get(i + 1));
    if core_url != Some(&callback) {
        bad.push(format!(
            "executor --core-url {core_url:?} is not [executor] callback_url {callback}"
        ));
    }
    let secret_of = |d: &Value| {
        d["spec"]["template"]["spec"]["volumes"]
            .as_array()
            .into_iter()
            .flatten()
            .find_map(|v| v["secret"]["secretName"].as_str().map(str::to_string))
    };
    let (core_secret, exec_secret) = (secret_of(core), secret_of(exec));
    if exec_secret.is_none() || exec_secret == core_secret {
        bad.push(format!(
            "executor PKI Secret {exec_secret:?} is not its own (core: {core_secret:?})"
        ));
    }
    if let Some(secret) = exec_secret
        .as_deref()
        .and_then(|n| find(objects, "Secret", n))
    {
        let keys: BTreeSet<&str> = secret["data"]
            .as_object()
            .into_iter()
            .flatten()
            .map(|(k, _)| k.as_str())
            .collect();
        if keys != BTreeSet::from(["ca.pem", "skillbox-executor.pem", "skillbox-executor.key"]) {
            bad.push(format!(
                "executor PKI Secret holds {keys:?}, not only the CA and its own pair"
            ));
        }
    }
    let exec_pod = &exec["spec"]["template"]["spec"];
    if exec_pod["containers"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|c| {
            !c["envFrom"].is_null()
                || c["env"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .any(|e| !e["valueFrom"].is_null())
        })
    {
        bad.push("an executor container takes environment from a Secret or ConfigMap".into());
    }
    let timeout_ms = executor
        .get("call_timeout_ms")
        .and_then(|v| v.as_integer())
        .unwrap_or(DEFAULT_CALL_TIMEOUT_MS);
    let grace = exec_pod["terminationGracePeriodSeconds"]
        .as_i64()
        .unwrap_or(30);
    if grace * 1000 < timeout_ms {
        bad.push(format!("executor terminationGracePeriodSeconds {grace} is shorter than a call may run ({timeout_ms} ms): draining would cut calls"));
    }
    // The executor's own drain must outlast a call and end before the kubelet's SIGKILL.
    let args: Vec<&str> = exec_pod["containers"][0]["args"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|a| a.as_str())
        .collect();
    let drain_ms = args
        .iter()
        .position(|a| *a == "--drain-grace-ms")
        .and_then(|i| args.get(i + 1))
        .and_then(|v| v.parse::<i64>().ok());
    match drain_ms {
        None => bad.push(
            "the executor has no --drain-grace-ms: its default drain is shorter than a call may run"
                .into(),
        ),
        Some(ms) if ms < timeout_ms => bad.push(format!(
            "executor --drain-grace-ms {ms} is shorter than a call may run ({timeout_ms} ms)"
        )),
        Some(ms) if ms >= grace * 1000 => bad.push(format!(
            "executor --drain-grace-ms {ms} does not end before terminationGracePeriodSeconds {grace}"
        )),
        Some(_) => {}
    }
    bad
}
