import * as assert from 'node:assert/strict';
import * as fs from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { CONFIG_FILE, ENV_API_KEY, ENV_BASE_URL } from '../../src/core/config';
import { pickDataCenters, pickVolume } from '../../src/ui/commands/configCommands';
import { startEmulator, type Emulator } from '../emulator/emulator';
import { fakeContext, folder } from '../unit/uiFakeHost';

const TOML = `# Where the model trains.
[training]
target = "pod"
trainer = "axolotl"
config = "axolotl.yaml"

[targets.pod]
kind = "runpod"   # a GPU pod
gpu_types = ["NVIDIA A40"]
max_hours = 2
# keep the data close
`;

/** Every line of the original (comments included) is still there, in its order. */
function assertKeeps(text: string): void {
  let at = 0;
  for (const line of TOML.split('\n').filter((l) => l !== '')) {
    const found = text.indexOf(`${line}\n`, at);
    assert.ok(found >= 0, `kept "${line}" in:\n${text}`);
    at = found + line.length;
  }
}

describe('Pick Data Centers and Pick Volume against the Runpod emulator (a fake window)', function () {
  let emulator: Emulator;
  let dir: string;

  before(async function () {
    emulator = await startEmulator();
  });
  after(async function () {
    await emulator?.close();
  });
  beforeEach(function () {
    dir = fs.mkdtempSync(path.join(tmpdir(), 'ob-pick-'));
    fs.writeFileSync(path.join(dir, CONFIG_FILE), TOML);
    fs.writeFileSync(path.join(dir, 'axolotl.yaml'), 'base_model: m\n');
  });
  afterEach(function () {
    fs.rmSync(dir, { recursive: true, force: true });
  });

  function context() {
    const c = fakeContext();
    c.fake.folders = [folder(dir)];
    c.fake.env[ENV_API_KEY] = emulator.apiKey;
    c.fake.env[ENV_BASE_URL] = emulator.baseUrl;
    return c;
  }

  it('Pick Volume writes network_volume_id and its data center, keeping the comments', async function () {
    const { ctx, fake } = context();
    fake.answer = (s) => (s.kind === 'quickPick' ? (s.items as { label: string }[])[0] : undefined);
    await pickVolume(ctx);
    const pick = fake.shown.find((s) => s.kind === 'quickPick');
    assert.ok(pick?.kind === 'quickPick');
    assert.match(
      (pick.items as { description: string }[])[0]?.description ?? '',
      /overbrainer-data · 50 GB · EU-RO-1/,
    );
    const text = fs.readFileSync(path.join(dir, CONFIG_FILE), 'utf8');
    assertKeeps(text);
    assert.match(text, /\nnetwork_volume_id = "agv6w2qcg7"\ndata_center_ids = \["EU-RO-1"\]\n/);
    assert.deepEqual(fake.messages(), [
      'info: Network volume of pod: agv6w2qcg7 (data center EU-RO-1)',
    ]);
  });

  it('Pick Data Centers lists Runpod data centers and writes the picked ones (or auto)', async function () {
    const { ctx, fake } = context();
    let offered: string[] = [];
    fake.answer = (s) => {
      if (s.kind !== 'quickPick') return undefined;
      const items = s.items as { label: string }[];
      offered = items.map((i) => i.label);
      return items.filter((i) => i.label === 'EU-RO-1');
    };
    await pickDataCenters(ctx);
    assert.equal(offered[0], 'Any data center (auto)');
    assert.ok(offered.includes('EU-RO-1'), offered.join(', '));
    const text = fs.readFileSync(path.join(dir, CONFIG_FILE), 'utf8');
    assertKeeps(text);
    assert.match(text, /\ndata_center_ids = \["EU-RO-1"\]\n/);
    fake.answer = (s) =>
      s.kind === 'quickPick' ? [(s.items as { label: string }[])[0]] : undefined;
    await pickDataCenters(ctx);
    assert.match(fs.readFileSync(path.join(dir, CONFIG_FILE), 'utf8'), /data_center_ids = "auto"/);
  });
});
