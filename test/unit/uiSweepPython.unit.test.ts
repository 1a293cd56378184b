/**
 * The Python a sweep's study runs in (the setting the user set, else the Python extension's
 * selected interpreter, else `python3`) and the virtual environment with Optuna offered when it
 * has none: made with the base Python's venv, Optuna and PyYAML installed, each failure a
 * StudyError naming the step and what to do.
 */
import assert from 'node:assert/strict';
import * as path from 'node:path';
import { StudyError } from '../../src/core/flow';
import {
  createSweepVenv,
  sweepPythonOf,
  sweepVenvDir,
  VENV_PACKAGES,
  wantsOptuna,
  type PythonEnvironments,
  type RunProgram,
} from '../../src/ui/sweeps/sweepPython';

function extension(exe: string | undefined, fails = false): PythonEnvironments {
  return {
    getActiveEnvironmentPath: () => {
      if (fails) throw new Error('not ready');
      return { path: '/envs/ml' };
    },
    resolveEnvironment: (env) =>
      Promise.resolve(
        typeof env !== 'string' && env.path === '/envs/ml'
          ? { executable: { uri: exe === undefined ? undefined : { fsPath: exe } } }
          : undefined,
      ),
  };
}

describe('ui: the Python for sweeps', () => {
  it("the setting the user set wins; else the Python extension's interpreter; else python3", async () => {
    const ext = extension('/envs/ml/bin/python');
    assert.deepEqual(
      (await sweepPythonOf('/opt/py/bin/python3', ext, undefined)).python,
      '/opt/py/bin/python3',
    );
    const fromExt = await sweepPythonOf(undefined, ext, undefined);
    assert.equal(fromExt.python, '/envs/ml/bin/python');
    assert.equal(fromExt.from, 'python extension');
    assert.match(fromExt.choosePython, /overbrainer\.sweepPython/);
    assert.equal((await sweepPythonOf('  ', ext, undefined)).from, 'python extension');
    const none = await sweepPythonOf(undefined, null, undefined);
    assert.deepEqual([none.python, none.from], [null, 'default']);
    // An environment without an executable, or an extension that throws: python3, said.
    assert.equal((await sweepPythonOf(undefined, extension(undefined), undefined)).from, 'default');
    const said: string[] = [];
    const broken = await sweepPythonOf(undefined, extension('/x', true), undefined, (m) =>
      said.push(m),
    );
    assert.equal(broken.from, 'default');
    assert.match(said.join('\n'), /the Python extension did not name its interpreter: .*not ready/);
  });

  it('a Python without Optuna, an old one, or none is offered a venv; other study errors are not', () => {
    for (const kind of ['optuna_missing', 'optuna_old', 'python_missing'] as const)
      assert.ok(wantsOptuna(new StudyError(kind, 'x', 'y')), kind);
    assert.ok(!wantsOptuna(new StudyError('study_mismatch', 'x', 'y')));
    assert.ok(!wantsOptuna(new Error('optuna')));
  });

  it('the venv is made with the base Python, then gets Optuna and PyYAML; a failed step says which and what to do', async () => {
    const dir = sweepVenvDir('/home/u');
    assert.equal(dir, path.join('/home/u', '.overbrainer', 'sweep-venv'));
    const calls: string[] = [];
    const ok: RunProgram = (program, args) => {
      calls.push([program, ...args].join(' '));
      return Promise.resolve({ code: 0, output: '' });
    };
    const python = await createSweepVenv(ok, '/usr/bin/python3', dir);
    assert.equal(python, path.join(dir, 'bin', 'python'));
    assert.deepEqual(calls, [
      `/usr/bin/python3 -m venv ${dir}`,
      `${python} -m pip install ${VENV_PACKAGES.join(' ')}`,
    ]);
    assert.deepEqual([...VENV_PACKAGES], ['optuna>=3.1,<6', 'pyyaml']);
    const noVenv: RunProgram = () =>
      Promise.resolve({ code: 1, output: 'ensurepip is not available' });
    await assert.rejects(
      createSweepVenv(noVenv, 'python3', dir),
      (e: unknown) =>
        e instanceof StudyError &&
        /python3 -m venv .* failed \(exit 1\): ensurepip is not available/.test(e.message) &&
        /python3-venv/.test(e.hint ?? ''),
    );
    const noIndex: RunProgram = (_program, args) =>
      Promise.resolve(
        args[0] === '-m' && args[1] === 'venv'
          ? { code: 0, output: '' }
          : { code: 1, output: 'No matching distribution found for optuna' },
      );
    await assert.rejects(
      createSweepVenv(noIndex, 'python3', dir),
      (e: unknown) =>
        e instanceof StudyError &&
        /installing Optuna into .* failed \(exit 1\): No matching distribution/.test(e.message) &&
        /pip reaches its package index/.test(e.hint ?? ''),
    );
  });
});
