import { isHostMessage, type HostMessage, type PageMessage } from '../src/ui/webviewProtocol';

/**
 * The run page. It renders what the host sends and keeps nothing it cannot rebuild from the
 * host's snapshot. The live chart, progress and buttons arrive with the run view; today the page
 * shows the run's header.
 */

interface VsCodeApi {
  postMessage(message: PageMessage): void;
  getState(): unknown;
  setState(state: unknown): void;
}

declare function acquireVsCodeApi(): VsCodeApi;

const vscode = acquireVsCodeApi();

function render(message: HostMessage): void {
  const title = document.getElementById('run-title');
  const summary = document.getElementById('run-summary');
  // textContent, never innerHTML: run ids and messages come from files anyone could edit.
  if (title) title.textContent = message.runId;
  if (summary) summary.textContent = message.summary;
  vscode.setState(message);
}

window.addEventListener('message', (event: MessageEvent<unknown>) => {
  if (isHostMessage(event.data)) render(event.data);
});

const saved = vscode.getState();
if (isHostMessage(saved)) render(saved);
vscode.postMessage({ type: 'ready' });
