/**
 * The retrieval benchmark's baseline (bench/retrieval.bench.ts): what a user would run with
 * OpenSSH on the same sshd and files, each process under /usr/bin/time; and the pod side's CPU.
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { mkdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { descendants } from '../test/helpers/sshd';

/** The baseline, each process under /usr/bin/time for its peak RSS. */
export function runBaseline(
  port: number,
  keyPath: string,
  knownHosts: string,
  remoteDir: string,
  work: string,
  dest: string,
): { ms: number; peakRssKiB: number; phasesMs: [number, number, number]; cpuMs: number } {
  mkdirSync(dest, { recursive: true });
  const ssh = [
    'ssh',
    '-p',
    String(port),
    '-i',
    keyPath,
    '-o',
    'IdentitiesOnly=yes',
    '-o',
    'BatchMode=yes',
    '-o',
    `UserKnownHostsFile=${knownHosts}`,
    '-o',
    'GlobalKnownHostsFile=/dev/null',
    '-o',
    'HostKeyAlias=pinned',
    'root@127.0.0.1',
  ].join(' ');
  const rss = (name: string): string => join(work, `rss-${name}`);
  const timed = (name: string): string => `/usr/bin/time -f '%M %U %S' -o ${rss(name)}`;
  const sums = join(work, 'sums');
  const started = performance.now();
  execFileSync('sh', [
    '-c',
    `${timed('m')} ${ssh} 'cd ${remoteDir} && find . -type f -exec sha256sum {} +' > ${sums}`,
  ]);
  const hashed = performance.now();
  execFileSync('sh', [
    '-c',
    `set -e; ${timed('s')} ${ssh} 'tar -C ${remoteDir} -cf - .' | ${timed('t')} tar -C ${dest} -xf -`,
  ]);
  const transferred = performance.now();
  const check = spawnSync('sh', ['-c', `cd ${dest} && ${timed('c')} sha256sum -c --quiet ${sums}`]);
  const ms = performance.now() - started;
  if (check.status !== 0) throw new Error(`baseline verification failed: ${check.stderr}`);
  // The last line of /usr/bin/time's output: peak KiB, user s, system s.
  const usage = (name: string): number[] =>
    readFileSync(rss(name), 'utf8').trim().split('\n').pop()!.split(' ').map(Number);
  const kib = (name: string): number => usage(name)[0]!;
  const cpuMs = ['m', 's', 't', 'c'].reduce(
    (sum, n) => sum + (usage(n)[1]! + usage(n)[2]!) * 1000,
    0,
  );
  // ssh and tar run side by side: their peaks add up.
  const peakRssKiB = Math.max(kib('m'), kib('s') + kib('t'), kib('c'));
  return {
    ms,
    peakRssKiB,
    phasesMs: [hashed - started, transferred - hashed, started + ms - transferred],
    cpuMs,
  };
}

/**
 * CPU time, ms, of the pod side so far: every process below the sshd listener (alive ones and
 * those they reaped) and the ones it reaped; a difference of two readings is what ran between.
 */
export function podCpuMs(sshdPid: number): number {
  const ticks = (pid: number, own: boolean): number => {
    try {
      const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
      // utime, stime, cutime, cstime: fields 14-17 of /proc/<pid>/stat.
      return (own ? +fields[11]! + +fields[12]! : 0) + +fields[13]! + +fields[14]!;
    } catch {
      return 0; // gone since it was listed: its parent counts it once it is reaped
    }
  };
  const all = descendants(sshdPid).reduce((sum, pid) => sum + ticks(pid, true), 0);
  return (all + ticks(sshdPid, false)) * 10; // USER_HZ is 100 on Linux
}
