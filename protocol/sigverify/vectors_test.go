package sigverify

import (
	"bufio"
	"crypto/ed25519"
	"encoding/hex"
	"encoding/json"
	"os"
	"testing"
)

// edgeCase is one line of testdata/vectors/ed25519-edge-cases.jsonl: the
// twelve cases of "Taming the many EdDSAs" (Chalkias et al.), with the
// answers of crypto/ed25519 and of libsodium.
type edgeCase struct {
	Case          int    `json:"case"`
	Message       string `json:"message"`
	PubKey        string `json:"pub_key"`
	Signature     string `json:"signature"`
	CryptoEd25519 bool   `json:"crypto_ed25519"`
	Libsodium     bool   `json:"libsodium"`
	Note          string `json:"note"`
	msg, pub, sig []byte
}

// loadEdgeCases reads the vectors, decoded.
func loadEdgeCases(t *testing.T) []edgeCase {
	t.Helper()
	f, err := os.Open("../../testdata/vectors/ed25519-edge-cases.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []edgeCase
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var c edgeCase
		if err := json.Unmarshal(sc.Bytes(), &c); err != nil {
			t.Fatal(err)
		}
		var e1, e2, e3 error
		c.msg, e1 = hex.DecodeString(c.Message)
		c.pub, e2 = hex.DecodeString(c.PubKey)
		c.sig, e3 = hex.DecodeString(c.Signature)
		if e1 != nil || e2 != nil || e3 != nil {
			t.Fatalf("case %d: bad hex", c.Case)
		}
		out = append(out, c)
	}
	if len(out) != 12 {
		t.Fatalf("%d cases, want 12", len(out))
	}
	return out
}

// TestEdgeCaseVectors requires libsodium's answer on each of the twelve
// cases from Verify (three times: decoded key, table build, table), from
// VerifyBatch in batches mixing them with valid signatures, and from the
// reference predicate; and checks that the crypto_ed25519 column is
// crypto/ed25519's, so the cases where the two differ are the ones tested.
func TestEdgeCaseVectors(t *testing.T) {
	cases := loadEdgeCases(t)
	c := New(DefaultBytes)
	differ := 0
	for _, tc := range cases {
		if got := sodiumVerify(tc.pub, tc.msg, tc.sig); got != tc.Libsodium {
			t.Errorf("case %d (%s): reference says %v, libsodium %v", tc.Case, tc.Note, got, tc.Libsodium)
		}
		if tc.CryptoEd25519 != tc.Libsodium {
			differ++
		}
		for round := range 3 {
			if got := c.Verify(tc.pub, tc.msg, tc.sig); got != tc.Libsodium {
				t.Errorf("case %d (%s) round %d: Verify %v, libsodium %v", tc.Case, tc.Note, round, got, tc.Libsodium)
			}
		}
	}
	if differ != 4 {
		t.Fatalf("%d cases where crypto/ed25519 and libsodium differ, want 4", differ)
	}
	// Batches: every case between valid signatures of a warm key (so
	// the batch has table checks sharing an inversion), all cases in one
	// batch, and each case alone.
	priv := keyOf(3)
	valid := func(i int) Job {
		msg := []byte{byte(i)}
		return Job{Pub: priv.Public().(ed25519.PublicKey), Msg: msg, Sig: ed25519.Sign(priv, msg)}
	}
	var jobs []Job
	var want []bool
	for i, tc := range cases {
		jobs = append(jobs, valid(2*i), Job{Pub: tc.pub, Msg: tc.msg, Sig: tc.sig})
		want = append(want, true, tc.Libsodium)
	}
	for round := range 3 {
		got := make([]bool, len(jobs))
		c.VerifyBatch(jobs, got)
		for i := range jobs {
			if got[i] != want[i] {
				t.Errorf("round %d: mixed batch job %d: got %v, want %v", round, i, got[i], want[i])
			}
		}
		for i, tc := range cases {
			one := make([]bool, 1)
			c.VerifyBatch([]Job{{Pub: tc.pub, Msg: tc.msg, Sig: tc.sig}}, one)
			if one[0] != tc.Libsodium {
				t.Errorf("round %d: case %d alone in a batch: %v", round, i, one[0])
			}
		}
	}
}
