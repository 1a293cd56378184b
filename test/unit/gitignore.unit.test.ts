/**
 * docs/SECURITY.md, "the smaller holes": `overbrainer init` and "Create overbrainer.toml" keep
 * `runs/` (each run's private SSH key, its results) and `.env` (it may hold the API key) out of
 * git: they add both to the workspace's .gitignore, creating it in a git workspace, and say so.
 * The CLI runs in-process (`runCli`) on a temp workspace; VS Code's command on the fake host.
 */
import * as assert from 'node:assert/strict';
import * as fs from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { runCli } from '../../src/cli/main';
import { createConfig } from '../../src/ui/commands/configCommands';
import { fakeContext, folder } from './uiFakeHost';

async function init(dir: string): Promise<{ code: number; stdout: string[] }> {
  const stdout: string[] = [];
  const code = await runCli(['-C', dir, 'init'], {
    stdout: (line) => stdout.push(line),
    stderr: () => undefined,
    env: {},
    cwd: dir,
    onInterrupt: () => () => undefined,
  });
  return { code, stdout };
}

describe('security: runs/ and .env are kept out of git', function () {
  let dir: string;
  beforeEach(() => (dir = fs.mkdtempSync(path.join(tmpdir(), 'ob-gitignore-'))));
  afterEach(() => fs.rmSync(dir, { recursive: true, force: true }));
  const gitignore = (): string => fs.readFileSync(path.join(dir, '.gitignore'), 'utf8');

  it('overbrainer init creates .gitignore with runs/ and .env in a git workspace, and says so', async function () {
    fs.mkdirSync(path.join(dir, '.git'));
    const ran = await init(dir);
    assert.equal(ran.code, 0);
    assert.match(gitignore(), /^runs\/$/m);
    assert.match(gitignore(), /^\.env$/m);
    assert.ok(
      ran.stdout.some((l) =>
        /^init: created \.gitignore with runs\/ and \.env \(runs\/ holds each run's private SSH key/.test(
          l,
        ),
      ),
      ran.stdout.join('\n'),
    );
  });

  it('overbrainer init adds only what an existing .gitignore lacks, keeping its lines', async function () {
    fs.writeFileSync(path.join(dir, '.gitignore'), 'node_modules/\n/runs\n');
    const ran = await init(dir);
    assert.equal(
      gitignore(),
      'node_modules/\n/runs\n\n# Overbrainer: .env may hold the Runpod API key\n.env\n',
    );
    assert.ok(ran.stdout.some((l) => /^init: added \.env to \.gitignore/.test(l)));
    fs.rmSync(path.join(dir, 'overbrainer.toml'));
    const again = await init(dir);
    assert.ok(!again.stdout.some((l) => /\.gitignore/.test(l)), again.stdout.join('\n'));
    assert.equal(gitignore().match(/^\.env$/gm)?.length, 1);
  });

  it('outside git with no .gitignore, init writes none (nothing would read it)', async function () {
    await init(dir);
    assert.ok(!fs.existsSync(path.join(dir, '.gitignore')));
  });

  it('Create overbrainer.toml adds them too, in a workspace inside a git repository, and says so', async function () {
    fs.mkdirSync(path.join(dir, '.git'));
    const ws = path.join(dir, 'project');
    fs.mkdirSync(ws);
    const { ctx, fake } = fakeContext();
    fake.folders = [folder(ws)];
    await createConfig(ctx);
    const text = fs.readFileSync(path.join(ws, '.gitignore'), 'utf8');
    assert.match(text, /^runs\/$/m);
    assert.match(text, /^\.env$/m);
    assert.ok(
      fake
        .messages()
        .some((m) => /^info: Overbrainer: created \.gitignore with runs\/ and \.env/.test(m)),
      fake.messages().join('\n'),
    );
  });
});
