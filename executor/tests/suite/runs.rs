//! What the sandbox must keep working: a writable scratch dir that disappears after the
//! call, Python (jsonrpc) and shell (plain) tools, and the example skills.

use std::path::{Path, PathBuf};

use serde_json::json;

use super::harness::{assert_mentions, copy_tree, open_up, scratch_root, shell_skill, SkillRoot};

#[test]
fn scratch_is_writable_home_and_removed_after_call() {
    let root = SkillRoot::new();
    let skill = root.python_skill(
        "worker",
        r#"
        home = os.environ["HOME"]
        path = os.path.join(home, "notes", "note.txt")
        os.makedirs(os.path.dirname(path))
        with open(path, "w") as f:
            f.write("scratch works")
        import tempfile
        with tempfile.NamedTemporaryFile(dir=None) as t:
            tmp_name = t.name
        reply({
            "home": home, "tmpdir": os.environ["TMPDIR"], "path": path,
            "read": open(path).read(), "tmp_name": tmp_name, "cwd": os.getcwd(),
        })
        "#,
    );
    let outcome = root.call("worker:run").run();
    let data = outcome.data();
    assert_eq!(data["read"], "scratch works");
    assert_eq!(data["home"], data["tmpdir"]);
    let home = PathBuf::from(data["home"].as_str().unwrap());
    assert_eq!(home.parent(), Some(scratch_root().as_path()), "{data}");
    assert!(
        data["tmp_name"]
            .as_str()
            .unwrap()
            .starts_with(&*home.to_string_lossy()),
        "tempfile uses TMPDIR: {data}"
    );
    assert_eq!(
        Path::new(data["cwd"].as_str().unwrap()),
        skill.canonicalize().unwrap(),
        "the working directory is the skill folder"
    );
    assert!(!home.exists(), "scratch dir {} was kept", home.display());
}

#[test]
fn python_tool_receives_args_and_call_id() {
    let root = SkillRoot::new();
    root.python_skill(
        "worker",
        r#"reply({"args": args, "call_id": call_id, "method": _request["method"], "id": _request["id"]})"#,
    );
    let args = json!({ "text": "héllo 价格", "n": [1, 2, {"deep": null}] });
    let outcome = root.call("worker:run").args(args.clone()).run();
    let data = outcome.data();
    assert_eq!(data["args"], args);
    assert_eq!(data["call_id"], outcome.call_id());
    assert_eq!(data["method"], "tool.invoke");
    assert_eq!(data["id"], 0);
}

#[test]
fn shell_tool_runs_with_plain_protocol() {
    let root = SkillRoot::new();
    shell_skill(
        &root,
        "read -r line\n\
         echo \"stdin=$line\"\n\
         echo \"file=$(cat \"$SKILLBOX_ARGS_FILE\")\"\n\
         echo \"env=${SKILLBOX_ARGS:-unset}\"\n\
         echo note > \"$HOME/note\" && cat \"$HOME/note\"\n\
         echo warning >&2\n",
    );
    let outcome = root.call("shell:run").args(json!({ "k": "v" })).run();
    let data = outcome.data();
    assert_eq!(
        data["stdout"], "stdin={\"k\":\"v\"}\nfile={\"k\":\"v\"}\nenv=unset\nnote\n",
        "{data}"
    );
    assert_eq!(data["stderr"], "warning\n");
    assert_eq!(data["exit_code"], 0);
}

#[test]
fn plain_tool_receives_900_kib_of_arguments() {
    let root = SkillRoot::new();
    shell_skill(
        &root,
        "from_stdin=$(wc -c)\n\
         from_file=$(wc -c < \"$SKILLBOX_ARGS_FILE\")\n\
         case \"$SKILLBOX_ARGS_FILE\" in \"$TMPDIR\"/*) where=scratch ;; *) where=elsewhere ;; esac\n\
         echo \"$from_stdin $from_file $where\"\n",
    );
    let text = "x".repeat(900 * 1024);
    let args = json!({ "text": text });
    let size = args.to_string().len();
    let outcome = root.call("shell:run").args(args).run();
    let data = outcome.data();
    assert_eq!(data["stdout"], format!("{size} {size} scratch\n"), "{data}");
    assert_eq!(data["exit_code"], 0);
}

#[test]
fn plain_tool_that_answers_without_reading_large_arguments_finishes() {
    let root = SkillRoot::new();
    shell_skill(&root, "echo early\n");
    let args = json!({ "text": "y".repeat(900 * 1024) });
    let outcome = root.call("shell:run").args(args).run();
    assert_eq!(outcome.data()["stdout"], "early\n", "{outcome}");
}

#[test]
fn shell_tool_nonzero_exit_is_tool_error() {
    let root = SkillRoot::new();
    shell_skill(&root, "echo 'cannot do that' >&2\nexit 3\n");
    let outcome = root.call("shell:run").run();
    let error = outcome.failure("tool_error");
    assert_mentions(error, "exited with code 3");
    assert_mentions(error, "cannot do that");
}

/// A skills root holding a copy of `examples/workspace/skills`, readable by the sandbox users.
fn examples() -> SkillRoot {
    let root = SkillRoot::new();
    let examples = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/workspace/skills");
    copy_tree(&examples, root.skills());
    open_up(root.skills());
    root
}

#[test]
fn example_echo_skill_runs() {
    let root = examples();
    let outcome = root
        .call("echo:echo")
        .args(json!({ "text": "hello sandbox" }))
        .run();
    assert_eq!(
        outcome.data(),
        &json!({ "echo": { "text": "hello sandbox" } })
    );
}

#[test]
fn example_word_count_skill_runs() {
    let root = examples();
    let outcome = root
        .call("word-count:count")
        .args(json!({ "text": "one two  three\nfour" }))
        .run();
    let data = outcome.data();
    assert_eq!(data["stdout"], "4\n", "{data}");
    assert_eq!(data["exit_code"], 0);
}

#[test]
fn example_crypto_price_fetch_is_unavailable_in_one_shot_mode() {
    let node = ["/usr/local/bin/node", "/usr/bin/node", "/bin/node"]
        .iter()
        .any(|p| Path::new(p).is_file());
    if !node {
        eprintln!("SKIPPED example_crypto_price_fetch_is_unavailable_in_one_shot_mode: no node on the sandbox PATH");
        return;
    }
    let root = examples();
    let outcome = root
        .call("crypto-price:get_price")
        .args(json!({ "coin": "bitcoin" }))
        .run();
    let error = outcome.failure("tool_error");
    assert_mentions(error, "capability \"fetch\" is unavailable");
    assert_mentions(error, "one-shot mode");
}
