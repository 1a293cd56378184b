/**
 * Open SSH Terminal on a run of an ssh target (issue 36 part 3): the user's own ssh, with their
 * SSH config, agent and known_hosts, into the run's directory on their machine (a real OpenSSH
 * sshd on loopback); with `ssh_client = "builtin"`, Overbrainer's client trusting the same
 * known_hosts. The terminal is given no key and no secret.
 */
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import type * as vscode from 'vscode';
import { openSshTerminal } from '../../src/ui/pods/podCommands';
import {
  ALIAS,
  closeMachines,
  spawnAsUser,
  startGated,
  userMachine as box,
} from '../helpers/userMachine';
import { cliArgv } from '../helpers/cli';
import { gatedCommand } from '../helpers/gatedJob';
import { fakeContext, folder, runSummary } from '../unit/uiFakeHost';

describe("Open SSH Terminal on the user's own machine", function () {
  this.timeout(120_000);
  afterEach(closeMachines);

  it("Open SSH Terminal on a run of the machine: the user's ssh with their SSH config in the run's directory (and builtin), no key or secret in what it is given", async () => {
    const token = 'hf_itTerminalToken_3f9a61c0';
    const b = await box(gatedCommand(4), undefined, { env: { OVERBRAINER_HF_TOKEN: token } });
    const { runId, ended, stop: leave } = await startGated(b);
    leave.abort();
    await ended;
    const remoteDir = b.deps.store.loadRun(runId).remoteDir;
    const summary = runSummary(path.join(b.ws, 'runs', runId), { target: 'box', pod: null });

    const { ctx, fake } = fakeContext([summary]);
    Object.assign(fake.env, b.env);
    fake.folders = [folder(b.ws)];
    await openSshTerminal(ctx, summary);
    assert.deepEqual(fake.messages(), []);
    const terminal = fake.shown.find((s) => s.kind === 'terminal');
    assert.ok(terminal?.kind === 'terminal', 'no terminal was opened');
    const { shellPath, shellArgs } = terminal.options;
    assert.equal(shellPath, 'ssh');
    assert.ok(Array.isArray(shellArgs));
    assert.ok(shellArgs.includes(`${b.sshd.user}@${ALIAS}`), shellArgs.join(' '));
    const keyBody = b.sshd.clientPrivateKey.toString().split('\n')[1] ?? '';
    const given = JSON.stringify(terminal.options);
    for (const secret of [token, keyBody, 'PRIVATE KEY', 'StrictHostKeyChecking']) {
      assert.ok(!given.includes(secret), `the terminal is given ${secret}: ${given}`);
    }
    const typed = 'pwd; echo "terminal: $((40 + 2))"; exit 3\n';
    const ran = await spawnAsUser(shellPath, shellArgs, { env: { HOME: b.home }, input: typed });
    assert.equal(ran.code, 3, ran.stderr);
    assert.match(
      ran.stdout,
      new RegExp(`^${remoteDir}$`, 'm'),
      'the shell is in the run directory',
    );
    assert.match(ran.stdout, /^terminal: 42$/m);

    // ssh_client = "builtin": Overbrainer's client, trusting the same known_hosts.
    const builtin = fakeContext([summary]);
    Object.assign(builtin.fake.env, b.env, { OVERBRAINER_SSH_CLIENT: 'builtin' });
    builtin.fake.folders = [folder(b.ws)];
    await openSshTerminal(builtin.ctx, summary);
    assert.deepEqual(builtin.fake.messages(), []);
    const shown = builtin.fake.shown.find((s) => s.kind === 'terminal');
    assert.ok(shown?.kind === 'terminal' && 'pty' in shown.options, 'no pseudo-terminal');
    const { pty } = shown.options as vscode.ExtensionTerminalOptions;
    let screen = '';
    pty.onDidWrite((text) => (screen += text));
    const closed = new Promise<number | void>((resolve) => pty.onDidClose?.(resolve));
    pty.open({ columns: 100, rows: 30 });
    pty.handleInput?.('echo "pty: $(pwd)"; exit 4\r');
    assert.equal(await closed, 4, screen);
    assert.match(screen, new RegExp(`^pty: ${remoteDir}\\r?$`, 'm'));
    assert.ok(!screen.includes(token));
    fs.writeFileSync(path.join(remoteDir, 'go'), '');
  });

  it('runs ssh on a run of the machine: a shell in its directory with the system ssh (openssh) and with its own client (builtin)', async () => {
    const b = await box(gatedCommand(4));
    const { runId, ended, stop: leave } = await startGated(b);
    leave.abort();
    await ended;
    const remoteDir = b.deps.store.loadRun(runId).remoteDir;
    const typed = 'echo "shell: $(pwd)"; exit 3\n';
    for (const client of ['openssh', 'builtin']) {
      const ran = await spawnAsUser(
        process.execPath,
        [...cliArgv(), '-C', b.ws, 'runs', 'ssh', runId],
        {
          env: { ...b.env, OVERBRAINER_SSH_CLIENT: client },
          input: typed,
        },
      );
      assert.equal(ran.code, 3, `${client}: ${ran.stderr}`);
      assert.match(ran.stdout, new RegExp(`^shell: ${remoteDir}\\r?$`, 'm'), client);
    }
    fs.writeFileSync(path.join(remoteDir, 'go'), '');
  });
});
