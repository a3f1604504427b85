// Mines proof of work (SPEC §1.4) off the page's thread: it sets
// ["pow", bits] and ["nonce", n] and searches n until the id has at least
// `bits` leading zero bits. Message in: {event, bits}; out: progress
// {tries} and finally {event, tries}.
import { canonicalBytes, leadingZeroBits, hex } from './jcs.js';

self.onmessage = async (msg) => {
  const { event, bits } = msg.data;
  const tags = event.tags.filter((t) => t[0] !== 'pow' && t[0] !== 'nonce');
  const nonce = ['nonce', '0'];
  event.tags = [...tags, ['pow', String(bits)], nonce];
  for (let n = 0; ; n++) {
    nonce[1] = String(n);
    const id = hex(await crypto.subtle.digest('SHA-256', canonicalBytes(event)));
    if (leadingZeroBits(id) >= bits) {
      self.postMessage({ done: true, event, tries: n + 1 });
      return;
    }
    if (n % 2048 === 2047) self.postMessage({ tries: n + 1 });
  }
};
