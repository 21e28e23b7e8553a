//! Rendering and schema validation: the base and the example overlay render, every object
//! passes the pinned Kubernetes versions' schemas, a second kubectl (Debian's) renders the
//! same objects, and broken objects are refused with the reason.

use serde_json::{json, Value};

use super::checks::{self, find, find_generated};
use super::{base, base_dir, repo, tools, PINNED_VERSIONS};

/// The kinds the base holds, with how many of each.
const BASE_KINDS: [(&str, usize); 7] = [
    ("ConfigMap", 2),
    ("Deployment", 2),
    ("HorizontalPodAutoscaler", 1),
    ("NetworkPolicy", 2),
    ("PersistentVolumeClaim", 1),
    ("PodDisruptionBudget", 1),
    ("Service", 2),
];

fn assert_valid(results: &[(String, Option<Value>)]) {
    let failed: Vec<_> = results.iter().filter(|(_, e)| e.is_some()).collect();
    assert!(
        failed.is_empty(),
        "objects refused by kubernetes-validate: {failed:#?}"
    );
}

#[test]
fn kubernetes_base_objects_pass_the_pinned_schemas() {
    let test = "kubernetes_base_objects_pass_the_pinned_schemas";
    let Some((tools, objects)) = base(test) else {
        return;
    };
    for (kind, count) in BASE_KINDS {
        let n = objects.iter().filter(|o| o["kind"] == kind).count();
        assert_eq!(n, count, "{kind} objects in the base");
    }
    assert_eq!(
        objects.len(),
        BASE_KINDS.iter().map(|(_, n)| n).sum::<usize>()
    );
    let Some(results) = tools.validate(test, &objects, &PINNED_VERSIONS) else {
        return;
    };
    assert_eq!(results.len(), objects.len() * PINNED_VERSIONS.len());
    assert_valid(&results);
}

#[test]
fn kubernetes_example_overlay_passes_the_schemas_and_every_check() {
    let test = "kubernetes_example_overlay_passes_the_schemas_and_every_check";
    let Some(tools) = tools(test) else { return };
    if tools.kubectl_minor() < 21 {
        // kubectl 1.20 embeds kustomize v2.0.3, which reads neither `resources: <folder>`
        // nor `patches:`; the base renders with it, the overlay needs kubectl 1.21+.
        println!(
            "SKIPPED {test}: kubectl 1.{} embeds kustomize v2, the overlay needs kubectl 1.21+",
            tools.kubectl_minor()
        );
        return;
    }
    // A copy of deploy/ with stand-in PKI files where `skillbox certs channel --out` puts them.
    let tmp = tempfile::tempdir().unwrap();
    for dir in ["kubernetes", "kubernetes-example"] {
        copy_tree(&repo().join("deploy").join(dir), &tmp.path().join(dir));
    }
    let pki = tmp.path().join("kubernetes-example/pki");
    std::fs::create_dir_all(&pki).unwrap();
    for f in [
        "ca.pem",
        "skillbox-core.pem",
        "skillbox-core.key",
        "skillbox-executor.pem",
        "skillbox-executor.key",
    ] {
        std::fs::write(pki.join(f), format!("stand-in {f}\n")).unwrap();
    }
    let yaml = tools.render(&tmp.path().join("kubernetes-example"));
    let Some(objects) = tools.objects(test, &yaml) else {
        return;
    };
    let Some(results) = tools.validate(test, &objects, &PINNED_VERSIONS) else {
        return;
    };
    assert_valid(&results);
    for o in &objects {
        if o["kind"] != "Namespace" {
            assert_eq!(
                o["metadata"]["namespace"], "skillbox",
                "{}",
                o["metadata"]["name"]
            );
        }
    }
    let core_pki =
        find_generated(&objects, "Secret", "skillbox-core-pki").expect("core PKI Secret");
    assert_eq!(
        core_pki["data"].as_object().unwrap().len(),
        5,
        "the core reads all five files"
    );
    assert!(find_generated(&objects, "Secret", "skillbox-executor-pki").is_some());
    let image = &find(&objects, "Deployment", checks::EXECUTOR).unwrap()["spec"]["template"]
        ["spec"]["containers"][0]["image"];
    assert_eq!(image, "registry.example.org/skillbox/executor:0.1.0");
    for (check, bad) in [
        ("capabilities", checks::capabilities(&objects)),
        ("container_walls", checks::container_walls(&objects)),
        ("core_pod", checks::core_pod(&objects)),
        (
            "disruption_and_scaling",
            checks::disruption_and_scaling(&objects),
        ),
        ("executor_isolation", checks::executor_isolation(&objects)),
        ("wiring", checks::wiring(&objects)),
    ] {
        assert!(bad.is_empty(), "{check}: {bad:#?}");
    }
}

fn copy_tree(from: &std::path::Path, to: &std::path::Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let dest = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_tree(&entry.path(), &dest);
        } else {
            std::fs::copy(entry.path(), dest).unwrap();
        }
    }
}

#[test]
fn kubernetes_base_renders_the_same_objects_with_a_second_kubectl() {
    let test = "kubernetes_base_renders_the_same_objects_with_a_second_kubectl";
    let Some(other) = std::env::var_os("SKILLBOX_KUBECTL_SECOND") else {
        println!("SKIPPED {test}: set SKILLBOX_KUBECTL_SECOND to another kubectl (e.g. Debian's kubernetes-client, kustomize v2)");
        return;
    };
    let Some(tools) = tools(test) else { return };
    let second = super::Tools {
        kubectl: other.into(),
        python: tools.python.clone(),
    };
    let (a, b) = (tools.render(&base_dir()), second.render(&base_dir()));
    let Some(same) = tools.compare(test, &a, &b) else {
        return;
    };
    assert_eq!(same["same"], true, "the two renders differ: {same:#}");
}

/// Validates `objects` with one object changed by `break_it`; the refusal of that object.
fn refusal(test: &str, break_it: impl Fn(&mut Vec<Value>)) -> Option<Value> {
    let (tools, mut objects) = base(test)?;
    break_it(&mut objects);
    let results = tools.validate(test, &objects, &["1.30.0"])?;
    let refused: Vec<_> = results
        .into_iter()
        .filter_map(|(id, e)| e.map(|e| (id, e)))
        .collect();
    assert_eq!(
        refused.len(),
        1,
        "exactly the broken object is refused: {refused:#?}"
    );
    Some(refused[0].1.clone())
}

fn object<'a>(objects: &'a mut [Value], kind: &str, name: &str) -> &'a mut Value {
    objects
        .iter_mut()
        .find(|o| o["kind"] == kind && o["metadata"]["name"] == name)
        .unwrap_or_else(|| panic!("{kind} {name} in the render"))
}

#[test]
fn kubernetes_validator_refuses_a_port_that_is_not_a_number() {
    let test = "kubernetes_validator_refuses_a_port_that_is_not_a_number";
    let Some(e) = refusal(test, |o| {
        object(o, "Service", "skillbox-core")["spec"]["ports"][0]["port"] =
            json!("seventy-seventy");
    }) else {
        return;
    };
    assert_eq!(e["kind"], "invalid");
    assert!(
        e["message"]
            .as_str()
            .unwrap()
            .contains("is not of type 'integer'"),
        "{e}"
    );
    assert_eq!(e["path"], "spec/ports/0/port");
}

#[test]
fn kubernetes_validator_refuses_a_misspelt_security_field() {
    let test = "kubernetes_validator_refuses_a_misspelt_security_field";
    let Some(e) = refusal(test, |o| {
        let c = &mut object(o, "Deployment", "skillbox-executor")["spec"]["template"]["spec"]
            ["containers"][0];
        let sc = c["securityContext"].as_object_mut().unwrap();
        let v = sc.remove("readOnlyRootFilesystem").unwrap();
        sc.insert("readOnlyRootFileSystem".into(), v);
    }) else {
        return;
    };
    assert!(
        e["message"]
            .as_str()
            .unwrap()
            .contains("readOnlyRootFileSystem"),
        "{e}"
    );
    assert!(
        e["message"].as_str().unwrap().contains("not allowed"),
        "{e}"
    );
}

#[test]
fn kubernetes_validator_refuses_an_autoscaler_without_its_target() {
    let test = "kubernetes_validator_refuses_an_autoscaler_without_its_target";
    let Some(e) = refusal(test, |o| {
        object(o, "HorizontalPodAutoscaler", "skillbox-executor")["spec"]
            .as_object_mut()
            .unwrap()
            .remove("scaleTargetRef");
    }) else {
        return;
    };
    assert!(
        e["message"]
            .as_str()
            .unwrap()
            .contains("'scaleTargetRef' is a required property"),
        "{e}"
    );
}

#[test]
fn kubernetes_validator_refuses_an_api_version_the_pinned_cluster_lacks() {
    let test = "kubernetes_validator_refuses_an_api_version_the_pinned_cluster_lacks";
    // policy/v1beta1 PodDisruptionBudget was removed in Kubernetes 1.25.
    let Some(e) = refusal(test, |o| {
        object(o, "PodDisruptionBudget", "skillbox-executor")["apiVersion"] =
            json!("policy/v1beta1");
    }) else {
        return;
    };
    assert_eq!(e["kind"], "no-schema", "{e}");
    assert!(
        e["message"].as_str().unwrap().contains("policy/v1beta1"),
        "{e}"
    );
}

#[test]
fn kubernetes_base_skill_is_the_example_echo_skill() {
    // kustomize reads no file outside the base's folder, so the base carries a copy of
    // examples/workspace/skills/echo; it must not drift from the original.
    for file in ["SKILL.md", "skill.yaml", "scripts/echo.py"] {
        let copy = std::fs::read(base_dir().join("skills/echo").join(file)).unwrap();
        let original =
            std::fs::read(repo().join("examples/workspace/skills/echo").join(file)).unwrap();
        assert!(copy == original, "deploy/kubernetes/skills/echo/{file} differs from examples/workspace/skills/echo/{file}: copy it again");
    }
}
