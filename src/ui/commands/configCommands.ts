import * as fs from 'node:fs';
import * as path from 'node:path';
import {
  CONFIG_FILE,
  configTemplate,
  gitignoreWords,
  protectWithGitignore,
  setDataCenterIds,
  setGpuTypes,
  setNetworkVolumeId,
  type RunpodTargetConfig,
} from '../../core/flow/config';
import { inStock, type AvailabilityLevel, type GpuType } from '../../core/flow/pods';
import type { UiContext } from '../uiContext';
import { describeError } from '../../core/errors';

/**
 * Create overbrainer.toml: writes the commented template unless one exists, adds the runs folder
 * and `.env` to the workspace's .gitignore (creating it in a git workspace; said when done), and
 * opens the file.
 */
export async function createConfig(ctx: UiContext): Promise<void> {
  const folder = await ctx.pickFolder();
  if (!folder) return;
  const file = path.join(folder.uri.fsPath, CONFIG_FILE);
  if (!fs.existsSync(file)) fs.writeFileSync(file, configTemplate(), { flag: 'wx' });
  try {
    const runsFolder = path.relative(folder.uri.fsPath, ctx.host.runsDir(folder)).split(path.sep);
    const ignored = protectWithGitignore(folder.uri.fsPath, runsFolder.join('/'));
    if (ignored !== null) {
      const text = `Overbrainer: ${gitignoreWords(ignored)}.`;
      ctx.log.info(text);
      void ctx.window.showInformationMessage(text);
    }
  } catch (error) {
    ctx.log.warn(`Could not update .gitignore: ${describeError(error)}`);
  }
  await ctx.window.showTextDocument(ctx.host.fileUri(file));
}

/** Pick GPU Types: the secure cloud's GPU types, written into a Runpod target's gpu_types. */
export async function pickGpuTypes(ctx: UiContext): Promise<void> {
  if (!(await ctx.requireTrust('list GPU types'))) return;
  const folder = await ctx.pickFolder();
  if (!folder) return;
  const session = await ctx.session(folder);
  try {
    const config = session.config();
    const names = Object.keys(config.targets).filter((n) => config.targets[n]?.kind === 'runpod');
    const targetName =
      names.length === 1
        ? names[0]
        : await ctx.window.showQuickPick(names, { placeHolder: 'Target' });
    if (targetName === undefined) return;
    const gpus = await ctx.window.withProgress(
      { location: ctx.host.progress.window, title: 'Overbrainer: loading GPU types' },
      () => session.api().listGpuTypes({ count: 1, cloud: 'SECURE', includeAvailability: true }),
    );
    const current = config.targets[targetName];
    const chosen = new Set(
      current?.kind === 'runpod' && current.gpuTypes !== 'auto' ? current.gpuTypes : [],
    );
    const picks = await ctx.window.showQuickPick(
      gpus
        .filter((g) => g.secureCloud)
        .map((g) => ({
          label: g.id,
          description: `${g.memoryInGb} GB · ${g.securePricePerHourUsd === null ? 'price n/a' : `$${g.securePricePerHourUsd.toFixed(2)}/h`} · ${stockText(g)}`,
          picked: chosen.has(g.id),
        })),
      {
        canPickMany: true,
        placeHolder: `GPU types for target ${targetName}, in order of preference`,
      },
    );
    if (picks === undefined || picks.length === 0) return;
    const file = path.join(folder.uri.fsPath, CONFIG_FILE);
    const text = fs.readFileSync(file, 'utf8');
    fs.writeFileSync(
      file,
      setGpuTypes(
        text,
        targetName,
        picks.map((p) => p.label),
      ),
    );
    void ctx.window.showInformationMessage(
      `GPU types of ${targetName}: ${picks.map((p) => p.label).join(', ')}`,
    );
  } catch (error) {
    await ctx.showError('Cannot pick GPU types', error);
  } finally {
    await session.close();
  }
}

function stockText(gpu: GpuType): string {
  return gpu.availability === null ? 'stock unknown' : `stock ${gpu.availability.toLowerCase()}`;
}

/** The Runpod target the pick is for: the only one, or the user's choice (undefined: none). */
async function pickRunpodTarget(
  ctx: UiContext,
  targets: Record<string, { kind: string } | undefined>,
): Promise<string | undefined> {
  const names = Object.keys(targets).filter((n) => targets[n]?.kind === 'runpod');
  if (names.length === 0) {
    void ctx.window.showErrorMessage(
      'Overbrainer: overbrainer.toml has no Runpod target (a [targets.NAME] with kind = "runpod").',
    );
    return undefined;
  }
  return names.length === 1
    ? names[0]
    : ctx.window.showQuickPick(names, { placeHolder: 'Runpod target' });
}

/**
 * What Pick Data Centers and Pick Volume share: the workspace folder, its session (closed after)
 * and one of its Runpod targets, handed to `pick`. A cancel at any step does nothing; an error is
 * shown under `failure`.
 */
async function onRunpodTarget(
  ctx: UiContext,
  failure: string,
  pick: (on: {
    folderPath: string;
    session: Awaited<ReturnType<UiContext['session']>>;
    targetName: string;
    target: RunpodTargetConfig;
  }) => Promise<void>,
): Promise<void> {
  if (!(await ctx.requireTrust('call the Runpod API'))) return;
  const folder = await ctx.pickFolder();
  if (!folder) return;
  const session = await ctx.session(folder);
  try {
    const config = session.config();
    const targetName = await pickRunpodTarget(ctx, config.targets);
    if (targetName === undefined) return;
    const target = config.targets[targetName] as RunpodTargetConfig;
    await pick({ folderPath: folder.uri.fsPath, session, targetName, target });
  } catch (error) {
    await ctx.showError(failure, error);
  } finally {
    await session.close();
  }
}

/** Rewrites one target value of the folder's overbrainer.toml in place (comments kept). */
function editConfig(dir: string, edit: (text: string) => string): void {
  const file = path.join(dir, CONFIG_FILE);
  fs.writeFileSync(file, edit(fs.readFileSync(file, 'utf8')));
}

const AUTO_LABEL = 'Any data center (auto)';

/**
 * Pick Data Centers: Runpod's data centers (with their GPU stock), written into the target's
 * data_center_ids; "auto" lets Runpod choose. A target with a network volume stays in the
 * volume's data center (Pick Volume sets both).
 */
export async function pickDataCenters(ctx: UiContext): Promise<void> {
  await onRunpodTarget(
    ctx,
    'Cannot pick data centers',
    async ({ folderPath, session, targetName, target }) => {
      if (target.networkVolumeId !== null) {
        void ctx.window.showInformationMessage(
          `Target ${targetName} uses network volume ${target.networkVolumeId}: its pods run in the volume's data center. Pick Volume changes both.`,
        );
        return;
      }
      const centers = await ctx.window.withProgress(
        { location: ctx.host.progress.window, title: 'Overbrainer: loading data centers' },
        () => session.api().listDataCenters(),
      );
      const chosen = new Set(target.dataCenterIds === 'auto' ? [] : target.dataCenterIds);
      const picks = await ctx.window.showQuickPick(
        [
          { label: AUTO_LABEL, description: 'Runpod places the pod', picked: false },
          ...centers.map((dc) => ({
            label: dc.id,
            description: [dc.name, dc.region, stockOf(dc.gpuAvailability)]
              .filter(Boolean)
              .join(' · '),
            picked: chosen.has(dc.id),
          })),
        ],
        { canPickMany: true, placeHolder: `Data centers for target ${targetName}` },
      );
      if (picks === undefined || picks.length === 0) return;
      const ids = picks.some((p) => p.label === AUTO_LABEL) ? 'auto' : picks.map((p) => p.label);
      editConfig(folderPath, (text) => setDataCenterIds(text, targetName, ids));
      void ctx.window.showInformationMessage(
        `Data centers of ${targetName}: ${ids === 'auto' ? 'auto' : ids.join(', ')}`,
      );
    },
  );
}

/**
 * Pick Volume: the account's network volumes; the one picked is written into the target's
 * network_volume_id with its data center as data_center_ids (a pod with a volume must be placed
 * in the volume's data center).
 */
export async function pickVolume(ctx: UiContext): Promise<void> {
  await onRunpodTarget(
    ctx,
    'Cannot pick a network volume',
    async ({ folderPath, session, targetName }) => {
      const volumes = await ctx.window.withProgress(
        { location: ctx.host.progress.window, title: 'Overbrainer: loading network volumes' },
        () => session.api().listNetworkVolumes(),
      );
      if (volumes.length === 0) {
        void ctx.window.showInformationMessage(
          'Overbrainer: the Runpod account has no network volume (create one in Runpod → Storage).',
        );
        return;
      }
      const pick = await ctx.window.showQuickPick(
        volumes.map((v) => ({
          label: v.id,
          description: [v.name, `${v.sizeGb} GB`, v.dataCenterId, v.type]
            .filter(Boolean)
            .join(' · '),
          volume: v,
        })),
        { placeHolder: `Network volume for target ${targetName} (mounted at the pod's data path)` },
      );
      if (pick === undefined) return;
      const { id, dataCenterId } = pick.volume;
      editConfig(folderPath, (text) =>
        setDataCenterIds(setNetworkVolumeId(text, targetName, id), targetName, [dataCenterId]),
      );
      void ctx.window.showInformationMessage(
        `Network volume of ${targetName}: ${id} (data center ${dataCenterId})`,
      );
    },
  );
}

function stockOf(gpus: readonly { availability: AvailabilityLevel }[]): string | null {
  if (gpus.length === 0) return null;
  return `${gpus.filter((g) => inStock(g.availability)).length} of ${gpus.length} GPU types in stock`;
}
