// Package interop holds the A2A interoperability test: the official Go SDK
// (github.com/a2aproject/a2a-go, pinned) against a real relay on loopback.
// It is a nested module so that the relay's own module does not depend on
// the SDK and its gRPC stack. Run it with run.sh.
package interop
