import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { describeError, HintedError, hintOf } from '../../src/core/errors';
import { ExecError } from '../../src/core/exec/executor';
import { FlowError } from '../../src/core/flow/deps';
import { PodError } from '../../src/core/pod/podError';
import { ApiError, RunpodConfigError, API_KEY_VARIABLE } from '../../src/core/runpod/apiErrors';

const SRC = path.resolve(__dirname, '../../src');

function sources(dir: string): string[] {
  return fs.readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const full = path.join(dir, entry.name);
    if (entry.isDirectory()) return sources(full);
    return entry.name.endsWith('.ts') ? [full] : [];
  });
}

/** Every `class X extends Y` of src/, X → Y (generic arguments dropped). */
function classParents(): Map<string, { parent: string; file: string }> {
  const parents = new Map<string, { parent: string; file: string }>();
  for (const file of sources(SRC)) {
    const text = fs.readFileSync(file, 'utf8');
    for (const match of text.matchAll(/^export class (\w+)(?:<[^>]*>)? extends (\w+)/gm)) {
      parents.set(match[1]!, { parent: match[2]!, file: path.relative(SRC, file) });
    }
  }
  return parents;
}

describe('errors: one base with a kind and a hint, one way to say them', () => {
  it('every error class of src/ extends HintedError (a kind, a hint slot), none Error directly', () => {
    const parents = classParents();
    const errorClasses = [...parents.entries()].filter(([, { parent }]) => {
      for (let p: string | undefined = parent; p !== undefined; p = parents.get(p)?.parent) {
        if (p === 'Error') return true;
      }
      return false;
    });
    assert.ok(errorClasses.length >= 25, `found ${errorClasses.length} error classes`);
    const offBase = errorClasses
      .filter(([name, { parent }]) => name !== 'HintedError' && parent === 'Error')
      .map(([name, { file }]) => `${name} (${file})`);
    assert.deepEqual(offBase, [], 'these extend Error, not HintedError');
  });

  it('each carries its kind; a hint only where the message does not say the next action', () => {
    const exec = new ExecError('auth', 'the target refused our key');
    assert.ok(exec instanceof HintedError);
    assert.equal(exec.kind, 'auth');
    assert.equal(hintOf(exec), null);
    const flow = new FlowError('no_target', 'overbrainer.toml defines no target', 'Add one.');
    assert.equal(flow.kind, 'no_target');
    assert.equal(hintOf(flow), 'Add one.');
    assert.equal(new PodError('pod_gone', 'gone').kind, 'pod_gone');
    assert.equal(new RunpodConfigError(API_KEY_VARIABLE, 'not set').kind, 'api_key');
    // The hint is no enumerable field: an ApiError's own fields stay its data.
    const api = new ApiError('rate_limited', 'slow', { status: 429 });
    assert.equal(api.kind, 'rate_limited');
    assert.equal(Object.keys(api).includes('hint'), false);
  });

  it('error-to-text is written once (describeError); only the thin first bundle, which loads no core, keeps its own', () => {
    const copies = sources(SRC)
      .filter((file) => /\.message : String\(/.test(fs.readFileSync(file, 'utf8')))
      .map((file) => path.relative(SRC, file))
      .sort();
    assert.deepEqual(copies, ['boot/codeCache.ts', 'core/errors.ts', 'extension.ts']);
  });

  it('describeError: an error says its message, any other thrown value its text', () => {
    assert.equal(
      describeError(new PodError('pod_gone', 'pod p no longer exists', 'hint')),
      'pod p no longer exists',
    );
    assert.equal(
      describeError(new ApiError('server', 'Runpod answered 500')),
      'Runpod answered 500',
    );
    assert.equal(describeError('plain words'), 'plain words');
    assert.equal(describeError(42), '42');
    assert.equal(describeError(null), 'null');
  });
});
