package client

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The seeds below were computed with Python's hashlib.pbkdf2_hmac, the
// call the network's Python SDK makes (anp2_client.crypto), and the
// agent_id with Python's cryptography package (Ed25519 from the seed).
func TestKeyFromPassphraseMatchesPythonSDK(t *testing.T) {
	const pass = "correct horse battery staple for anp2 agents"
	for _, c := range []struct{ salt, seed string }{
		{"", "059cafd207abf26936ecedbbb85536237d909618fd2fa2c1949655a541787116"},
		{"anp2-v1", "059cafd207abf26936ecedbbb85536237d909618fd2fa2c1949655a541787116"},
		{"other-salt", "c61bcccdb864f936d41d499b44a2c8df0acd9b67f61ebb954ed06bb7b5ae0119"},
	} {
		id, err := KeyFromPassphrase(pass, c.salt)
		if err != nil {
			t.Fatal(err)
		}
		if got := hex.EncodeToString(id.PrivateKey().Seed()); got != c.seed {
			t.Errorf("salt %q: seed %s, want %s", c.salt, got, c.seed)
		}
	}
	id, _ := KeyFromPassphrase(pass, "")
	if id.AgentID() != "4d6b842a1ebc22f6ecd865c6bcff7bea5fdf272665f308701573ddb9aadf8176" {
		t.Errorf("agent_id %s", id.AgentID())
	}
	if _, err := KeyFromPassphrase("", ""); err == nil {
		t.Error("empty passphrase accepted")
	}
}

func TestIdentityNeverPrintsItsSecret(t *testing.T) {
	id, err := GenerateIdentity()
	if err != nil {
		t.Fatal(err)
	}
	seed := hex.EncodeToString(id.PrivateKey().Seed())
	var logs bytes.Buffer
	slog.New(slog.NewTextHandler(&logs, nil)).Info("start", "key", id)
	js, _ := json.Marshal(map[string]any{"id": id})
	outs := []string{logs.String(), string(js)}
	for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%x", "%q", "%d"} {
		outs = append(outs, fmt.Sprintf(verb, id), fmt.Sprintf(verb, *id), fmt.Sprintf(verb, []*Identity{id}))
	}
	for _, o := range outs {
		if strings.Contains(o, seed) || strings.Contains(strings.ToLower(o), seed[:16]) {
			t.Fatalf("secret printed: %s", o)
		}
	}
	if !strings.Contains(id.String(), id.AgentID()) {
		t.Errorf("String %q does not name the agent", id)
	}
}

// TestKeyOrFresh requires an empty path to give a new key each time and
// writing nothing, and a path to give the key kept there.
func TestKeyOrFresh(t *testing.T) {
	dir := t.TempDir()
	a, errA := KeyOrFresh("")
	b, errB := KeyOrFresh("")
	if errA != nil || errB != nil || a.AgentID() == b.AgentID() {
		t.Fatalf("fresh keys %v (%v), %v (%v): want two different ones", a, errA, b, errB)
	}
	path := filepath.Join(dir, "agent.key")
	c, err := KeyOrFresh(path)
	if err != nil {
		t.Fatal(err)
	}
	if d, err := KeyOrFresh(path); err != nil || d.AgentID() != c.AgentID() {
		t.Fatalf("second open of %s gave %v, %v; want %s", path, d, err, c.AgentID())
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Errorf("%d files in the key directory, want the one key", len(entries))
	}
}

func TestLoadOrCreateKey(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sub", "agent.key")
	a, err := LoadOrCreateKey(path)
	if err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(path)
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("key file mode %v, %v", st.Mode().Perm(), err)
	}
	b, err := LoadOrCreateKey(path)
	if err != nil || b.AgentID() != a.AgentID() {
		t.Fatalf("reload gave %v, %v; want %s", b, err, a.AgentID())
	}
	// A key readable by others is refused, and the error does not leak it.
	os.Chmod(path, 0o644)
	_, err = LoadKey(path)
	if !errors.Is(err, ErrKeyFileMode) {
		t.Fatalf("0644 key file: %v", err)
	}
	// The Python SDK's bare-hex file loads too.
	py := filepath.Join(t.TempDir(), "py.key")
	os.WriteFile(py, []byte(hex.EncodeToString(a.PrivateKey().Seed())+"\n"), 0o600)
	if c, err := LoadKey(py); err != nil || c.AgentID() != a.AgentID() {
		t.Fatalf("hex key file: %v, %v", c, err)
	}
	os.WriteFile(py, []byte("not a key"), 0o600)
	if _, err := LoadKey(py); err == nil || strings.Contains(err.Error(), "not a key") {
		t.Fatalf("bad key file: %v", err)
	}
}

func TestKeyFromEnv(t *testing.T) {
	t.Setenv(EnvKey, "")
	t.Setenv(EnvKeyFile, "")
	t.Setenv(EnvPassphrase, "")
	if _, err := KeyFromEnv(); !errors.Is(err, ErrNoKey) {
		t.Fatalf("empty env: %v", err)
	}
	t.Setenv(EnvPassphrase, "correct horse battery staple for anp2 agents")
	id, err := KeyFromEnv()
	if err != nil || hex.EncodeToString(id.PrivateKey().Seed()) != "059cafd207abf26936ecedbbb85536237d909618fd2fa2c1949655a541787116" {
		t.Fatalf("passphrase env: %v %v", id, err)
	}
	seed := strings.Repeat("ab", 32)
	t.Setenv(EnvKey, seed)
	if id, err = KeyFromEnv(); err != nil || hex.EncodeToString(id.PrivateKey().Seed()) != seed {
		t.Fatalf("key env: %v %v", id, err)
	}
	t.Setenv(EnvKey, "zz"+seed[2:])
	if _, err = KeyFromEnv(); err == nil || strings.Contains(err.Error(), seed[2:]) {
		t.Fatalf("bad key env: %v", err)
	}
}
