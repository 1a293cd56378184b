/**
 * The user's own shell on a kept pod of the emulator (its real sshd), as the product hands it
 * out: the ssh command `runs show` prints, run as printed by a shell in the CLI's folder, and the
 * terminal "Open SSH Terminal" opens, spawned as VS Code would spawn it. A run folder holding an
 * ssh/config with a ProxyCommand (what a cloned repository can ship) must run nothing of it; a
 * run folder Overbrainer did not write must be refused.
 */
import assert from 'node:assert/strict';
import { type ChildProcess } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { startEmulator, type Emulator } from '../emulator/emulator';
import { ApiClient } from '../emulator/testing';
import { cliArgv, startCli, ROOT, type Ran } from '../helpers/cli';
import { readJson } from '../helpers/labFiles';
import { emulatorEnv, tempTinyWorkspace, tinyToml } from '../helpers/tinyWorkspace';
import { spawnAsUser, type ShellRun } from '../helpers/userMachine';
import { systemClock } from '../../src/core/clock';
import { prepareSshAccess } from '../../src/core/pod/sshAccess';
import { RunStore } from '../../src/core/runs/store';
import { openSshTerminal } from '../../src/ui/pods/podCommands';
import { builtinTerminal } from '../../src/ui/pods/sshTerminal';
import { fakeContext, folder, podSummary, runSummary } from '../unit/uiFakeHost';

describe('the ssh command and terminal of a kept pod run nothing of the run folder', function () {
  this.timeout(150_000);
  let emulator: Emulator;
  let api: ApiClient;
  let tmp: string;
  let ws: string;
  let home: string;
  let id: string;
  let podId: string;
  let marker: string;
  const children = new Set<ChildProcess>();

  const cli = (args: string[]): Promise<Ran> =>
    startCli(['-C', ws, ...args], { children, env: emulatorEnv(emulator) }).done;
  const sshDir = (): string => path.join(ws, 'runs', id, 'ssh');

  before(async () => {
    emulator = await startEmulator({ bootDelaysMs: { provisioning: 100, starting: 100 } });
    api = new ApiClient(emulator.baseUrl, emulator.apiKey);
    ({ tmp, ws } = tempTinyWorkspace(
      'ssh-access-it-',
      tinyToml('python3 train.py --steps 5 --step-seconds 0.05'),
    ));
    home = path.join(tmp, 'home');
    fs.mkdirSync(home);
    const trained = await cli(['train', '--keep-pod']);
    assert.equal(trained.code, 0, trained.stderr);
    [id = ''] = fs.readdirSync(path.join(ws, 'runs'));
    podId = String(readJson(path.join(ws, 'runs', id, 'pod.json')).pod_id);
  });

  after(async () => {
    for (const child of children) child.kill('SIGKILL');
    if (emulator) {
      for (const pod of emulator.ledger().pods.filter((p) => p.billing))
        await api.delete(`/pods/${pod.id}`);
      await emulator.close();
    }
    if (tmp) fs.rmSync(tmp, { recursive: true, force: true });
  });

  beforeEach(() => {
    // What a cloned repository can ship beside the product's files: a config whose ProxyCommand
    // (and Match exec) runs on this machine, and a known_hosts trusting any key.
    marker = path.join(tmp, `proxy-ran-${Date.now()}`);
    fs.writeFileSync(
      path.join(sshDir(), 'config'),
      [
        `Match exec "id > ${marker}.match"`,
        'Host *',
        `  ProxyCommand sh -c "id > ${marker}"`,
        '  StrictHostKeyChecking no',
        '',
      ].join('\n'),
    );
    fs.writeFileSync(
      path.join(sshDir(), 'known_hosts'),
      '* ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIH\n',
    );
    fs.chmodSync(sshDir(), 0o700);
    fs.chmodSync(path.join(sshDir(), 'id_ed25519'), 0o600);
  });

  /** Asserts that nothing of the planted config ran and the pinned host key is what is trusted. */
  function assertNothingRan(): void {
    assert.equal(fs.existsSync(marker), false, 'the ProxyCommand of the planted config ran');
    assert.equal(
      fs.existsSync(`${marker}.match`),
      false,
      'the Match exec of the planted config ran',
    );
    const pinned = String(readJson(path.join(ws, 'runs', id, 'pod.json')).host_key);
    assert.equal(
      fs.readFileSync(path.join(sshDir(), 'known_hosts'), 'utf8'),
      `overbrainer-${id} ${pinned}\n`,
    );
  }

  it('runs show prints an ssh command that, run as printed, reaches the pod with its pinned key and runs no ProxyCommand', async () => {
    const shown = await cli(['runs', 'show', id]);
    assert.equal(shown.code, 0, shown.stderr);
    const line = shown.stdout.split('\n').find((l) => /^\s*ssh:\s/.test(l));
    assert.ok(line, `runs show printed no ssh command:\n${shown.stdout}`);
    const command = line.replace(/^\s*ssh:\s*/, '');
    assert.match(command, /^ssh -F none /);
    // The command names the key file, never a secret.
    const privateKey = fs.readFileSync(path.join(sshDir(), 'id_ed25519'), 'utf8');
    const keyBody = privateKey.split('\n')[1] ?? '';
    assert.ok(keyBody.length > 20);
    for (const secret of [emulator.apiKey, keyBody, 'PRIVATE KEY']) {
      assert.ok(!shown.stdout.includes(secret), `runs show printed a secret: ${shown.stdout}`);
    }

    // As a user pastes it, in the folder the CLI ran in (the CLI helper's cwd).
    const ran = await spawnAsUser('sh', ['-c', `${command} 'echo "on the pod: $((40 + 2))"'`], {
      cwd: ROOT,
      env: { HOME: home },
    });
    assert.equal(ran.code, 0, ran.stderr);
    assert.equal(ran.stdout, 'on the pod: 42\n');
    assertNothingRan();
    assert.equal(fs.existsSync(path.join(home, '.ssh')), false, 'ssh learnt a key outside the run');
    assert.equal(fs.existsSync(path.join(sshDir(), 'config')), false, 'the planted config is left');
    assert.ok(emulator.ledger().pods.some((p) => p.id === podId && p.billing));
  });

  it('Open SSH Terminal spawns an ssh that reaches the pod with its pinned key and runs no ProxyCommand', async () => {
    const summary = runSummary(path.join(ws, 'runs', id), {
      state: 'succeeded',
      pod: podSummary(podId, { state: 'kept', keep: true }),
    });
    const { ctx, fake } = fakeContext([summary]);
    fake.folders = [folder(ws)];
    await openSshTerminal(ctx, summary);
    assert.deepEqual(fake.messages(), []);
    const terminal = fake.shown.find((s) => s.kind === 'terminal');
    assert.ok(terminal?.kind === 'terminal', 'no terminal was opened');
    const { shellPath, shellArgs, cwd } = terminal.options;
    assert.equal(shellPath, 'ssh');
    assert.ok(Array.isArray(shellArgs));
    const where = typeof cwd === 'string' ? cwd : (cwd?.fsPath ?? ws);
    const ran = await spawnAsUser(shellPath, [...shellArgs, 'echo "terminal: $((40 + 2))"'], {
      cwd: where,
      env: { HOME: home },
    });
    assert.equal(ran.code, 0, ran.stderr);
    assert.equal(ran.stdout, 'terminal: 42\n');
    assertNothingRan();
  });

  it('a run folder Overbrainer did not write (modes of a checkout, another owner) is refused by both', async () => {
    const summary = runSummary(path.join(ws, 'runs', id), {
      state: 'succeeded',
      pod: podSummary(podId, { state: 'kept', keep: true }),
    });
    const key = path.join(sshDir(), 'id_ed25519');
    const cases: [string, () => void, RegExp][] = [
      ['a key readable by others', () => fs.chmodSync(key, 0o644), /has mode 644/],
      ['an ssh folder of a checkout', () => fs.chmodSync(sshDir(), 0o755), /has mode 755/],
      ['a key of another user', () => fs.chownSync(key, 65534, 65534), /belongs to user 65534/],
    ];
    for (const [what, spoil, said] of cases) {
      spoil();
      const shown = await cli(['runs', 'show', id]);
      assert.equal(shown.code, 0, `${what}: ${shown.stderr}`);
      assert.ok(!/^\s*ssh:\s+ssh /m.test(shown.stdout), `${what}: ${shown.stdout}`);
      assert.match(shown.stdout, new RegExp(`ssh:\\s+refused: run ${id} was not written`), what);
      assert.match(shown.stdout, said, what);

      const { ctx, fake } = fakeContext([summary]);
      fake.folders = [folder(ws)];
      await openSshTerminal(ctx, summary);
      assert.ok(!fake.shown.some((s) => s.kind === 'terminal'), `${what}: a terminal was opened`);
      const [message = ''] = fake.messages();
      assert.match(message, new RegExp(`^error: .*run ${id} was not written by Overbrainer`), what);
      assert.match(message, new RegExp(`delete runs/${id}`), what);
      assertNothingRanYet();
      // Back as the product wrote it.
      fs.chownSync(key, process.getuid?.() ?? 0, process.getgid?.() ?? 0);
      fs.chmodSync(key, 0o600);
      fs.chmodSync(sshDir(), 0o700);
    }
  });

  /** `overbrainer runs ssh ID` with `input` on its stdin (a pipe: no pseudo-terminal). */
  function runsSsh(input: string, env: Record<string, string> = {}): Promise<ShellRun> {
    return spawnAsUser(process.execPath, [...cliArgv(), '-C', ws, 'runs', 'ssh', id], {
      cwd: ROOT,
      env: { HOME: home, ...emulatorEnv(emulator), ...env },
      input,
      children,
    });
  }

  it('runs ssh opens a shell on the pod with the system ssh (openssh) and with its own client (builtin)', async () => {
    const input = 'echo "shell: $((40 + 2))"; exit 3\n';
    const openssh = await runsSsh(input);
    assert.equal(openssh.code, 3, openssh.stderr);
    assert.equal(openssh.stdout, 'shell: 42\n');
    assertNothingRan();

    const builtin = await runsSsh(input, { OVERBRAINER_SSH_CLIENT: 'builtin' });
    assert.equal(builtin.code, 3, builtin.stderr);
    assert.equal(builtin.stdout, 'shell: 42\n');
    assertNothingRanYet();
    // No ssh binary is needed for it: a PATH without one changes nothing.
    const bare = fs.mkdtempSync(path.join(tmp, 'bin-'));
    fs.symlinkSync(process.execPath, path.join(bare, 'node'));
    const alone = await runsSsh(input, { OVERBRAINER_SSH_CLIENT: 'builtin', PATH: bare });
    assert.equal(alone.code, 3, alone.stderr);
    assert.equal(alone.stdout, 'shell: 42\n');

    // runs show says how, honestly: no system ssh command for the builtin client.
    const shown = await startCli(['-C', ws, 'runs', 'show', id], {
      children,
      env: { ...emulatorEnv(emulator), OVERBRAINER_SSH_CLIENT: 'builtin' },
    }).done;
    assert.equal(shown.code, 0, shown.stderr);
    assert.match(
      shown.stdout,
      new RegExp(
        `^ {2}ssh: {5}overbrainer runs ssh ${id} {3}\\(ssh_client = "builtin": no system ssh command\\)$`,
        'm',
      ),
    );
  });

  it('Open SSH Terminal with ssh_client = "builtin": a pseudo-terminal over Overbrainer\'s client reaches the pod', async () => {
    const store = new RunStore(path.join(ws, 'runs'), systemClock);
    const pod = store.loadPod(id);
    assert.ok(pod);
    const pty = builtinTerminal(prepareSshAccess(store, pod), 10_000);
    let screen = '';
    pty.onDidWrite((text) => (screen += text));
    const closed = new Promise<number | void>((resolve) => pty.onDidClose?.(resolve));
    pty.open({ columns: 100, rows: 30 });
    // Typed before the shell is up: kept and sent once it is.
    pty.handleInput?.('stty size; echo "pty: $((40 + 2))"; exit 4\r');
    assert.equal(await closed, 4, screen);
    assert.match(screen, /^30 100\r?$/m, 'the shell has the terminal size');
    assert.match(screen, /^pty: 42\r?$/m);
    assertNothingRanYet();
  });

  function assertNothingRanYet(): void {
    assert.equal(fs.existsSync(marker), false);
    assert.equal(fs.existsSync(`${marker}.match`), false);
  }
});
