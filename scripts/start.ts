/**
 * The demo (`npm start`; scripts/start.sh installs what is missing and builds first): the local
 * Runpod emulator (real pods: real processes with real sshd and the real bootstrap and watchdog),
 * and the real VS Code (code-server) with this build of the extension, opened on a fresh copy of
 * examples/tiny/, with code-server's machine settings pointing `overbrainer.runpod.baseUrl` at
 * the emulator (where a user sets it: a workspace cannot) and its extension host holding the
 * emulator's key as OVERBRAINER_RUNPOD__API_KEY. Prints the URL and runs until Ctrl-C
 * (SIGINT) or SIGTERM, then stops code-server, deletes every emulated pod and waits until they
 * are gone.
 *
 * `--check` runs the same demo unattended (./demoCheck.ts): Chromium trains through the UI and
 * the script prints each step, exiting 0 only when everything held.
 *
 * Options:
 *   --check            drive the demo in Chromium and exit (0: every step passed)
 *   --port N           code-server's port (default 8080; 0 picks a free one; --check: 0)
 *   --dir D            where the demo lives (default .demo/ in the repo), recreated at each start:
 *                      D/workspace is the opened folder, D/emulator the pods' directories
 *   --timing-scale F   every production duration divided by F (default 10): the watchdog ticks
 *                      every 6 s instead of 60 s, the client polls 10× faster
 *   --boot-ms MS       emulated pod boot, create → RUNNING (default 3000)
 *   --vsix FILE        install this .vsix (`npm run package`) into the demo's code-server instead
 *                      of linking the build in dist/: the demo runs what users install
 */
import { spawnSync } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, rmSync } from 'node:fs';
import * as path from 'node:path';
import { startEmulator, type Emulator } from '../test/emulator/emulator';
import { CodeServer, codeServerEnv, NODE24, REPO_ROOT } from '../test/e2e/harness';
import { runCheck } from './demoCheck';

export interface DemoOptions {
  check: boolean;
  port: number;
  dir: string;
  timingScale: number;
  bootMs: number;
  vsix: string | null;
}

const USAGE =
  'usage: npm start -- [--check] [--port N] [--dir D] [--timing-scale F] [--boot-ms MS] [--vsix FILE]';

export function parseDemoArgs(argv: readonly string[]): DemoOptions {
  const options: DemoOptions = {
    check: false,
    port: Number.NaN,
    dir: path.join(REPO_ROOT, '.demo'),
    timingScale: 10,
    bootMs: 3000,
    vsix: null,
  };
  for (let i = 0; i < argv.length; i += 1) {
    const flag = argv[i];
    const value = (): string => {
      const next = argv[i + 1];
      if (next === undefined || next.startsWith('--')) throw new Error(`${flag} needs a value`);
      i += 1;
      return next;
    };
    const number = (min: number, max: number): number => {
      const raw = value();
      const n = Number(raw);
      if (raw.trim() === '' || !Number.isFinite(n) || n < min || n > max) {
        throw new Error(`${flag} takes a number from ${min} to ${max}, not '${raw}'`);
      }
      return n;
    };
    switch (flag) {
      case '--check':
        options.check = true;
        break;
      case '--port':
        options.port = number(0, 65535);
        break;
      case '--dir':
        options.dir = path.resolve(value());
        break;
      case '--timing-scale':
        options.timingScale = number(1, 1000);
        break;
      case '--boot-ms':
        options.bootMs = number(0, 600_000);
        break;
      case '--vsix':
        options.vsix = path.resolve(value());
        break;
      case '--help':
      case '-h':
        console.log(USAGE);
        process.exit(0);
        break;
      default:
        throw new Error(`unknown argument '${flag ?? ''}'\n${USAGE}`);
    }
  }
  if (Number.isNaN(options.port)) {
    options.port = options.check ? 0 : Number(process.env.OVERBRAINER_DEMO_PORT ?? 8080);
  }
  if (options.dir === REPO_ROOT || REPO_ROOT.startsWith(`${options.dir}${path.sep}`)) {
    throw new Error(`--dir ${options.dir} would hold the repository; give a folder of its own`);
  }
  return options;
}

/** A fresh copy of examples/tiny (no runs, no caches, no .vscode). */
export function prepareWorkspace(workspace: string): void {
  rmSync(workspace, { recursive: true, force: true });
  const tiny = path.join(REPO_ROOT, 'examples', 'tiny');
  cpSync(tiny, workspace, {
    recursive: true,
    filter: (source) => !/(^|\/)(runs|output|__pycache__|\.vscode)$/.test(source),
  });
}

/** Installs `vsix` into a fresh extensions dir with code-server's own CLI; returns the dir. */
function installVsix(vsix: string, dir: string): string {
  if (!existsSync(vsix)) throw new Error(`${vsix} does not exist: run \`npm run package\` first`);
  const extensionsDir = path.join(dir, 'extensions');
  const entry = path.join(REPO_ROOT, 'test/e2e/vscode/node_modules/code-server/out/node/entry.js');
  const home = path.join(dir, 'install');
  const result = spawnSync(
    NODE24,
    [
      entry,
      '--extensions-dir',
      extensionsDir,
      '--user-data-dir',
      path.join(home, 'user-data'),
      '--config',
      path.join(home, 'config.yaml'),
      '--install-extension',
      vsix,
    ],
    { encoding: 'utf8', env: codeServerEnv(home), timeout: 300_000 },
  );
  if (result.status !== 0) {
    throw new Error(
      `code-server --install-extension ${vsix} failed:\n${result.stdout}${result.stderr}`,
    );
  }
  return extensionsDir;
}

function log(text: string): void {
  console.log(text);
}

async function main(): Promise<number> {
  const options = parseDemoArgs(process.argv.slice(2));
  const workspace = path.join(options.dir, 'workspace');
  const stateDir = path.join(options.dir, 'emulator');
  // The emulator's pods from an earlier demo died with it; their directories are only files.
  rmSync(options.dir, { recursive: true, force: true });
  mkdirSync(stateDir, { recursive: true });

  let emulator: Emulator | undefined;
  let server: CodeServer | undefined;
  let stopping: Promise<void> | undefined;
  const abort = new AbortController();

  /** Stops code-server, deletes every pod and waits until none runs. Safe to call twice. */
  const stop = (): Promise<void> => {
    stopping ??= (async () => {
      await server?.close().catch((error: unknown) => log(`code-server: ${String(error)}`));
      if (emulator) {
        const left = emulator.pods().map((pod) => pod.id);
        if (left.length > 0) log(`deleting ${left.length} emulated pod(s): ${left.join(', ')}`);
        await emulator.close();
      }
      rmSync(stateDir, { recursive: true, force: true });
    })();
    return stopping;
  };
  const onSignal = (signal: NodeJS.Signals): void => {
    if (stopping) {
      log(`(${signal}: still stopping; pods are being deleted)`);
      return;
    }
    log(`\n${signal}: stopping code-server and the emulator…`);
    abort.abort();
    void stop().then(
      () => {
        log('stopped: no process and no emulated pod left.');
        process.exit(options.check ? 130 : 0);
      },
      (error: unknown) => {
        console.error(error);
        process.exit(1);
      },
    );
  };
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);

  try {
    emulator = await startEmulator({
      stateDir,
      bootDelaysMs: {
        provisioning: Math.floor(options.bootMs / 2),
        starting: options.bootMs - Math.floor(options.bootMs / 2),
      },
    });
    prepareWorkspace(workspace);
    log(
      `Runpod emulator: ${emulator.baseUrl} (api key: ${emulator.apiKey}; pods boot in ${options.bootMs} ms)`,
    );
    log(
      `workspace: ${path.relative(process.cwd(), workspace) || workspace} (a copy of examples/tiny)`,
    );
    let extensionsDir: string | undefined;
    if (options.vsix !== null) {
      extensionsDir = installVsix(options.vsix, options.dir);
      log(
        `extension: installed from ${path.relative(process.cwd(), options.vsix) || options.vsix}`,
      );
    }
    server = await CodeServer.start({
      workspace,
      extensionsDir,
      port: options.port,
      env: {
        // The extension's fallback when no key is in its secret storage (src/ui/apiKey.ts).
        OVERBRAINER_RUNPOD__API_KEY: emulator.apiKey,
        // Production durations divided by this factor (the CLI's and the extension's test hook).
        OVERBRAINER_TIMING_SCALE: String(options.timingScale),
      },
      // The demo shows the product as a user first sees it: the walkthrough may open.
      settings: options.check ? {} : { 'workbench.startupEditor': 'welcomePage' },
      // Where a user points the extension at another API (scope `machine`: code-server's window
      // is a remote one, so its machine settings, never the workspace's .vscode/settings.json).
      machineSettings: { 'overbrainer.runpod.baseUrl': emulator.baseUrl },
    });
    log(
      `settings: overbrainer.runpod.baseUrl = ${emulator.baseUrl} in code-server's machine settings (${server.machineSettingsFile})`,
    );
    if (options.check) {
      const ok = await runCheck({ server, emulator, workspace, signal: abort.signal });
      await stop();
      const left = emulator.pods().length;
      if (left > 0) {
        log(`✗ ${left} emulated pod(s) still exist after the emulator closed`);
        return 1;
      }
      log(ok ? 'demo check: passed' : 'demo check: FAILED');
      return ok ? 0 : 1;
    }
    log('');
    log(`Overbrainer demo: open ${server.folderUrl}`);
    log('Then: Overbrainer in the activity bar → Train (▶). Ctrl-C stops everything.');
    await new Promise<never>(() => undefined);
    return 0;
  } catch (error) {
    if (abort.signal.aborted) return new Promise<number>(() => undefined); // the signal handler exits
    console.error(error instanceof Error ? error.message : error);
    await stop();
    return 1;
  }
}

if (require.main === module) {
  main().then(
    (code) => process.exit(code),
    (error: unknown) => {
      console.error(error instanceof Error ? error.message : error);
      process.exit(1);
    },
  );
}
