/**
 * Today's build as the journeys' windows install it, copied once per run: every window gets a
 * private copy of that one stage, never of dist/ itself. A build elsewhere in the tree (the demo's
 * `npm start`, the package journey's `npm run package`, a developer's `npm run build`) replaces
 * dist/'s files one by one and removes those it did not make (source maps after a production
 * build): a window copying dist/ meanwhile could get two builds' bundles or miss a file, and an
 * extension host that (re)starts (Reload Window, a crash) reads its folder again.
 *
 * `scripts/test.sh` makes the stage right after its build and names it in OVERBRAINER_E2E_BUILD
 * (the e2e files then run two at a time while other files build); a file run alone stages the
 * build at its first window and removes the stage when its process exits.
 */
import { cpSync, existsSync, mkdirSync, mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { eventually, extensionFolderName, REPO_ROOT } from './harness';

/** The files of an installed extension: what a .vsix holds of this repository. */
const PARTS = ['package.json', 'dist', 'media'];

let ownStage: Promise<string> | undefined;

/** The folder holding this run's copy of the build (package.json, dist/, media/). */
export function buildStage(): Promise<string> {
  const given = process.env.OVERBRAINER_E2E_BUILD;
  if (given !== undefined && given !== '') {
    if (!existsSync(path.join(given, 'dist', 'extension.js'))) {
      return Promise.reject(
        new Error(`OVERBRAINER_E2E_BUILD=${given} holds no dist/extension.js: run the build first`),
      );
    }
    return Promise.resolve(given);
  }
  ownStage ??= stageBuild();
  return ownStage;
}

/** Copies dist/ (once complete: a build may be writing it) and the rest into a temp folder. */
async function stageBuild(): Promise<string> {
  const dist = path.join(REPO_ROOT, 'dist', 'extension.js');
  if (!existsSync(dist)) {
    throw new Error('dist/extension.js is missing: run `npm run build` before the e2e tests.');
  }
  await eventually(
    'a complete dist/extension.js (npm run build)',
    async () => {
      if (!existsSync(dist)) return undefined;
      const size = statSync(dist).size;
      await new Promise((resolve) => setTimeout(resolve, 1000));
      return existsSync(dist) && statSync(dist).size === size && size > 0 ? true : undefined;
    },
    60_000,
  );
  const stage = mkdtempSync(path.join(tmpdir(), 'overbrainer-e2e-build-'));
  process.once('exit', () => rmSync(stage, { recursive: true, force: true }));
  for (const part of PARTS) {
    cpSync(path.join(REPO_ROOT, part), path.join(stage, part), { recursive: true });
  }
  return stage;
}

/**
 * Installs the run's copy of the build into `extensionsDir` as `<publisher>.<name>-<version>`:
 * a folder of its own (not a link: VS Code knows which extension calls its API by the path of
 * the module that requires `vscode`, which Node resolves through links).
 */
export async function installBuild(extensionsDir: string): Promise<void> {
  const stage = await buildStage();
  const folder = path.join(extensionsDir, extensionFolderName());
  mkdirSync(folder, { recursive: true });
  for (const part of PARTS) {
    cpSync(path.join(stage, part), path.join(folder, part), { recursive: true });
  }
}
