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

  it('puts following a run (core/follow) below the run commands and above the pod', async function () {
    for (const [file, code] of [
      ['src/core/follow/layerProbe.ts', "import { train } from '../flow';"],
      ['src/core/pod/layerProbe.ts', "import { watchLeased } from '../follow/watch';"],
      ['src/core/train/layerProbe.ts', "import { collect } from '../follow/collect';"],
      ['src/ui/runs/layerProbe.ts', "import { watchLeased } from '../../core/follow/watch';"],
    ]) {
      const found = await problems(file!, `${code!}\nexport const probe = 1;\n`);
      assert.equal(found.length, 1, `${file!}: ${JSON.stringify(found)}`);
      assert.match(found[0]!, /layers import downward only|the front ends import core\/flow/);
    }
    for (const [file, code] of [
      ['src/core/flow/layerProbe.ts', "import { watchLeased } from '../follow/watch';"],
      ['src/core/follow/layerProbe.ts', "import { startPod } from '../pod/provision';"],
    ]) {
      assert.deepEqual(await problems(file!, `${code!}\nexport const probe = 1;\n`), [], file);
    }
  });

  it('lets the run commands import the records below them', async function () {
    const down = await problems(
      'src/core/flow/layerProbe.ts',
      "import { RunStore } from '../runs/store';\nexport const probe = RunStore;\n",
    );
    assert.deepEqual(down, []);
  });

  it('lets the front ends import core/flow and the base files only, never a lower layer', async function () {
    for (const [file, code] of [
      ['src/cli/commands/layerProbe.ts', "import { listPods } from '../../core/pod/podAdmin';"],
      ['src/cli/layerProbe.ts', "import { loadConfig } from '../core/config';"],
      ['src/ui/runs/layerProbe.ts', "import type { RunRecord } from '../../core/runs/runRecord';"],
      ['src/ui/layerProbe.ts', "import { RunpodClient } from '../core/runpod/client';"],
    ]) {
      const found = await problems(file!, `${code!}\nexport const probe = 1;\n`);
      assert.equal(found.length, 1, `${file!}: ${JSON.stringify(found)}`);
      assert.match(found[0]!, /the front ends import core\/flow and the base files/);
    }
    for (const [file, code] of [
      ['src/cli/commands/layerProbe.ts', "import { train } from '../../core/flow';"],
      ['src/ui/pods/layerProbe.ts', "import { listPods } from '../../core/flow/pods';"],
      ['src/ui/layerProbe.ts', "import { EventBus } from '../core/events';"],
      ['src/cli/layerProbe.ts', "import { hintOf } from '../core/errors';"],
    ]) {
      assert.deepEqual(await problems(file!, `${code!}\nexport const probe = 1;\n`), [], file);
    }
  });
});
