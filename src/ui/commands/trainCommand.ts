import {
  afterTrainingS,
  beforeTrain,
  chooseTarget,
  heldByEarlierRuns,
  train as trainFlow,
  trainingPlanLines,
} from '../../core/flow';
import type { GpuType } from '../../core/flow/pods';
import { finish } from '../runs/following';
import type { RunSummary } from '../runs/runsModel';
import { trainConfirmation } from './trainConfirm';
import { transferMessage } from '../runs/transferModel';
import { keyProblem, podText, type UiContext } from '../uiContext';
import { describeError } from '../../core/errors';

/** Train (or, with `resume`, a new run that continues from that run's snapshot). */
export async function train(ctx: UiContext, resume?: RunSummary): Promise<void> {
  const { window, log } = ctx;
  if (!(await ctx.requireTrust(resume ? 'resume a run' : 'train'))) return;
  const folder = resume ? ctx.folderOfRun(resume) : await ctx.pickFolder();
  if (!folder) {
    void window.showErrorMessage('Overbrainer: open a folder with an overbrainer.toml first.');
    return;
  }
  const session = await ctx.session(folder);
  let config;
  try {
    config = session.config();
  } catch (error) {
    await ctx.showError('Cannot train', error);
    return;
  }
  let targetName = chooseTarget(config, undefined).name;
  if (targetName === undefined) {
    const names = Object.keys(config.targets);
    targetName = await window.showQuickPick(names, { placeHolder: 'Target to train on' });
    if (targetName === undefined) return;
  }
  const target = config.targets[targetName];
  let keep = false;
  if (target?.kind === 'runpod') {
    // The live catalog gives the hourly rate; a missing or refused key stops here, with the
    // action that fixes it, before anything is created.
    let catalog: GpuType[] | null = null;
    try {
      catalog = await window.withProgress(
        { location: ctx.host.progress.window, title: 'Overbrainer: reading GPU prices' },
        () => session.api().listGpuTypes({ includeAvailability: false }),
      );
    } catch (error) {
      if (keyProblem(error)) {
        await ctx.showError('Cannot train', error);
        await session.close();
        return;
      }
      log.warn(`Cannot read the GPU catalog for the rate: ${describeError(error)}`);
    }
    const confirm = trainConfirmation(
      targetName,
      target,
      catalog,
      ctx.clock.nowMs(),
      heldByEarlierRuns(session.store, targetName),
      session.options.timing,
      { lines: trainingPlanLines(config, session.dir), afterS: afterTrainingS(config) },
    );
    if (resume?.snapshot) {
      confirm.message = `Resume ${resume.id} from step ${resume.snapshot.step} on "${targetName}"?`;
    }
    const other = session.otherApiHost();
    if (other !== null) confirm.detail = `${confirm.detail}\n${other}`;
    const choice = await window.showInformationMessage(
      confirm.message,
      { modal: true, detail: confirm.detail },
      'Train',
      'Train and Keep Pod',
    );
    if (choice === undefined) {
      await session.close();
      return;
    }
    keep = choice === 'Train and Keep Pod';
  }
  let deps;
  try {
    deps = session.deps(target?.kind === 'runpod');
  } catch (error) {
    await ctx.showError('Cannot train', error);
    return;
  }
  // Before a Runpod run: the pods nothing will delete, the secrets ended runs left; before any:
  // the runs a dead client left starting (warnings come as events: notifications and log lines).
  await beforeTrain(target?.kind === 'runpod' ? deps : { ...deps, client: null }, config);
  const abort = new AbortController();
  let runId: string | null = null;
  let started: () => void = () => undefined;
  const jobStarted = new Promise<void>((resolve) => (started = resolve));
  const flow = trainFlow(deps, config, session.dir, {
    target: targetName,
    keepPod: keep,
    resumeFrom: resume?.id,
    signal: abort.signal,
    onRun: (run) => {
      runId = run.id;
      ctx.track(run.id, session, abort);
      log.info(`Run ${run.id} started on target ${run.target}.`);
      ctx.refreshViews();
      void ctx
        .openRunView(session.store.runDir(run.id))
        .catch((error: unknown) => log.warn(`Cannot open the run view: ${describeError(error)}`));
    },
  });
  const watch = ctx.bus.on((event) => {
    if (event.type === 'runState' && event.runId === runId && event.state !== 'preparing')
      started();
  });
  // Provisioning under a cancellable progress: cancel before the job starts deletes the pod.
  await window.withProgress(
    {
      location: ctx.host.progress.notification,
      title: `Overbrainer: starting the run on ${targetName}`,
      cancellable: true,
    },
    async (progress, token) => {
      token.onCancellationRequested(() =>
        abort.abort(Object.assign(new Error('cancelled in VS Code'), { name: 'AbortError' })),
      );
      const sub = ctx.bus.on((event) => {
        if (!('runId' in event) || event.runId !== runId) return;
        if (event.type === 'pod') progress.report({ message: podText(event) });
        if (event.type === 'transfer' && event.direction === 'upload') {
          const message = transferMessage(event);
          if (message !== null) progress.report({ message });
        }
      });
      await Promise.race([
        jobStarted,
        flow.then(
          () => undefined,
          () => undefined,
        ),
      ]);
      sub.dispose();
    },
  );
  watch.dispose();
  await finish(ctx, flow, () => runId, session);
}
