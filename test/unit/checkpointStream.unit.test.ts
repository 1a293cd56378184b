import assert from 'node:assert/strict';
import {
  finishedCheckpoint,
  parseLook,
  seedFromStream,
  stepOf,
} from '../../src/core/pod/checkpointStream';

const look = (text: string): ReturnType<typeof parseLook> => parseLook(text);

describe('checkpoint stream: which checkpoint is finished', () => {
  const two = [
    'D ./output/checkpoint-10',
    'F 120 ./output/checkpoint-10/model.json',
    'D ./output/checkpoint-20',
    'F 60 ./output/checkpoint-20/model.json',
    '',
  ].join('\n');

  it('takes the newest once a newer one exists, never a checkpoint still changing', () => {
    const first = look(two);
    assert.equal(finishedCheckpoint(first, null), 'output/checkpoint-10');
    const grown = look(two.replace('F 60 ', 'F 120 '));
    // checkpoint-20 changed between the two looks: still the older one.
    assert.equal(finishedCheckpoint(grown, first), 'output/checkpoint-10');
    // Unchanged at the next look: finished.
    assert.equal(
      finishedCheckpoint(look(two.replace('F 60 ', 'F 120 ')), grown),
      'output/checkpoint-20',
    );
  });

  it('takes the one snapshot.json names at once, skips empty and foreign names', () => {
    const named = look(`${two}S {"checkpoint":"output/checkpoint-20","step":20}\n`);
    assert.equal(named.snapshot, 'output/checkpoint-20');
    assert.equal(finishedCheckpoint(named, null), 'output/checkpoint-20');
    const odd = look('D ./out put/checkpoint-3\nF 1 x\nD ./output/checkpoint-4\n');
    assert.deepEqual([...odd.checkpoints.keys()], ['output/checkpoint-4']);
    assert.equal(finishedCheckpoint(odd, odd), null);
    assert.equal(stepOf('output/checkpoint-20'), 20);
  });

  it('never takes a checkpoint path that climbs out or that Windows reads differently', async () => {
    const hostile = look(
      [
        'D ./../../../checkpoint-7',
        'F 1 ./../../../checkpoint-7/model.json',
        'D ./output/../checkpoint-8',
        'D ./output./checkpoint-9',
        'D ./CON/checkpoint-10',
        'D ./output/checkpoint-11',
        'F 1 ./output/checkpoint-11/model.json',
        '',
      ].join('\n'),
    );
    assert.deepEqual([...hostile.checkpoints.keys()], ['output/checkpoint-11']);
    // A latest.json naming such a path (a pod that once lied) seeds nothing, removes nothing.
    const { mkdtempSync, mkdirSync, writeFileSync, existsSync, rmSync } = await import('node:fs');
    const { join } = await import('node:path');
    const { tmpdir } = await import('node:os');
    const root = mkdtempSync(join(tmpdir(), 'ob-seed-'));
    try {
      const runDir = join(root, 'runs', 'r1');
      mkdirSync(join(runDir, 'checkpoints', 'checkpoint-7'), { recursive: true });
      mkdirSync(join(root, 'runs', 'checkpoint-7'), { recursive: true });
      writeFileSync(join(root, 'runs', 'checkpoint-7', 'keep.txt'), "not the stream's");
      const remote = '../../../checkpoint-7';
      writeFileSync(
        join(runDir, 'checkpoints', 'latest.json'),
        JSON.stringify({
          path: 'checkpoints/checkpoint-7',
          step: 7,
          remote,
          timeMs: 1,
          files: 1,
          bytes: 1,
        }),
      );
      assert.equal(await seedFromStream(runDir, remote), 0);
      assert.ok(
        existsSync(join(root, 'runs', 'checkpoint-7', 'keep.txt')),
        'nothing removed outside',
      );
    } finally {
      rmSync(root, { recursive: true, force: true });
    }
  });
});
