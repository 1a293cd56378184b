"""Pushes a run's result to the Hugging Face Hub, from the pod, with the standard library only.

Run by the job after training (and after the LoRA merge) when ``[training] hub_model_id`` is set::

    python3 overbrainer_hub.py --repo me/model --folder output --endpoint URL --out hub_push.json

The token is read from ``$HF_TOKEN`` (never an argument, never printed). The Hub's base URL is
``--endpoint`` (the client passes ``$HF_ENDPOINT`` as the Hugging Face libraries read it; by default
``https://huggingface.co``). The calls are the Hub's documented commit API, as ``huggingface_hub``
makes them:

1. ``POST /api/repos/create`` ``{"name", "organization", "private": true}``: 200 made, 409 there.
2. ``POST /api/models/<repo>/preupload/main`` with each file's path, size and first 512 bytes
   (base64): the Hub answers each file's ``uploadMode`` (``regular`` or ``lfs``).
3. For the ``lfs`` files, ``POST /<repo>.git/info/lfs/objects/batch`` (sha256 and size); each
   object the Hub does not hold yet comes back with an ``upload`` action: one ``PUT`` of the
   bytes to its ``href``, or with ``chunk_size`` in its header, one ``PUT`` per part to the
   numbered URLs then a ``POST`` of the parts' ETags to ``href``; then its ``verify`` action.
4. ``POST /api/models/<repo>/commit/main`` (``application/x-ndjson``): a header line, then one
   line per file, a regular file's bytes inline in base64, an LFS file by its sha256.

The outcome goes to ``--out`` (written to a temp file, then renamed), one JSON object:
``{"repo_id", "state": "pushed", "revision", "files", "bytes"}`` or
``{"repo_id", "state": "failed", "stage", "status", "error"}``, where ``stage`` is where it
stopped (``token``, ``files``, ``create_repo``, ``preupload``, ``lfs``, ``commit``) and ``status``
the Hub's HTTP status (null: no answer). The script exits 0 either way: a failed push never
fails the training it follows, and the run says what failed.

What leaves out of the folder: directories named ``checkpoint-*`` (intermediate checkpoints, as
the retrieval leaves them), at any depth.
"""

import argparse
import base64
import hashlib
import json
import os
import sys
import urllib.error
import urllib.parse
import urllib.request

SAMPLE_BYTES = 512
TIMEOUT_S = 300
CHUNK_BYTES = 1 << 20


class PushError(Exception):
    def __init__(self, stage, message, status=None):
        super().__init__(message)
        self.stage = stage
        self.status = status


def files_of(folder):
    """(path in repo, absolute path, size) of each file under folder, checkpoint-* dirs left out."""
    found = []
    for root, dirs, names in os.walk(folder):
        dirs[:] = sorted(d for d in dirs if not d.startswith("checkpoint-"))
        for name in sorted(names):
            full = os.path.join(root, name)
            if not os.path.isfile(full):
                continue
            rel = os.path.relpath(full, folder).replace(os.sep, "/")
            found.append((rel, full, os.path.getsize(full)))
    return found


def sha256_of(path):
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(CHUNK_BYTES), b""):
            digest.update(block)
    return digest.hexdigest()


def call(stage, method, url, token, body=None, content_type="application/json", headers=None):
    """One HTTP call; returns (status, parsed JSON or None, response headers)."""
    data = body
    if isinstance(body, (dict, list)):
        data = json.dumps(body).encode("utf-8")
    request = urllib.request.Request(url, data=data, method=method)
    if token is not None:
        request.add_header("Authorization", "Bearer " + token)
    if data is not None and content_type is not None:
        request.add_header("Content-Type", content_type)
    request.add_header("User-Agent", "overbrainer-hub-push")
    for key, value in (headers or {}).items():
        request.add_header(key, str(value))
    try:
        with urllib.request.urlopen(request, timeout=TIMEOUT_S) as response:
            raw = response.read()
            return response.status, parse(raw), response.headers
    except urllib.error.HTTPError as error:
        raw = error.read()
        return error.code, parse(raw), error.headers
    except (urllib.error.URLError, OSError) as error:
        reason = getattr(error, "reason", error)
        raise PushError(stage, "the Hub at %s did not answer: %s" % (host_of(url), reason)) from None


def parse(raw):
    try:
        return json.loads(raw.decode("utf-8")) if raw else None
    except ValueError:
        return None


def host_of(url):
    parts = urllib.parse.urlsplit(url)
    return "%s://%s" % (parts.scheme, parts.netloc)


def said(answer):
    """The Hub's own words in an error answer ({"error": "..."}), cut short."""
    if isinstance(answer, dict) and isinstance(answer.get("error"), str):
        return ": " + answer["error"][:300]
    return ""


def check(stage, status, answer, what, ok=(200, 201)):
    if status not in ok:
        raise PushError(stage, "%s answered HTTP %d%s" % (what, status, said(answer)), status)


def create_repo(endpoint, token, repo_id):
    namespace, _, name = repo_id.rpartition("/")
    body = {"name": name, "organization": namespace or None, "private": True}
    status, answer, _ = call("create_repo", "POST", endpoint + "/api/repos/create", token, body)
    # 409: the repository is there already (the push adds a commit to it).
    check("create_repo", status, answer, "creating the repository " + repo_id, ok=(200, 201, 409))


def upload_modes(endpoint, token, repo_id, files):
    payload = []
    for rel, full, size in files:
        with open(full, "rb") as handle:
            sample = handle.read(SAMPLE_BYTES)
        payload.append({"path": rel, "size": size, "sample": base64.b64encode(sample).decode()})
    url = "%s/api/models/%s/preupload/main" % (endpoint, repo_id)
    status, answer, _ = call("preupload", "POST", url, token, {"files": payload})
    check("preupload", status, answer, "the preupload of " + repo_id)
    modes = {}
    for item in (answer or {}).get("files", []):
        if isinstance(item, dict) and isinstance(item.get("path"), str):
            modes[item["path"]] = item.get("uploadMode", "regular")
    return modes


def upload_lfs(endpoint, token, repo_id, lfs):
    """lfs: list of (rel, full, size, oid). Uploads what the Hub does not hold yet."""
    if not lfs:
        return
    url = "%s/%s.git/info/lfs/objects/batch" % (endpoint, repo_id)
    body = {
        "operation": "upload",
        "transfers": ["basic", "multipart"],
        "objects": [{"oid": oid, "size": size} for _, _, size, oid in lfs],
        "hash_algo": "sha256",
    }
    git_lfs = "application/vnd.git-lfs+json"
    status, answer, _ = call(
        "lfs", "POST", url, token, body, content_type=git_lfs, headers={"Accept": git_lfs}
    )
    check("lfs", status, answer, "the LFS batch of " + repo_id)
    by_oid = {oid: (rel, full, size) for rel, full, size, oid in lfs}
    for item in (answer or {}).get("objects", []):
        oid = item.get("oid")
        if oid not in by_oid:
            continue
        rel, full, size = by_oid[oid]
        if isinstance(item.get("error"), dict):
            raise PushError("lfs", "the Hub refused %s: %s" % (rel, item["error"].get("message", "")))
        actions = item.get("actions") or {}
        upload = actions.get("upload")
        if upload is None:
            continue  # the Hub holds these bytes already
        header = dict(upload.get("header") or {})
        if "chunk_size" in header:
            put_parts(rel, full, oid, upload, header)
        else:
            with open(full, "rb") as handle:
                status, answer, _ = call(
                    "lfs", "PUT", upload["href"], None, handle.read(), "application/octet-stream", header
                )
            check("lfs", status, answer, "the upload of " + rel)
        verify = actions.get("verify")
        if verify is not None:
            status, answer, _ = call(
                "lfs", "POST", verify["href"], token, {"oid": oid, "size": size},
                headers=verify.get("header") or {},
            )
            check("lfs", status, answer, "the verification of " + rel)


def put_parts(rel, full, oid, upload, header):
    chunk = int(header.pop("chunk_size"))
    numbers = sorted(int(key) for key in header if key.isdigit())
    parts = []
    with open(full, "rb") as handle:
        for number in numbers:
            handle.seek((number - 1) * chunk)
            status, answer, headers = call(
                "lfs", "PUT", header[str(number)], None, handle.read(chunk), None
            )
            check("lfs", status, answer, "part %d of %s" % (number, rel))
            parts.append({"partNumber": number, "etag": headers.get("ETag", "")})
    status, answer, _ = call("lfs", "POST", upload["href"], None, {"oid": oid, "parts": parts})
    check("lfs", status, answer, "the completion of " + rel)


def commit(endpoint, token, repo_id, files, modes, oids, summary):
    lines = [{"key": "header", "value": {"summary": summary, "description": ""}}]
    for rel, full, size in files:
        if modes.get(rel) == "lfs":
            value = {"path": rel, "algo": "sha256", "oid": oids[rel], "size": size}
            lines.append({"key": "lfsFile", "value": value})
        else:
            with open(full, "rb") as handle:
                content = base64.b64encode(handle.read()).decode()
            lines.append({"key": "file", "value": {"content": content, "path": rel, "encoding": "base64"}})
    body = ("\n".join(json.dumps(line) for line in lines) + "\n").encode("utf-8")
    url = "%s/api/models/%s/commit/main" % (endpoint, repo_id)
    status, answer, _ = call("commit", "POST", url, token, body, "application/x-ndjson")
    check("commit", status, answer, "the commit to " + repo_id)
    revision = (answer or {}).get("commitOid")
    if not isinstance(revision, str) or revision == "":
        raise PushError("commit", "the Hub's commit answer names no commitOid", status)
    return revision


def push(repo_id, folder, endpoint, token, summary):
    if not token:
        raise PushError("token", "HF_TOKEN is not set in the job's environment")
    files = files_of(folder) if os.path.isdir(folder) else []
    if not files:
        raise PushError("files", "%s holds no file to push" % folder)
    create_repo(endpoint, token, repo_id)
    modes = upload_modes(endpoint, token, repo_id, files)
    oids = {rel: sha256_of(full) for rel, full, _ in files if modes.get(rel) == "lfs"}
    upload_lfs(endpoint, token, repo_id, [(r, f, s, oids[r]) for r, f, s in files if r in oids])
    revision = commit(endpoint, token, repo_id, files, modes, oids, summary)
    return {"revision": revision, "files": len(files), "bytes": sum(s for _, _, s in files)}


def write_atomic(path, record):
    temp = path + ".tmp"
    with open(temp, "w", encoding="utf-8") as handle:
        json.dump(record, handle)
        handle.write("\n")
    os.replace(temp, path)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repo", required=True)
    parser.add_argument("--folder", required=True)
    parser.add_argument("--endpoint", default="https://huggingface.co")
    parser.add_argument("--out", required=True)
    parser.add_argument("--summary", default="Upload with Overbrainer")
    args = parser.parse_args(argv)
    endpoint = args.endpoint.rstrip("/")
    token = os.environ.get("HF_TOKEN", "").strip()
    record = {"repo_id": args.repo, "folder": args.folder}
    print("overbrainer: pushing %s/ to %s on %s" % (args.folder, args.repo, endpoint), flush=True)
    try:
        record.update(state="pushed", **push(args.repo, args.folder, endpoint, token, args.summary))
        print("overbrainer: pushed %s, revision %s" % (args.repo, record["revision"]), flush=True)
    except PushError as error:
        record.update(state="failed", stage=error.stage, status=error.status, error=str(error))
        print("overbrainer: the Hub push failed (%s): %s" % (error.stage, error), file=sys.stderr)
    except Exception as error:  # a bug or a local I/O error: still said, never a lost training
        record.update(state="failed", stage="push", status=None, error="%s: %s" % (type(error).__name__, error))
        print("overbrainer: the Hub push failed: %s" % record["error"], file=sys.stderr)
    if token and isinstance(record.get("error"), str):
        record["error"] = record["error"].replace(token, "[redacted]")
    write_atomic(args.out, record)
    return 0


if __name__ == "__main__":
    sys.exit(main())
