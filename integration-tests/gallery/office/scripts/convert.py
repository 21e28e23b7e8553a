"""Recalculates samples/budget.fods to CSV and converts samples/letter.fodt to PDF with
LibreOffice, as the published office skills do, and prints what came out as JSON."""
import json
import os
import shutil
import subprocess

HOME = os.environ["HOME"]
HERE = os.path.dirname(os.path.abspath(__file__))


def convert(name, target):
    # LibreOffice writes lock files beside its input: a copy in the writable scratch.
    source = shutil.copy(os.path.join(HERE, "..", "samples", name), HOME)
    run = subprocess.run(
        ["soffice", "--headless", "--convert-to", target, "--outdir", HOME, source],
        capture_output=True, text=True, timeout=100,
    )
    result = os.path.join(HOME, os.path.splitext(name)[0] + "." + target)
    if run.returncode != 0 or not os.path.exists(result):
        return {"error": "soffice exited %d: %s" % (run.returncode, run.stderr.strip()[-500:])}
    with open(result, "rb") as f:
        return {"head": f.read(64).decode("latin-1")}


print(json.dumps({"csv": convert("budget.fods", "csv"), "pdf": convert("letter.fodt", "pdf")}))
