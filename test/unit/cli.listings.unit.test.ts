/**
 * The `--json` documents of the CLI's listings and of `spend`: their field names and order are a
 * documented interface (README, "--json fields"), so each is pinned here key by key, in order.
 */
import assert from 'node:assert/strict';
import {
  dataCentersJson,
  gpusJson,
  podsJson,
  runsJson,
  templatesJson,
  volumesJson,
} from '../../src/cli/listings';
import { spendJson, spendRow } from '../../src/cli/spend';
import type { DataCenter, GpuType, NetworkVolume, Template } from '../../src/core/runpod/api';
import type { PodRow } from '../../src/core/pod/podList';
import { newPodRecord } from '../../src/core/runs/podRecord';
import type { RunRecord } from '../../src/core/runs/runRecord';

const HOST_KEY = 'ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOv1kJg2b3q4c5d6e7f8g9h0i1j2k3l4m5n6o7p8q9r0';

/** The document as printed: key order matters, so it is compared as text. */
function same(actual: unknown, expected: unknown): void {
  assert.equal(JSON.stringify(actual, null, 1), JSON.stringify(expected, null, 1));
}

function podOf(runId: string): ReturnType<typeof newPodRecord> {
  const pod = newPodRecord(runId, false, 1, HOST_KEY);
  pod.podId = 'pod1';
  pod.state = 'running';
  pod.gpuType = 'NVIDIA RTX A4000';
  pod.estimatedSpendUsd = 1.25;
  pod.billedUsd = 1.2;
  pod.billedCheckedAt = '2026-12-04T07:00:00Z';
  return pod;
}

describe('cli: the --json documents of the listings and spend', () => {
  it('runs ls: run, state, target, created, message, then its pod', () => {
    const run: RunRecord = {
      id: 'tiny_1',
      target: 'pod',
      created: '2026-12-04T06:00:00Z',
      remoteDir: '/workspace/tiny_1',
      job: null,
      state: 'running',
      message: null,
    };
    same(
      runsJson([
        { run, pod: podOf('tiny_1'), podProblem: null },
        { run: { ...run, id: 'tiny_2', message: 'm' }, pod: null, podProblem: 'damaged' },
      ]),
      {
        runs: [
          {
            run_id: 'tiny_1',
            state: 'running',
            target: 'pod',
            created: '2026-12-04T06:00:00Z',
            message: null,
            pod_id: 'pod1',
            pod_state: 'running',
            gpu_type: 'NVIDIA RTX A4000',
            pod_problem: null,
          },
          {
            run_id: 'tiny_2',
            state: 'running',
            target: 'pod',
            created: '2026-12-04T06:00:00Z',
            message: 'm',
            pod_id: null,
            pod_state: null,
            gpu_type: null,
            pod_problem: 'damaged',
          },
        ],
      },
    );
  });

  it('pod ls: run, pod, status, GPU, price, created, note, orphan', () => {
    const row: PodRow = {
      runId: null,
      podId: 'p9',
      status: 'RUNNING',
      gpu: 'NVIDIA RTX A4000',
      costPerHourUsd: 0.25,
      created: '2026-12-04T06:00:00Z',
      note: 'no run marker',
      kind: 'no_marker',
      orphan: true,
    };
    same(podsJson([row]), {
      pods: [
        {
          run_id: null,
          pod_id: 'p9',
          status: 'RUNNING',
          gpu_type: 'NVIDIA RTX A4000',
          usd_per_hour: 0.25,
          created: '2026-12-04T06:00:00Z',
          note: 'no run marker',
          orphan: true,
        },
      ],
    });
  });

  it('pod gpus, datacenters, volumes, templates: each field renamed, in order', () => {
    const gpu: GpuType = {
      id: 'NVIDIA RTX A4000',
      displayName: 'RTX A4000',
      manufacturer: 'Nvidia',
      memoryInGb: 16,
      secureCloud: true,
      communityCloud: false,
      securePricePerHourUsd: 0.25,
      communityPricePerHourUsd: null,
      maxCountSecure: 8,
      availability: 'LOW',
      dataCenters: [
        { id: 'US-KS-2', name: 'Kansas', availability: 'HIGH' },
        { id: 'EU-RO-1', name: 'Romania', availability: 'NONE' },
      ],
      cudaVersions: [],
    };
    same(gpusJson([gpu]), {
      gpus: [
        {
          id: 'NVIDIA RTX A4000',
          display_name: 'RTX A4000',
          memory_gb: 16,
          usd_per_hour: 0.25,
          availability: 'LOW',
          data_centers_in_stock: ['US-KS-2'],
        },
      ],
    });
    const dc: DataCenter = {
      id: 'US-KS-2',
      name: 'Kansas',
      region: 'US',
      globalNetwork: true,
      networkVolumeTypes: ['STANDARD'],
      gpuAvailability: [
        { id: 'NVIDIA RTX A4000', name: 'RTX A4000', availability: 'MEDIUM' },
        { id: 'NVIDIA H100', name: 'H100', availability: 'NONE' },
      ],
    };
    same(dataCentersJson([dc]), {
      data_centers: [
        {
          id: 'US-KS-2',
          name: 'Kansas',
          region: 'US',
          global_network: true,
          network_volume_types: ['STANDARD'],
          gpu_types_in_stock: [{ id: 'NVIDIA RTX A4000', availability: 'MEDIUM' }],
        },
      ],
    });
    const volume: NetworkVolume = {
      id: 'v1',
      name: 'data',
      sizeGb: 50,
      dataCenterId: 'US-KS-2',
      type: null,
    };
    same(volumesJson([volume]), {
      volumes: [{ id: 'v1', name: 'data', size_gb: 50, data_center_id: 'US-KS-2', type: null }],
    });
    const template: Template = {
      id: 't1',
      name: 'trainer',
      image: 'runpod/pytorch',
      isPublic: false,
      category: 'NVIDIA',
    };
    same(templatesJson([template]), {
      templates: [
        { id: 't1', name: 'trainer', image: 'runpod/pytorch', public: false, category: 'NVIDIA' },
      ],
    });
  });

  it('spend: each run, then the totals', () => {
    const pod = podOf('tiny_1');
    pod.state = 'deleted';
    pod.deletedAt = '2026-12-04T06:59:00Z';
    const nowMs = Date.parse('2026-12-04T08:00:00Z');
    same(spendJson([spendRow('tiny_1', '2026-12-04T06:00:00Z', 'succeeded', pod, nowMs)]), {
      runs: [
        {
          run_id: 'tiny_1',
          created: '2026-12-04T06:00:00Z',
          state: 'succeeded',
          pod_id: 'pod1',
          pod_state: 'deleted',
          pods: 1,
          estimated_usd: 1.25,
          billed_usd: 1.2,
          billed_checked_at: '2026-12-04T07:00:00Z',
          difference_usd: 0.05,
          flagged: true,
        },
      ],
      totals: { estimated_usd: 1.25, billed_usd: 1.2, flagged: 1 },
    });
  });

  it("spend: a recovered run is judged by each of its pods' resolution, not by its last pod's alone", () => {
    // Two pods at $0.44/h, each estimate 2 s over its bill (its createdAt in whole seconds, its end
    // at the confirmed delete): within each pod's resolution ($0.0001 + 2 s of its price), so the
    // run's $0.0005 difference is not flagged (CI's e2e saw it flagged "over 1 % apart").
    const pod = podOf('tiny_2');
    pod.state = 'deleted';
    pod.costPerHourUsd = 0.44;
    pod.estimatedSpendUsd = 0.0021;
    pod.billedUsd = 0.0018;
    pod.otherPods = [
      {
        podId: 'pod0',
        costPerHourUsd: 0.44,
        billedFromMs: Date.parse('2026-12-04T06:00:00Z'),
        endedMs: Date.parse('2026-12-04T06:00:16Z'),
        estimatedSpendUsd: 0.002,
        billedUsd: 0.0018,
        billedCheckedAt: '2026-12-04T07:00:00Z',
      },
    ];
    const row = spendRow('tiny_2', '2026-12-04T06:00:00Z', 'succeeded', pod, Date.now());
    assert.equal(row.pods, 2);
    assert.equal(row.differenceUsd, 0.0005);
    assert.equal(row.flagged, false);
    // One pod's resolution is not the run's: the same difference on one pod is flagged.
    pod.otherPods = [];
    pod.estimatedSpendUsd = 0.0041;
    pod.billedUsd = 0.0036;
    assert.equal(spendRow('tiny_2', '', 'succeeded', pod, Date.now()).flagged, true);
  });
});
