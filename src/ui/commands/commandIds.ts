/**
 * Every command the extension contributes, with its palette title (category "Overbrainer").
 * package.json declares the same list; a unit test keeps both in step.
 */
export const COMMAND_TITLES = {
  'overbrainer.train': 'Train',
  'overbrainer.attach': 'Attach to Run',
  'overbrainer.cancel': 'Cancel Run',
  'overbrainer.stopRun': 'Stop and Snapshot',
  'overbrainer.resumeRun': 'Resume Run',
  'overbrainer.keepPod': 'Keep Pod',
  'overbrainer.releasePod': 'Release Pod',
  'overbrainer.removePod': 'Remove Pod',
  'overbrainer.showRun': 'Show Run',
  'overbrainer.openSshTerminal': 'Open SSH Terminal',
  'overbrainer.showPods': 'Show Pods',
  'overbrainer.setApiKey': 'Set Runpod API Key',
  'overbrainer.setHfToken': 'Set Hugging Face Token',
  'overbrainer.setJobSecret': 'Set Job Secret',
  'overbrainer.pickGpuTypes': 'Pick GPU Types',
  'overbrainer.pickDataCenters': 'Pick Data Centers',
  'overbrainer.pickVolume': 'Pick Volume',
  'overbrainer.showLogs': 'Show Logs',
  'overbrainer.createConfig': 'Create overbrainer.toml',
  'overbrainer.refreshRuns': 'Refresh Runs',
  'overbrainer.refreshPods': 'Refresh Pods',
  'overbrainer.compareRuns': 'Compare Runs',
  'overbrainer.startSweep': 'Start Sweep',
  'overbrainer.stopSweep': 'Stop Sweep',
  'overbrainer.attachSweep': 'Attach Sweep',
  'overbrainer.refreshSweeps': 'Refresh Sweeps',
  'overbrainer.openSweep': 'Open Sweep',
} as const;

export type CommandId = keyof typeof COMMAND_TITLES;

export const COMMAND_IDS = Object.keys(COMMAND_TITLES) as CommandId[];

/** What a command whose feature has not landed yet says, instead of failing silently. */
export function notAvailableMessage(id: CommandId): string {
  return `Overbrainer: ${COMMAND_TITLES[id]} is not available yet.`;
}
