import * as assert from 'node:assert/strict';
import * as vscode from 'vscode';
import { COMMAND_IDS } from '../../../src/ui/commands/commandIds';

/** Tests that need the editor API itself (registered commands, activation), run in the host. */
export function defineHostTests(): void {
  describe('Overbrainer in the extension host', function () {
    let extension: vscode.Extension<unknown>;

    before(async function () {
      const found = vscode.extensions.getExtension('overbrainer.overbrainer');
      assert.ok(found, 'the extension under development is loaded');
      extension = found;
      await vscode.commands.executeCommand('workbench.view.extension.overbrainer');
      await extension.activate();
    });

    it('activates', function () {
      assert.equal(extension.isActive, true);
    });

    it('registers every contributed command', async function () {
      const registered = new Set(await vscode.commands.getCommands(true));
      assert.deepEqual(
        COMMAND_IDS.filter((id) => !registered.has(id)),
        [],
      );
    });

    it('refreshes the runs and pods views without an error', async function () {
      await vscode.commands.executeCommand('overbrainer.refreshRuns');
      await vscode.commands.executeCommand('overbrainer.refreshPods');
    });
  });
}
