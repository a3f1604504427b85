package main

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/anp2net/relay/protocol"
)

// keyFile is the on-disk form of an agent key (mode 0600).
type keyFile struct {
	AgentID string `json:"agent_id"`
	Seed    string `json:"secret_seed_hex"`
}

type keygenCmd struct {
	out   io.Writer
	path  string
	force bool
}

func (c *keygenCmd) ParseFlags(args []string) error {
	fs := flag.NewFlagSet("keygen", flag.ContinueOnError)
	fs.StringVar(&c.path, "key", "anp2.key", "key file to write")
	fs.BoolVar(&c.force, "force", false, "overwrite an existing key file")
	return parse(fs, args)
}

func (c *keygenCmd) Run(ctx context.Context) error {
	priv, err := newKeyFile(c.path, c.force)
	if err != nil {
		return err
	}
	fmt.Fprintln(c.out, protocol.AgentIDOf(priv))
	return nil
}

// newKeyFile creates a fresh key at path (mode 0600); an existing file is
// an error unless force.
func newKeyFile(path string, force bool) (ed25519.PrivateKey, error) {
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, err
	}
	kf := keyFile{AgentID: protocol.AgentIDOf(priv), Seed: hex.EncodeToString(priv.Seed())}
	b, _ := json.MarshalIndent(kf, "", "  ")
	flags := os.O_WRONLY | os.O_CREATE | os.O_EXCL
	if force {
		flags = os.O_WRONLY | os.O_CREATE | os.O_TRUNC
	}
	f, err := os.OpenFile(path, flags, 0o600)
	if err != nil {
		return nil, fmt.Errorf("write key: %w", err)
	}
	if _, err := f.Write(append(b, '\n')); err != nil {
		f.Close()
		return nil, err
	}
	return priv, f.Close()
}

// loadOrCreateKey loads the key at path, creating it when missing.
func loadOrCreateKey(path string) (ed25519.PrivateKey, error) {
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		return newKeyFile(path, false)
	}
	return loadKey(path)
}

// loadKey reads a key file written by keygen.
func loadKey(path string) (ed25519.PrivateKey, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read key: %w", err)
	}
	var kf keyFile
	if err := json.Unmarshal(b, &kf); err != nil {
		return nil, fmt.Errorf("key file %s: %w", path, err)
	}
	seed, err := hex.DecodeString(kf.Seed)
	if err != nil || len(seed) != ed25519.SeedSize {
		return nil, errors.New("key file: secret_seed_hex must be 64 hex characters")
	}
	return ed25519.NewKeyFromSeed(seed), nil
}
