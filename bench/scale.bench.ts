import type { BenchOptions, BenchReport } from './lib';

export async function scaleBench(options: BenchOptions): Promise<BenchReport> {
  void options;
  throw new Error('not written yet');
}
