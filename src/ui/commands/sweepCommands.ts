/**
 * Start Sweep, Stop Sweep and Attach Sweep, through the flow's sweep functions only (the CLI's
 * `sweep start`, `sweep stop NAME`, `sweep attach NAME`): the quote shown before anything is
 * created, each running under a notification's progress with the sweep's own lines in the log,
 * the record's end said when it ends (./sweeps/sweepPython.ts finds the Python with Optuna, and
 * offers a virtual environment with it when it is missing). Closing the window stops following only: the trials go on
 * under their pods' watchdogs, and Attach Sweep (or `overbrainer sweep attach`) follows them again.
 */
import { execFile } from 'node:child_process';
import type * as vscode from 'vscode';
import { describeError, hintOf } from '../../core/errors';
import {
  beforeTrain,
  sweep,
  sweepAttach,
  sweepList,
  sweepQuote,
  sweepQuoteLines,
  sweepStop,
  type FlowDeps,
  type OverbrainerConfig,
  type SweepResult,
} from '../../core/flow';

import { sweepEndNotice } from '../sweeps/sweepsModel';
import {
  createSweepVenv,
  sweepPythonOf,
  sweepVenvDir,
  wantsOptuna,
  type PythonEnvironments,
  type RunProgram,
} from '../sweeps/sweepPython';
import type { UiContext } from '../uiContext';

type SweepArg = { kind?: unknown; name?: unknown } | undefined;

/**
 * The Python with Optuna: the setting the user set, else the Python extension's interpreter for
 * the folder, else `python3` (./sweeps/sweepPython.ts); said in the log.
 */
async function pythonOf(
  ctx: UiContext,
  folder: vscode.Uri | undefined,
): Promise<{ python: string | null; choosePython: string }> {
  const setting = ctx.host.workspace
    .getConfiguration('overbrainer')
    .inspect<string>('sweepPython')?.globalValue;
  let environments: PythonEnvironments | null = null;
  try {
    environments = (await ctx.host.pythonEnvironments?.()) ?? null;
  } catch (error) {
    ctx.log.warn(`Sweep: the Python extension could not be asked: ${String(error)}`);
  }
  const choice = await sweepPythonOf(setting, environments, folder, (m) =>
    ctx.log.warn(`Sweep: ${m}`),
  );
  ctx.log.info(`Sweep: Optuna runs in ${choice.python ?? 'python3'} (${choice.from})`);
  return { python: choice.python, choosePython: choice.choosePython };
}

/** Runs a program to its end (the venv's creation, pip), its output kept for an error. */
const runProgram: RunProgram = (program, args) =>
  new Promise((resolve) => {
    execFile(program, [...args], { maxBuffer: 16 * 1024 * 1024 }, (error, stdout, stderr) => {
      const code =
        error === null ? 0 : typeof error.code === 'number' ? error.code : error.code ? -1 : null;
      resolve({ code, output: `${stdout}${stderr}${error && code === -1 ? error.message : ''}` });
    });
  });

const CREATE_VENV = 'Create Virtual Environment';

/**
 * A sweep refused for want of Optuna (or of Python): the error, with an offer to make a virtual
 * environment with Optuna and set overbrainer.sweepPython to it.
 */
async function offerVenv(ctx: UiContext, error: unknown, python: string | null): Promise<void> {
  const text = ctx.log.redact(
    `Sweep: ${describeError(error)}${hintOf(error) ? ` — ${hintOf(error)}` : ''}`,
  );
  ctx.log.error(text);
  const dir = sweepVenvDir();
  const choice = await ctx.window.showErrorMessage(
    `${text}

Create a virtual environment with Optuna in ${dir} and use it for sweeps?`,
    CREATE_VENV,
  );
  if (choice !== CREATE_VENV) return;
  try {
    const made = await ctx.window.withProgress(
      {
        location: ctx.host.progress.notification,
        title: `Overbrainer: creating ${dir} with Optuna`,
      },
      () => createSweepVenv(runProgram, python ?? 'python3', dir),
    );
    await ctx.host.workspace.getConfiguration('overbrainer').update('sweepPython', made, true);
    void ctx.window.showInformationMessage(
      `Overbrainer: sweeps use ${made} now (overbrainer.sweepPython). Start the sweep again.`,
    );
  } catch (installError) {
    await ctx.showError('Cannot create the Python environment for sweeps', installError);
  }
}

async function open(
  ctx: UiContext,
  what: string,
): Promise<{
  deps: FlowDeps;
  config: OverbrainerConfig;
  dir: string;
  uri: vscode.Uri;
  close(): Promise<void>;
} | null> {
  if (!(await ctx.requireTrust(what))) return null;
  const folder = await ctx.pickFolder();
  if (!folder) {
    void ctx.window.showErrorMessage('Overbrainer: open a folder with an overbrainer.toml first.');
    return null;
  }
  const session = await ctx.session(folder);
  try {
    const config = session.config();
    const deps = session.deps(true);
    return { deps, config, dir: session.dir, uri: folder.uri, close: () => session.close() };
  } catch (error) {
    await ctx.showError(`Cannot ${what}`, error);
    await session.close();
    return null;
  }
}

type PythonOptions = { python: string | null; choosePython: string };

/**
 * Runs `go` with the sweep's Python under a progress notification, the sweep's lines logged, its
 * end said; a Python without Optuna is offered a virtual environment with it.
 */
async function running(
  ctx: UiContext,
  title: string,
  folder: vscode.Uri,
  go: (python: PythonOptions) => Promise<SweepResult>,
): Promise<void> {
  const lines = ctx.bus.on((event) => {
    if (event.type === 'log' && event.message.startsWith('sweep ')) {
      ctx.log.info(event.message);
      ctx.refreshViews();
    }
  });
  let python: PythonOptions | null = null;
  try {
    python = await pythonOf(ctx, folder);
    const options = python;
    const result = await ctx.window.withProgress(
      { location: ctx.host.progress.notification, title },
      () => go(options),
    );
    const notice = sweepEndNotice(result.record);
    if (notice?.severity === 'warning') void ctx.window.showWarningMessage(notice.message);
    else if (notice !== null) void ctx.window.showInformationMessage(notice.message);
  } catch (error) {
    if (wantsOptuna(error)) await offerVenv(ctx, error, python?.python ?? null);
    else await ctx.showError('Sweep', error);
  } finally {
    lines.dispose();
    ctx.refreshViews();
  }
}

/** Start Sweep: the quote, then the sweep of [sweep] (a started one resumes from its records). */
export async function startSweep(ctx: UiContext): Promise<void> {
  const s = await open(ctx, 'start a sweep');
  if (s === null) return;
  try {
    const quote = await sweepQuote(s.deps, s.config);
    const [head, ...rest] = sweepQuoteLines(quote);
    const choice = await ctx.window.showInformationMessage(
      `Start ${head ?? 'the sweep'}?`,
      { modal: true, detail: rest.join('\n') },
      'Start Sweep',
    );
    if (choice !== 'Start Sweep') return;
    await beforeTrain(s.deps, s.config);
  } catch (error) {
    await ctx.showError('Cannot start the sweep', error);
    await s.close();
    return;
  }
  await running(ctx, `Overbrainer: sweep ${s.config.sweep?.name ?? ''}`, s.uri, (python) =>
    sweep(s.deps, s.config, s.dir, { ...python, signal: ctx.closing.signal }),
  ).finally(() => s.close());
}

/** The sweep a command acts on: the view's row, or one picked among the running ones. */
async function pickSweep(ctx: UiContext, deps: FlowDeps, arg: SweepArg): Promise<string | null> {
  if (arg?.kind === 'sweep' && typeof arg.name === 'string') return arg.name;
  const running = sweepList(deps).sweeps.filter((r) => r.state === 'running');
  if (running.length === 0) {
    void ctx.window.showInformationMessage('Overbrainer: no sweep is running in this folder.');
    return null;
  }
  const picked = await ctx.window.showQuickPick(
    running.map((r) => r.name),
    { placeHolder: 'Sweep' },
  );
  return picked ?? null;
}

/** Attach Sweep: follows a sweep whose client stopped; refused while another client runs it. */
export async function attachSweep(ctx: UiContext, arg?: unknown): Promise<void> {
  const s = await open(ctx, 'attach to a sweep');
  if (s === null) return;
  const name = await pickSweep(ctx, s.deps, arg as SweepArg);
  if (name === null) return void (await s.close());
  await running(ctx, `Overbrainer: sweep ${name}`, s.uri, (python) =>
    sweepAttach(s.deps, s.config, s.dir, name, { ...python, signal: ctx.closing.signal }),
  ).finally(() => s.close());
}

/** Stop Sweep: no new trial; running trials stopped, results home, pods deleted. */
export async function stopSweep(ctx: UiContext, arg?: unknown): Promise<void> {
  const s = await open(ctx, 'stop a sweep');
  if (s === null) return;
  const name = await pickSweep(ctx, s.deps, arg as SweepArg);
  if (name === null) return void (await s.close());
  await running(ctx, `Overbrainer: stopping sweep ${name}`, s.uri, (python) =>
    sweepStop(s.deps, s.config, s.dir, name, {
      ...python,
      signal: ctx.closing.signal,
      onWait: (holder) =>
        ctx.log.info(`Sweep ${name} is run by another client (${holder}): asked it to stop.`),
    }),
  ).finally(() => s.close());
}
