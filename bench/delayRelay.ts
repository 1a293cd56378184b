/**
 * A TCP relay that holds every chunk `oneWayMs` each way (a distant link), in a process of its
 * own: the retrieval baseline's steps run synchronously in the benchmark's process, which would
 * stop a relay living there. Prints its port, then relays until it is killed.
 *
 *   node --import tsx bench/delayRelay.ts TARGET_PORT ONE_WAY_MS
 */
import { startTcpProxy } from '../test/helpers/sshd';

const [targetPort, oneWayMs] = process.argv.slice(2).map(Number);
startTcpProxy(targetPort!, { oneWayDelayMs: oneWayMs! }).then(
  (relay) => process.stdout.write(`${relay.port}\n`),
  (error: unknown) => {
    console.error(error);
    process.exit(1);
  },
);
