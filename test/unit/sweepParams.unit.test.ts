/**
 * A trial's params beyond params.json and placeholders: OVERBRAINER_PARAM_<NAME> (uppercased, a
 * dot written `__`), set at dotted paths of a mapping (a key on the way that is no mapping is an
 * error naming it and what to do), and in the user's own YAML by python/overbrainer_yaml.py under
 * the real /usr/bin/python3 (PyYAML, which Optuna brings).
 */
import assert from 'node:assert/strict';
import { paramEnv, ParamPathError, setParams, setParamsInYaml } from '../../src/core/sweep/params';

const PYTHON = '/usr/bin/python3';

describe('sweep params: environment variables and YAML keys', () => {
  it('names each OVERBRAINER_PARAM_<NAME>, uppercased, a dot as __; values as text', () => {
    assert.deepEqual(paramEnv({ learning_rate: 0.0001, 'lora.r': 16, tag: "it's", on: true }), {
      OVERBRAINER_PARAM_LEARNING_RATE: '0.0001',
      OVERBRAINER_PARAM_LORA__R: '16',
      OVERBRAINER_PARAM_TAG: "it's",
      OVERBRAINER_PARAM_ON: 'true',
    });
  });

  it('sets dotted keys, making missing mappings, and refuses a key under a list', () => {
    const doc = { lora: { r: 4, alpha: 8 }, datasets: [{ path: 'a' }] };
    assert.deepEqual(setParams(doc, { 'lora.r': 16, 'optimizer.betas.b1': 0.9, lr: 1 }), {
      lora: { r: 16, alpha: 8 },
      datasets: [{ path: 'a' }],
      optimizer: { betas: { b1: 0.9 } },
      lr: 1,
    });
    assert.equal(doc.lora.r, 4, 'the original is left as it was');
    assert.throws(
      () => setParams(doc, { 'datasets.path': 'b' }),
      (error: unknown) =>
        error instanceof ParamPathError &&
        /sweep\.params\.datasets\.path: datasets in axolotl\.yaml holds a list, not a mapping/.test(
          error.message,
        ) &&
        /Rename the parameter/.test(error.hint),
    );
  });

  it("sets them in the user's YAML with the real PyYAML, keeping its other keys", async () => {
    const text = '# mine\nbase_model: tiny/x\nlora:\n  r: 4\ndatasets:\n  - path: data/a.jsonl\n';
    const out = await setParamsInYaml(
      PYTHON,
      text,
      { 'lora.r': 32, learning_rate: 0.0002 },
      'my.yaml',
    );
    assert.equal(
      out,
      'base_model: tiny/x\nlora:\n  r: 32\ndatasets:\n- path: data/a.jsonl\nlearning_rate: 0.0002\n',
    );
    await assert.rejects(
      setParamsInYaml(PYTHON, text, { 'datasets.path': 'b' }, 'my.yaml'),
      (error: unknown) =>
        error instanceof ParamPathError &&
        error.kind === 'bad_path' &&
        /^my\.yaml: datasets\.path: datasets holds a list, not a mapping/.test(error.message) &&
        /Rename the parameter to a key of a mapping of my\.yaml/.test(error.hint),
    );
    await assert.rejects(
      setParamsInYaml(PYTHON, '- a\n- b\n', { x: 1 }, 'my.yaml'),
      (error: unknown) => error instanceof ParamPathError && error.kind === 'bad_yaml',
    );
    await assert.rejects(
      setParamsInYaml('/nonexistent/python3', text, { x: 1 }, 'my.yaml'),
      (error: unknown) =>
        error instanceof ParamPathError &&
        error.kind === 'no_yaml' &&
        /pip install optuna pyyaml/.test(error.hint),
    );
  });
});
