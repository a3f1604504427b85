package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/anp2net/relay/protocol"
	"github.com/cloudflare/circl/sign/mldsa/mldsa65"
)

// pqKeygenCmd creates an ML-DSA-65 key for a seed or sovereign key holder
// (SPEC §13.2) and prints the line for the relay's --pq-keys file.
type pqKeygenCmd struct {
	out              io.Writer
	keyPath, agentOf string
}

func (c *pqKeygenCmd) ParseFlags(args []string) error {
	fs := flag.NewFlagSet("pqkey", flag.ContinueOnError)
	fs.StringVar(&c.keyPath, "key", "anp2.pq-key", "file to create with the ML-DSA-65 seed (0600)")
	fs.StringVar(&c.agentOf, "agent-key", "anp2.key", "the Ed25519 key file (anp2 keygen) this post-quantum key pairs with")
	return parse(fs, args)
}

// Run writes the seed and prints {"<agent_id>": "<public key hex>"}.
func (c *pqKeygenCmd) Run(ctx context.Context) error {
	ed, err := loadKey(c.agentOf)
	if err != nil {
		return err
	}
	var seed [mldsa65.SeedSize]byte
	if _, err := rand.Read(seed[:]); err != nil {
		return err
	}
	pk, _ := mldsa65.NewKeyFromSeed(&seed)
	f, err := os.OpenFile(c.keyPath, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fmt.Errorf("create pq key: %w", err)
	}
	if _, err := fmt.Fprintln(f, hex.EncodeToString(seed[:])); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	raw, _ := pk.MarshalBinary()
	b, _ := json.Marshal(map[string]string{protocol.AgentIDOf(ed): hex.EncodeToString(raw)})
	fmt.Fprintln(c.out, string(b))
	return nil
}

// loadPQKey reads a seed written by `anp2 pqkey`.
func loadPQKey(path string) (*mldsa65.PrivateKey, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read pq key: %w", err)
	}
	s, err := hex.DecodeString(strings.TrimSpace(string(b)))
	if err != nil || len(s) != mldsa65.SeedSize {
		return nil, errors.New("pq key file: want the 64 hex characters of an ML-DSA-65 seed")
	}
	var seed [mldsa65.SeedSize]byte
	copy(seed[:], s)
	_, sk := mldsa65.NewKeyFromSeed(&seed)
	return sk, nil
}
