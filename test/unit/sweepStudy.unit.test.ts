/**
 * The study process's client (src/core/sweep/study.ts) against interpreters that are not a good
 * Python with Optuna: each failure is a typed StudyError whose hint names the next action. The
 * real Optuna study is test/integration/sweepStudy.integration.test.ts.
 */
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { hintOf } from '../../src/core/errors';
import { StudyClient, StudyError, studyScript } from '../../src/core/sweep/study';

describe('sweep study client: a Python that cannot run the study', function () {
  this.timeout(30_000);
  let dir: string;

  beforeEach(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ob-study-'));
  });
  afterEach(() => fs.rmSync(dir, { recursive: true, force: true }));

  /** An executable "interpreter": a shell script that ignores the script it is given. */
  function fake(name: string, body: string): string {
    const file = path.join(dir, name);
    fs.writeFileSync(file, `#!/bin/sh\n${body}\n`, { mode: 0o755 });
    return file;
  }

  async function startError(python: string | null): Promise<StudyError> {
    try {
      const client = await StudyClient.start({
        python,
        choosePython: 'or set overbrainer.sweepPython',
      });
      await client.close();
    } catch (error) {
      assert.ok(error instanceof StudyError, String(error));
      return error;
    }
    assert.fail('the study started');
  }

  it('finds the shipped study script', () => {
    assert.ok(fs.existsSync(studyScript()));
  });

  it('an interpreter that is not there: python_missing, with the pip line and the setting', async () => {
    const error = await startError(path.join(dir, 'no-such-python'));
    assert.equal(error.kind, 'python_missing');
    assert.match(error.message, /no-such-python, was not found/);
    assert.match(hintOf(error) ?? '', /python3 -m pip install optuna/);
    assert.match(hintOf(error) ?? '', /overbrainer\.sweepPython/);
  });

  it('a Python without Optuna: optuna_missing, with the pip install line for that Python', async () => {
    // /usr/bin/python3 without its site packages (-S) has no Optuna, whatever the machine holds.
    const python = fake('python-no-site', 'exec /usr/bin/python3 -S "$@"');
    const error = await startError(python);
    assert.equal(error.kind, 'optuna_missing');
    assert.match(error.message, /has no Optuna \(ModuleNotFoundError/);
    assert.equal(
      hintOf(error),
      `Install it: ${python} -m pip install optuna (in a virtual environment if pip refuses), or set overbrainer.sweepPython.`,
    );
  });

  it('a program that is not the study process: malformed, never a value taken on trust', async () => {
    const error = await startError(fake('chatty', 'echo "Python 2.7.18"; read line'));
    assert.equal(error.kind, 'malformed');
    assert.match(error.message, /did not answer as the study process does.*Python 2\.7\.18/);
  });

  it('a program that ends at once: process_died, with what it said on stderr', async () => {
    const error = await startError(fake('dies', 'echo "no such option -u" >&2; exit 2'));
    assert.equal(error.kind, 'process_died');
    assert.match(error.message, /ended before the study started: no such option -u/);
    assert.match(hintOf(error) ?? '', /-c "import optuna"/);
  });

  const READY = `echo '{"ready":true,"optuna":"3.1.0","python":"3.11.2"}'`;

  it('a malformed answer fails the request and every later one', async () => {
    const client = await StudyClient.start({
      python: fake(
        'garbles',
        `${READY}\nread line; echo '{"id":1,"ok":true,"trials":"many"}'; read line`,
      ),
    });
    assert.equal(client.optunaVersion, '3.1.0');
    await assert.rejects(client.trials(), (error: StudyError) => {
      assert.equal(error.kind, 'malformed');
      assert.match(error.message, /a trials answer without its fields/);
      return true;
    });
    await assert.rejects(client.ask(), (error: StudyError) => error.kind === 'malformed');
    await client.close();
  });

  it("the process's death fails the pending request: process_died, and the study goes on when started again", async () => {
    const client = await StudyClient.start({
      python: fake('quits', `${READY}\nread line; echo "Traceback: boom" >&2; exit 1`),
    });
    await assert.rejects(client.ask(), (error: StudyError) => {
      assert.equal(error.kind, 'process_died');
      assert.match(error.message, /ended with code 1: Traceback: boom/);
      assert.match(hintOf(error) ?? '', /goes on where it was/);
      return true;
    });
    await assert.rejects(client.trials(), (error: StudyError) => error.kind === 'process_died');
  });

  it("a study's own error is a typed error, and the process goes on answering", async () => {
    const client = await StudyClient.start({
      python: fake(
        'refuses',
        `${READY}\nread line; echo '{"id":1,"ok":false,"error":{"kind":"no_trial","message":"the study has no trial 7"}}'\nread line; echo '{"id":2,"ok":true,"trials":[],"best":null}'; read line`,
      ),
    });
    await assert.rejects(client.tell(7, 'complete', 1), (error: StudyError) => {
      assert.equal(error.kind, 'no_trial');
      return true;
    });
    assert.deepEqual(await client.trials(), { trials: [], best: null });
    await client.close();
  });
});
