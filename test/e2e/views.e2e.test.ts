import { chartJourneys } from './chartJourneys';
import { treesJourneys } from './treesJourneys';
import { webviewJourneys } from './webviewJourneys';
import { useWindow } from './window';

/**
 * The extension's views in one real VS Code window against the Runpod emulator, one after
 * another: the Runs and Pods trees on a runs/ folder prepared before the window opened
 * (./treesJourneys.ts), the run webview charting a live run, restored by a reload and comparing
 * two runs (./webviewJourneys.ts), then the chart's smoothing, log scale and x by time,
 * remembered across a reload (./chartJourneys.ts). They were three windows: a window costs about
 * 14 CPU-s to its extension's activation, more than most of these journeys, and the e2e tier runs
 * beside the integration files on 2 cores. Each part begins by making the workspace its own
 * (the runs before it gone, its files and its runs written), so each judges what it made.
 *
 * Timings at 1/8 (the webview's live run), the emulator's key in VS Code's environment (the
 * trees' Pods view lists the account; the webview trains). SHELL: code-server resolves the login
 * shell's environment at every extension host start; root's bash runs `pyenv init`, which on the
 * loaded machine ran into VS Code's timeout and held the restart after a reload for over 2
 * minutes.
 */
describe('The Runs and Pods trees, the run webview and its chart, one after another in one real VS Code window', function () {
  this.timeout(420_000);
  const trees = treesJourneys();
  const window = useWindow({
    name: 'views',
    // The trees' workspace first: their toml and runs, no training files (the webview's part
    // writes those).
    tiny: false,
    prepare: trees.prepare,
    cleanup: trees.cleanup,
    timingScale: '8',
    apiKeyInEnv: true,
    env: { SHELL: '/bin/sh' },
  });
  trees.register(window);
  webviewJourneys(window);
  chartJourneys(window);
});
