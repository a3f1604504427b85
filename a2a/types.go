package a2a

import (
	"crypto/rand"
	"encoding/hex"
	"time"
)

// TaskState is an A2A v0.3.0 task state.
type TaskState string

// The A2A v0.3.0 TaskState enum.
const (
	StateSubmitted     TaskState = "submitted"
	StateWorking       TaskState = "working"
	StateInputRequired TaskState = "input-required"
	StateCompleted     TaskState = "completed"
	StateCanceled      TaskState = "canceled"
	StateFailed        TaskState = "failed"
	StateRejected      TaskState = "rejected"
	StateAuthRequired  TaskState = "auth-required"
	StateUnknown       TaskState = "unknown"
)

// Terminal reports whether s ends a task in A2A terms.
func (s TaskState) Terminal() bool {
	switch s {
	case StateCompleted, StateCanceled, StateFailed, StateRejected:
		return true
	}
	return false
}

func knownState(s TaskState) bool {
	switch s {
	case StateSubmitted, StateWorking, StateInputRequired, StateCompleted, StateCanceled,
		StateFailed, StateRejected, StateAuthRequired, StateUnknown:
		return true
	}
	return false
}

// Task is an A2A Task object.
type Task struct {
	Kind      string         `json:"kind"` // always "task"
	ID        string         `json:"id"`
	ContextID string         `json:"contextId"`
	Status    TaskStatus     `json:"status"`
	History   []Message      `json:"history,omitempty"`
	Artifacts []Artifact     `json:"artifacts,omitempty"`
	Metadata  map[string]any `json:"metadata,omitempty"`
}

// TaskStatus is a task's state at a time, with an optional agent message.
type TaskStatus struct {
	State     TaskState `json:"state"`
	Message   *Message  `json:"message,omitempty"`
	Timestamp string    `json:"timestamp,omitempty"` // RFC 3339
}

// Message is an A2A Message.
type Message struct {
	Kind             string         `json:"kind"` // always "message"
	Role             string         `json:"role"` // "user" or "agent"
	Parts            []Part         `json:"parts"`
	MessageID        string         `json:"messageId"`
	TaskID           string         `json:"taskId,omitempty"`
	ContextID        string         `json:"contextId,omitempty"`
	ReferenceTaskIDs []string       `json:"referenceTaskIds,omitempty"`
	Extensions       []string       `json:"extensions,omitempty"`
	Metadata         map[string]any `json:"metadata,omitempty"`
}

// Part is one part of a message or artifact: kind "text" (Text), "data"
// (Data) or "file" (File, kept verbatim).
type Part struct {
	Kind     string         `json:"kind"`
	Text     *string        `json:"text,omitempty"`
	Data     map[string]any `json:"data,omitempty"`
	File     map[string]any `json:"file,omitempty"`
	Metadata map[string]any `json:"metadata,omitempty"`
}

// TextPart returns a text part.
func TextPart(s string) Part { return Part{Kind: "text", Text: &s} }

// DataPart returns a structured-data part.
func DataPart(d map[string]any) Part { return Part{Kind: "data", Data: d} }

// Artifact is an output of a task.
type Artifact struct {
	ArtifactID  string         `json:"artifactId"`
	Name        string         `json:"name,omitempty"`
	Description string         `json:"description,omitempty"`
	Parts       []Part         `json:"parts"`
	Metadata    map[string]any `json:"metadata,omitempty"`
}

// StatusUpdate is a TaskStatusUpdateEvent, one frame of a stream.
type StatusUpdate struct {
	Kind      string         `json:"kind"` // always "status-update"
	TaskID    string         `json:"taskId"`
	ContextID string         `json:"contextId"`
	Status    TaskStatus     `json:"status"`
	Final     bool           `json:"final"`
	Metadata  map[string]any `json:"metadata,omitempty"`
}

// ArtifactUpdate is a TaskArtifactUpdateEvent, one frame of a stream.
type ArtifactUpdate struct {
	Kind      string   `json:"kind"` // always "artifact-update"
	TaskID    string   `json:"taskId"`
	ContextID string   `json:"contextId"`
	Artifact  Artifact `json:"artifact"`
	Append    bool     `json:"append"`
	LastChunk bool     `json:"lastChunk"`
}

// timestamp formats t as A2A timestamps are written (RFC 3339, UTC).
func timestamp(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

// newID returns a random RFC 4122 version 4 UUID.
func newID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go ≥ 1.24)
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b[:])
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:32]
}
