// The event id and signature checks, in the browser (SPEC §19).
//
// The id preimage is [agent_id, created_at, kind, tags, content]: strings,
// integers below 2^53 and arrays of strings. For exactly these values
// RFC 8785 (JCS) is what JSON.stringify writes (ECMAScript's string
// escaping and integer printing are JCS's), so the canonical bytes are the
// UTF-8 of JSON.stringify. The signature is Ed25519 over the 32 raw id
// bytes, checked by WebCrypto, after libsodium's byte rules the relay
// applies too (SPEC §1.7): no small-order key or R, no non-canonical key.

const enc = new TextEncoder();

// canonical returns the JCS text of e's id preimage.
export function canonical(e) {
  return JSON.stringify([e.agent_id, e.created_at, e.kind, e.tags, e.content]);
}

// canonicalBytes returns the UTF-8 bytes hashed into e's id.
export function canonicalBytes(e) {
  return enc.encode(canonical(e));
}

export function hex(bytes) {
  let s = '';
  for (const b of new Uint8Array(bytes)) s += b.toString(16).padStart(2, '0');
  return s;
}

export function unhex(s) {
  if (typeof s !== 'string' || s.length % 2 || /[^0-9a-f]/.test(s)) return null;
  const out = new Uint8Array(s.length / 2);
  for (let i = 0; i < out.length; i++) out[i] = parseInt(s.substr(i * 2, 2), 16);
  return out;
}

// deriveID returns the hex SHA-256 of e's canonical bytes.
export async function deriveID(e) {
  return hex(await crypto.subtle.digest('SHA-256', canonicalBytes(e)));
}

// leadingZeroBits counts the leading zero bits of a hex id (NIP-13).
export function leadingZeroBits(idHex) {
  let n = 0;
  for (const c of idHex) {
    const v = parseInt(c, 16);
    if (v === 0) { n += 4; continue; }
    return n + Math.clz32(v) - 28;
  }
  return n;
}

// libsodium's ge25519_has_small_order list (sign bit cleared).
const smallOrderY = [
  '0000000000000000000000000000000000000000000000000000000000000000',
  '0100000000000000000000000000000000000000000000000000000000000000',
  '26e8958fc2b227b045c3f489f2ef98f0d5dfac05d3c63339b13802886d53fc05',
  'c7176a703d4dd84fba3c0b760d10670f2a2053fa2c39ccc64ec7fd7792ac037a',
  'ecffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f',
  'edffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f',
  'eeffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f',
];

function smallOrder(b) {
  const y = Uint8Array.from(b);
  y[31] &= 0x7f;
  return smallOrderY.includes(hex(y));
}

function canonicalY(b) {
  if ((b[31] & 0x7f) !== 0x7f) return true;
  for (let i = 1; i < 31; i++) if (b[i] !== 0xff) return true;
  return b[0] < 0xed;
}

// weakKey reports a key no signature is valid under by libsodium's rules.
export function weakKey(pub) {
  return pub.length === 32 && (smallOrder(pub) || !canonicalY(pub));
}

// verifyBytes checks an Ed25519 signature by libsodium's rules.
export async function verifyBytes(pub, msg, sig) {
  if (!pub || !sig || pub.length !== 32 || sig.length !== 64) return false;
  if (weakKey(pub) || smallOrder(sig.subarray(0, 32))) return false;
  try {
    const key = await crypto.subtle.importKey('raw', pub, { name: 'Ed25519' }, false, ['verify']);
    return await crypto.subtle.verify({ name: 'Ed25519' }, key, sig, msg);
  } catch {
    return false;
  }
}

// check re-derives e's id and checks its signature. It returns
// {canonical, derived, idOK, sigOK, pow}; sigOK is checked over the
// stated id only when it is the derived one.
export async function check(e) {
  const text = canonical(e);
  const derived = hex(await crypto.subtle.digest('SHA-256', enc.encode(text)));
  const idOK = derived === e.id;
  const sigOK = idOK && await verifyBytes(unhex(e.agent_id), unhex(e.id), unhex(e.sig));
  return { canonical: text, derived, idOK, sigOK, pow: leadingZeroBits(derived) };
}

// Keys. WebCrypto imports an Ed25519 private key as PKCS #8 only: the
// 32-byte seed behind this fixed prefix.
const pkcs8Prefix = unhex('302e020100300506032b657004220420');

// keyFromSeed returns {seed, agentID, privateKey} for a 64-hex seed.
export async function keyFromSeed(seedHex) {
  const seed = unhex(seedHex.trim().toLowerCase());
  if (!seed || seed.length !== 32) throw new Error('a key is 64 hex characters (the 32-byte Ed25519 seed)');
  const pkcs8 = new Uint8Array(48);
  pkcs8.set(pkcs8Prefix);
  pkcs8.set(seed, 16);
  const privateKey = await crypto.subtle.importKey('pkcs8', pkcs8, { name: 'Ed25519' }, true, ['sign']);
  const jwk = await crypto.subtle.exportKey('jwk', privateKey);
  const pub = Uint8Array.from(atob(jwk.x.replace(/-/g, '+').replace(/_/g, '/')), (c) => c.charCodeAt(0));
  return { seed: hex(seed), agentID: hex(pub), privateKey };
}

// generateSeed returns a fresh random 64-hex seed.
export function generateSeed() {
  return hex(crypto.getRandomValues(new Uint8Array(32)));
}

// sign fills e.agent_id, e.id and e.sig with key (from keyFromSeed); the
// other fields must be final.
export async function sign(e, key) {
  e.agent_id = key.agentID;
  e.id = await deriveID(e);
  e.sig = hex(await crypto.subtle.sign({ name: 'Ed25519' }, key.privateKey, unhex(e.id)));
  return e;
}
