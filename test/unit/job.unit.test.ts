import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import {
  cancelScript,
  jobScript,
  jobStatus,
  launcherScript,
  parseJobStatus,
  shQuote,
  startJob,
  statusScript,
  wrapperScript,
} from '../../src/core/train/job';
import { pollCommand, streamCommand } from '../../src/core/train/follow';
import type { ExecResult, Executor } from '../../src/core/exec/executor';

const SHELLS: { name: string; argv: string[] }[] = [
  { name: 'sh', argv: ['sh'] },
  { name: 'dash', argv: ['dash'] },
  { name: 'bash --posix', argv: ['bash', '--posix'] },
  { name: 'busybox sh', argv: ['busybox', 'sh'] },
];

const runDir = "/workspace/overbrainer/it's a run";

describe('job scripts', () => {
  it('every script parses under every installed shell (sh -n)', () => {
    // Every shell a pod may have, none skipped (`npm run test:unit` installs dash and busybox).
    const missing = SHELLS.filter(
      ({ argv }) => spawnSync(argv[0]!, [...argv.slice(1), '-c', 'true']).status !== 0,
    ).map((s) => s.name);
    assert.deepEqual(missing, [], 'install the missing shells (scripts/test.sh unit does)');
    const scripts = {
      launcher: launcherScript({
        runDir,
        script: jobScript(
          { trainer: 'command', command: 'python3 train.py --steps 3' },
          { runDir, jobEnvFile: null },
        ),
        env: { HF_HOME: '/workspace/.hf cache' },
        secretNames: ['HF_TOKEN'],
      }),
      status: statusScript(runDir),
      cancel: cancelScript(runDir),
      stream: streamCommand(runDir, 123),
      poll: pollCommand(`${runDir}/metrics.jsonl`, 0),
      wrapper: wrapperScript(runDir, 'echo hi'),
      axolotl: jobScript(
        { trainer: 'axolotl', config: 'axolotl.yaml', venv: '/opt/venv' },
        { runDir, jobEnvFile: '/etc/overbrainer/job.env' },
      ),
    };
    for (const shell of SHELLS) {
      for (const [name, script] of Object.entries(scripts)) {
        const result = spawnSync(shell.argv[0] as string, [
          ...shell.argv.slice(1),
          '-n',
          '-c',
          script,
        ]);
        assert.equal(result.status, 0, `${name} under ${shell.name}: ${result.stderr.toString()}`);
      }
    }
  });

  it('shQuote makes one word of anything but NUL', () => {
    for (const value of ["it's", '$(rm -rf /)', '`x`', 'a b\nc', '', "''", '\\', '"', '*']) {
      const out = execFileSync('sh', ['-c', `printf %s ${shQuote(value)}`]).toString();
      assert.equal(out, value);
    }
    assert.throws(() => shQuote('a\0b'), RangeError);
  });

  it('the launcher follows the spec: cd, clear markers, secrets from stdin, setsid nohup sh -c, echo $!', () => {
    const text = launcherScript({
      runDir: '/r',
      script: 'true',
      secretNames: ['HF_TOKEN'],
      env: { A: 'b' },
    });
    const lines = text.split('\n');
    assert.match(lines[0] ?? '', /^cd '\/r' \|\|/);
    assert.equal(
      lines[1],
      'rm -f exit_code cancelling cancelled job.pid job.pid.tmp exit_code.tmp',
    );
    assert.match(text, /IFS= read -r HF_TOKEN \|\|/);
    assert.match(text, /export HF_TOKEN/);
    assert.match(text, /setsid \$nohup sh -c '.*' > job\.log 2>&1 < \/dev\/null &/s);
    assert.equal(lines[lines.length - 1], 'echo "$pid"');
    assert.throws(() => launcherScript({ runDir: 'relative', script: 'true' }), RangeError);
    assert.throws(
      () => launcherScript({ runDir: '/r', script: 'true', secretNames: ['A;rm'] }),
      RangeError,
    );
    assert.throws(
      () => launcherScript({ runDir: '/r', script: 'true', env: { '1X': 'v' } }),
      RangeError,
    );
  });

  it('the wrapper records its pid and exit code via temp + mv and exports OVERBRAINER_METRICS', () => {
    const text = wrapperScript('/r', 'train');
    assert.match(text, /^echo \$\$ > job\.pid\.tmp && mv -f job\.pid\.tmp job\.pid$/m);
    assert.match(text, /^OVERBRAINER_METRICS='\/r\/metrics\.jsonl'$/m);
    assert.match(text, /^echo "\$code" > exit_code\.tmp && mv -f exit_code\.tmp exit_code$/m);
    assert.match(text, /exit "\$code"$/);
  });

  it('trainer scripts: axolotl as the native runtime, a command as is', () => {
    assert.equal(
      jobScript(
        { trainer: 'axolotl', config: 'axolotl.yaml', venv: '/opt/venv' },
        { runDir: '/w/r1', jobEnvFile: '/etc/overbrainer/job.env' },
      ),
      ". '/etc/overbrainer/job.env' && export AXOLOTL_DO_NOT_TRACK=1 PYTHONPATH='/w/r1/plugin'${PYTHONPATH:+:$PYTHONPATH} " +
        "OVERBRAINER_METRICS='/w/r1/metrics.jsonl' && '/opt/venv/bin/axolotl' train 'axolotl.yaml'",
    );
    assert.equal(
      jobScript(
        { trainer: 'axolotl', config: 'a.yaml', venv: '/v/' },
        { runDir: '/w/r1', jobEnvFile: null },
      ),
      "export AXOLOTL_DO_NOT_TRACK=1 PYTHONPATH='/w/r1/plugin'${PYTHONPATH:+:$PYTHONPATH} " +
        "OVERBRAINER_METRICS='/w/r1/metrics.jsonl' && '/v/bin/axolotl' train 'a.yaml'",
    );
    assert.equal(
      jobScript({ trainer: 'command', command: 'make train' }, { runDir: '/w', jobEnvFile: null }),
      'make train',
    );
    assert.match(
      jobScript(
        { trainer: 'command', command: 'make train' },
        { runDir: '/w', jobEnvFile: '/etc/overbrainer/job.env' },
      ),
      /^\. '\/etc\/overbrainer\/job\.env' \|\| .*\nmake train$/,
    );
    assert.throws(
      () => jobScript({ trainer: 'command', command: '  ' }, { runDir: '/w', jobEnvFile: null }),
      RangeError,
    );
  });

  it('the axolotl script keeps an inherited PYTHONPATH after the plugin', () => {
    const script = jobScript(
      { trainer: 'axolotl', config: 'c', venv: '/v' },
      { runDir: '/w', jobEnvFile: null },
    ).split(' && ')[0];
    const out = execFileSync('sh', ['-c', `${script} && printf %s "$PYTHONPATH"`], {
      env: { ...process.env, PYTHONPATH: '/inherited' },
    }).toString();
    assert.equal(out, '/w/plugin:/inherited');
    const bare = execFileSync('sh', [
      '-c',
      `unset PYTHONPATH; ${script} && printf %s "$PYTHONPATH"`,
    ]).toString();
    assert.equal(bare, '/w/plugin');
  });

  it('cancel waits are whole seconds', () => {
    assert.match(
      cancelScript('/r', { termWaitS: 2, killWaitS: 3 }),
      /wait_gone 2\n[\s\S]*wait_gone 3/,
    );
    assert.throws(() => cancelScript('/r', { termWaitS: 1.5 }), RangeError);
  });
});

describe('parseJobStatus', () => {
  it('reads the four answers and nothing else', () => {
    assert.deepEqual(parseJobStatus('running\n'), { kind: 'running' });
    assert.deepEqual(parseJobStatus('cancelled'), { kind: 'cancelled' });
    assert.deepEqual(parseJobStatus('lost'), { kind: 'lost' });
    assert.deepEqual(parseJobStatus('exited 0'), { kind: 'exited', code: 0 });
    assert.deepEqual(parseJobStatus('exited 137\n'), { kind: 'exited', code: 137 });
    for (const bad of [
      '',
      'exited',
      'exited -1',
      'exited x',
      'Running',
      'running now',
      'sh: 1: syntax error',
    ]) {
      assert.equal(parseJobStatus(bad), null, bad);
    }
  });
});

describe('jobStatus', () => {
  /** An executor whose every exec answers `result`. */
  const answering = (result: Partial<ExecResult>): Executor =>
    new Proxy({} as Executor, {
      get: (_t, name) =>
        name === 'exec'
          ? () =>
              Promise.resolve({
                code: null,
                signal: null,
                stdout: Buffer.alloc(0),
                stderr: Buffer.alloc(0),
                ...result,
              })
          : () => {
              throw new Error(`unexpected ${String(name)}`);
            },
    });

  it('takes a whole answer whose session lost its exit status, not a cut or failed one', async () => {
    const out = (text: string): Buffer => Buffer.from(text);
    assert.deepEqual(await jobStatus(answering({ code: 0, stdout: out('running\n') }), '/r'), {
      kind: 'running',
    });
    // sshd closed the session without an exit status: the line is whole, the answer stands.
    assert.deepEqual(await jobStatus(answering({ stdout: out('exited 3\n') }), '/r'), {
      kind: 'exited',
      code: 3,
    });
    for (const bad of [
      { stdout: out('runn') }, // cut short
      { stdout: out('running\n'), signal: 'SIGKILL' },
      { stdout: out('running\n'), code: 2 },
      { stdout: out('running\n'), truncated: true },
    ]) {
      await assert.rejects(jobStatus(answering(bad), '/r'), /status script/, JSON.stringify(bad));
    }
  });
});

describe('startJob input checks', () => {
  const never: Executor = new Proxy({} as Executor, {
    get: () => () => {
      throw new Error('the executor must not be called');
    },
  });

  it('refuses secret values with a line break before running anything, without echoing them', async () => {
    await assert.rejects(
      startJob(never, { runDir: '/r', script: 'true', secrets: { HF_TOKEN: 'hf_abc\nrm -rf' } }),
      (error: Error) => error instanceof RangeError && !error.message.includes('hf_abc'),
    );
    await assert.rejects(
      startJob(never, { runDir: '/r', script: 'true', secrets: { 'BAD-NAME': 'x' } }),
      RangeError,
    );
  });
});
