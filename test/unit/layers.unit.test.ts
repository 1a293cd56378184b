import * as assert from 'node:assert/strict';
import * as path from 'node:path';
import { ESLint } from 'eslint';

const ROOT = path.resolve(__dirname, '..', '..');

/**
 * The core's layers import downward only (docs/ARCHITECTURE.md), and `npm run lint` is what
 * enforces it (eslint.config.mjs, `no-restricted-imports` per folder): a back-import fails it,
 * a downward one passes.
 */
describe('the layer order, as npm run lint enforces it', function () {
  this.timeout(60_000);
  const eslint = new ESLint({ cwd: ROOT });

  async function problems(file: string, code: string): Promise<string[]> {
    const [result] = await eslint.lintText(code, { filePath: path.join(ROOT, file) });
    return (result?.messages ?? [])
      .filter((m) => m.ruleId === 'no-restricted-imports')
      .map((m) => m.message);
  }

  it('rejects a record layer importing the run commands, and the core importing vscode or the UI', async function () {
    const back = await problems(
      'src/core/runs/layerProbe.ts',
      "import { train } from '../flow';\nexport const probe = train;\n",
    );
    assert.equal(back.length, 1, JSON.stringify(back));
    assert.match(back[0]!, /layers import downward only/);
    const editor = await problems(
      'src/core/train/layerProbe.ts',
      "import * as vscode from 'vscode';\nexport const probe = vscode;\n",
    );
    assert.match(editor.join('\n'), /must not depend on the editor API/);
    const frontEnd = await problems(
      'src/core/flow/layerProbe.ts',
      "import { COMMAND_IDS } from '../../ui/commands/commandIds';\nexport const probe = COMMAND_IDS;\n",
    );
    assert.match(frontEnd.join('\n'), /must not import the front ends/);
  });

  it('lets the run commands import the records below them', async function () {
    const down = await problems(
      'src/core/flow/layerProbe.ts',
      "import { RunStore } from '../runs/store';\nexport const probe = RunStore;\n",
    );
    assert.deepEqual(down, []);
  });
});
