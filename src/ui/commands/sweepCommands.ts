/**
 * Start Sweep, Stop Sweep and Attach Sweep, through the flow's sweep functions only (the CLI's
 * `sweep start`, `sweep stop NAME`, `sweep attach NAME`): the quote shown before anything is
 * created, each running under a notification's progress with the sweep's own lines in the log,
 * the record's end said when it ends. Closing the window stops following only: the trials go on
 * under their pods' watchdogs, and Attach Sweep (or `overbrainer sweep attach`) follows them again.
 */
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
import type { UiContext } from '../uiContext';

type SweepArg = { kind?: unknown; name?: unknown } | undefined;

/** The Python with Optuna: the machine-scoped setting, else `python3`. */
function pythonOf(ctx: UiContext): { python: string | null; choosePython: string } {
  const python = ctx.host.workspace.getConfiguration('overbrainer').get<string>('sweepPython');
  return {
    python: python?.trim() ? python.trim() : null,
    choosePython: 'or set overbrainer.sweepPython to a Python that has it',
  };
}

async function open(
  ctx: UiContext,
  what: string,
): Promise<{
  deps: FlowDeps;
  config: OverbrainerConfig;
  dir: string;
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
    return { deps, config, dir: session.dir, close: () => session.close() };
  } catch (error) {
    await ctx.showError(`Cannot ${what}`, error);
    await session.close();
    return null;
  }
}

/** Runs `go` under a progress notification, the sweep's lines logged, its end said. */
async function running(
  ctx: UiContext,
  title: string,
  go: () => Promise<SweepResult>,
): Promise<void> {
  const lines = ctx.bus.on((event) => {
    if (event.type === 'log' && event.message.startsWith('sweep ')) {
      ctx.log.info(event.message);
      ctx.refreshViews();
    }
  });
  try {
    const result = await ctx.window.withProgress(
      { location: ctx.host.progress.notification, title },
      () => go(),
    );
    const notice = sweepEndNotice(result.record);
    if (notice?.severity === 'warning') void ctx.window.showWarningMessage(notice.message);
    else if (notice !== null) void ctx.window.showInformationMessage(notice.message);
  } catch (error) {
    await ctx.showError('Sweep', error);
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
  await running(ctx, `Overbrainer: sweep ${s.config.sweep?.name ?? ''}`, () =>
    sweep(s.deps, s.config, s.dir, { ...pythonOf(ctx), signal: ctx.closing.signal }),
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
  await running(ctx, `Overbrainer: sweep ${name}`, () =>
    sweepAttach(s.deps, s.config, s.dir, name, { ...pythonOf(ctx), signal: ctx.closing.signal }),
  ).finally(() => s.close());
}

/** Stop Sweep: no new trial; running trials stopped, results home, pods deleted. */
export async function stopSweep(ctx: UiContext, arg?: unknown): Promise<void> {
  const s = await open(ctx, 'stop a sweep');
  if (s === null) return;
  const name = await pickSweep(ctx, s.deps, arg as SweepArg);
  if (name === null) return void (await s.close());
  await running(ctx, `Overbrainer: stopping sweep ${name}`, () =>
    sweepStop(s.deps, s.config, s.dir, name, {
      ...pythonOf(ctx),
      signal: ctx.closing.signal,
      onWait: (holder) =>
        ctx.log.info(`Sweep ${name} is run by another client (${holder}): asked it to stop.`),
    }),
  ).finally(() => s.close());
}
