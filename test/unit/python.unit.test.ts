import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import path from 'node:path';

const ROOT = path.resolve(__dirname, '..', '..');

/**
 * The Python side of the trainer protocol (python/overbrainer_metrics.py and
 * examples/tiny/train.py) is tested by its own stdlib unittest suite; this
 * runs it so `npm run test:unit` covers both languages.
 */
describe('python unittest suite (python/tests)', function () {
  this.timeout(60_000);

  it('passes, and actually ran its tests', function () {
    const probe = spawnSync('python3', ['--version']);
    // The trainer protocol's Python needs python3 >= 3.7 on the machine (`npm run test:unit`
    // installs it): without it this fails, it does not skip.
    assert.ok(!probe.error && probe.status === 0, 'python3 is not on PATH: install python3');
    const result = spawnSync(
      'python3',
      ['-m', 'unittest', 'discover', '-s', 'python/tests', '-t', 'python', '-v'],
      {
        cwd: ROOT,
        encoding: 'utf8',
        env: { ...process.env, PYTHONDONTWRITEBYTECODE: '1', OVERBRAINER_METRICS: '' },
      },
    );
    const output = `${result.stdout}${result.stderr}`;
    assert.equal(result.status, 0, output);
    const ran = /Ran (\d+) tests?/.exec(output);
    assert.ok(ran?.[1] && Number(ran[1]) >= 10, `expected at least 10 Python tests:\n${output}`);
    assert.match(output, /\nOK/);
  });
});
