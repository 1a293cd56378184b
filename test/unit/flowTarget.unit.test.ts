import * as assert from 'node:assert/strict';
import { parseConfig } from '../../src/core/config';
import { chooseTarget, FlowError } from '../../src/core/flow';
import { pickTarget } from '../../src/core/flow/deps';

/** A config with local targets `names` and, when given, `[training] target = training`. */
function configWith(names: string[], training?: string) {
  const text = [
    ...(training === undefined
      ? []
      : ['[training]', 'trainer = "command"', 'command = "true"', `target = "${training}"`]),
    ...names.flatMap((n) => [`[targets.${n}]`, 'kind = "local"']),
  ].join('\n');
  const result = parseConfig(text, { file: 'overbrainer.toml', workspaceName: 'w' });
  if (!result.ok) assert.fail(result.errors.map((e) => e.message).join('\n'));
  return result.config;
}

/**
 * The target a train uses is chosen by one rule in flow/ (the CLI's train and dry run, VS Code's
 * Train and the train flow itself): the one named, else `[training] target`, else the only one.
 */
describe('flow: the target a train uses', function () {
  it('takes the one named, else [training] target, else the only one', function () {
    assert.equal(chooseTarget(configWith(['a', 'b'], 'b'), 'a').name, 'a');
    assert.equal(chooseTarget(configWith(['a', 'b'], 'b'), null).name, 'b');
    assert.equal(chooseTarget(configWith(['a']), undefined).name, 'a');
    assert.equal(chooseTarget(configWith(['a']), undefined).target?.name, 'a');
  });

  it('chooses none among several without [training] target; a name the config lacks has no target', function () {
    assert.deepEqual(chooseTarget(configWith(['a', 'b']), undefined), {
      name: undefined,
      target: undefined,
    });
    assert.deepEqual(chooseTarget(configWith(['a']), 'c'), { name: 'c', target: undefined });
  });

  it('the train flow refuses either with the next action', function () {
    assert.throws(
      () => pickTarget(configWith(['a', 'b']), {}),
      (e: unknown) =>
        e instanceof FlowError &&
        /several targets \(a, b\)/.test(e.message) &&
        /--target/.test(e.hint ?? ''),
    );
    assert.throws(
      () => pickTarget(configWith(['a']), { target: 'c' }),
      (e: unknown) =>
        e instanceof FlowError && /no target "c"/.test(e.message) && e.hint === 'Use one of: a.',
    );
  });
});
