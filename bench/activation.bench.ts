import type { BenchOptions, BenchReport } from './lib';

export async function activationBench(options: BenchOptions): Promise<BenchReport> {
  void options;
  throw new Error('not written yet');
}
