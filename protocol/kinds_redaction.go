package protocol

// KindRedaction is a relay's record that it withholds an event's body
// (SPEC §21.8): content {"id", "reason"}, tags ["e", <event id>], signed
// by a relay key. It has no publish rule; it counts only where its author
// is a key the relay counts.
const KindRedaction = 25
