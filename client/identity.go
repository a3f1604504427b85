package client

import (
	"crypto/ed25519"
	"crypto/pbkdf2"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"github.com/anp2net/relay/protocol"
)

// Passphrase derivation parameters of the network's Python SDK
// (anp2_client.crypto.derive_keypair_from_passphrase): PBKDF2-HMAC-SHA256
// over the UTF-8 passphrase and salt, 200,000 iterations, 32 bytes used as
// the Ed25519 seed. The same passphrase and salt give the same agent in
// both SDKs.
const (
	DefaultPassphraseSalt = "anp2-v1"
	PassphraseIterations  = 200_000
)

// Environment variables KeyFromEnv reads, in this order.
const (
	EnvKey        = "ANP2_KEY"        // 64 hex: the Ed25519 seed
	EnvKeyFile    = "ANP2_KEY_FILE"   // a key file (LoadKey)
	EnvPassphrase = "ANP2_PASSPHRASE" // a passphrase (KeyFromPassphrase, default salt)
)

// Errors of loading keys.
var (
	// ErrNoKey: none of EnvKey, EnvKeyFile, EnvPassphrase is set.
	ErrNoKey = errors.New("no key in the environment (set " + EnvKey + ", " + EnvKeyFile + " or " + EnvPassphrase + ")")
	// ErrKeyFileMode: a key file is readable or writable by group or others.
	ErrKeyFileMode = errors.New("key file is accessible to group or others (chmod 600 it)")
)

// Identity is an agent's signing key. Its String, Format, GoString,
// LogValue and MarshalJSON never show the secret: printing or logging an
// Identity shows only its agent_id.
type Identity struct {
	priv ed25519.PrivateKey
	id   string
}

// NewIdentity wraps an Ed25519 private key.
func NewIdentity(priv ed25519.PrivateKey) *Identity {
	return &Identity{priv: priv, id: protocol.AgentIDOf(priv)}
}

// GenerateIdentity returns a fresh random identity. It fails only when the
// system's random source does.
func GenerateIdentity() (*Identity, error) {
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generate key: %w", err)
	}
	return NewIdentity(priv), nil
}

// IdentityFromSeedHex returns the identity of a 64-hex Ed25519 seed (the
// form the Python SDK stores and `anp2 keygen` writes as secret_seed_hex).
// A 128-hex value is taken as seed followed by public key. Anything else
// is an error that does not echo the input.
func IdentityFromSeedHex(s string) (*Identity, error) {
	s = strings.TrimSpace(s)
	b, err := hex.DecodeString(s)
	if err != nil || (len(b) != ed25519.SeedSize && len(b) != ed25519.PrivateKeySize) {
		return nil, errors.New("key must be 64 hex characters (an Ed25519 seed)")
	}
	priv := ed25519.NewKeyFromSeed(b[:ed25519.SeedSize])
	if len(b) == ed25519.PrivateKeySize && !strings.EqualFold(hex.EncodeToString(b[32:]), hex.EncodeToString(priv[32:])) {
		return nil, errors.New("key: public half does not match the seed")
	}
	return NewIdentity(priv), nil
}

// KeyFromPassphrase derives the identity the Python SDK's
// Agent.from_passphrase derives: PBKDF2-HMAC-SHA256(passphrase, salt,
// 200,000 iterations, 32 bytes) as the Ed25519 seed. salt "" means
// DefaultPassphraseSalt; distinct salts give distinct identities from one
// passphrase. The passphrase is the only protection: use a long one.
func KeyFromPassphrase(passphrase, salt string) (*Identity, error) {
	if passphrase == "" {
		return nil, errors.New("empty passphrase")
	}
	if salt == "" {
		salt = DefaultPassphraseSalt
	}
	seed, err := pbkdf2.Key(sha256.New, passphrase, []byte(salt), PassphraseIterations, ed25519.SeedSize)
	if err != nil {
		return nil, fmt.Errorf("derive key: %w", err)
	}
	defer clear(seed)
	return NewIdentity(ed25519.NewKeyFromSeed(seed)), nil
}

// keyFile is the JSON form `anp2 keygen` writes.
type keyFile struct {
	AgentID string `json:"agent_id"`
	Seed    string `json:"secret_seed_hex"`
}

// LoadKey reads a key file: the JSON `anp2 keygen` writes
// ({"agent_id", "secret_seed_hex"}) or a bare 64-hex seed (the Python
// SDK's file). It fails with ErrKeyFileMode when the file is accessible to
// group or others, and when the file is missing or malformed.
func LoadKey(path string) (*Identity, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("read key: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("read key: %w", err)
	}
	if st.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("%s (mode %o): %w", path, st.Mode().Perm(), ErrKeyFileMode)
	}
	b, err := io.ReadAll(io.LimitReader(f, 4096))
	defer clear(b)
	if err != nil {
		return nil, fmt.Errorf("read key: %w", err)
	}
	text := strings.TrimSpace(string(b))
	if strings.HasPrefix(text, "{") {
		var kf keyFile
		if err := json.Unmarshal([]byte(text), &kf); err != nil {
			return nil, fmt.Errorf("key file %s: not a key file", path)
		}
		text = kf.Seed
	}
	id, err := IdentityFromSeedHex(text)
	if err != nil {
		return nil, fmt.Errorf("key file %s: %w", path, err)
	}
	return id, nil
}

// KeyOrFresh returns the identity a --key flag names: LoadOrCreateKey(path),
// or when path is empty a fresh identity that is kept nowhere (a demo
// agent's).
func KeyOrFresh(path string) (*Identity, error) {
	if path == "" {
		return GenerateIdentity()
	}
	return LoadOrCreateKey(path)
}

// LoadOrCreateKey loads the key at path (LoadKey, with its mode check), or
// when the file does not exist creates a fresh key there with mode 0600
// (its directory 0700 if missing), in `anp2 keygen`'s format. Two processes
// racing to create it end with the same key: creation is exclusive.
func LoadOrCreateKey(path string) (*Identity, error) {
	if _, err := os.Stat(path); !errors.Is(err, fs.ErrNotExist) {
		return LoadKey(path)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("key dir: %w", err)
	}
	id, err := GenerateIdentity()
	if err != nil {
		return nil, err
	}
	b, _ := json.MarshalIndent(keyFile{AgentID: id.id, Seed: hex.EncodeToString(id.priv.Seed())}, "", "  ")
	defer clear(b)
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, fs.ErrExist) {
		return LoadKey(path)
	}
	if err != nil {
		return nil, fmt.Errorf("write key: %w", err)
	}
	if _, err := f.Write(append(b, '\n')); err != nil {
		f.Close()
		return nil, fmt.Errorf("write key: %w", err)
	}
	if err := f.Close(); err != nil {
		return nil, fmt.Errorf("write key: %w", err)
	}
	return id, nil
}

// KeyFromEnv returns the identity named by the environment: EnvKey (a
// 64-hex seed), else EnvKeyFile (a key file, LoadKey), else EnvPassphrase
// (KeyFromPassphrase with the default salt). It fails with ErrNoKey when
// none is set; errors never include the secret.
func KeyFromEnv() (*Identity, error) {
	if v := os.Getenv(EnvKey); v != "" {
		id, err := IdentityFromSeedHex(v)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", EnvKey, err)
		}
		return id, nil
	}
	if v := os.Getenv(EnvKeyFile); v != "" {
		return LoadKey(v)
	}
	if v := os.Getenv(EnvPassphrase); v != "" {
		return KeyFromPassphrase(v, "")
	}
	return nil, ErrNoKey
}

// AgentID returns the agent_id: the public key in 64 lowercase hex.
func (id Identity) AgentID() string { return id.id }

// PrivateKey returns the Ed25519 private key, for signing. Keep it out of
// logs: unlike the Identity, the key prints its secret.
func (id Identity) PrivateKey() ed25519.PrivateKey { return id.priv }

// String returns "anp2 identity <agent_id>", never the secret.
func (id Identity) String() string { return "anp2 identity " + id.id }

// GoString is String, so %#v cannot print the secret either.
func (id Identity) GoString() string { return id.String() }

// Format prints String for every verb (%v, %+v, %#v, %s, %x, %q …).
func (id Identity) Format(f fmt.State, verb rune) { fmt.Fprint(f, id.String()) }

// LogValue makes slog record only the agent_id.
func (id Identity) LogValue() slog.Value { return slog.StringValue(id.String()) }

// MarshalJSON writes only the agent_id ({"agent_id": …}).
func (id Identity) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		AgentID string `json:"agent_id"`
	}{id.id})
}
