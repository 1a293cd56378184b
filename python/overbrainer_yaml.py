"""A sweep trial's YAML: the user's own Axolotl config with the trial's params set in it.

Overbrainer runs this script with the sweep's Python (the one with Optuna, which brings PyYAML)
once per trial. It reads one JSON object on stdin, {"text": YAML, "set": {"a.b": value, ...}},
and writes one JSON object on stdout: {"ok": true, "text": YAML} with each dotted key set (the
mappings on its way made when missing), or {"ok": false, "error": {"kind": ..., "message": ...}}:
"bad_yaml" (the text is not YAML holding a mapping), "bad_path" (a key on the way holds a value
that is not a mapping), "no_yaml" (PyYAML is missing). Comments are not kept; key order is.
"""

import json
import sys


def fail(kind, message):
    sys.stdout.write(json.dumps({"ok": False, "error": {"kind": kind, "message": message}}) + "\n")
    sys.exit(0)


def main():
    try:
        import yaml
    except ImportError as error:
        fail("no_yaml", "PyYAML is missing (%s)" % error)
    request = json.loads(sys.stdin.read())
    try:
        doc = yaml.safe_load(request["text"])
    except yaml.YAMLError as error:
        fail("bad_yaml", "it is not valid YAML: %s" % str(error).replace("\n", " "))
    if doc is None:
        doc = {}
    if not isinstance(doc, dict):
        fail("bad_yaml", "it holds a %s, not a mapping of keys" % type(doc).__name__)
    for dotted, value in request["set"].items():
        keys = dotted.split(".")
        node = doc
        for depth, key in enumerate(keys[:-1]):
            under = node.get(key)
            if under is None:
                under = node[key] = {}
            if not isinstance(under, dict):
                where = ".".join(keys[: depth + 1])
                fail(
                    "bad_path",
                    "%s: %s holds a %s, not a mapping, so %s cannot be set under it"
                    % (dotted, where, type(under).__name__, ".".join(keys[depth + 1 :])),
                )
            node = under
        node[keys[-1]] = value
    text = yaml.safe_dump(doc, sort_keys=False, default_flow_style=False, allow_unicode=True)
    sys.stdout.write(json.dumps({"ok": True, "text": text}) + "\n")


main()
