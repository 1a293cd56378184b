import assert from 'node:assert/strict';
import { parseMetricLine } from '../../src/core/train/metrics';
import type { TrainMetric } from '../../src/core/events';
import { metricValue, noObjectiveMessage, Objective } from '../../src/core/sweep/objective';

function metric(line: Record<string, unknown>): TrainMetric {
  const parsed = parseMetricLine(Buffer.from(JSON.stringify({ event: 'log', time: 1, ...line })));
  assert.equal(parsed.kind, 'metric', JSON.stringify(parsed));
  return (parsed as { metric: TrainMetric }).metric;
}

describe('sweep objective: any key of the metrics stream', () => {
  it('reads the protocol keys by their written names and any other numeric key', () => {
    const m = metric({ step: 5, loss: 1.5, eval_loss: 1.2, accuracy: 0.8 });
    assert.equal(metricValue(m, 'loss'), 1.5);
    assert.equal(metricValue(m, 'eval_loss'), 1.2);
    assert.equal(metricValue(m, 'accuracy'), 0.8);
    assert.equal(metricValue(m, 'bleu'), null);
    assert.equal(
      metricValue(m, 'evalLoss'),
      null,
      'the camelCase field is not a key of the stream',
    );
    assert.equal(metricValue(m, 'toString'), null);
  });

  it("keeps each step's value and gives the last step's as the result", () => {
    const objective = new Objective('accuracy');
    assert.equal(objective.take(metric({ step: 1, loss: 2 })), null);
    assert.deepEqual(objective.take(metric({ step: 5, accuracy: 0.5 })), { step: 5, value: 0.5 });
    assert.deepEqual(objective.take(metric({ step: 10, accuracy: 0.7 })), { step: 10, value: 0.7 });
    assert.equal(objective.final(), 0.7);
    assert.equal(objective.count, 2);
  });

  it('has no result when the job never wrote the key, and says so naming it', () => {
    const objective = new Objective('eval_accuracy');
    objective.take(metric({ step: 1, loss: 2, eval_loss: 1 }));
    assert.equal(objective.final(), null);
    assert.match(noObjectiveMessage('eval_accuracy'), /never wrote "eval_accuracy"/);
  });
});
