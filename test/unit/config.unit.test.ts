import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import {
  configTemplate,
  DEFAULT_ARTIFACTS,
  DEFAULT_RUNPOD_BASE_URL,
  DEFAULT_RUNPOD_IMAGE,
  formatConfigError,
  KNOWN_KEYS,
  loadConfig,
  parseConfig,
  runpodSettings,
  workdirFor,
  type ConfigError,
  type Env,
  type OverbrainerConfig,
  type RunpodTargetConfig,
} from '../../src/core/config';

const FILE = '/w/overbrainer.toml';

/** Lines 1-3 training, 5-8 a runpod target; appended lines start at 9. */
const BASE = `[training]
trainer = "command"
command = "python train.py"

[targets.pod]
kind = "runpod"
gpu_types = ["NVIDIA A40"]
max_hours = 6
`;

function parse(text: string, env: Env = {}): ReturnType<typeof parseConfig> {
  return parseConfig(text, { file: FILE, env, workspaceName: 'My Workspace' });
}

function ok(text: string, env: Env = {}): OverbrainerConfig {
  const result = parse(text, env);
  if (!result.ok) assert.fail(result.errors.map(formatConfigError).join('\n'));
  return result.config;
}

function errors(text: string, env: Env = {}): ConfigError[] {
  const result = parse(text, env);
  if (result.ok) assert.fail('expected errors, the config was accepted');
  return result.errors;
}

/** The only error of `text`. */
function one(text: string, env: Env = {}): ConfigError {
  const found = errors(text, env);
  assert.equal(found.length, 1, found.map(formatConfigError).join('\n'));
  return found[0] as ConfigError;
}

function pod(config: OverbrainerConfig, name = 'pod'): RunpodTargetConfig {
  const target = config.targets[name];
  assert.ok(target && target.kind === 'runpod', `no runpod target ${name}`);
  return target;
}

/** Asserts where `error` is and what it says. */
function at(error: ConfigError, line: number, column: number, message: RegExp, hint: RegExp): void {
  assert.equal(error.file, FILE, formatConfigError(error));
  assert.deepEqual([error.line, error.column], [line, column], formatConfigError(error));
  assert.match(error.message, message);
  assert.match(error.hint, hint);
}

describe('config: defaults', () => {
  it('gives every runpod key its default', () => {
    const config = ok(BASE);
    assert.equal(config.projectName, 'My Workspace');
    assert.deepEqual(pod(config), {
      kind: 'runpod',
      name: 'pod',
      gpuTypes: ['NVIDIA A40'],
      minVramGb: null,
      maxPricePerHourUsd: null,
      gpuCount: 1,
      image: DEFAULT_RUNPOD_IMAGE,
      venv: '/workspace/axolotl-venv',
      containerDiskGb: 50,
      maxHours: 6,
      maxCostUsd: null,
      maxRecoveries: 2,
      bootGraceS: 30 * 60,
      retrieveGraceS: 60 * 60,
      dataCenterIds: [],
      networkVolumeId: null,
      maxVolumeGb: null,
      sshClient: 'openssh',
    });
    assert.deepEqual(config.training, {
      target: null,
      trainer: { kind: 'command', command: 'python train.py' },
      upload: [],
      artifacts: [...DEFAULT_ARTIFACTS],
    });
  });

  it('pins the default image by digest', () => {
    assert.match(
      DEFAULT_RUNPOD_IMAGE,
      /^axolotlai\/axolotl-cloud-term:0\.19\.0-py3\.12-cu130-2\.12\.1@sha256:f7b94da8[0-9a-f]{56}$/,
    );
  });

  it('reads every runpod key, with units in the typed names', () => {
    const config = ok(`[project]
name = "Tiny Llama"

[training]
target = "pod"
trainer = "axolotl"
config = "./cfg//axolotl.yaml"
upload = ["data/", "./train.py"]
artifacts = ["output/", "extra/file.txt"]

[targets.pod]
kind = "runpod"
gpu_types = "auto"
min_vram_gb = 48
max_price_per_hour = 1.5
gpu_count = 2
image = "repo/image:tag"
venv = "/opt/venv"
container_disk_gb = 80
max_hours = 2.5
max_cost_usd = 20
boot_grace_minutes = 10
retrieve_grace_minutes = 5
data_center_ids = ["EU-RO-1"]
network_volume_id = "vol123"
max_volume_gb = 200
ssh_client = "builtin"

[targets.here]
kind = "local"
venv = "/home/me/venv"
runtime = "native"
`);
    assert.equal(config.projectName, 'Tiny Llama');
    assert.deepEqual(config.training, {
      target: 'pod',
      trainer: { kind: 'axolotl', configPath: 'cfg/axolotl.yaml' },
      upload: ['data', 'train.py'],
      artifacts: ['output/', 'extra/file.txt'],
    });
    const target = pod(config);
    assert.equal(target.gpuTypes, 'auto');
    assert.equal(target.minVramGb, 48);
    assert.equal(target.maxPricePerHourUsd, 1.5);
    assert.equal(target.gpuCount, 2);
    assert.equal(target.image, 'repo/image:tag');
    assert.equal(target.venv, '/opt/venv');
    assert.equal(target.containerDiskGb, 80);
    assert.equal(target.maxHours, 2.5);
    assert.equal(target.maxCostUsd, 20);
    assert.equal(target.bootGraceS, 600);
    assert.equal(target.retrieveGraceS, 300);
    assert.deepEqual(target.dataCenterIds, ['EU-RO-1']);
    assert.equal(target.networkVolumeId, 'vol123');
    assert.equal(target.maxVolumeGb, 200);
    assert.equal(target.sshClient, 'builtin');
    assert.deepEqual(config.targets.here, { kind: 'local', name: 'here', venv: '/home/me/venv' });
    assert.equal(workdirFor(target), '/workspace/data/overbrainer');
    assert.equal(workdirFor({ ...target, networkVolumeId: null }), '/workspace/overbrainer');
  });

  it('accepts numbers written as strings', () => {
    const target = pod(ok(BASE.replace('max_hours = 6', 'max_hours = " 2.5 "\ngpu_count = "2"')));
    assert.equal(target.maxHours, 2.5);
    assert.equal(target.gpuCount, 2);
  });

  it('has no training when [training] is absent, and a local target with no venv', () => {
    const config = ok('[targets.here]\nkind = "local"\n');
    assert.equal(config.training, null);
    assert.deepEqual(config.targets.here, { kind: 'local', name: 'here', venv: null });
  });

  it('keeps target names off Object.prototype', () => {
    const config = ok(BASE);
    assert.equal(Object.getPrototypeOf(config.targets), null);
    assert.equal(config.targets.toString, undefined);
  });
});

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

  it('a target without kind, with an unknown kind, or of kind ssh', () => {
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
      /kind must be "runpod" or "local", not "docker"/,
      /kind = "local"/,
    );
    at(
      one(BASE.replace('kind = "runpod"', 'kind = "ssh"')),
      6,
      8,
      /ssh" targets are not supported/,
      /kind = "runpod"/,
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
    at(noConfig as ConfigError, 2, 11, /needs config/, /config = "axolotl.yaml"/);
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
    at(moved as ConfigError, 4, 1, /training.epochs is not read/, /Set epochs in the YAML/);
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
      [2, 3, 5, 7, 8, 9],
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

describe('config: environment overrides', () => {
  it('env > file > defaults, with __ between levels', () => {
    const config = ok(BASE, {
      OVERBRAINER_TARGETS__POD__MAX_HOURS: '2',
      OVERBRAINER_TARGETS__POD__GPU_TYPES: 'NVIDIA L40S, NVIDIA A40',
      OVERBRAINER_TARGETS__POD__CONTAINER_DISK_GB: '80',
      OVERBRAINER_TRAINING__TARGET: 'pod',
      OVERBRAINER_PROJECT__NAME: 'from env',
      OVERBRAINER_TRAINING__UPLOAD: 'a.py,data/',
    });
    const target = pod(config);
    assert.equal(target.maxHours, 2);
    assert.deepEqual(target.gpuTypes, ['NVIDIA L40S', 'NVIDIA A40']);
    assert.equal(target.containerDiskGb, 80);
    assert.equal(target.bootGraceS, 1800); // default untouched
    assert.equal(config.training?.target, 'pod');
    assert.deepEqual(config.training?.upload, ['a.py', 'data']);
    assert.equal(config.projectName, 'from env');
  });

  it('auto from env is only the exact lower-case word', () => {
    assert.equal(pod(ok(BASE, { OVERBRAINER_TARGETS__POD__GPU_TYPES: ' auto ' })).gpuTypes, 'auto');
    assert.deepEqual(pod(ok(BASE, { OVERBRAINER_TARGETS__POD__GPU_TYPES: 'AUTO' })).gpuTypes, [
      'AUTO',
    ]);
    assert.equal(
      pod(ok(BASE, { OVERBRAINER_TARGETS__POD__DATA_CENTER_IDS: 'auto' })).dataCenterIds,
      'auto',
    );
  });

  it('an env value error names the variable', () => {
    const error = one(BASE, { OVERBRAINER_TARGETS__POD__MAX_HOURS: 'lots' });
    assert.equal(error.envVar, 'OVERBRAINER_TARGETS__POD__MAX_HOURS');
    assert.equal(error.file, 'env:OVERBRAINER_TARGETS__POD__MAX_HOURS');
    assert.deepEqual([error.line, error.column], [1, 1]);
    assert.match(error.message, /max_hours must be a number of hours.*not "lots"/);
    assert.match(formatConfigError(error), /^OVERBRAINER_TARGETS__POD__MAX_HOURS: /);
  });

  it('an item error of an env list names the variable', () => {
    const error = one(BASE, { OVERBRAINER_TARGETS__POD__GPU_TYPES: 'A,,B' });
    assert.equal(error.envVar, 'OVERBRAINER_TARGETS__POD__GPU_TYPES');
    assert.match(error.message, /gpu_types item 2/);
  });

  it('a whole target from env; its missing keys point at its variable', () => {
    const config = ok(BASE, {
      OVERBRAINER_TARGETS__SPARE__KIND: 'runpod',
      OVERBRAINER_TARGETS__SPARE__GPU_TYPES: 'auto',
      OVERBRAINER_TARGETS__SPARE__MAX_HOURS: '1',
    });
    assert.equal(pod(config, 'spare').gpuTypes, 'auto');
    const error = one(BASE, {
      OVERBRAINER_TARGETS__SPARE__KIND: 'runpod',
      OVERBRAINER_TARGETS__SPARE__MAX_HOURS: '1',
    });
    assert.match(error.message, /targets\.spare needs gpu_types/);
    assert.ok(error.envVar?.startsWith('OVERBRAINER_TARGETS__SPARE__'));
  });

  it('ignores other OVERBRAINER_ variables and empty values; refuses unknown runpod ones and section-only names', () => {
    ok(BASE, {
      OVERBRAINER_LOG: 'debug',
      OVERBRAINER_HF_TOKEN: 'x',
      OVERBRAINER_ETC_DIR: '/tmp',
      OVERBRAINER_RUNPOD__API_KEY: 'k',
      OVERBRAINER_RUNPOD__BASE_URL: 'https://x',
      OVERBRAINER_TARGETS__POD__MAX_HOURS: '',
    });
    const unknown = one(BASE, { OVERBRAINER_RUNPOD__API_TOKEN: 'x' });
    assert.equal(unknown.envVar, 'OVERBRAINER_RUNPOD__API_TOKEN');
    assert.match(unknown.hint, /OVERBRAINER_RUNPOD__API_KEY/);
    const bare = one(BASE, { OVERBRAINER_TARGETS__POD: 'x' });
    assert.match(bare.message, /does not name a key/);
    assert.match(bare.hint, /OVERBRAINER_TARGETS__POD__MAX_HOURS=2/);
  });

  it('an unknown key from env is refused at its variable', () => {
    const error = one(BASE, { OVERBRAINER_TARGETS__POD__GPU_TYPE: 'A' });
    assert.equal(error.envVar, 'OVERBRAINER_TARGETS__POD__GPU_TYPE');
    assert.match(error.hint, /gpu_types = \["A"\]/);
  });

  it('OVERBRAINER_SSH_CLIENT overrides every runpod target', () => {
    assert.equal(pod(ok(BASE, { OVERBRAINER_SSH_CLIENT: 'builtin' })).sshClient, 'builtin');
    const error = one(BASE, { OVERBRAINER_SSH_CLIENT: 'putty' });
    assert.equal(error.envVar, 'OVERBRAINER_SSH_CLIENT');
  });

  it('an env key inside a value that is not a table', () => {
    const [file, error] = errors('targets = 3\n', { OVERBRAINER_TARGETS__POD__KIND: 'local' }) as [
      ConfigError,
      ConfigError,
    ];
    at(file, 1, 1, /targets must be a table, not 3/, /\[targets\] section/);
    assert.equal(error.envVar, 'OVERBRAINER_TARGETS__POD__KIND');
    assert.match(error.message, /inside targets, which is not a table/);
  });
});

describe('config: runpodSettings', () => {
  it('defaults: no key, the public API', () => {
    assert.deepEqual(runpodSettings({}), {
      ok: true,
      settings: { apiKey: null, baseUrl: DEFAULT_RUNPOD_BASE_URL },
    });
  });

  it('takes the key trimmed and an https or loopback http base URL', () => {
    for (const [url, expected] of [
      ['https://api.example.com/v2/', 'https://api.example.com/v2'],
      ['http://127.0.0.1:4321/v2', 'http://127.0.0.1:4321/v2'],
      ['http://localhost:80/v2', 'http://localhost/v2'],
      ['http://[::1]:9/v2', 'http://[::1]:9/v2'],
    ] as const) {
      const result = runpodSettings({
        OVERBRAINER_RUNPOD__API_KEY: ' rpa_KEY \n',
        OVERBRAINER_RUNPOD__BASE_URL: url,
      });
      assert.deepEqual(
        result,
        { ok: true, settings: { apiKey: 'rpa_KEY', baseUrl: expected } },
        url,
      );
    }
  });

  it('refuses plain http elsewhere, other schemes, credentials, and non-URLs', () => {
    for (const url of [
      'http://api.runpod.io/v2',
      'ftp://x/',
      'not a url',
      'https://u:p@x/v2',
      'https://x/v2?a=1',
      'http://127.0.0.1.evil.com/',
      'https://x/',
      'http://127.0.0.1:4321',
      'http://127.0.0.1:4321/v1',
    ]) {
      const result = runpodSettings({ OVERBRAINER_RUNPOD__BASE_URL: url });
      assert.equal(result.ok, false, url);
      if (!result.ok) {
        assert.equal(result.errors[0]?.envVar, 'OVERBRAINER_RUNPOD__BASE_URL');
        assert.match(result.errors[0]?.hint ?? '', /https:\/\//);
      }
    }
  });

  it('says why plain http off loopback is refused, naming the variable once', () => {
    const result = runpodSettings({ OVERBRAINER_RUNPOD__BASE_URL: 'http://10.0.0.1/v2' });
    assert.equal(result.ok, false);
    if (!result.ok) {
      const text = formatConfigError(result.errors[0]!);
      assert.match(text, /^OVERBRAINER_RUNPOD__BASE_URL uses plain http .* API key unencrypted\. /);
      assert.equal(text.split('OVERBRAINER_RUNPOD__BASE_URL').length - 1, 2, text); // the error and the hint
    }
  });

  it('never quotes the key in an error', () => {
    for (const key of ['vault:secret/runpod#key', 'rpa_SECRET with space']) {
      const result = runpodSettings({ OVERBRAINER_RUNPOD__API_KEY: key });
      assert.equal(result.ok, false);
      if (!result.ok) {
        const text = result.errors.map(formatConfigError).join('\n');
        assert.doesNotMatch(text, /SECRET|secret\/runpod/);
        assert.match(text, /OVERBRAINER_RUNPOD__API_KEY/);
      }
    }
  });
});

describe('config: template', () => {
  it('parses and validates as written', () => {
    const config = ok(configTemplate());
    assert.equal(config.training?.target, 'pod');
    assert.deepEqual(pod(config).gpuTypes, ['NVIDIA A40', 'NVIDIA L40S']);
  });

  it('explains every key the parser knows, and the commented keys are valid when uncommented', () => {
    const text = configTemplate();
    for (const [section, keys] of Object.entries(KNOWN_KEYS)) {
      for (const key of keys) {
        assert.match(
          text,
          new RegExp(`^#? ?${key} = `, 'm'),
          `${section}.${key} is not in the template`,
        );
      }
    }
    // Uncommenting a default must keep the file valid (auto keys aside, which need gpu_types = "auto").
    const runpodPart = text.slice(0, text.indexOf('# [targets.here]'));
    const uncommented = runpodPart
      .split('\n')
      .map((line) =>
        /^# (name|artifacts|gpu_count|max_cost_usd|boot_grace_minutes|retrieve_grace_minutes|image|venv|container_disk_gb|ssh_client) = /.test(
          line,
        )
          ? line.slice(2)
          : line,
      )
      .join('\n');
    const target = pod(ok(uncommented));
    assert.equal(target.image, DEFAULT_RUNPOD_IMAGE);
    assert.equal(target.maxCostUsd, 20);
  });
});

describe('config: loadConfig', () => {
  let dir: string;
  beforeEach(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ob-config-'));
  });
  afterEach(() => fs.rmSync(dir, { recursive: true, force: true }));

  it('says how to create a missing overbrainer.toml', () => {
    const result = loadConfig(dir, {});
    assert.equal(result.ok, false);
    if (!result.ok) {
      assert.equal(result.errors[0]?.file, path.join(dir, 'overbrainer.toml'));
      assert.match(result.errors[0]?.message ?? '', /there is no overbrainer\.toml/);
      assert.match(result.errors[0]?.hint ?? '', /Create overbrainer\.toml/);
    }
  });

  it('reads .env under the process env, and names the workspace folder as the project', () => {
    fs.writeFileSync(path.join(dir, 'overbrainer.toml'), BASE);
    fs.writeFileSync(
      path.join(dir, '.env'),
      '# comment\nexport OVERBRAINER_TARGETS__POD__MAX_HOURS="3"\nOVERBRAINER_TARGETS__POD__GPU_COUNT=2 # two\nOTHER=x\nOVERBRAINER_RUNPOD__API_KEY=\'from-file\'\n',
    );
    const result = loadConfig(dir, { OVERBRAINER_TARGETS__POD__GPU_COUNT: '4' });
    if (!result.ok) assert.fail(result.errors.map(formatConfigError).join('\n'));
    assert.equal(pod(result.config).maxHours, 3);
    assert.equal(pod(result.config).gpuCount, 4);
    assert.equal(result.config.projectName, path.basename(dir));
    assert.equal(result.env.OTHER, undefined);
    const settings = runpodSettings(result.env);
    assert.ok(settings.ok && settings.settings.apiKey === 'from-file');
  });

  it('checks that training.config and upload entries exist inside the workspace', () => {
    const outside = fs.mkdtempSync(path.join(os.tmpdir(), 'ob-outside-'));
    try {
      fs.writeFileSync(path.join(outside, 'secret.txt'), 'x');
      fs.symlinkSync(outside, path.join(dir, 'link'));
      fs.mkdirSync(path.join(dir, 'data'));
      fs.writeFileSync(
        path.join(dir, 'overbrainer.toml'),
        '[training]\ntrainer = "axolotl"\nconfig = "axolotl.yaml"\nupload = ["data/", "missing.py", "link/secret.txt"]\n',
      );
      const result = loadConfig(dir, {});
      assert.equal(result.ok, false);
      if (result.ok) return;
      assert.deepEqual(
        result.errors.map((e) => [e.line, e.column, e.message]),
        [
          [3, 10, 'training.config names axolotl.yaml, which does not exist'],
          [4, 20, 'training.upload names missing.py, which does not exist'],
          [
            4,
            34,
            'training.upload names link/secret.txt, which leads outside the workspace (through a link)',
          ],
        ],
      );
      fs.writeFileSync(path.join(dir, 'axolotl.yaml'), 'base_model: x\n');
      fs.writeFileSync(
        path.join(dir, 'overbrainer.toml'),
        '[training]\ntrainer = "axolotl"\nconfig = "axolotl.yaml"\nupload = ["data/"]\n',
      );
      assert.equal(loadConfig(dir, {}).ok, true);
    } finally {
      fs.rmSync(outside, { recursive: true, force: true });
    }
  });

  it('refuses a file that is not UTF-8 at its first bad byte, and changes nothing', () => {
    // Latin-1 "é" (0xE9) in a comment on line 3, column 6: a silent U+FFFD would hide it.
    const bytes = Buffer.concat([
      Buffer.from('[training]\ntrainer = "command"\n# caf'),
      Buffer.from([0xe9]),
      Buffer.from(' ok\ncommand = "python train.py"\n'),
    ]);
    fs.writeFileSync(path.join(dir, 'overbrainer.toml'), bytes);
    const result = loadConfig(dir, {});
    assert.equal(result.ok, false);
    if (result.ok) return;
    assert.equal(result.errors.length, 1);
    const [error] = result.errors;
    assert.deepEqual([error?.line, error?.column], [3, 6]);
    assert.match(error?.message ?? '', /not UTF-8.*byte 0xE9 at line 3, column 6/);
    assert.match(error?.hint ?? '', /Save overbrainer\.toml as UTF-8/);
    assert.deepEqual(fs.readFileSync(path.join(dir, 'overbrainer.toml')), bytes);
    // A valid two-byte character before the bad byte counts as one column.
    fs.writeFileSync(
      path.join(dir, 'overbrainer.toml'),
      Buffer.concat([Buffer.from('# café '), Buffer.from([0xff, 0x0a])]),
    );
    const second = loadConfig(dir, {});
    assert.ok(!second.ok);
    assert.deepEqual([second.errors[0]?.line, second.errors[0]?.column], [1, 8]);
    assert.match(second.errors[0]?.message ?? '', /byte 0xFF/);
  });

  it('the template needs only its Axolotl YAML', () => {
    fs.writeFileSync(path.join(dir, 'overbrainer.toml'), configTemplate());
    assert.equal(loadConfig(dir, {}).ok, false);
    fs.writeFileSync(path.join(dir, 'axolotl.yaml'), 'base_model: x\n');
    assert.equal(loadConfig(dir, {}).ok, true);
  });
});
