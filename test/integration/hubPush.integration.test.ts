/**
 * The Hub push of `hub_model_id` (issue 36 part 1), on a pod of the emulator: after training, the
 * job pushes output/ from the pod to a loopback stand-in of the Hugging Face Hub (the job's
 * HF_ENDPOINT; test/helpers/hubStandIn.ts answers the Hub's commit API: repository create,
 * preupload, LFS batch with basic and multipart uploads and verify, the NDJSON commit), with the
 * token the job has as HF_TOKEN. The files arrive with the bytes that came home, the revision the
 * Hub answered is in run.json, the token is in no file or event; a push the Hub refuses leaves a
 * succeeded run whose results came home, saying what failed and what to do.
 *
 * What the stand-in leaves untested: the real Hub's accounts and token scopes (here one fixed
 * token), its LFS limits (object sizes, the real multipart thresholds, storage quotas), its rate
 * limits (429s), its upload-mode rule (here: files of 4 KiB and more are LFS), and the network
 * between a real pod and huggingface.co.
 */
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { loadConfig } from '../../src/core/config';
import { train } from '../../src/core/flow';
import { startHubStandIn, type HubStandIn } from '../helpers/hubStandIn';
import { filesUnder, Lab } from '../helpers/lifecycle';

const TOKEN = 'hf_itHubPushToken_5e2b9d17c3a8';
const REPO = 'me/tiny';

/** The job writes output/ of three sizes: inline, LFS in one PUT, multipart LFS. */
const OPTIONS = {
  command:
    'python3 train.py --steps 10 --step-seconds 0.05 && python3 -c "import os; open(\\"output/weights.bin\\", \\"wb\\").write(os.urandom(300000)); open(\\"output/adapter.bin\\", \\"wb\\").write(os.urandom(20000))"',
  trainingExtra: `hub_model_id = "${REPO}"\n`,
};

/** The files under `dir`, by path relative to it, `checkpoint-*` folders left out. */
function tree(dir: string): Map<string, Buffer> {
  const out = new Map<string, Buffer>();
  for (const [rel, data] of filesUnder(dir)) {
    if (!rel.split('/').some((part) => part.startsWith('checkpoint-'))) out.set(rel, data);
  }
  return out;
}

describe('the Hub push (hub_model_id): from the pod to a Hub stand-in', function () {
  this.timeout(240_000);
  let lab: Lab | null = null;
  let hub: HubStandIn | null = null;
  afterEach(async () => {
    await lab?.close();
    await hub?.close();
    lab = null;
    hub = null;
  });

  async function runWith(
    token: string,
    faults: (standIn: HubStandIn) => void = () => undefined,
  ): Promise<{ l: Lab; runId: string; summary: string }> {
    hub = await startHubStandIn({
      token: TOKEN,
      lfsFromBytes: 4096,
      multipartFromBytes: 100_000,
      partBytes: 64 * 1024,
    });
    faults(hub);
    const l = await Lab.start(OPTIONS);
    lab = l;
    const loaded = loadConfig(l.workspace, { HF_ENDPOINT: hub.url });
    assert.ok(loaded.ok, JSON.stringify(!loaded.ok && loaded.errors));
    assert.equal(loaded.config.training?.hubEndpoint, hub.url);
    let runId: string | null = null;
    const result = await l.track(
      train({ ...l.deps, env: { OVERBRAINER_HF_TOKEN: token } }, loaded.config, l.workspace, {
        onRun: (r) => (runId = r.id),
      }),
    );
    return { l, runId: runId!, summary: result.summary };
  }

  it('pushes output/ with its bytes (regular, LFS, multipart LFS) and records the revision', async () => {
    const { l, runId, summary } = await runWith(TOKEN);
    const runDir = l.runDir(runId);
    const log = fs.readFileSync(path.join(runDir, 'job.log'), 'utf8');
    const run = l.runJson(runId);
    assert.equal(run.state, 'succeeded', `${summary}\n${log}`);
    const revisions = hub!.revisions(REPO);
    assert.equal(revisions.length, 1, `${summary}\n${log}`);
    assert.deepEqual(run.hub_push, {
      repo_id: REPO,
      state: 'pushed',
      revision: revisions[0],
      folder: 'output',
      files: tree(path.join(runDir, 'output')).size,
      bytes: [...tree(path.join(runDir, 'output')).values()].reduce((n, b) => n + b.length, 0),
    });
    assert.match(
      summary,
      new RegExp(`succeeded; pushed output/ to the Hub as ${REPO} \\(revision ${revisions[0]}\\)`),
    );
    // What the Hub holds is what came home, byte for byte.
    const home = tree(path.join(runDir, 'output'));
    const pushed = hub!.files(REPO);
    assert.deepEqual([...pushed.keys()].sort(), [...home.keys()].sort());
    for (const [rel, data] of home) assert.ok(pushed.get(rel)?.equals(data), `${rel} differs`);
    assert.ok(
      ['weights.bin', 'adapter.bin', 'model.json'].every((name) => home.has(name)),
      [...home.keys()].join(' '),
    );
    // The calls the push makes: the API with the token, the LFS URLs without it.
    const routes = hub!.calls.map((c) => c.route);
    assert.deepEqual(
      [...new Set(routes)],
      [
        'create_repo',
        'preupload',
        'lfs_batch',
        'lfs_put',
        'lfs_verify',
        'lfs_part',
        'lfs_complete',
        'commit',
      ],
    );
    // weights.bin in ⌈300000 / 65536⌉ parts; adapter.bin in one PUT; model.json inline.
    assert.equal(routes.filter((route) => route === 'lfs_part').length, 5);
    assert.equal(routes.filter((route) => route === 'lfs_put').length, 1);
    for (const call of hub!.calls) {
      assert.ok(call.status < 300, `${call.method} ${call.path} answered ${call.status}`);
      const api = !['lfs_put', 'lfs_part', 'lfs_complete'].includes(call.route);
      assert.equal(
        api ? call.authorized : call.hadAuthorization,
        api,
        `${call.method} ${call.path}`,
      );
    }
    // The token is in no file under the workspace (run.json, the copied job.log) and no event.
    for (const [rel, data] of filesUnder(l.workspace)) {
      assert.ok(!data.toString('latin1').includes(TOKEN), `${rel} holds the token`);
    }
    assert.ok(!JSON.stringify(l.events).includes(TOKEN), 'an event holds the token');
  });

  it('a push the Hub refuses: the run succeeded, its results came home, it says what failed', async () => {
    const { l, runId, summary } = await runWith(TOKEN, (standIn) =>
      standIn.fail('commit', 500, 'internal error'),
    );
    const run = l.runJson(runId);
    assert.equal(run.state, 'succeeded', summary);
    assert.deepEqual(run.end, { cause: 'completed', message: run.message });
    assert.deepEqual(run.hub_push, {
      repo_id: REPO,
      state: 'failed',
      folder: 'output',
      stage: 'commit',
      status: 500,
      error: `the commit to ${REPO} answered HTTP 500: internal error`,
    });
    assert.match(
      summary,
      new RegExp(
        `^train: run ${runId} succeeded; Hub push failed \\(commit\\): the commit to ${REPO} answered HTTP 500: internal error\\. The results are home: push runs/${runId}/output/ yourself`,
      ),
    );
    assert.ok(fs.existsSync(path.join(l.runDir(runId), 'output', 'model.json')));
    assert.deepEqual(hub!.revisions(REPO), []);
  });

  it('a token the Hub refuses: the next action is a write token', async () => {
    const { l, runId, summary } = await runWith('hf_notTheRightToken_0000');
    const run = l.runJson(runId);
    assert.equal(run.state, 'succeeded', summary);
    const push = run.hub_push as Record<string, unknown>;
    assert.equal(push.state, 'failed');
    assert.equal(push.stage, 'create_repo');
    assert.equal(push.status, 401);
    assert.match(
      String(run.message),
      /Set OVERBRAINER_HF_TOKEN to a write token that may write to me\/tiny/,
    );
    assert.ok(hub!.calls.every((c) => !c.authorized));
  });
});
