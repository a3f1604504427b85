package a2a

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"

	"github.com/anp2net/relay/protocol"
	"github.com/anp2net/relay/relay/delivery"
)

// Pusher keeps A2A push notification configs and delivers notifications
// durably; relay/delivery's Module is one (its queue, states, lease,
// watchdog, retries and signatures).
type Pusher interface {
	SetPushConfig(ctx context.Context, c delivery.PushConfig) (delivery.PushConfig, error)
	PushConfigs(ctx context.Context, taskID string) ([]delivery.PushConfig, error)
	DeletePushConfig(ctx context.Context, taskID, id string) (bool, error)
	// HasPushConfigs reports, without I/O, whether any config is stored.
	HasPushConfigs() bool
	Notify(ctx context.Context, c delivery.PushConfig, key string, body []byte) error
}

var _ Pusher = (*delivery.Module)(nil)

// pushConfig is A2A's PushNotificationConfig.
type pushConfig struct {
	ID             *string         `json:"id,omitempty"`
	URL            string          `json:"url"`
	Token          *string         `json:"token,omitempty"`
	Authentication json.RawMessage `json:"authentication,omitempty"`
}

// taskPushConfig is A2A's TaskPushNotificationConfig.
type taskPushConfig struct {
	TaskID                 string     `json:"taskId"`
	PushNotificationConfig pushConfig `json:"pushNotificationConfig"`
}

// toA2A is c as the push-config methods return it: never with its token,
// which only the receiver of the notifications may see (a caller who
// learns it could forge notifications the receiver would trust).
func toA2A(c delivery.PushConfig) taskPushConfig {
	id := c.ID
	return taskPushConfig{TaskID: c.TaskID, PushNotificationConfig: pushConfig{ID: &id, URL: c.URL}}
}

// pushOwner checks that the caller in ctx may manage the push configs of
// taskID: the task is native and the caller is its requester, proved by
// the request's D4 header. A stranger (anonymous, a header that proves
// nothing, another agent) gets -32001 as for an unknown task, so a config
// is out of reach of everyone but the requester; an A2A-originated task,
// complete when message/send answers and owned by no key, takes no configs
// (-32004).
func (a *Adapter) pushOwner(ctx context.Context, taskID string) *Error {
	if _, ok := a.store.get(taskID); ok {
		return rpcError(CodeUnsupportedOperation, "push configs are for native tasks: an A2A-originated task is complete when "+
			"message/send answers and has no requester key to own a config", "id", taskID)
	}
	v, ok := a.lookupNative(taskID)
	if !ok {
		return rpcError(CodeTaskNotFound, "no A2A task and no native kind-50 task has this id", "id", taskID)
	}
	who, err := callerFrom(ctx).who()
	switch {
	case err != nil:
		return notRequester(taskID, "the Authorization header proves no identity: "+protocolDetail(err))
	case who == "":
		return notRequester(taskID, "the request is anonymous")
	case who != v.Requester:
		return notRequester(taskID, "the request is signed by another agent")
	}
	return nil
}

// notRequester is the answer to a stranger: -32001, the task as out of the
// caller's reach, with why and what would succeed.
func notRequester(taskID, why string) *Error {
	return rpcError(CodeTaskNotFound, "no task of yours has this id ("+why+"): a task's push configs belong to its requester, "+
		"who signs the request with the D4 header Authorization: ANP2 <base64 of a kind 27235 event>", "id", taskID)
}

// pushError maps a Pusher refusal to invalid params, anything else to an
// internal error.
func pushError(err error) *Error {
	var pe *protocol.Error
	if errors.As(err, &pe) {
		return invalidParams("pushNotificationConfig: %s", pe.Detail)
	}
	return rpcError(CodeInternalError, "")
}

// pushMethod runs tasks/pushNotificationConfig/set|get|list|delete for
// the task's requester (pushOwner).
func (a *Adapter) pushMethod(ctx context.Context, method string, raw json.RawMessage) (any, *Error) {
	if method == "tasks/pushNotificationConfig/set" {
		return a.pushSet(ctx, raw)
	}
	var q struct {
		ID       string `json:"id"`
		ConfigID string `json:"pushNotificationConfigId"`
	}
	if err := decodeParams(raw, &q); err != nil {
		return nil, err
	}
	if q.ID == "" {
		return nil, invalidParams("params.id (the task id) is required")
	}
	if err := a.pushOwner(ctx, q.ID); err != nil {
		return nil, err
	}
	cs, err := a.opts.Push.PushConfigs(ctx, q.ID)
	if err != nil {
		return nil, pushError(err)
	}
	switch method {
	case "tasks/pushNotificationConfig/list":
		out := make([]taskPushConfig, len(cs))
		for i, c := range cs {
			out[i] = toA2A(c)
		}
		return out, nil
	case "tasks/pushNotificationConfig/get":
		for _, c := range cs {
			if q.ConfigID == "" || c.ID == q.ConfigID {
				return toA2A(c), nil
			}
		}
		return nil, invalidParams("no push notification config %q for this task", q.ConfigID)
	}
	if q.ConfigID == "" {
		return nil, invalidParams("params.pushNotificationConfigId is required")
	}
	ok, err := a.opts.Push.DeletePushConfig(ctx, q.ID, q.ConfigID)
	if err != nil {
		return nil, pushError(err)
	}
	if !ok {
		return nil, invalidParams("no push notification config %q for this task", q.ConfigID)
	}
	return nil, nil
}

// pushSet runs tasks/pushNotificationConfig/set.
func (a *Adapter) pushSet(ctx context.Context, raw json.RawMessage) (any, *Error) {
	var p taskPushConfig
	if err := decodeParams(raw, &p); err != nil {
		return nil, err
	}
	if p.TaskID == "" || p.PushNotificationConfig.URL == "" {
		return nil, invalidParams("params.taskId and params.pushNotificationConfig.url are required")
	}
	if len(p.PushNotificationConfig.Authentication) > 0 && string(p.PushNotificationConfig.Authentication) != "null" {
		return nil, invalidParams("pushNotificationConfig.authentication is not supported; use token (sent back in %s) and check the relay's signature", delivery.HeaderA2AToken)
	}
	if err := a.pushOwner(ctx, p.TaskID); err != nil {
		return nil, err
	}
	c := delivery.PushConfig{TaskID: p.TaskID, URL: p.PushNotificationConfig.URL}
	if p.PushNotificationConfig.ID != nil {
		c.ID = *p.PushNotificationConfig.ID
	}
	if p.PushNotificationConfig.Token != nil {
		c.Token = *p.PushNotificationConfig.Token
	}
	c, err := a.opts.Push.SetPushConfig(ctx, c)
	if err != nil {
		return nil, pushError(err)
	}
	a.pushWake()
	return toA2A(c), nil
}

// notifyAll queues, for every task with push configs, its current state
// for each config. A notification is keyed by (task, config, state,
// status timestamp), so each change is queued once per config however
// often this runs, and a restart re-queues nothing already queued.
func (a *Adapter) notifyAll(ctx context.Context) error {
	if !a.opts.Push.HasPushConfigs() {
		return nil // the common case: nothing to read on each commit
	}
	cs, err := a.opts.Push.PushConfigs(ctx, "")
	if err != nil {
		return err
	}
	base := a.opts.PublicBaseURL
	for _, c := range cs {
		var task Task
		if t, ok := a.store.get(c.TaskID); ok {
			task = trimHistory(t, 0)
		} else if v, ok := a.lookupNative(c.TaskID); ok {
			task = a.nativeTask(v, base, 0, false)
		} else {
			continue
		}
		body, _ := json.Marshal(task)
		sum := sha256.Sum256([]byte("a2a-push\x00" + c.TaskID + "\x00" + c.ID + "\x00" + string(task.Status.State) + "\x00" + task.Status.Timestamp))
		if err := a.opts.Push.Notify(ctx, c, hex.EncodeToString(sum[:]), body); err != nil {
			return err
		}
	}
	return nil
}

func (a *Adapter) pushWake() {
	select {
	case a.pushSignal <- struct{}{}:
	default:
	}
}
