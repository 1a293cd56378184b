/**
 * overbrainer.toml parsing: defaults, environment overrides, runpodSettings, the template, loadConfig (the fixture: test/helpers/configFixture.ts).
 */
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
  runpodSettings,
  workdirFor,
  type ConfigError,
} from '../../src/core/config';
import { BASE, ok, errors, one, pod, at } from '../helpers/configFixture';

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
      nodes: 1,
      image: DEFAULT_RUNPOD_IMAGE,
      venv: '/workspace/axolotl-venv',
      containerDiskGb: 50,
      maxHours: 6,
      maxCostUsd: null,
      maxRecoveries: 2,
      bootGraceS: 30 * 60,
      retrieveGraceS: 60 * 60,
      maxRetrieveGb: 200,
      dataCenterIds: [],
      networkVolumeId: null,
      maxVolumeGb: null,
      sshClient: 'openssh',
    });
    assert.deepEqual(config.training, {
      target: null,
      trainer: { kind: 'command', command: 'python train.py', launcher: null },
      upload: [],
      artifacts: [...DEFAULT_ARTIFACTS],
      merge: false,
      hubModelId: null,
      hubEndpoint: null,
      secrets: [],
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
max_retrieve_gb = 0.5
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
      trainer: { kind: 'axolotl', configPath: 'cfg/axolotl.yaml', model: null },
      upload: ['data', 'train.py'],
      artifacts: ['output/', 'extra/file.txt'],
      merge: false,
      hubModelId: null,
      hubEndpoint: null,
      secrets: [],
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
    assert.equal(target.maxRetrieveGb, 0.5);
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
