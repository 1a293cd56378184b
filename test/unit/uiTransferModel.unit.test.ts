import assert from 'node:assert/strict';
import type { TransferProgress } from '../../src/core/events';
import {
  TransferModel,
  transferMessage,
  transferStatusView,
} from '../../src/ui/runs/transferModel';
import { MIB, transferProgress } from '../helpers/transferFixture';

function event(
  over: Partial<TransferProgress>,
): { type: 'transfer'; runId: string } & TransferProgress {
  return { type: 'transfer', runId: 'r1', ...transferProgress(over) };
}

describe('ui: a transfer in the status bar', () => {
  it('shows the percent, the rate and the time left while it lasts, then gives the countdown back', () => {
    const model = new TransferModel();
    assert.equal(model.onEvent(event({ phase: 'start', elapsedMs: 0 })), false);
    assert.equal(model.of('r1'), null, 'not before it has lasted a second');
    assert.equal(model.onEvent(event({})), true);
    const view = transferStatusView('r1', model.of('r1')!);
    assert.equal(view.text, '$(cloud-upload) Uploading 30 % · 48.2 MiB/s · 15 s left');
    assert.match(view.tooltip, /317\.0 MiB of 1\.00 GiB \(3 of 12 files\)/);
    assert.equal(view.background, 'none');
    assert.equal(model.of('r2'), null);
    assert.equal(model.onEvent(event({ phase: 'checking', bytesDone: 1024 * MIB })), true);
    assert.equal(
      transferStatusView('r1', model.of('r1')!).text,
      '$(cloud-upload) Uploading · the pod checks it',
    );
    assert.equal(model.onEvent(event({ phase: 'done' })), true);
    assert.equal(model.of('r1'), null);
    assert.equal(model.onEvent({ type: 'runWatched', runId: 'r1' }), false);
  });

  it('says what goes which way; without a total, no percent', () => {
    const model = new TransferModel();
    model.onEvent(event({ direction: 'retrieve', bytesTotal: null, etaMs: null }));
    assert.equal(
      transferStatusView('r1', model.of('r1')!).text,
      '$(cloud-download) Retrieving · 48.2 MiB/s',
    );
    model.onEvent(event({ direction: 'checkpoint' }));
    assert.match(
      transferStatusView('r1', model.of('r1')!).text,
      /^\$\(cloud-download\) Copying checkpoint 30 %/,
    );
    model.onEvent(event({ direction: 'checkpoint', phase: 'failed' }));
    assert.match(transferStatusView('r1', model.of('r1')!).text, /Retrieving/);
  });
});

describe('ui: a transfer in the progress notifications (the start, the retrieval)', () => {
  it('the percent, the bytes, the rate and the time left; at the end the total and the time', () => {
    assert.equal(
      transferMessage(event({})),
      'Uploading 30 % · 317.0 MiB of 1.00 GiB · 48.2 MiB/s · 15 s left',
    );
    assert.equal(
      transferMessage(
        event({ direction: 'retrieve', bytesTotal: null, rateBytesPerS: null, etaMs: null }),
      ),
      'Retrieving · 317.0 MiB',
    );
    assert.equal(
      transferMessage(event({ direction: 'retrieve', phase: 'checking', bytesDone: 1024 * MIB })),
      "Retrieving: 1.00 GiB received, checking it against the pod's hashes",
    );
    assert.equal(
      transferMessage(event({ phase: 'done', bytesDone: 1024 * MIB, elapsedMs: 21_000 })),
      'Uploaded 1.00 GiB in 21 s',
    );
  });

  it('nothing for a transfer too short to show yet, nor for a failed one (its error says it)', () => {
    assert.equal(transferMessage(event({ phase: 'start', elapsedMs: 0 })), null);
    assert.equal(transferMessage(event({ elapsedMs: 900 })), null);
    assert.equal(transferMessage(event({ phase: 'failed' })), null);
  });
});
