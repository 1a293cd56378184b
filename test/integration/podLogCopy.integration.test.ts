/**
 * The pod's own logs copied home before its delete (`runs/<id>/.pod/watchdog.log`,
 * `bootstrap.log`) are treated like the results, against the emulator's real pods: every line
 * redacted by the one redactor (keys and tokens by their shape, the pod's host key whether as
 * a key block or as the base64 its env carried), at most 4 MiB of each (its end, a line says
 * what was left), no symlink or hard link followed out of the run folder, on the pod or here.
 * Timings: production / 60.
 */
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { generateEd25519KeyPair } from '../../src/core/exec/sshKeys';
import { train } from '../../src/core/flow';
import { runIdHolder } from '../helpers/lifecycle';
import { lifecycleSuite } from '../helpers/lifecycleSuite';

describe("the pod's logs copied home, like results", function () {
  this.timeout(150_000);
  const { lab, assertNothingBills } = lifecycleSuite();

  it('watchdog.log and bootstrap.log come home redacted (keys, tokens, the host key), cut to their last 4 MiB, never through a link on the pod or here', async () => {
    const rpaKey = `rpa_${'Q7'.repeat(16)}`;
    const hfToken = `hf_${'Zx9'.repeat(12)}`;
    const bearer = 'tokenvalue0123456789';
    const hostKey = generateEd25519KeyPair('pod-host').privateKey;
    const hostKeyB64 = Buffer.from(`${hostKey.trimEnd()}\n`, 'utf8').toString('base64');
    const keyBody = hostKey.split('\n')[1]!;
    const quote = (s: string): string => `'${s.replace(/'/g, `'\\''`)}'`;
    // After the job: 5 MB of filler then the secrets into the watchdog's log; the bootstrap's log
    // replaced by a hard link to a file outside the run folder.
    const command = [
      'python3 train.py --steps 20 --step-seconds 0.1',
      "yes 'filler line of the watchdog log' | head -c 5000000 >> .pod/watchdog.log",
      `printf '%s\\n' ${[`key ${rpaKey}`, `token ${hfToken}`, `Authorization: Bearer ${bearer}`].map(quote).join(' ')} >> .pod/watchdog.log`,
      // The host key, as a block and as the base64 its env carried: its markers spelt on the
      // pod, since the lab refuses a private key (or its base64) in any file here.
      `k=PRIVATE; key=$(printf '%s\\n' ${hostKey
        .trimEnd()
        .split('\n')
        .map((line) => quote(line).replace('PRIVATE', `'"$k"'`))
        .join(' ')})`,
      `printf '%s\\n' "$key" >> .pod/watchdog.log`,
      `printf 'OVERBRAINER_HOST_KEY=%s\\n' "$(printf '%s\\n' "$key" | base64 | tr -d '\\n')" >> .pod/watchdog.log`,
      'echo OUTSIDE-THE-RUN-FOLDER > ../outside.txt',
      'ln -f ../outside.txt .pod/bootstrap.log',
    ].join(' && ');
    const l = await lab({ command });
    // Here, outside the run folder: a file the copy must never write through a link to.
    const victim = path.join(l.workspace, 'victim.txt');
    fs.writeFileSync(victim, 'VICTIM\n');
    const run = runIdHolder();
    let planted = false;
    l.bus.on((event) => {
      if (planted || event.type !== 'pod' || event.status.kind !== 'ready' || run.id === null)
        return;
      planted = true;
      const local = path.join(l.runDir(run.id), '.pod');
      fs.mkdirSync(local, { recursive: true });
      fs.linkSync(victim, path.join(local, 'watchdog.log'));
    });
    const result = await train(l.deps, l.config, l.workspace, { onRun: run.onRun });
    const id = result.run.id;
    assert.equal(l.runJson(id).state, 'succeeded', l.transcript());
    assert.ok(planted, 'the link was planted before the pod ended');

    // The hard link here was replaced, not written through.
    assert.equal(fs.readFileSync(victim, 'utf8'), 'VICTIM\n');
    const copied = path.join(l.runDir(id), '.pod', 'watchdog.log');
    const stats = fs.lstatSync(copied);
    assert.ok(stats.isFile() && stats.nlink === 1, `nlink ${stats.nlink}`);
    assert.equal(stats.mode & 0o777, 0o600);
    const text = fs.readFileSync(copied, 'utf8');
    // Cut to its end: at most 4 MiB and the line that says so; the secrets after the filler kept.
    assert.ok(stats.size <= 4 * 1024 * 1024 + 200, `${stats.size} bytes`);
    assert.match(
      text.split('\n')[0]!,
      /^overbrainer: the first \d+ bytes of this \d+-byte log were left on the pod \(at most 4194304 are copied\)$/,
    );
    for (const line of ['key rpa_[redacted]', 'token hf_[redacted]', 'Bearer [redacted]']) {
      assert.ok(text.includes(line), line);
    }
    assert.ok(text.includes('OVERBRAINER_HOST_KEY=[redacted private key]'), 'the base64 key');
    for (const secret of [rpaKey, hfToken, bearer, hostKeyB64.slice(0, 40), keyBody]) {
      assert.ok(!text.includes(secret), `a secret came home: ${secret.slice(0, 12)}…`);
    }
    // The pod's bootstrap.log was a hard link to a file outside the run folder: not copied.
    const boot = path.join(l.runDir(id), '.pod', 'bootstrap.log');
    assert.ok(
      !fs.existsSync(boot) || !fs.readFileSync(boot, 'utf8').includes('OUTSIDE-THE-RUN-FOLDER'),
    );
    assert.match(
      l.transcript(),
      /bootstrap\.log of run \S+ was not copied: on the pod it is a hard link/,
    );
    assertNothingBills(l);
  });
});
