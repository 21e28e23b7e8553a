//! The security properties (`checks`) hold on the rendered base, and each check refuses a
//! weakened copy, naming what was weakened: proof that the check can fail.

use serde_json::{json, Value};

use super::base;
use super::checks::{self, CORE, EXECUTOR};

type Check = fn(&[Value]) -> Vec<String>;

/// `check` passes on the base and, after `weaken`, reports a violation containing `reason`.
fn holds_and_refuses(test: &str, check: Check, weaken: impl Fn(&mut Vec<Value>), reason: &str) {
    let Some((_, mut objects)) = base(test) else {
        return;
    };
    let bad = check(&objects);
    assert!(bad.is_empty(), "{test}: the base violates it: {bad:#?}");
    weaken(&mut objects);
    let bad = check(&objects);
    assert!(
        bad.iter().any(|b| b.contains(reason)),
        "{test}: the weakened copy is not refused with {reason:?}: {bad:#?}"
    );
}

fn get<'a>(objects: &'a mut [Value], kind: &str, name: &str) -> &'a mut Value {
    objects
        .iter_mut()
        .find(|o| o["kind"] == kind && o["metadata"]["name"] == name)
        .unwrap_or_else(|| panic!("{kind} {name} in the render"))
}

fn container<'a>(objects: &'a mut [Value], deployment: &str) -> &'a mut Value {
    &mut get(objects, "Deployment", deployment)["spec"]["template"]["spec"]["containers"][0]
}

#[test]
fn kubernetes_core_that_keeps_its_capabilities_is_refused() {
    holds_and_refuses(
        "kubernetes_core_that_keeps_its_capabilities_is_refused",
        checks::capabilities,
        |o| container(o, CORE)["securityContext"]["capabilities"]["drop"] = json!([]),
        "skillbox-core/core does not drop ALL capabilities",
    );
}

#[test]
fn kubernetes_executor_with_sys_ptrace_is_refused() {
    holds_and_refuses(
        "kubernetes_executor_with_sys_ptrace_is_refused",
        checks::capabilities,
        |o| {
            let add = &mut container(o, EXECUTOR)["securityContext"]["capabilities"]["add"];
            add.as_array_mut().unwrap().push(json!("SYS_PTRACE"));
        },
        "skillbox-executor/executor adds capability SYS_PTRACE",
    );
}

#[test]
fn kubernetes_executor_without_net_admin_is_refused() {
    holds_and_refuses(
        "kubernetes_executor_without_net_admin_is_refused",
        checks::capabilities,
        |o| {
            let add = &mut container(o, EXECUTOR)["securityContext"]["capabilities"]["add"];
            add.as_array_mut().unwrap().retain(|c| c != "NET_ADMIN");
        },
        "lacks capability NET_ADMIN",
    );
}

#[test]
fn kubernetes_executor_without_setpcap_is_refused() {
    holds_and_refuses(
        "kubernetes_executor_without_setpcap_is_refused",
        checks::capabilities,
        |o| {
            let add = &mut container(o, EXECUTOR)["securityContext"]["capabilities"]["add"];
            add.as_array_mut().unwrap().retain(|c| c != "SETPCAP");
        },
        "lacks capability SETPCAP",
    );
}

#[test]
fn kubernetes_executor_without_seccomp_is_refused() {
    holds_and_refuses(
        "kubernetes_executor_without_seccomp_is_refused",
        checks::container_walls,
        |o| {
            container(o, EXECUTOR)["securityContext"]["seccompProfile"] =
                json!({"type": "Unconfined"})
        },
        "skillbox-executor/executor runs with seccomp profile \"Unconfined\"",
    );
}

#[test]
fn kubernetes_writable_root_is_refused() {
    holds_and_refuses(
        "kubernetes_writable_root_is_refused",
        checks::container_walls,
        |o| container(o, EXECUTOR)["securityContext"]["readOnlyRootFilesystem"] = json!(false),
        "skillbox-executor/executor has a writable root filesystem",
    );
}

#[test]
fn kubernetes_privilege_escalation_is_refused() {
    holds_and_refuses(
        "kubernetes_privilege_escalation_is_refused",
        checks::container_walls,
        |o| {
            let sc = container(o, CORE)["securityContext"]
                .as_object_mut()
                .unwrap();
            sc.remove("allowPrivilegeEscalation");
        },
        "skillbox-core/core allows privilege escalation",
    );
}

#[test]
fn kubernetes_core_as_root_is_refused() {
    holds_and_refuses(
        "kubernetes_core_as_root_is_refused",
        checks::core_pod,
        |o| {
            let sc = container(o, CORE)["securityContext"]
                .as_object_mut()
                .unwrap();
            sc.insert("runAsUser".into(), json!(0));
        },
        "runs as uid 0, not 10001",
    );
}

#[test]
fn kubernetes_core_with_rolling_replicas_is_refused() {
    holds_and_refuses(
        "kubernetes_core_with_rolling_replicas_is_refused",
        checks::core_pod,
        |o| get(o, "Deployment", CORE)["spec"]["strategy"] = json!({"type": "RollingUpdate"}),
        "strategy is \"RollingUpdate\", not Recreate",
    );
}

#[test]
fn kubernetes_executor_egress_to_the_internet_is_refused() {
    holds_and_refuses(
        "kubernetes_executor_egress_to_the_internet_is_refused",
        checks::executor_isolation,
        |o| {
            let egress = &mut get(o, "NetworkPolicy", EXECUTOR)["spec"]["egress"];
            egress
                .as_array_mut()
                .unwrap()
                .push(json!({"to": [{"ipBlock": {"cidr": "0.0.0.0/0"}}]}));
        },
        "lets executors reach [{\"ipBlock\"",
    );
}

#[test]
fn kubernetes_second_policy_opening_every_pod_is_refused() {
    // NetworkPolicies add up: one more selecting all pods undoes the executor's.
    holds_and_refuses(
        "kubernetes_second_policy_opening_every_pod_is_refused",
        checks::executor_isolation,
        |o| {
            o.push(json!({
                "apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
                "metadata": {"name": "allow-all"},
                "spec": {"podSelector": {}, "policyTypes": ["Ingress"], "ingress": [{}]}
            }))
        },
        "NetworkPolicy allow-all does not restrict Egress",
    );
}

#[test]
fn kubernetes_executor_reachable_on_another_port_is_refused() {
    holds_and_refuses(
        "kubernetes_executor_reachable_on_another_port_is_refused",
        checks::executor_isolation,
        |o| {
            let ports = &mut get(o, "NetworkPolicy", EXECUTOR)["spec"]["ingress"][0]["ports"];
            ports
                .as_array_mut()
                .unwrap()
                .push(json!({"protocol": "TCP", "port": 22}));
        },
        "opens executor ports",
    );
}

#[test]
fn kubernetes_autoscaler_on_the_core_is_refused() {
    holds_and_refuses(
        "kubernetes_autoscaler_on_the_core_is_refused",
        checks::disruption_and_scaling,
        |o| {
            get(o, "HorizontalPodAutoscaler", EXECUTOR)["spec"]["scaleTargetRef"]["name"] =
                json!(CORE)
        },
        "not Deployment skillbox-executor",
    );
}

#[test]
fn kubernetes_disruption_budget_on_other_pods_is_refused() {
    holds_and_refuses(
        "kubernetes_disruption_budget_on_other_pods_is_refused",
        checks::disruption_and_scaling,
        |o| {
            let labels =
                &mut get(o, "PodDisruptionBudget", EXECUTOR)["spec"]["selector"]["matchLabels"];
            labels["app.kubernetes.io/component"] = json!("core");
        },
        "not the executor pods",
    );
}

#[test]
fn kubernetes_executor_url_on_a_clusterip_service_is_refused() {
    holds_and_refuses(
        "kubernetes_executor_url_on_a_clusterip_service_is_refused",
        checks::wiring,
        |o| {
            get(o, "Service", EXECUTOR)["spec"]
                .as_object_mut()
                .unwrap()
                .remove("clusterIP");
        },
        "Service skillbox-executor is not headless",
    );
}

#[test]
fn kubernetes_executor_url_naming_another_service_is_refused() {
    holds_and_refuses(
        "kubernetes_executor_url_naming_another_service_is_refused",
        checks::wiring,
        |o| {
            let cm = o
                .iter_mut()
                .find(|x| x["kind"] == "ConfigMap" && x["data"]["skillbox.toml"].is_string())
                .unwrap();
            let toml = cm["data"]["skillbox.toml"]
                .as_str()
                .unwrap()
                .replace("https://skillbox-executor:7071", "https://executor:7071");
            cm["data"]["skillbox.toml"] = json!(toml);
        },
        "no Service executor",
    );
}

#[test]
fn kubernetes_executor_mounting_the_core_pki_is_refused() {
    holds_and_refuses(
        "kubernetes_executor_mounting_the_core_pki_is_refused",
        checks::wiring,
        |o| {
            let volumes =
                &mut get(o, "Deployment", EXECUTOR)["spec"]["template"]["spec"]["volumes"];
            for v in volumes.as_array_mut().unwrap() {
                if v["secret"].is_object() {
                    v["secret"]["secretName"] = json!("skillbox-core-pki");
                }
            }
        },
        "is not its own",
    );
}

#[test]
fn kubernetes_executor_grace_shorter_than_a_call_is_refused() {
    holds_and_refuses(
        "kubernetes_executor_grace_shorter_than_a_call_is_refused",
        checks::wiring,
        |o| {
            get(o, "Deployment", EXECUTOR)["spec"]["template"]["spec"]
                ["terminationGracePeriodSeconds"] = json!(30)
        },
        "draining would cut calls",
    );
}

#[test]
fn kubernetes_executor_drain_shorter_than_a_call_is_refused() {
    holds_and_refuses(
        "kubernetes_executor_drain_shorter_than_a_call_is_refused",
        checks::wiring,
        |o| {
            let args = &mut get(o, "Deployment", EXECUTOR)["spec"]["template"]["spec"]
                ["containers"][0]["args"];
            let list = args.as_array_mut().unwrap();
            let at = list.iter().position(|a| a == "--drain-grace-ms").unwrap();
            list[at + 1] = json!("25000");
        },
        "--drain-grace-ms 25000 is shorter than a call may run",
    );
}
