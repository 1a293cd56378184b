/**
 * How the e2e harness (and `npm start`) runs code-server: its arguments and its environment, kept
 * to loopback and to its own temp home.
 */
import * as path from 'node:path';

export function codeServerArgs(
  userDataDir: string,
  extensionsDir: string,
  home: string,
  port = 0,
  /** Keep Workspace Trust on (the trust journey); every other window turns it off. */
  workspaceTrust = false,
): string[] {
  return [
    '--auth',
    'none',
    // Port 0: the kernel picks a free port; the harness reads it from code-server's log.
    '--bind-addr',
    `127.0.0.1:${port}`,
    '--user-data-dir',
    userDataDir,
    '--extensions-dir',
    extensionsDir,
    '--config',
    path.join(home, 'config.yaml'),
    '--disable-telemetry',
    '--disable-update-check',
    ...(workspaceTrust ? [] : ['--disable-workspace-trust']),
    '--disable-getting-started-override',
  ];
}

/** code-server's environment: its own XDG dirs, so it writes nothing into the real home. */
export function codeServerEnv(home: string, extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    XDG_CONFIG_HOME: path.join(home, 'xdg-config'),
    XDG_DATA_HOME: path.join(home, 'xdg-data'),
    XDG_CACHE_HOME: path.join(home, 'xdg-cache'),
    // No extension gallery (code-server's default is open-vsx.org): nothing here may leave
    // loopback, and without a network its queries only failed, beside the extension's start.
    EXTENSIONS_GALLERY: '{}',
    // Nor a login shell's environment (`bash -il` per extension host and terminal host, given up
    // after 10 s): VS Code resolves it only for a desktop start, and skips it where VSCODE_CLI is
    // set. This environment is complete; CI's loaded first window timed out on it three times.
    VSCODE_CLI: '1',
  };
  // A key from the developer's shell must not leak into a test's extension host, nor the outer
  // npm's settings (npm test) into code-server's own npm-based tooling. A key given in `extra`
  // (the demo's emulator key) is meant for it, so `extra` applies after.
  delete env.OVERBRAINER_RUNPOD__API_KEY;
  delete env.VSCODE_IPC_HOOK_CLI;
  for (const name of Object.keys(env)) {
    if (name.startsWith('npm_')) delete env[name];
  }
  return { ...env, ...extra };
}

/**
 * VS Code's built-in extensions that no journey uses, left out of every window's extension host
 * (code-server reads VSCODE_SKIP_BUILTIN_EXTENSIONS): Git with its base and GitHub (they start
 * at `*` and look for git and repositories), merge conflicts and debug auto-attach (at startup
 * end), Emmet (any language), npm, the JSON and TypeScript language features with their
 * settings-editing helpers (started for the JSON documents a window opens), the sign-ins, the
 * JavaScript debugger (it also sets NODE_OPTIONS in every terminal), references view, tunnel
 * forwarding and Copilot Chat. Side by side on 2026-12-07 (a window to the extension's
 * activation and 50 s after, three each, load 40-54): 2.3-3.0 CPU-s to the activation against
 * 4.7-5.4, 24.6-29.5 CPU-s in all against 27.1-33.7; only overbrainer.overbrainer activates.
 * The workbench a journey drives (palette, views, webviews, terminals, notifications) is core.
 */
export const BUILTINS_OFF = [
  'GitHub.copilot-chat',
  'vscode.git',
  'vscode.git-base',
  'vscode.github',
  'vscode.github-authentication',
  'vscode.microsoft-authentication',
  'vscode.merge-conflict',
  'vscode.debug-auto-launch',
  'ms-vscode.js-debug',
  'ms-vscode.js-debug-companion',
  'vscode.emmet',
  'vscode.npm',
  'vscode.json-language-features',
  'vscode.typescript-language-features',
  'vscode.configuration-editing',
  'vscode.extension-editing',
  'vscode.references-view',
  'vscode.tunnel-forwarding',
];
