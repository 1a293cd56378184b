/**
 * The Hub push's parts that need no pod: HF_ENDPOINT's rule, what the job pushes (output/ or
 * output/merged/) and how its script runs it (after training and the merge, never after a
 * snapshot, always status 0, an outcome even when the push script cannot run), run.json's typed
 * `hub_push`, and what a run says of its push (the words and the next action).
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { loadConfig } from '../../src/core/config';
import { hubEndpointOf } from '../../src/core/config/hubEndpoint';
import { checkRunFiles } from '../../src/core/flow/runFiles';
import { decodeRunRecord, encodeRunRecord, type RunRecord } from '../../src/core/runs/runRecord';
import { HUB_PUSH_FILE, parseHubPush, recordHubPush } from '../../src/core/train/hubPush';
import { jobScript } from '../../src/core/train/jobScripts';
import { axolotlToml, firstTarget } from '../helpers/configFixture';

const AXOLOTL = axolotlToml();

const COMMAND = `[training]
target = "here"
trainer = "command"
command = "mkdir -p output && echo weights > output/model.bin"
hub_model_id = "me/tiny"

[targets.here]
kind = "local"
`;

describe('the Hub push (hub_model_id) without a pod', () => {
  let dir: string;
  beforeEach(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'hub-push-'));
    fs.mkdirSync(path.join(dir, 'data'));
    fs.writeFileSync(path.join(dir, 'data', 'train.jsonl'), '{"messages":[]}\n');
  });
  afterEach(() => fs.rmSync(dir, { recursive: true, force: true }));

  it('HF_ENDPOINT: https, or http to this machine only; the default is huggingface.co', () => {
    assert.deepEqual(hubEndpointOf({}), { ok: true, url: 'https://huggingface.co' });
    assert.deepEqual(hubEndpointOf({ HF_ENDPOINT: 'https://hub.example.org/' }), {
      ok: true,
      url: 'https://hub.example.org',
    });
    assert.deepEqual(hubEndpointOf({ HF_ENDPOINT: 'http://127.0.0.1:8123' }), {
      ok: true,
      url: 'http://127.0.0.1:8123',
    });
    const plain = hubEndpointOf({ HF_ENDPOINT: 'http://hub.example.org' });
    assert.ok(!plain.ok && /unencrypted/.test(plain.message), JSON.stringify(plain));
    const creds = hubEndpointOf({ HF_ENDPOINT: 'https://me:pw@hub.example.org' });
    assert.ok(!creds.ok && /user name, a password/.test(creds.message));
    // A bad one is an error at hub_model_id, naming the variable and the fix.
    fs.writeFileSync(path.join(dir, 'overbrainer.toml'), AXOLOTL);
    const loaded = loadConfig(dir, { HF_ENDPOINT: 'ftp://hub.example.org' });
    assert.ok(!loaded.ok);
    const error = loaded.errors[0]!;
    assert.match(
      error.message,
      /hub_model_id pushes to the Hub at HF_ENDPOINT, but HF_ENDPOINT must be an https:\/\/ URL/,
    );
    assert.equal(error.line, 6);
    assert.match(error.hint, /Unset HF_ENDPOINT/);
    // Without hub_model_id, HF_ENDPOINT is nobody's business.
    fs.writeFileSync(path.join(dir, 'overbrainer.toml'), AXOLOTL.replace(/^hub_model_id.*$/m, ''));
    const without = loadConfig(dir, { HF_ENDPOINT: 'ftp://hub.example.org' });
    assert.ok(without.ok);
    assert.equal(without.config.training?.hubEndpoint, null);
  });

  it('with merge = true the job pushes output/merged/ with the venv Python, after the merge, never after a snapshot', () => {
    fs.writeFileSync(path.join(dir, 'overbrainer.toml'), AXOLOTL);
    const loaded = loadConfig(dir, {});
    assert.ok(loaded.ok);
    const runDir = path.join(dir, 'runs', 'r');
    fs.mkdirSync(runDir, { recursive: true });
    const files = checkRunFiles(loaded.config, firstTarget(loaded.config), dir, runDir);
    assert.deepEqual(files.job.hub, {
      repoId: 'me/qwen-lora',
      endpoint: 'https://huggingface.co',
      folder: 'output/merged',
    });
    // The push script travels with the metrics plugin.
    assert.ok(fs.existsSync(path.join(runDir, 'plugin', 'overbrainer_hub.py')));
    const script = jobScript({ ...files.job, venv: '/v' } as Parameters<typeof jobScript>[0], {
      runDir: '/w/r',
      jobEnvFile: null,
    });
    assert.match(
      script,
      /merge-lora 'axolotl.yaml'; \}; \} && \{ \[ -e 'snapshot.json' \] \|\| \[ "\$\{NODE_RANK:-0\}" != 0 \] \|\| \{ rm -f 'hub_push.json'; '\/v\/bin\/python' plugin\/overbrainer_hub.py --repo 'me\/qwen-lora' --folder 'output\/merged' --endpoint 'https:\/\/huggingface.co' --out 'hub_push.json'; .*\}; true; \}$/,
    );
    // Without merge: output/.
    fs.writeFileSync(path.join(dir, 'overbrainer.toml'), AXOLOTL.replace('merge = true', ''));
    const plain = loadConfig(dir, {});
    assert.ok(plain.ok);
    assert.equal(
      checkRunFiles(plain.config, firstTarget(plain.config), dir, runDir).job.hub?.folder,
      'output',
    );
    // The token is never an argument.
    assert.doesNotMatch(script, /HF_TOKEN/);
  });

  it('a command job: pushed only when it succeeded, the job keeps its status, an outcome even without the script', () => {
    fs.writeFileSync(path.join(dir, 'overbrainer.toml'), COMMAND);
    const loaded = loadConfig(dir, { HF_ENDPOINT: 'http://127.0.0.1:9' });
    assert.ok(loaded.ok);
    const runDir = path.join(dir, 'run');
    fs.mkdirSync(runDir);
    const files = checkRunFiles(loaded.config, firstTarget(loaded.config), dir, runDir);
    const run = (job: typeof files.job, env: Record<string, string> = {}): number => {
      const script = jobScript(job, { runDir, jobEnvFile: null });
      return (
        spawnSync('sh', ['-c', script], { cwd: runDir, env: { ...process.env, ...env } }).status ??
        -1
      );
    };
    // The push script is not there (a broken install on the target): the job still exits 0, and
    // its outcome says the push did not run.
    fs.rmSync(path.join(runDir, 'plugin', 'overbrainer_hub.py'));
    assert.equal(run(files.job), 0);
    const outcome = parseHubPush(fs.readFileSync(path.join(runDir, HUB_PUSH_FILE), 'utf8'));
    assert.equal(outcome?.state, 'failed');
    assert.ok(outcome?.state === 'failed');
    assert.equal(outcome.stage, 'not_run');
    assert.match(outcome.error, /the push script ended with status 2 and wrote no outcome/);
    // A cluster's other nodes push nothing: the primary (NODE_RANK 0) does.
    fs.rmSync(path.join(runDir, HUB_PUSH_FILE));
    assert.equal(run(files.job, { NODE_RANK: '1' }), 0);
    assert.ok(!fs.existsSync(path.join(runDir, HUB_PUSH_FILE)));
    // A failed training pushes nothing and keeps its status.
    assert.equal(run({ ...files.job, command: 'exit 7' } as typeof files.job), 7);
    assert.ok(!fs.existsSync(path.join(runDir, HUB_PUSH_FILE)));
    // A snapshot stops the training: nothing is pushed.
    fs.writeFileSync(path.join(runDir, 'snapshot.json'), '{}');
    assert.equal(run(files.job), 0);
    assert.ok(!fs.existsSync(path.join(runDir, HUB_PUSH_FILE)));
  });

  it("run.json's hub_push: typed, written and read back; an unknown stage reads as push", () => {
    const base: RunRecord = {
      id: 'tiny-1',
      target: 'pod',
      created: '2026-12-06T21:00:00Z',
      remoteDir: '/w/tiny-1',
      job: null,
      state: 'succeeded',
      message: null,
      end: { cause: 'completed', message: null },
    };
    const pushed: RunRecord = {
      ...base,
      hubPush: {
        repoId: 'me/tiny',
        state: 'pushed',
        revision: 'a'.repeat(40),
        folder: 'output',
        files: 3,
        bytes: 120,
      },
    };
    const text = encodeRunRecord(pushed);
    assert.deepEqual(JSON.parse(text).hub_push, {
      repo_id: 'me/tiny',
      state: 'pushed',
      revision: 'a'.repeat(40),
      folder: 'output',
      files: 3,
      bytes: 120,
    });
    assert.deepEqual(decodeRunRecord(text, 'run.json').hubPush, pushed.hubPush);
    const odd = JSON.parse(encodeRunRecord(base)) as Record<string, unknown>;
    odd.hub_push = {
      repo_id: 'me/tiny',
      state: 'failed',
      folder: 'output',
      stage: 'teleport',
      status: null,
      error: 'x',
    };
    const read = decodeRunRecord(JSON.stringify(odd), 'run.json').hubPush;
    assert.ok(read?.state === 'failed' && read.stage === 'push');
  });

  it('what a run says: pushed, or what failed and the next action; a failed run keeps its words', () => {
    const ended = (state: string, message: string | null) => ({
      id: 'tiny-1',
      state,
      message,
      end: { message } as { message: string | null },
    });
    const failed = (stage: string, status: number | null, error: string) =>
      parseHubPush(
        JSON.stringify({
          repo_id: 'me/tiny',
          folder: 'output',
          state: 'failed',
          stage,
          status,
          error,
        }),
      );
    const run = ended('succeeded', null);
    recordHubPush(
      run,
      parseHubPush(
        JSON.stringify({
          repo_id: 'me/tiny',
          folder: 'output',
          state: 'pushed',
          revision: 'abc123',
          files: 1,
          bytes: 1,
        }),
      ),
    );
    assert.equal(run.message, 'pushed output/ to the Hub as me/tiny (revision abc123)');
    assert.equal(run.end.message, run.message);
    const cases: [string, number | null, RegExp][] = [
      ['create_repo', 401, /Set OVERBRAINER_HF_TOKEN to a write token that may write to me\/tiny/],
      ['token', null, /Set OVERBRAINER_HF_TOKEN/],
      [
        'commit',
        429,
        /The Hub limits how fast you may push: wait, then push runs\/tiny-1\/output\/ yourself/,
      ],
      ['files', null, /The job wrote nothing into output\/: nothing was pushed/],
      ['not_run', null, /Check that python3 runs on the target \(see runs\/tiny-1\/job.log\)/],
      [
        'lfs',
        500,
        /The results are home: push runs\/tiny-1\/output\/ yourself \(`huggingface-cli upload me\/tiny runs\/tiny-1\/output`\)/,
      ],
    ];
    for (const [stage, status, next] of cases) {
      const r = ended('succeeded', null);
      recordHubPush(r, failed(stage, status, 'it broke'));
      assert.match(r.message ?? '', new RegExp(`^Hub push failed \\(${stage}\\): it broke\\. `));
      assert.match(r.message ?? '', next);
    }
    const bad = ended('failed', 'exited with code 1');
    recordHubPush(bad, failed('commit', 500, 'x'));
    assert.equal(bad.message, 'exited with code 1');
    assert.equal((bad as { hubPush?: unknown }).hubPush !== undefined, true);
    assert.equal(parseHubPush('{"state":"pushed"}'), null);
    assert.equal(parseHubPush('not json'), null);
  });
});
