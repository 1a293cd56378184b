import * as fs from 'node:fs';
import * as path from 'node:path';
import { CONFIG_FILE, configTemplate, setGpuTypes } from '../core/config';
import type { GpuType } from '../core/runpod/api';
import type { UiContext } from './uiContext';

/** Create overbrainer.toml: writes the commented template unless one exists, and opens it. */
export async function createConfig(ctx: UiContext): Promise<void> {
  const folder = await ctx.pickFolder();
  if (!folder) return;
  const file = path.join(folder.uri.fsPath, CONFIG_FILE);
  if (!fs.existsSync(file)) fs.writeFileSync(file, configTemplate(), { flag: 'wx' });
  await ctx.window.showTextDocument(ctx.host.fileUri(file));
}

/** Pick GPU Types: the secure cloud's GPU types, written into a Runpod target's gpu_types. */
export async function pickGpuTypes(ctx: UiContext): Promise<void> {
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
