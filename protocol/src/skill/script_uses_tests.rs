use super::*;

fn skill(files: &[(&str, &str)]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for (path, text) in files {
        let path = dir.path().join(path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }
    dir
}

fn set(names: &[&str]) -> BTreeSet<String> {
    names.iter().map(|s| s.to_string()).collect()
}

#[test]
fn an_office_skill_shaped_like_the_published_ones() {
    let dir = skill(&[
        (
            "SKILL.md",
            "---\nname: sheets\ndescription: d\n---\n\
             Recalculate with:\n\n```bash\npython scripts/recalc.py out.xlsx 30\n```\n\n\
             Convert:\n\n```bash\nsoffice --headless --convert-to pdf doc.docx && pdftoppm -png doc.pdf page\n```\n\n\
             ```python\nimport pandas as pd\nos.system(\"never\")\n```\n",
        ),
        (
            "scripts/recalc.py",
            "#!/usr/bin/env python3\nimport json, sys\nimport os.path\nfrom openpyxl import load_workbook\n\
             from .local import x\nfrom office.soffice import get_soffice_env\n\
             try:\n    import lxml.etree\nexcept ImportError:\n    pass\n\
             def run():\n    subprocess.run([\"soffice\", \"--headless\"], check=True)\n\
             \x20   subprocess.run(cmd)\n    shutil.which('timeout')\n",
        ),
        ("scripts/office/__init__.py", ""),
        ("scripts/office/soffice.py", "import socket\nsubprocess.run(['gcc', '-shared'])\n"),
        (
            "scripts/build.mjs",
            "import { execSync } from 'child_process';\nexecSync(\"pandoc -o out.docx in.md\");\nspawn('node', ['x']);\nre.exec('no');\n",
        ),
        (
            "scripts/pack.sh",
            "#!/bin/bash\nset -e\nOUT=${1:-out}  # the folder\nif [ -d \"$OUT\" ]; then\n  zip -r \"$OUT.zip\" \"$OUT\" | tail -n1\nfi\nsudo apt-get install x\n./scripts/helper.sh\nX=1 jq . file.json\n",
        ),
    ]);
    let uses = ScriptUses::scan(dir.path());
    assert_eq!(
        uses.programs,
        set(&[
            "apt-get", "bash", "gcc", "jq", "node", "pandoc", "pdftoppm", "python", "python3",
            "soffice", "tail", "timeout", "zip"
        ]),
        "{uses:?}"
    );
    // Not lxml (inside try), not the relative import, not the skill's own `office`
    // package or its modules; the standard library is judged where the skill runs.
    assert_eq!(
        uses.python_imports,
        set(&["json", "openpyxl", "os", "socket", "sys"]),
        "{uses:?}"
    );
}

#[test]
fn a_skill_with_no_scripts_uses_nothing_and_other_files_are_not_read() {
    let dir = skill(&[
        (
            "SKILL.md",
            "---\nname: a\ndescription: d\n---\nJust prose, `ls` inline.\n",
        ),
        ("notes.txt", "import numpy\nsubprocess.run(['x'])\n"),
        ("node_modules/pkg/index.js", "execSync('hidden')\n"),
    ]);
    assert_eq!(ScriptUses::scan(dir.path()), ScriptUses::default());
}

#[test]
fn program_names_are_bare_names_or_system_paths() {
    assert_eq!(program_name("soffice").as_deref(), Some("soffice"));
    assert_eq!(program_name("/usr/bin/python3").as_deref(), Some("python3"));
    assert_eq!(program_name("/opt/x/bin/y"), None);
    assert_eq!(program_name("./run.sh"), None);
    assert_eq!(program_name("$CMD"), None);
    assert_eq!(program_name("<your-tool>"), None);
    assert_eq!(program_name("Output"), None);
    assert_eq!(program_name("-v"), None);
}

#[test]
fn the_corpus_yields_bounded_names_without_shell_words() {
    let Ok(root) = std::env::var("SKILLBOX_CORPUS") else {
        println!(
            "SKIPPED the_corpus_yields_bounded_names_without_shell_words: SKILLBOX_CORPUS unset"
        );
        return;
    };
    let mut any = 0;
    let collections = std::fs::read_dir(&root).unwrap().flatten();
    let skills =
        collections.flat_map(|c| std::fs::read_dir(c.path()).into_iter().flatten().flatten());
    for entry in skills.filter(|e| e.path().join("SKILL.md").is_file()) {
        let uses = ScriptUses::scan(&entry.path());
        println!("{:?}: {:?}", entry.file_name(), uses.programs);
        assert!(uses.programs.len() <= MAX_NAMES);
        for p in &uses.programs {
            assert!(!is_shell_word(p), "{p} in {:?}", entry.path());
            assert!(program_name(p).as_deref() == Some(p.as_str()));
        }
        any += usize::from(!uses.programs.is_empty());
    }
    assert!(any > 0, "no corpus skill names a program");
}
