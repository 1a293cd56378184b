import * as assert from 'node:assert/strict';
import { parse as parseToml } from 'smol-toml';
import { ConfigEditError, setDataCenterIds, setNetworkVolumeId } from '../../src/core/config';

const TOML = `# my project
[training]
target = "pod"

[targets.pod]
kind = "runpod"   # the GPU pod
gpu_types = ["NVIDIA A40"]
# pinned to Romania for the data
data_center_ids = ["EU-RO-1"]
`;

describe('config edit: data centers and network volume (Pick Data Centers, Pick Volume)', function () {
  it('replaces data_center_ids in place, keeping every comment', function () {
    const edited = setDataCenterIds(TOML, 'pod', ['US-TX-3', 'EU-SE-1']);
    assert.equal(edited, TOML.replace('["EU-RO-1"]', '["US-TX-3", "EU-SE-1"]'));
    assert.equal(setDataCenterIds(TOML, 'pod', 'auto'), TOML.replace('["EU-RO-1"]', '"auto"'));
  });

  it('adds network_volume_id at the end of the target, keeping the rest as written', function () {
    const edited = setNetworkVolumeId(TOML, 'pod', 'vol123abc');
    assert.ok(edited.startsWith(TOML.trimEnd()), edited);
    assert.match(edited, /# pinned to Romania for the data\n/);
    const parsed = parseToml(edited) as { targets: { pod: Record<string, unknown> } };
    assert.equal(parsed.targets.pod.network_volume_id, 'vol123abc');
    assert.deepEqual(parsed.targets.pod.data_center_ids, ['EU-RO-1']);
  });

  it('refuses an unknown target, an empty pick and a bad ID, saying what to do', function () {
    assert.throws(() => setNetworkVolumeId(TOML, 'gpu', 'v1'), ConfigEditError);
    assert.throws(() => setDataCenterIds(TOML, 'pod', []), /no data center was picked/);
    assert.throws(() => setNetworkVolumeId(TOML, 'pod', 'auto'), /not a network volume ID/);
  });
});
