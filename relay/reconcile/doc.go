// Package reconcile finds which events two relays hold that the other lacks
// by range-based set reconciliation, with bytes on the wire growing with the
// number of differences rather than with the size of the sets.
//
// Events are Items, (created_at, id) pairs ordered by created_at then id. Each
// side keeps them in an Index. The client sends fingerprints of ranges of its
// set; the server skips the ranges whose fingerprints match its own and
// answers the others with its ids (small ranges) or with fingerprints of
// sub-ranges; the client does the same with the server's answer, and so on,
// until every range is settled. An id list from the server settles a range
// for the client, which compares it with its own ids. The server keeps no
// state between messages and never learns the differences: the client pushes
// what the server lacks afterwards.
//
// The wire format is Negentropy protocol V1 (NIP-77), described with the
// algorithm and its limits in FORMAT.md. The package does no I/O:
//
//	// server, e.g. in POST /sync
//	reply, err := reconcile.Respond(idx, body)
//
//	// client
//	s := reconcile.NewSession(idx)
//	for msg := s.Initiate(); msg != nil; {
//		reply := post(msg)
//		var have, need [][32]byte
//		msg, have, need, err = s.Reconcile(reply)
//		// fetch need from the server, push have to it
//	}
//
// With the default Params two sets of 100,000 shared items differing in 100
// reconcile in 2 round trips and about 81 KB; identical sets in 1 round trip
// and under 700 bytes.
package reconcile
