/**
 * overbrainer.toml parsing: errors carry file, line, column and a hint (the fixture: test/helpers/configFixture.ts).
 */
import assert from 'node:assert/strict';
import { formatConfigError, type ConfigError } from '../../src/core/config';
import { BASE, ok, errors, one, pod, at } from '../helpers/configFixture';

describe('config: errors carry file, line, column and a hint', () => {
  const cases: [string, string, number, number, RegExp, RegExp][] = [
    [
      'the old gpu_type key',
      'gpu_type = "NVIDIA A40"',
      9,
      1,
      /gpu_type is the old/,
      /did you mean gpu_types = \["NVIDIA A40"\]/i,
    ],
    [
      'a typo',
      'max_hour = 3',
      9,
      1,
      /targets\.pod\.max_hour is not a key/,
      /Did you mean max_hours\?/,
    ],
    [
      'min_vram_gb with a list',
      'min_vram_gb = 48',
      9,
      1,
      /min_vram_gb only applies to gpu_types = "auto"/,
      /gpu_types = "auto"/,
    ],
    [
      'max_price_per_hour with a list',
      'max_price_per_hour = 1',
      9,
      1,
      /max_price_per_hour only applies/,
      /Remove max_price_per_hour/,
    ],
    [
      'gpu_count 0',
      'gpu_count = 0',
      9,
      13,
      /gpu_count must be a whole number, at least 1, not 0/,
      /gpu_count = 1/,
    ],
    [
      'gpu_count 1.5',
      'gpu_count = 1.5',
      9,
      13,
      /gpu_count must be a whole number/,
      /gpu_count = 1/,
    ],
    [
      'an image with spaces',
      'image = "my image"',
      9,
      9,
      /image must be a container image reference/,
      /leave it out for the pinned/,
    ],
    ['an empty image', 'image = ""', 9, 9, /image must be/, /image = /],
    [
      'a relative venv',
      'venv = "venv"',
      9,
      8,
      /venv must be an absolute path/,
      /venv = "\/workspace\/axolotl-venv"/,
    ],
    [
      'a small disk',
      'container_disk_gb = 19',
      9,
      21,
      /at least 20, not 19/,
      /container_disk_gb = 50/,
    ],
    [
      'max_cost_usd 0',
      'max_cost_usd = 0',
      9,
      16,
      /max_cost_usd must be a number of USD greater than 0/,
      /max_cost_usd = 20/,
    ],
    ['a negative max_cost_usd', 'max_cost_usd = -5', 9, 16, /not -5/, /no cost cap/],
    [
      'a short boot grace',
      'boot_grace_minutes = 4',
      9,
      22,
      /at least 5, not 4/,
      /boot_grace_minutes = 30/,
    ],
    [
      'no retrieve grace',
      'retrieve_grace_minutes = 0',
      9,
      26,
      /at least 1, not 0/,
      /retrieve_grace_minutes = 60/,
    ],
    [
      'no retrieve limit',
      'max_retrieve_gb = 0',
      9,
      19,
      /max_retrieve_gb must be a number of GB greater than 0, not 0/,
      /max_retrieve_gb = 200/,
    ],
    [
      'a retrieve limit as text',
      'max_retrieve_gb = "lots"',
      9,
      19,
      /max_retrieve_gb must be a number of GB greater than 0/,
      /leave it out for 200/,
    ],
    [
      'max_volume_gb without a volume',
      'max_volume_gb = 100',
      9,
      1,
      /max_volume_gb only applies with network_volume_id/,
      /add network_volume_id/,
    ],
    [
      'a volume without a data center',
      'network_volume_id = "vol1"',
      9,
      1,
      /needs exactly one data_center_ids entry.*there is none/,
      /data_center_ids = \["EU-RO-1"\]/,
    ],
    [
      'a volume with two data centers',
      'network_volume_id = "vol1"\ndata_center_ids = ["A", "B"]',
      9,
      1,
      /there are 2/,
      /data_center_ids/,
    ],
    [
      'a volume with auto data centers',
      'network_volume_id = "vol1"\ndata_center_ids = "auto"',
      10,
      19,
      /cannot go with a network volume/,
      /data_center_ids = \[/,
    ],
    [
      'a bad data center',
      'data_center_ids = ["EU RO"]',
      9,
      20,
      /data_center_ids item 1 must be a Runpod data center ID/,
      /data_center_ids = \["EU-RO-1"\]/,
    ],
    [
      'a bad volume ID',
      'network_volume_id = "a/b"\ndata_center_ids = ["X"]',
      9,
      21,
      /network_volume_id must be a Runpod network volume ID/,
      /as Runpod shows it/,
    ],
    [
      'a bad ssh_client',
      'ssh_client = "putty"',
      9,
      14,
      /ssh_client must be "openssh" or "builtin"/,
      /ssh_client = "openssh"/,
    ],
    ['an env-only host', 'host = "x"', 9, 1, /environment only/, /OVERBRAINER_TARGETS__POD__HOST/],
  ];
  for (const [name, line, l, c, message, hint] of cases) {
    it(name, () => at(one(BASE + line), l, c, message, hint));
  }

  const maxHours: [string, RegExp][] = [
    ['0', /not 0/],
    ['721', /not 721/],
    ['nan', /not nan/],
    ['inf', /not Infinity/],
    ['"abc"', /not "abc"/],
    ['"NaN"', /not "NaN"/],
    ['true', /not true/],
  ];
  for (const [value, got] of maxHours) {
    it(`max_hours = ${value}`, () => {
      const error = one(BASE.replace('max_hours = 6', `max_hours = ${value}`));
      at(
        error,
        8,
        13,
        /max_hours must be a number of hours greater than 0 and at most 720/,
        /max_hours = 6/,
      );
      assert.match(error.message, got);
    });
  }

  it('max_hours = 720 is the largest accepted', () => {
    assert.equal(pod(ok(BASE.replace('max_hours = 6', 'max_hours = 720'))).maxHours, 720);
  });

  it('a missing max_hours, at the target table', () => {
    at(
      one(BASE.replace('max_hours = 6\n', '')),
      5,
      1,
      /targets\.pod needs max_hours/,
      /Add max_hours = 6/,
    );
  });

  it('missing gpu_types', () => {
    at(
      one(BASE.replace('gpu_types = ["NVIDIA A40"]\n', '')),
      5,
      1,
      /needs gpu_types/,
      /gpu_types = "auto"/,
    );
  });

  const gpuTypes: [string, number, RegExp, RegExp][] = [
    ['[]', 13, /gpu_types must not be empty/, /gpu_types = \["NVIDIA A40"/],
    ['["auto"]', 14, /\["auto"\] is a list/, /gpu_types = "auto" without brackets/],
    ['"Auto"', 13, /list of strings or exactly "auto"/, /gpu_types = "auto" \(lower case/],
    [
      '"NVIDIA A40"',
      13,
      /list of strings or exactly "auto", not "NVIDIA A40"/,
      /gpu_types = \["NVIDIA A40"\]/,
    ],
    ['["A", 1]', 19, /gpu_types item 2 must be a Runpod GPU type ID, not 1/, /gpu_types = /],
    ['7', 13, /not 7/, /gpu_types = /],
  ];
  for (const [value, column, message, hint] of gpuTypes) {
    it(`gpu_types = ${value}`, () => {
      at(
        one(BASE.replace('gpu_types = ["NVIDIA A40"]', `gpu_types = ${value}`)),
        7,
        column,
        message,
        hint,
      );
    });
  }

  it('min_vram_gb and max_price_per_hour are checked with auto', () => {
    const found = errors(
      BASE.replace('["NVIDIA A40"]', '"auto"') + 'min_vram_gb = 0\nmax_price_per_hour = 0\n',
    );
    assert.equal(found.length, 2);
    at(
      found[0] as ConfigError,
      9,
      15,
      /min_vram_gb must be a whole number of GB, at least 1/,
      /min_vram_gb = 48/,
    );
    at(
      found[1] as ConfigError,
      10,
      22,
      /max_price_per_hour must be a number of USD greater than 0/,
      /max_price_per_hour = 1\.0/,
    );
  });

  it('a target without kind, or with an unknown kind', () => {
    at(
      one(BASE.replace('kind = "runpod"\n', '')),
      5,
      1,
      /targets\.pod needs kind/,
      /kind = "runpod"/,
    );
    at(
      one(BASE.replace('kind = "runpod"', 'kind = "docker"')),
      6,
      8,
      /kind must be "runpod", "ssh" or "local", not "docker"/,
      /kind = "local"/,
    );
  });

  it('a target name that is not lower case', () => {
    at(
      one(BASE.replace('[targets.pod]', '[targets.My-Pod]')),
      5,
      1,
      /target name "My-Pod" is not allowed/,
      /\[targets\.my_pod\]/,
    );
  });

  it('__proto__ is refused as a target name', () => {
    at(
      one(BASE.replace('[targets.pod]', '[targets.__proto__]')),
      5,
      1,
      /is not allowed/,
      /Rename it/,
    );
  });

  it('local targets refuse runpod keys and containers', () => {
    const found = errors(
      '[targets.here]\nkind = "local"\nmax_hours = 3\nimage = "x"\nruntime = "docker"\nvenv = "rel"\n',
    );
    assert.equal(found.length, 4);
    at(
      found[0] as ConfigError,
      3,
      1,
      /max_hours only applies to kind = "runpod"/,
      /Remove max_hours/,
    );
    at(
      found[1] as ConfigError,
      4,
      1,
      /not read: a local target runs its job on this machine/,
      /Remove image/,
    );
    at(found[2] as ConfigError, 5, 11, /runtime must be "native"/, /runtime = "native"/);
    at(found[3] as ConfigError, 6, 8, /venv must be an absolute path/, /venv = /);
  });

  it('training errors', () => {
    const trainer = (lines: string): ConfigError[] =>
      errors(`[training]\n${lines}\n\n[targets.pod]\nkind = "local"\n`);
    at(
      one('[training]\ntarget = "pod"\n\n[targets.pod]\nkind = "local"\n'),
      1,
      1,
      /training needs trainer/,
      /trainer = "axolotl"/,
    );
    const [unknownTrainer] = trainer('trainer = "pytorch"');
    at(
      unknownTrainer as ConfigError,
      2,
      11,
      /trainer must be "axolotl" or "command", not "pytorch"/,
      /trainer = "command"/,
    );
    const [noConfig] = trainer('trainer = "axolotl"');
    at(
      noConfig as ConfigError,
      2,
      11,
      /needs base_model \(Overbrainer generates the Axolotl config\) or config/,
      /base_model = "Qwen\/Qwen2.5-0.5B-Instruct".*config = "axolotl.yaml"/,
    );
    const [noCommand] = trainer('trainer = "command"');
    at(noCommand as ConfigError, 2, 11, /needs command/, /command = "python train.py"/);
    const [stray] = trainer('trainer = "axolotl"\nconfig = "a.yaml"\ncommand = "x"');
    at(
      stray as ConfigError,
      4,
      1,
      /training.command only applies to trainer = "command"/,
      /Remove command/,
    );
    const [strayConfig] = trainer('trainer = "command"\ncommand = "x"\nconfig = "a.yaml"');
    at(
      strayConfig as ConfigError,
      4,
      1,
      /training.config only applies to trainer = "axolotl"/,
      /Remove config/,
    );
    for (const bad of ['"../a.yaml"', '"/etc/a.yaml"', '"a.txt"', '"sub\\\\a.yaml"']) {
      const [error] = trainer(`trainer = "axolotl"\nconfig = ${bad}`);
      at(
        error as ConfigError,
        3,
        10,
        /config must be the path of a \.yaml file inside the workspace/,
        /relative to the workspace/,
      );
    }
    const [emptyCommand] = trainer('trainer = "command"\ncommand = "  "');
    at(emptyCommand as ConfigError, 3, 11, /command must be a non-empty shell command/, /sh -c/);
    const [moved] = trainer('trainer = "command"\ncommand = "x"\nepochs = 3');
    at(
      moved as ConfigError,
      4,
      1,
      /training.epochs only applies to trainer = "axolotl"/,
      /generate the Axolotl config from it/,
    );
    const [target] = trainer('trainer = "command"\ncommand = "x"\ntarget = "gpu"');
    at(
      target as ConfigError,
      4,
      10,
      /names "gpu", but there is no \[targets\.gpu\]/,
      /Write target = "pod"/,
    );
  });

  it('upload and artifacts must stay inside', () => {
    const found = errors(`[training]
trainer = "command"
command = "x"
upload = ["ok.py", "../secret", "/etc/passwd", "a/../../b", "", "~/x", "."]
artifacts = []
`);
    assert.deepEqual(
      found.map((e) => [e.line, e.column, e.key]),
      [
        [4, 20, 'training.upload[1]'],
        [4, 33, 'training.upload[2]'],
        [4, 48, 'training.upload[3]'],
        [4, 61, 'training.upload[4]'],
        [4, 65, 'training.upload[5]'],
        [4, 72, 'training.upload[6]'],
        [5, 13, 'training.artifacts'],
      ],
    );
    assert.match(found[0]?.message ?? '', /upload item 2 leaves the workspace/);
    assert.match(found[1]?.message ?? '', /upload item 3 is absolute/);
    assert.match(found[0]?.hint ?? '', /relative to the workspace that stays inside it/);
    assert.match(found[6]?.message ?? '', /artifacts must not be empty/);
  });

  it('unknown sections, and env-only keys without quoting their value', () => {
    const found = errors(`[trainig]
x = 1

[runpod]
api_key = "rp_SECRET_VALUE_123"
base_url = "https://example.com"

hf_token_x = 1
`);
    assert.equal(found.length, 4);
    at(found[0] as ConfigError, 1, 1, /trainig is not a section/, /Did you mean \[training\]/);
    at(
      found[1] as ConfigError,
      5,
      1,
      /runpod\.api_key is read from the environment only/,
      /set OVERBRAINER_RUNPOD__API_KEY/,
    );
    at(
      found[2] as ConfigError,
      6,
      1,
      /runpod\.base_url is read from the environment only/,
      /OVERBRAINER_RUNPOD__BASE_URL/,
    );
    at(
      found[3] as ConfigError,
      8,
      1,
      /runpod\.hf_token_x is not a setting/,
      /OVERBRAINER_RUNPOD__API_KEY/,
    );
    for (const error of found) assert.doesNotMatch(formatConfigError(error), /SECRET/);
  });

  it('a TOML syntax error, by smol-toml position, without quoting the file', () => {
    const error = one('[training]\ntrainer = "command"\ncommand = \nsecret = "MARKER"\n');
    at(error, 3, 11, /not valid TOML: invalid value/, /Fix the syntax/);
    assert.doesNotMatch(formatConfigError(error), /MARKER/);
  });

  it('collects every error, sorted by place', () => {
    const found = errors(`[training]
trainer = "axolotl"
epochs = 3

[targets.pod]
kind = "runpod"
gpu_type = "A"
max_hours = 0
container_disk_gb = 1
`);
    assert.deepEqual(
      found.map((e) => e.line),
      [3, 5, 7, 8, 9],
    );
  });

  it('points into inline tables and dotted keys', () => {
    at(
      one('[targets]\npod = { kind = "runpod", gpu_types = ["A"], max_hours = -1 }\n'),
      2,
      57,
      /max_hours must be/,
      /max_hours = 6/,
    );
    at(
      one('[targets]\npod.kind = "runpod"\npod.gpu_types = ["A"]\npod.max_hours = 999\n'),
      4,
      17,
      /not 999/,
      /max_hours = 6/,
    );
    at(
      one('targets.pod.kind = "runpod"\ntargets.pod.gpu_types = ["A"]\n'),
      1,
      1,
      /needs max_hours/,
      /max_hours = 6/,
    );
  });

  it('formats an error as file:line:column: message. hint', () => {
    const error = one(BASE + 'gpu_count = 0');
    assert.equal(
      formatConfigError(error),
      '/w/overbrainer.toml:9:13: targets.pod.gpu_count must be a whole number, at least 1, not 0. Write gpu_count = 1, or leave it out for 1.',
    );
  });
});
