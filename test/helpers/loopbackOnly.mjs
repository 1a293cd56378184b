/**
 * Preloaded into a CLI child (`NODE_OPTIONS=--import=<this file>`) by tests that must make sure
 * nothing leaves this machine even when the product would talk to a real host (Runpod's own API
 * when a refused setting falls back to it): every host-name lookup but loopback's fails at once
 * with ENOTFOUND, and says so on stderr (`loopback only: refused a lookup of HOST`). A firewall
 * for one process, not a mock: the product's code runs unchanged up to the socket.
 */
import dns from 'node:dns';

const lookup = dns.lookup;
const LOOPBACK = /^(localhost|127\.\d{1,3}\.\d{1,3}\.\d{1,3}|::1|\[::1\])$/;

dns.lookup = function loopbackOnlyLookup(hostname, options, callback) {
  if (typeof options === 'function') {
    callback = options;
    options = {};
  }
  if (LOOPBACK.test(String(hostname))) return lookup.call(dns, hostname, options, callback);
  process.stderr.write(`loopback only: refused a lookup of ${hostname}\n`);
  const error = Object.assign(new Error(`getaddrinfo ENOTFOUND ${hostname}`), {
    code: 'ENOTFOUND',
    hostname,
  });
  process.nextTick(callback, error);
  return undefined;
};
