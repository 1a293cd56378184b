import assert from 'node:assert/strict';
import {
  ConfigEditError,
  configTemplate,
  parseConfig,
  setGpuTypes,
  TomlPositions,
} from '../../src/core/config';

function gpuTypesOf(text: string, target = 'pod'): unknown {
  const result = parseConfig(text, { file: 'f', workspaceName: 'w' });
  if (!result.ok)
    assert.fail(result.errors.map((e) => `${e.line}:${e.column} ${e.message}`).join('\n'));
  const found = result.config.targets[target];
  assert.ok(found?.kind === 'runpod');
  return found.gpuTypes;
}

describe('config: setGpuTypes', () => {
  it('replaces only the value, keeping comments and layout', () => {
    const text = `# my settings
[targets.pod]   # the GPU pod
kind = "runpod"
gpu_types = [ # tried in order
  "NVIDIA A40",   # cheap
  "NVIDIA L40S",
] # end
max_hours = 6 # hours
`;
    const edited = setGpuTypes(text, 'pod', ['NVIDIA H100 80GB HBM3', 'NVIDIA A40']);
    assert.equal(
      edited,
      `# my settings
[targets.pod]   # the GPU pod
kind = "runpod"
gpu_types = ["NVIDIA H100 80GB HBM3", "NVIDIA A40"] # end
max_hours = 6 # hours
`,
    );
    assert.deepEqual(gpuTypesOf(edited), ['NVIDIA H100 80GB HBM3', 'NVIDIA A40']);
    const auto = setGpuTypes(edited, 'pod', 'auto');
    assert.equal(auto, edited.replace('["NVIDIA H100 80GB HBM3", "NVIDIA A40"]', '"auto"'));
    assert.equal(gpuTypesOf(auto), 'auto');
  });

  it('adds the key after the last line of the target table when absent', () => {
    const text =
      '[targets.pod]\r\nkind = "runpod"\r\nmax_hours = 6\r\n# a note about the next table\r\n\r\n[targets.other]\r\nkind = "local"\r\n';
    const edited = setGpuTypes(text, 'pod', ['A']);
    assert.equal(
      edited,
      '[targets.pod]\r\nkind = "runpod"\r\nmax_hours = 6\r\ngpu_types = ["A"]\r\n# a note about the next table\r\n\r\n[targets.other]\r\nkind = "local"\r\n',
    );
    assert.deepEqual(gpuTypesOf(edited), ['A']);
  });

  it('adds to an empty table right after its header', () => {
    const edited = setGpuTypes('[targets.pod] # x\n\n[training]\n', 'pod', ['A']);
    assert.equal(edited, '[targets.pod] # x\ngpu_types = ["A"]\n\n[training]\n');
  });

  it('edits inline tables and dotted keys', () => {
    assert.equal(
      setGpuTypes('[targets]\npod = { kind = "runpod", max_hours = 2 } # c\n', 'pod', ['A', 'B']),
      '[targets]\npod = { kind = "runpod", max_hours = 2, gpu_types = ["A", "B"] } # c\n',
    );
    assert.equal(
      setGpuTypes('[targets]\npod = {}\n', 'pod', 'auto'),
      '[targets]\npod = { gpu_types = "auto" }\n',
    );
    const dotted = setGpuTypes(
      '[targets]\npod.kind = "runpod" # c\npod.max_hours = 2\n\n[project]\n',
      'pod',
      ['A'],
    );
    assert.equal(
      dotted,
      '[targets]\npod.kind = "runpod" # c\npod.max_hours = 2\npod.gpu_types = ["A"]\n\n[project]\n',
    );
    assert.deepEqual(gpuTypesOf(dotted), ['A']);
    const quoted = setGpuTypes(
      '[targets."pod"]\nkind = "runpod"\nmax_hours = 1\n"gpu_types" = "auto"\n',
      'pod',
      ['A'],
    );
    assert.equal(quoted, '[targets."pod"]\nkind = "runpod"\nmax_hours = 1\n"gpu_types" = ["A"]\n');
  });

  it('leaves every other target alone, even one with the same keys', () => {
    const text =
      '[targets.a]\nkind = "runpod"\ngpu_types = ["X"]\nmax_hours = 1\n\n[targets.pod]\nkind = "runpod"\ngpu_types = ["Y"]\nmax_hours = 1\n';
    const edited = setGpuTypes(text, 'pod', ['Z']);
    assert.deepEqual(gpuTypesOf(edited, 'a'), ['X']);
    assert.deepEqual(gpuTypesOf(edited, 'pod'), ['Z']);
  });

  it('escapes IDs as TOML strings', () => {
    const edited = setGpuTypes('[targets.pod]\nkind = "runpod"\nmax_hours = 1\n', 'pod', [
      'say "hi" \\ x',
    ]);
    assert.deepEqual(gpuTypesOf(edited), ['say "hi" \\ x']);
  });

  it('works on the template', () => {
    const edited = setGpuTypes(configTemplate(), 'pod', 'auto');
    assert.equal(gpuTypesOf(edited), 'auto');
    assert.equal(
      edited.length,
      configTemplate().length - '["NVIDIA A40", "NVIDIA L40S"]'.length + '"auto"'.length,
    );
  });

  it('refuses what it cannot do safely', () => {
    const refuse = (fn: () => unknown, message: RegExp): void => {
      assert.throws(
        fn,
        (error: unknown) =>
          error instanceof ConfigEditError && message.test(error.message) && error.hint.length > 0,
      );
    };
    refuse(() => setGpuTypes('[targets.pod\n', 'pod', ['A']), /not valid TOML/);
    refuse(
      () => setGpuTypes('[targets.other]\nkind = "runpod"\n', 'pod', ['A']),
      /no \[targets\.pod\]/,
    );
    refuse(() => setGpuTypes('[targets.pod]\n', 'pod', []), /no GPU type was picked/);
    refuse(() => setGpuTypes('[targets.pod]\n', 'pod', ['auto']), /is not a GPU type ID/);
    refuse(() => setGpuTypes('[targets.pod]\n', 'pod', ['a\nb']), /is not a GPU type ID/);
    refuse(() => setGpuTypes('[targets.pod]\n', 'Pod', ['A']), /not a target name/);
  });
});

describe('config: TomlPositions', () => {
  it('finds keys, values, array items and tables, with 1-based lines and columns', () => {
    const text = `a = 1
[t.u]  # c
"q.k" = 'v'
arr = [
  1, # one
  { x = "]" },
]
ml = """
x = 1
"""
after = 2
[[list]]
n = 1
[[list]]
n = 2
`;
    const positions = new TomlPositions(text);
    const spot = (path: string[], want: 'key' | 'value' = 'key'): [number, number] => {
      const p = positions.locate(path, want);
      return [p.line, p.column];
    };
    assert.deepEqual(spot(['a'], 'value'), [1, 5]);
    assert.deepEqual(spot(['t', 'u']), [2, 1]);
    assert.deepEqual(spot(['t', 'u', 'q.k']), [3, 1]);
    assert.deepEqual(spot(['t', 'u', 'q.k'], 'value'), [3, 9]);
    assert.deepEqual(spot(['t', 'u', 'arr', '0']), [5, 3]);
    assert.deepEqual(spot(['t', 'u', 'arr', '1', 'x'], 'value'), [6, 9]);
    assert.deepEqual(spot(['t', 'u', 'after']), [11, 1]); // not fooled by `x = 1` inside the multi-line string
    assert.equal(positions.key(['t', 'u', 'x']), undefined);
    assert.deepEqual(spot(['list', '1', 'n'], 'value'), [15, 5]);
    assert.deepEqual(spot(['missing', 'deep']), [1, 1]);
    assert.deepEqual(spot(['t', 'u', 'missing']), [2, 1]);
  });
});
