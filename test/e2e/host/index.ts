/**
 * The in-host suite: mocha inside VS Code's extension host, the way @vscode/test-electron runs
 * tests (`--extensionTestsPath`). Run with `npm run vscode-test` (downloads VS Code: needs
 * internet) or the "Extension Tests" launch configuration. The suite that runs on every machine
 * is the code-server one (test/e2e/*.e2e.test.ts); this one is for people with a desktop VS Code.
 */
import Mocha from 'mocha';
import { defineHostTests } from './host.suite';

export function run(): Promise<void> {
  const mocha = new Mocha({ ui: 'bdd', timeout: 30_000, color: true });
  // Installs describe/it as globals for the suite defined below (the bundle has no test files).
  mocha.suite.emit('pre-require', globalThis, 'host.suite', mocha);
  defineHostTests();
  return new Promise((resolve, reject) => {
    mocha.run((failures) =>
      failures > 0 ? reject(new Error(`${failures} in-host test(s) failed`)) : resolve(),
    );
  });
}
