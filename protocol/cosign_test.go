package protocol

import (
	"crypto/ed25519"
	"testing"
)

func cosignKey(i byte) ed25519.PrivateKey {
	seed := make([]byte, 32)
	seed[0], seed[31] = i, 0xc0
	return ed25519.NewKeyFromSeed(seed)
}

func TestCosignatures(t *testing.T) {
	author, a, b := cosignKey(1), cosignKey(2), cosignKey(3)
	content := `{"checkpoint_id":"cp-1","state_hash":"ab","event_count":10,"as_of":1790000000}`
	tagA, err := Cosign(a, KindCheckpoint, content)
	if err != nil {
		t.Fatal(err)
	}
	// The same endorsement, content written with other key order and spacing.
	tagB, err := Cosign(b, KindCheckpoint, `{ "as_of": 1790000000, "event_count": 10, "state_hash": "ab", "checkpoint_id": "cp-1" }`)
	if err != nil {
		t.Fatal(err)
	}
	otherKind, _ := Cosign(b, KindRollback, content)
	otherContent, _ := Cosign(b, KindCheckpoint, `{"checkpoint_id":"cp-2","state_hash":"ab","event_count":10,"as_of":1790000000}`)
	self, _ := Cosign(author, KindCheckpoint, content)
	bad := []string{"cosign", tagA[1], tagA[2][:126] + "00"}
	e := &Event{Kind: KindCheckpoint, Content: content, CreatedAt: 1790000000, Tags: [][]string{
		tagA, {"cosign", AgentIDOf(a)}, tagA, self, {"cosign", "zz", tagA[2]}, bad,
		{"cosign", tagB[1], otherKind[2]}, {"cosign", tagB[1], otherContent[2]}, tagB,
	}}
	e.Sign(author)
	got := Cosignatures(e)
	want := []Cosignature{
		{AgentIDOf(a), true, ""}, {AgentIDOf(a), false, "duplicate"}, {AgentIDOf(author), false, "author"},
		{"zz", false, "malformed"}, {AgentIDOf(a), false, "duplicate"},
		{AgentIDOf(b), false, "bad_signature"}, {AgentIDOf(b), false, "bad_signature"}, {AgentIDOf(b), true, ""},
	}
	if len(got) != len(want) {
		t.Fatalf("got %d cosignatures, want %d: %+v", len(got), len(want), got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("tag %d: got %+v, want %+v", i, got[i], want[i])
		}
	}
	// Content that is not JSON cannot be cosigned, and its tags never count.
	if _, err := Cosign(a, KindCheckpoint, "not json"); err == nil {
		t.Fatal("cosigned non-JSON content")
	}
	e2 := &Event{Kind: KindCheckpoint, Content: "not json", Tags: [][]string{tagA}}
	if c := Cosignatures(e2); len(c) != 1 || c[0].Valid || c[0].Reason != "malformed" {
		t.Fatalf("non-JSON content: %+v", c)
	}
}
