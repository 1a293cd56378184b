import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { describeError, HintedError, hintOf } from '../../src/core/errors';
import { ExecError } from '../../src/core/exec/executor';
import { FlowError } from '../../src/core/flow/deps';
import { PodError } from '../../src/core/pod/podError';
import { ApiError, RunpodConfigError, API_KEY_VARIABLE } from '../../src/core/runpod/apiErrors';
import { missingHints } from '../helpers/errorHints';

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

  it('each carries its kind and a next action: the one given, else the one of its kind', () => {
    const exec = new ExecError('auth', 'the target refused our key');
    assert.ok(exec instanceof HintedError);
    assert.equal(exec.kind, 'auth');
    assert.match(hintOf(exec) ?? '', /overbrainer pod rm/);
    const flow = new FlowError('no_target', 'overbrainer.toml defines no target', 'Add one.');
    assert.equal(flow.kind, 'no_target');
    assert.equal(hintOf(flow), 'Add one.');
    assert.match(hintOf(new FlowError('no_target', 'no target')) ?? '', /\[targets\.NAME\]/);
    const gone = new PodError('pod_gone', 'gone');
    assert.equal(gone.kind, 'pod_gone');
    assert.match(hintOf(gone) ?? '', /overbrainer runs show/);
    // A call's failure wrapped for the pod keeps the call's own next action.
    const refused = new ApiError('unauthorized', 'Runpod refused the API key', { status: 401 });
    assert.equal(PodError.api(refused).hint, refused.hint);
    assert.equal(new RunpodConfigError(API_KEY_VARIABLE, 'not set').kind, 'api_key');
    // The hint is no enumerable field: an ApiError's own fields stay its data.
    const api = new ApiError('rate_limited', 'slow', { status: 429 });
    assert.equal(api.kind, 'rate_limited');
    assert.equal(Object.keys(api).includes('hint'), false);
  });

  it('every error class of src/ carries a next action: each declares a hint of its own or takes one that every `new` gives', () => {
    const { classes, problems } = missingHints(
      sources(SRC).map((file) => ({
        file: path.relative(SRC, file),
        text: fs.readFileSync(file, 'utf8'),
      })),
    );
    assert.ok(classes.length >= 25, `found ${classes.length} error classes`);
    assert.deepEqual(problems, [], 'these can be built without a next action');
  });

  it('the hint check finds a class without a hint, a nullable one, and a `new` that leaves it out', () => {
    const { classes, problems } = missingHints([
      {
        file: 'a.ts',
        text: [
          "class Bare extends HintedError<'x'> { constructor(m: string) { super('x', m); } }",
          'class Maybe extends HintedError<string> {',
          '  constructor(k: string, m: string, hint: string | null = null) { super(k, m, hint); }',
          '}',
          'class Given extends HintedError<string> {',
          '  constructor(k: string, m: string, hint: string) { super(k, m, hint); }',
          '}',
          "class Own extends HintedError<'o'> { constructor(m: string) { super('o', m, 'Do this.'); } }",
          "class Sub extends Given { constructor(m: string) { super('s', m, ''); } }",
          "new Given('k', 'm', 'Do that.');",
          "new Given('k', 'm', null);",
          "new Own('m');",
        ].join('\n'),
      },
    ]);
    assert.deepEqual(classes, ['Bare', 'Given', 'Maybe', 'Own', 'Sub']);
    assert.deepEqual(problems, [
      'a.ts:1: Bare passes no hint to HintedError',
      'a.ts:2: Maybe its hint defaults to null',
      'a.ts:9: Sub passes no hint to Given',
      'a.ts:11: new Given(…) without a hint',
    ]);
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
