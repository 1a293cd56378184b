/**
 * The Python that runs a sweep's Optuna study, found the way users expect, free of `vscode`: the
 * machine-scoped setting `overbrainer.sweepPython` when the user set it; else the interpreter the
 * Python extension (ms-python.python) has selected for the folder, through its API when it is
 * installed; else `python3`. A Python without Optuna (or none at all) is offered a virtual
 * environment with Optuna, made under ~/.overbrainer and set as the setting once it is ready.
 */
import * as os from 'node:os';
import * as path from 'node:path';
import type * as vscode from 'vscode';
import { StudyError } from '../../core/flow';

/** The Python extension's environments API (its `exports.environments`), the part used here. */
export interface PythonEnvironments {
  getActiveEnvironmentPath(resource?: vscode.Uri): { path: string };
  resolveEnvironment(
    environment: { path: string } | string,
  ): Promise<{ executable: { uri?: { fsPath: string } } } | undefined>;
}

export interface SweepPythonChoice {
  /** The interpreter; null: `python3` on PATH. */
  python: string | null;
  /** Where it came from, for the log. */
  from: 'setting' | 'python extension' | 'default';
  /** How the user names another Python, for the core's hints. */
  choosePython: string;
}

const CHOOSE =
  "or set overbrainer.sweepPython (or select an interpreter with the Python extension's Python: Select Interpreter)";

/**
 * The sweep's Python: the setting the user set (`setting`, the configuration's inspected value at
 * user or machine level), else the Python extension's selected interpreter for `resource`, else
 * null (`python3`). An extension that fails to answer is passed over, said through `onProblem`.
 */
export async function sweepPythonOf(
  setting: string | undefined,
  environments: PythonEnvironments | null,
  resource: vscode.Uri | undefined,
  onProblem: (message: string) => void = () => {},
): Promise<SweepPythonChoice> {
  const set = setting?.trim();
  if (set) return { python: set, from: 'setting', choosePython: CHOOSE };
  if (environments !== null) {
    try {
      const active = environments.getActiveEnvironmentPath(resource);
      const resolved = await environments.resolveEnvironment(active);
      const exe = resolved?.executable.uri?.fsPath;
      if (exe) return { python: exe, from: 'python extension', choosePython: CHOOSE };
    } catch (error) {
      onProblem(`the Python extension did not name its interpreter: ${String(error)}`);
    }
  }
  return { python: null, from: 'default', choosePython: CHOOSE };
}

/** Whether a sweep's error is a Python without (a recent enough) Optuna, or no Python. */
export function wantsOptuna(error: unknown): boolean {
  return (
    error instanceof StudyError &&
    (error.kind === 'optuna_missing' ||
      error.kind === 'optuna_old' ||
      error.kind === 'python_missing')
  );
}

/** Where the offered virtual environment is made (one per machine, as the setting). */
export function sweepVenvDir(home = os.homedir()): string {
  return path.join(home, '.overbrainer', 'sweep-venv');
}

/** What the venv gets: the Optuna versions the study script is written for, and PyYAML. */
export const VENV_PACKAGES = ['optuna>=3.1,<6', 'pyyaml'] as const;

/** Runs a program to its end: its exit code and the end of its output. */
export type RunProgram = (
  program: string,
  args: readonly string[],
) => Promise<{ code: number | null; output: string }>;

/**
 * Makes the virtual environment at `dir` with `base` (a Python 3 with venv) and installs
 * {@link VENV_PACKAGES} into it; its interpreter's path, or a StudyError saying which step failed
 * and what to do (pip needs the package index; a Debian Python needs python3-venv).
 */
export async function createSweepVenv(run: RunProgram, base: string, dir: string): Promise<string> {
  const made = await run(base, ['-m', 'venv', dir]);
  if (made.code !== 0) {
    throw new StudyError(
      'install_broken',
      `${base} -m venv ${dir} failed (exit ${String(made.code)}): ${made.output.trim().slice(-300)}`,
      `Install the venv module (on Debian or Ubuntu: apt install python3-venv), or set overbrainer.sweepPython to a Python with Optuna.`,
    );
  }
  const python = path.join(dir, process.platform === 'win32' ? 'Scripts' : 'bin', 'python');
  const pip = await run(python, ['-m', 'pip', 'install', ...VENV_PACKAGES]);
  if (pip.code !== 0) {
    throw new StudyError(
      'install_broken',
      `installing Optuna into ${dir} failed (exit ${String(pip.code)}): ${pip.output.trim().slice(-300)}`,
      `Check that pip reaches its package index, then try again, or run: ${python} -m pip install ${VENV_PACKAGES.map((p) => `"${p}"`).join(' ')}`,
    );
  }
  return python;
}
