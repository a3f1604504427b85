package delivery

import (
	"context"
	"fmt"

	"github.com/anp2net/relay/protocol"
)

// PushConfig is an A2A push notification config: where the relay POSTs
// a task's updates, and the token it sends back in
// X-A2A-Notification-Token.
type PushConfig struct {
	TaskID    string `json:"taskId"`
	ID        string `json:"id"`
	URL       string `json:"url"`
	Token     string `json:"token,omitempty"`
	CreatedAt int64  `json:"-"`
}

// Limits of A2A push configs.
const (
	maxPushPerTask = 10
	maxPushConfigs = 10000 // in all: every commit re-reads them
	maxToken       = 512
)

// HeaderA2AToken carries a push config's token (A2A).
const HeaderA2AToken = "X-A2A-Notification-Token"

// SetPushConfig records (or replaces, by TaskID and ID) an A2A push
// config; an empty ID is assigned. It fails with a *protocol.Error
// (invalid_trigger for a bad URL or token, webhook_target_refused for a
// plain-http URL, too_many_triggers past 10 configs per task).
func (m *Module) SetPushConfig(ctx context.Context, c PushConfig) (PushConfig, error) {
	t := Target{Type: "webhook", URL: c.URL}
	if err := t.check(m.opts.AllowPrivate); err != nil {
		return c, err
	}
	if len(c.Token) > maxToken || len(c.ID) > 128 {
		return c, bad("token is at most %d bytes and id at most 128", maxToken)
	}
	if c.ID == "" {
		c.ID = newID()
	}
	c.CreatedAt = m.core.Now()
	var n int
	if err := m.store.db.QueryRowContext(ctx, `SELECT count(*) FROM push_configs WHERE task_id = ? AND id != ?`, c.TaskID, c.ID).Scan(&n); err != nil {
		return c, err
	}
	if n >= maxPushPerTask {
		return c, protocol.Errorf(CodeTooManyTriggers, "at most %d push configs per task", maxPushPerTask)
	}
	if err := m.store.db.QueryRowContext(ctx, `SELECT count(*) FROM push_configs`).Scan(&n); err != nil {
		return c, err
	}
	if n >= maxPushConfigs {
		return c, protocol.Errorf(CodeTooManyTriggers, "the relay holds its maximum of %d push configs", maxPushConfigs)
	}
	_, err := m.store.db.ExecContext(ctx, `INSERT INTO push_configs(task_id, id, url, token, created_at) VALUES (?, ?, ?, ?, ?)
		ON CONFLICT(task_id, id) DO UPDATE SET url = excluded.url, token = excluded.token`, c.TaskID, c.ID, c.URL, c.Token, c.CreatedAt)
	if err != nil {
		return c, err
	}
	return c, m.countPushConfigs(ctx)
}

// HasPushConfigs reports whether any push config is stored, without a
// query: the A2A adapter asks on every commit.
func (m *Module) HasPushConfigs() bool { return m.pushes.Load() > 0 }

// countPushConfigs refreshes the count HasPushConfigs reads (after a
// change, and at Mount).
func (m *Module) countPushConfigs(ctx context.Context) error {
	var n int64
	if err := m.store.db.QueryRowContext(ctx, `SELECT count(*) FROM push_configs`).Scan(&n); err != nil {
		return err
	}
	m.pushes.Store(n)
	return nil
}

// PushConfigs returns the configs of taskID ("" for every task's), oldest
// first.
func (m *Module) PushConfigs(ctx context.Context, taskID string) ([]PushConfig, error) {
	q := `SELECT task_id, id, url, token, created_at FROM push_configs`
	var args []any
	if taskID != "" {
		q += ` WHERE task_id = ?`
		args = append(args, taskID)
	}
	rows, err := m.store.db.QueryContext(ctx, q+` ORDER BY created_at, id`, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := []PushConfig{}
	for rows.Next() {
		var c PushConfig
		if err := rows.Scan(&c.TaskID, &c.ID, &c.URL, &c.Token, &c.CreatedAt); err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	return out, rows.Err()
}

// DeletePushConfig removes one config; it reports whether it existed.
func (m *Module) DeletePushConfig(ctx context.Context, taskID, id string) (bool, error) {
	res, err := m.store.db.ExecContext(ctx, `DELETE FROM push_configs WHERE task_id = ? AND id = ?`, taskID, id)
	if err != nil {
		return false, err
	}
	n, _ := res.RowsAffected()
	return n == 1, m.countPushConfigs(ctx)
}

// Notify queues body for c's URL as a delivery of the same engine (same
// states, lease, watchdog, retries, signature headers), with c's token in
// X-A2A-Notification-Token. key identifies the notification: a second
// Notify with the same key queues nothing (idempotent across restarts).
func (m *Module) Notify(ctx context.Context, c PushConfig, key string, body []byte) error {
	now := m.now()
	_, err := m.store.db.ExecContext(ctx, `INSERT INTO deliveries(`+deliveryCols+`, owner, throttle_key, body, token)
		VALUES (?, ?, ?, '', 0, ?, 0, ?, 1, 0, ?, 0, '', ?, ?, '', '', ?, ?) ON CONFLICT(idem_key) DO NOTHING`,
		newID(), key, "a2a:"+c.TaskID+"/"+c.ID, c.URL, StatusPending, now, now, now, body, c.Token)
	if err != nil {
		return fmt.Errorf("queue notification: %w", err)
	}
	m.wakeDispatcher()
	return nil
}
