import { randomBytes } from 'node:crypto';
import * as fs from 'node:fs';
import * as path from 'node:path';
import type * as vscode from 'vscode';
import { decodePodRecord, decodeRunRecord, POD_FILE, RUN_FILE } from '../../core/flow/records';
import { clusterTimes } from '../runs/clusterSummary';

/** pod.json is small; a bigger file is not read (the view shows what run.json says). */
const MAX_POD_FILE_BYTES = 1024 * 1024;

/** What the run view shows of pod.json beyond run.json. */
export interface PodExtras {
  maxCostUsd: number | null;
  createdUnixS: number | null;
  deletedUnixS: number | null;
}

/** pod.json's cost cap and billing times; empty when absent or unreadable (the view still works). */
export function readPodExtras(dir: string): PodExtras {
  const none: PodExtras = { maxCostUsd: null, createdUnixS: null, deletedUnixS: null };
  const file = path.join(dir, POD_FILE);
  // A cluster run has no pod.json: its cluster's create and delete bound its billing.
  if (!fs.existsSync(file)) return clusterExtras(dir) ?? none;
  try {
    if (fs.statSync(file).size > MAX_POD_FILE_BYTES) return none;
    const pod = decodePodRecord(fs.readFileSync(file, 'utf8'), file);
    const deleted = pod.deletedAt === null ? NaN : Date.parse(pod.deletedAt);
    return {
      maxCostUsd: pod.costCapUsd,
      createdUnixS: pod.createdUnixS,
      deletedUnixS: Number.isFinite(deleted) ? Math.floor(deleted / 1000) : null,
    };
  } catch {
    return none;
  }
}

/** The run's current cluster's billing times from run.json, or null for a run without one. */
function clusterExtras(dir: string): PodExtras | null {
  const file = path.join(dir, RUN_FILE);
  try {
    if (fs.statSync(file).size > MAX_POD_FILE_BYTES) return null;
    const cluster = decodeRunRecord(fs.readFileSync(file, 'utf8'), file).cluster;
    return cluster ? { maxCostUsd: null, ...clusterTimes(cluster) } : null;
  } catch {
    return null;
  }
}

export function isDirectory(file: string): boolean {
  try {
    return fs.statSync(file).isDirectory();
  } catch {
    return false;
  }
}

/**
 * The page: a strict CSP (nothing but our bundle with its nonce, our styles, and the webview's
 * own resource origin), the static skeleton the script fills, and no data interpolated.
 */
export function pageHtml(webview: vscode.Webview, distFile: (name: string) => vscode.Uri): string {
  const nonce = randomBytes(18).toString('base64');
  const asset = (name: string): string => webview.asWebviewUri(distFile(name)).toString();
  const csp = [
    "default-src 'none'",
    `style-src ${webview.cspSource}`,
    `font-src ${webview.cspSource}`,
    `img-src ${webview.cspSource} data:`,
    `script-src 'nonce-${nonce}'`,
  ].join('; ');
  return `<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="UTF-8">
<meta http-equiv="Content-Security-Policy" content="${csp}">
<meta name="viewport" content="width=device-width, initial-scale=1.0">
<link rel="stylesheet" href="${asset('uPlot.min.css')}">
<link rel="stylesheet" href="${asset('main.css')}">
<title>Overbrainer run</title>
</head>
<body>
<header class="header">
  <h1 id="run-title"></h1>
  <span id="run-state" class="state"></span>
  <div id="run-summary" class="summary"></div>
</header>
<div id="overrun" class="banner" role="alert" hidden></div>
<section id="stats" class="stats" hidden>
  <div class="progress" aria-hidden="true"><div id="progress-bar" class="progress-bar"></div></div>
  <ul class="figures">
    <li id="step"></li><li id="epoch"></li><li id="eta"></li><li id="deadline"></li><li id="spend"></li>
  </ul>
</section>
<ul id="gpus" class="figures gpus" hidden></ul>
<div id="gpu-warning" class="banner" role="status" hidden></div>
<p id="run-message" class="message" hidden></p>
<p id="run-attempts" class="message" hidden></p>
<nav id="actions" class="actions" hidden>
  <button type="button" data-action="stop" title="Save a checkpoint at the next step end, stop, and bring it home">Stop and Snapshot</button>
  <button type="button" data-action="cancel">Cancel Run</button>
  <button type="button" data-action="keep">Keep Pod</button>
  <button type="button" data-action="release">Release Pod</button>
  <button type="button" data-action="remove" class="danger">Remove Pod</button>
  <button type="button" data-action="resume" title="A new run that continues from this run's snapshot">Resume Run</button>
  <button type="button" data-action="openOutput">Open Output</button>
</nav>
<section id="boot" class="boot" hidden>
  <h2>The pod is booting: the last lines of its log</h2>
  <pre id="boot-log" class="boot-log"></pre>
</section>
<form id="chart-controls" class="chart-controls">
  <label title="Exponential moving average of the loss, as TensorBoard's; the raw line stays faint behind it">Smoothing
    <input id="smoothing" type="range" min="0" max="0.99" step="0.01" value="0.6">
    <output id="smoothing-value" for="smoothing">0.60</output></label>
  <label><input id="log-loss" type="checkbox"> Log scale (loss)</label>
  <label>x <select id="x-axis"><option value="step">step</option><option value="time">wall time</option></select></label>
</form>
<div id="chart" class="chart" data-points="0"></div>
<p id="empty" class="empty" hidden>No metrics yet: the chart fills in as the job logs.</p>
<script nonce="${nonce}" src="${asset('webview.js')}"></script>
</body>
</html>`;
}
