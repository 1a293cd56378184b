import * as assert from 'node:assert/strict';
import { exponentTickLabels } from '../../media/ticks';

describe('chart tick labels (the learning-rate axis)', function () {
  it('labels a narrow learning-rate range with distinct ticks (was 3.0e-1, 3.0e-1, 2.9e-1 …)', function () {
    const splits = [0.2875, 0.29, 0.2925, 0.295, 0.2975, 0.3];
    const labels = exponentTickLabels(splits);
    assert.equal(new Set(labels).size, splits.length, labels.join(', '));
    assert.deepEqual(labels, [
      '2.875e-1',
      '2.900e-1',
      '2.925e-1',
      '2.950e-1',
      '2.975e-1',
      '3.000e-1',
    ]);
  });

  it('keeps one decimal where the spacing allows it, and 0 as 0', function () {
    assert.deepEqual(exponentTickLabels([0, 1e-4, 2e-4, 3e-4]), [
      '0',
      '1.0e-4',
      '2.0e-4',
      '3.0e-4',
    ]);
    assert.deepEqual(exponentTickLabels([0.00005, 0.0001, 0.00015]), [
      '5.0e-5',
      '1.0e-4',
      '1.5e-4',
    ]);
  });

  it('chooses the precision from the spacing, up to what makes the labels distinct', function () {
    const splits = [1.0001e-3, 1.0002e-3, 1.0003e-3];
    assert.deepEqual(exponentTickLabels(splits), ['1.0001e-3', '1.0002e-3', '1.0003e-3']);
    assert.deepEqual(exponentTickLabels([]), []);
    assert.deepEqual(exponentTickLabels([2e-5]), ['2.0e-5']);
  });
});
