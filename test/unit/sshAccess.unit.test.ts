import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import type { OverbrainerConfig, RunpodTargetConfig } from '../../src/core/config/types';
import { alias, generateRunKeys, KeysError } from '../../src/core/pod/keys';
import {
  opensshCommandLine,
  prepareSshAccess,
  sshClientFor,
  SshAccessError,
} from '../../src/core/pod/sshAccess';
import { newPodRecord, type PodRecord } from '../../src/core/runs/podRecord';
import { openSshTerminal } from '../../src/ui/pods/podCommands';
import { fakeContext, folder, podSummary, runSummary, useTempStore } from './uiFakeHost';

const ENDPOINT = { host: '203.0.113.7', port: 40122, user: 'root' };

describe('sshAccess: the shell on a run pod, from a run folder Overbrainer wrote', function () {
  const lab = useTempStore('ob ssh %h-');

  /** Run `id` as the product leaves it once its pod was reached: keys, pod.json (state `kept`). */
  function reachedRun(id: string, over: (pod: PodRecord) => void = () => undefined): PodRecord {
    lab.store.saveRun({
      id,
      target: 'pod',
      created: '2026-12-02T12:00:00Z',
      remoteDir: `/workspace/overbrainer/${id}`,
      job: null,
      state: 'succeeded',
      message: null,
    });
    const keys = generateRunKeys(lab.store.sshDir(id), alias(id));
    const pod = newPodRecord(id, true, 1, keys.hostPublic);
    pod.created({ id: 'pod1' }, 'created', 0);
    pod.ready(ENDPOINT, 0);
    pod.state = 'kept';
    over(pod);
    lab.store.savePod(pod);
    return pod;
  }

  it('hands out ssh -F none with every option, paths relative to where it is typed, % doubled', function () {
    const access = prepareSshAccess(lab.store, reachedRun('r1'));
    const here = opensshCommandLine(access, lab.root);
    assert.equal(
      here,
      [
        'ssh -F none -i runs/r1/ssh/id_ed25519 -p 40122',
        '-o IdentitiesOnly=yes -o IdentityAgent=none',
        '-o UserKnownHostsFile=runs/r1/ssh/known_hosts -o GlobalKnownHostsFile=none',
        '-o HostKeyAlias=overbrainer-r1 -o CheckHostIP=no -o StrictHostKeyChecking=yes',
        '-o UpdateHostKeys=no -o PasswordAuthentication=no -o KbdInteractiveAuthentication=no',
        'root@203.0.113.7',
      ].join(' '),
    );
    // Typed elsewhere: absolute paths, the space quoted for the shell, `%` doubled for ssh.
    const elsewhere = opensshCommandLine(access, path.join(lab.root, 'elsewhere'));
    const key = path.join(lab.root, 'runs', 'r1', 'ssh', 'id_ed25519').replace(/%/g, '%%');
    assert.ok(elsewhere.includes(` -i '${key}' `), elsewhere);
    assert.equal(
      fs.readFileSync(access.knownHostsFile, 'utf8'),
      `overbrainer-r1 ${lab.store.loadPod('r1')?.hostKey ?? ''}\n`,
    );
  });

  it('refuses a run without a reachable pod, without its key, or whose files are not its own', function () {
    const refused = (id: string, kind: string, said: RegExp, pod: PodRecord): void => {
      assert.throws(
        () => prepareSshAccess(lab.store, pod),
        (error: unknown) =>
          error instanceof SshAccessError && error.kind === kind && said.test(error.message),
        `${id}: ${kind}`,
      );
    };
    refused(
      'gone',
      'no_pod',
      /its pod is deleted/,
      reachedRun('gone', (p) => (p.state = 'deleted')),
    );
    const keyless = reachedRun('keyless');
    fs.rmSync(path.join(lab.store.runDir('keyless'), 'ssh', 'id_ed25519'));
    refused('keyless', 'no_key', /private key of run keyless is gone/, keyless);
    const linked = reachedRun('linked');
    const key = path.join(lab.store.runDir('linked'), 'ssh', 'id_ed25519');
    fs.renameSync(key, `${key}.real`);
    fs.symlinkSync(`${key}.real`, key);
    refused('linked', 'foreign_run', /ssh\/id_ed25519 is a symbolic link/, linked);
    const open = reachedRun('open');
    fs.chmodSync(path.join(lab.store.runDir('open'), 'pod.json'), 0o644);
    refused('open', 'foreign_run', /runs\/open\/pod\.json has mode 644/, open);
    // A user name ssh would read as an option (-F names a configuration file).
    const hostile = reachedRun('hostile', (p) => (p.ssh = { ...ENDPOINT, user: '-Fcfg' }));
    assert.throws(() => prepareSshAccess(lab.store, hostile), KeysError);
  });

  it('ssh_client: the run target’s, else OVERBRAINER_SSH_CLIENT, else openssh', function () {
    const target = { kind: 'runpod', name: 'pod', sshClient: 'builtin' } as RunpodTargetConfig;
    const config = { targets: { pod: target } } as unknown as OverbrainerConfig;
    assert.equal(sshClientFor(config, 'pod', {}), 'builtin');
    assert.equal(sshClientFor(config, 'gone', {}), 'openssh');
    assert.equal(sshClientFor(null, 'pod', { OVERBRAINER_SSH_CLIENT: 'builtin' }), 'builtin');
    assert.equal(sshClientFor(null, 'pod', {}), 'openssh');
  });

  it('Open SSH Terminal: ssh -F none for openssh, a pseudo-terminal for builtin, an error for no pod', async function () {
    reachedRun('r1');
    const summary = runSummary(lab.store.runDir('r1'), {
      pod: podSummary('pod1', { state: 'kept', keep: true }),
    });
    const { ctx, fake } = fakeContext([summary]);
    fake.folders = [folder(lab.root)];
    await openSshTerminal(ctx, summary);
    const ssh = fake.shown.find((s) => s.kind === 'terminal');
    assert.ok(ssh?.kind === 'terminal', fake.messages().join('\n'));
    assert.equal(ssh.options.shellPath, 'ssh');
    assert.deepEqual(ssh.options.shellArgs?.slice(0, 2), ['-F', 'none']);
    assert.ok(![...(ssh.options.shellArgs ?? [])].some((a) => a.endsWith('config')));

    fake.shown.length = 0;
    fake.env.OVERBRAINER_SSH_CLIENT = 'builtin';
    await openSshTerminal(ctx, summary);
    const pty = fake.shown.find((s) => s.kind === 'terminal');
    assert.ok(pty?.kind === 'terminal');
    assert.equal(pty.options.shellPath, undefined);
    assert.ok('pty' in pty.options, 'builtin opens a pseudo-terminal over its own client');

    fake.shown.length = 0;
    fs.rmSync(path.join(lab.store.runDir('r1'), 'pod.json'));
    await openSshTerminal(ctx, summary);
    assert.deepEqual(fake.messages(), [
      'error: Cannot open a terminal: run r1 has no pod record (runs/r1/pod.json) — A shell opens on a kept pod, or on the pod of a run still running.',
    ]);
  });
});
