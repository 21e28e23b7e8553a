"""Fills {{field}} placeholders of a text form from a JSON file of values."""
import json
import sys

if len(sys.argv) != 4:
    print("usage: fill_form.py FIELDS.json FORM OUT")
    sys.exit(1)
with open(sys.argv[1]) as f:
    fields = json.load(f)
with open(sys.argv[2]) as f:
    text = f.read()
for key, value in fields.items():
    text = text.replace("{{" + key + "}}", str(value))
with open(sys.argv[3], "w") as f:
    f.write(text)
print("wrote", sys.argv[3])
