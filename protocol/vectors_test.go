package protocol

import (
	"bufio"
	"bytes"
	"crypto/ed25519"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"testing"
)

type vector struct {
	Name     string          `json:"name"`
	SeedHex  string          `json:"secret_seed_hex"`
	Event    json.RawMessage `json:"event"`
	Valid    bool            `json:"valid"`
	Reason   string          `json:"reason"`
	ZeroBits *int            `json:"leading_zero_bits"`
}

func loadVectors(t *testing.T) []vector {
	t.Helper()
	f, err := os.Open("../testdata/vectors/events.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []vector
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var v vector
		if err := json.Unmarshal(sc.Bytes(), &v); err != nil {
			t.Fatal(err)
		}
		out = append(out, v)
	}
	if len(out) < 19 {
		t.Fatalf("only %d vectors", len(out))
	}
	return out
}

func codeOf(err error) string {
	var pe *Error
	if errors.As(err, &pe) {
		return pe.Code
	}
	return ""
}

func TestConformanceVectors(t *testing.T) {
	c := DefaultChecker()
	reasonCodes := map[string][]string{
		"id":  {CodeIDMismatch},
		"sig": {CodeBadSignature},
		"pow": {CodePoWRequired, CodePoWBelowMinimum, CodePoWNotMet, CodePoWMalformed},
	}
	// The vectors predate nothing: they are checked with PoW mandatory.
	c.PoW.ActiveFrom = 0
	for _, v := range loadVectors(t) {
		t.Run(v.Name, func(t *testing.T) {
			e, err := DecodeJSON(v.Event)
			if err != nil {
				t.Fatalf("decode: %v", err)
			}
			// The vectors classify id, signature and PoW; shape limits
			// (the far-future created_at vector) are the relay's concern.
			err = e.CheckID()
			if err == nil {
				err = c.CheckAfterID(e)
			}
			if v.Valid {
				if err != nil {
					t.Fatalf("valid vector rejected: %v", err)
				}
			} else if !contains(reasonCodes[v.Reason], codeOf(err)) {
				t.Fatalf("reason %q: got %v (code %q)", v.Reason, err, codeOf(err))
			}
			if v.ZeroBits != nil {
				id, _ := e.IDBytes()
				if got := LeadingZeroBits(id); got != *v.ZeroBits {
					t.Fatalf("leading zero bits %d, vector says %d", got, *v.ZeroBits)
				}
			}
			if v.SeedHex != "" {
				seed, _ := hex.DecodeString(v.SeedHex)
				resigned := *e
				resigned.ID, resigned.Sig, resigned.AgentID = "", "", ""
				resigned.Sign(ed25519.NewKeyFromSeed(seed))
				if resigned.ID != e.ID || resigned.Sig != e.Sig || resigned.AgentID != e.AgentID {
					t.Fatalf("signing from the seed does not reproduce the vector:\n got %s %s\nwant %s %s", resigned.ID, resigned.Sig, e.ID, e.Sig)
				}
			}
		})
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// networkSample returns the lines of the public-network sample.
func networkSample(t *testing.T) [][]byte {
	t.Helper()
	b, err := os.ReadFile("../testdata/vectors/anp2-network-sample.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	return bytes.Split(bytes.TrimSpace(b), []byte("\n"))
}

// TestNetworkSample checks the 443 public-network events: exactly 196 derive
// their id under RFC 8785 and verify; the rest are id mismatches.
func TestNetworkSample(t *testing.T) {
	f, err := os.Open("../testdata/vectors/anp2-network-sample.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	c := DefaultChecker()
	c.Limits.MaxAge = 0
	counts := map[string]int{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		e, err := DecodeJSON(sc.Bytes())
		if err != nil {
			t.Fatalf("decode: %v", err)
		}
		counts[codeOf(c.CheckFirst(e, 1779200000))]++
	}
	if counts[""] != 196 || counts[CodeIDMismatch] != 247 || len(counts) != 2 {
		t.Fatalf("want 196 accepted and 247 id mismatches, got %v", counts)
	}
}
