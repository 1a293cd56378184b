/**
 * docs/SECURITY.md, VS Code's side: a workspace cannot choose where the API key goes, and in a
 * folder VS Code does not trust (Restricted Mode) the extension shows runs from their records but
 * makes no API call, no SSH connection and starts nothing. The handlers run against the fake
 * host (./uiFakeHost.ts); the "API" is a loopback listener that records every request, so "no
 * API call" is what it saw, not what the code says it did.
 */
import * as assert from 'node:assert/strict';
import * as fs from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { CONFIG_FILE, configTemplate, DEFAULT_RUNPOD_BASE_URL } from '../../src/core/config';
import { pickDataCenters, pickGpuTypes, pickVolume } from '../../src/ui/commands/configCommands';
import { attach, resumeFollowing } from '../../src/ui/runs/following';
import { keep, openSshTerminal, removePod } from '../../src/ui/pods/podCommands';
import { listingProblem } from '../../src/ui/pods/podsModel';
import { cancel, stopRun } from '../../src/ui/commands/stopCommands';
import { train } from '../../src/ui/commands/trainCommand';
import { SetupError } from '../../src/core/flow';
import { emptyPodsApi, type ApiStub } from '../helpers/apiStub';
import { fakeContext, folder, runSummary as run } from './uiFakeHost';

const ROOT = path.resolve(__dirname, '..', '..');
const KEY = 'rpa_TRUSTTEST0123456789';

/** The requests `api` received, as `METHOD /path`. */
function calls(api: ApiStub): string[] {
  return api.requests.map((r) => `${r.method} ${r.path}`);
}

const LOCAL_TOML = `[training]
trainer = "command"
command = "touch started"

[targets.here]
kind = "local"
`;

describe('security: the API key goes only where the user said, and Restricted Mode starts nothing', function () {
  let dir: string;
  let api: ApiStub;
  beforeEach(async function () {
    dir = fs.mkdtempSync(path.join(tmpdir(), 'ob-trust-'));
    api = await emptyPodsApi();
  });
  afterEach(async function () {
    await api.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  /** A context on `dir` with a stored key and the listener as the user's base URL setting. */
  async function context(trusted: boolean, runs = [run(path.join(dir, 'runs', 'r1'))]) {
    const made = fakeContext(runs);
    made.fake.folders = [folder(dir)];
    made.fake.trusted = trusted;
    made.fake.scoped.set('runpod.baseUrl', { globalValue: api.baseUrl });
    await made.apiKeys.set(KEY);
    return made;
  }

  it('the manifest: settings naming a host, a command or a path are machine-scoped, and untrusted workspaces are supported in part', function () {
    const manifest = JSON.parse(fs.readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as {
      capabilities?: {
        untrustedWorkspaces?: {
          supported?: unknown;
          description?: string;
          restrictedConfigurations?: string[];
        };
      };
      contributes: {
        configuration: { properties: Record<string, { scope?: string; format?: string }> };
      };
    };
    const properties = manifest.contributes.configuration.properties;
    const naming = Object.keys(properties).filter((name) =>
      /url|host|command|path|executable|python|interpreter/i.test(name),
    );
    assert.ok(naming.includes('overbrainer.runpod.baseUrl'));
    for (const name of naming) {
      assert.ok(
        properties[name]?.scope === 'machine' || properties[name]?.scope === 'application',
        `${name} has scope ${properties[name]?.scope}: a workspace could set it`,
      );
    }
    const untrusted = manifest.capabilities?.untrustedWorkspaces;
    assert.equal(untrusted?.supported, 'limited');
    assert.match(untrusted?.description ?? '', /no Runpod API call, no SSH connection/);
    assert.deepEqual(untrusted?.restrictedConfigurations, naming);
  });

  it("a workspace's overbrainer.runpod.baseUrl is ignored (said in the log); the user's setting is used", async function () {
    const { ctx, fake, log } = await context(true);
    fake.scoped.set('runpod.baseUrl', { workspaceValue: 'https://collect.example.test/v2' });
    const session = await ctx.session(folder(dir));
    assert.equal(session.api().baseUrl, DEFAULT_RUNPOD_BASE_URL);
    assert.ok(
      log.lines.some((l) =>
        /^warn overbrainer\.runpod\.baseUrl in the workspace's settings \(https:\/\/collect\.example\.test\/v2\) is ignored/.test(
          l,
        ),
      ),
      log.lines.join('\n'),
    );
    fake.scoped.set('runpod.baseUrl', {
      workspaceFolderValue: 'https://collect.example.test/v2',
      globalValue: api.baseUrl,
    });
    assert.equal((await ctx.session(folder(dir))).api().baseUrl, api.baseUrl);
  });

  it('names a host other than Runpod and loopback in the log of every command that uses it', async function () {
    const { ctx, fake } = await context(true);
    const events: string[] = [];
    ctx.bus.on((event) => {
      if (event.type === 'log') events.push(event.message);
    });
    fake.scoped.set('runpod.baseUrl', { globalValue: 'https://runpod-proxy.example.test/v2' });
    const session = await ctx.session(folder(dir));
    assert.equal(
      session.otherApiHost(),
      "Runpod API: your API key goes to runpod-proxy.example.test (https://runpod-proxy.example.test/v2, from your user setting overbrainer.runpod.baseUrl), not to Runpod's own API.",
    );
    session.api();
    assert.deepEqual(events, [session.otherApiHost()]);
    fake.scoped.set('runpod.baseUrl', { globalValue: api.baseUrl });
    assert.equal((await ctx.session(folder(dir))).otherApiHost(), null);
  });

  it('untrusted: Train on a Runpod target makes no API call, creates nothing and offers Manage Workspace Trust', async function () {
    const { ctx, fake } = await context(false, []);
    fs.writeFileSync(path.join(dir, CONFIG_FILE), configTemplate());
    fs.writeFileSync(path.join(dir, 'axolotl.yaml'), 'base_model: m\n');
    fake.answer = (s) => (s.kind === 'error' ? 'Manage Workspace Trust' : undefined);
    await train(ctx);
    assert.deepEqual(api.requests, []);
    const [shown] = fake.shown;
    assert.ok(shown?.kind === 'error', JSON.stringify(fake.shown));
    assert.match(shown.message, /This folder is not trusted, so Overbrainer does not train/);
    assert.deepEqual(shown.items, ['Manage Workspace Trust']);
    assert.ok(
      fake.shown.some((s) => s.kind === 'command' && s.command === 'workbench.trust.manage'),
    );
    assert.ok(!fake.shown.some((s) => s.kind === 'info' && s.modal), 'a confirmation was asked');
    assert.ok(!fs.existsSync(path.join(dir, 'runs')));
  });

  it('untrusted: Train on a local target starts nothing', async function () {
    const { ctx, fake } = await context(false, []);
    fs.writeFileSync(path.join(dir, CONFIG_FILE), LOCAL_TOML);
    await train(ctx);
    assert.match(fake.messages()[0] ?? '', /^error: .*not trusted/);
    assert.ok(!fs.existsSync(path.join(dir, 'runs')));
    assert.ok(!fs.existsSync(path.join(dir, 'started')));
  });

  it('untrusted: every command that would call the API, connect or start says so and does nothing else', async function () {
    const r = run(path.join(dir, 'runs', 'r1'), {
      pod: { ...run(dir).pod!, state: 'kept', keep: true },
    });
    fs.mkdirSync(path.join(r.dir, 'ssh'), { recursive: true });
    fs.writeFileSync(path.join(r.dir, 'ssh', 'config'), '');
    fs.writeFileSync(path.join(dir, CONFIG_FILE), configTemplate());
    const { ctx, fake } = await context(false, [r]);
    fake.answer = (s) => (s.kind === 'warning' && s.modal ? 'Remove Pod' : undefined);
    const commands: [string, () => Promise<void>][] = [
      ['attach to a run', () => attach(ctx, r)],
      ['cancel a run', () => cancel(ctx, r)],
      ['stop a run', () => stopRun(ctx, r)],
      ['keep a pod', () => keep(ctx, r, true)],
      ['release a pod', () => keep(ctx, r, false)],
      ['remove a pod', () => removePod(ctx, r)],
      ['open an SSH connection', () => openSshTerminal(ctx, r)],
      ['list GPU types', () => pickGpuTypes(ctx)],
      ['call the Runpod API', () => pickDataCenters(ctx)],
      ['call the Runpod API', () => pickVolume(ctx)],
    ];
    for (const [what, command] of commands) {
      fake.shown.length = 0;
      await command();
      assert.deepEqual(
        fake.shown.map((s) => s.kind),
        ['error'],
        `${what}: ${JSON.stringify(fake.shown)}`,
      );
      assert.match(fake.messages()[0] ?? '', new RegExp(`does not ${what} from it`));
    }
    assert.deepEqual(api.requests, []);
    assert.equal(ctx.followed.size, 0);
  });

  it('untrusted: no run is followed again at activation, and the session refuses API, SSH and jobs; trusted, it calls the API', async function () {
    const { ctx, fake, log } = await context(false);
    await resumeFollowing(ctx);
    assert.equal(ctx.followed.size, 0);
    assert.ok(log.lines.some((l) => /not trusted: its runs are shown from their records/.test(l)));
    const session = await ctx.session(folder(dir));
    for (const call of [
      () => session.api(),
      () => session.deps(false),
      () => session.workspace.podCtx(),
    ]) {
      assert.throws(call, (e: unknown) => e instanceof SetupError && e.needsTrust);
    }
    // The Pods view says why the account is not listed, with the action that changes it.
    let refused: unknown;
    try {
      session.api();
    } catch (error) {
      refused = error;
    }
    const problem = listingProblem(refused);
    assert.ok(problem.kind === 'message');
    assert.equal(problem.text, 'Folder not trusted');
    assert.equal(problem.command?.id, 'workbench.trust.manage');
    assert.deepEqual(api.requests, []);

    fake.trusted = true;
    await (await ctx.session(folder(dir))).api().listPods();
    assert.deepEqual(calls(api), ['GET /v2/pods']);
  });
});
