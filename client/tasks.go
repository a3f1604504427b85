package client

import (
	"context"
	"fmt"
	"time"

	"github.com/anp2net/relay/protocol"
)

// The task lifecycle (seed §18, SPEC §5.3) as one agent sees it. A
// requester calls RequestTask, WaitResult, VerifyResult (its own verdict
// is recorded but only neutral verifiers' verdicts count), then
// ReleasePayment, and WaitSettled; a provider calls AcceptTask and
// SubmitResult. Credit moves when neutral verifiers pass the result (SPEC
// §5.4), whatever the payment event says.

// RequestTask publishes a kind 50 (mining its proof of work) and returns
// its id, the task_id.
func (c *Client) RequestTask(ctx context.Context, r TaskRequest) (string, error) {
	e := TaskRequestEvent(r)
	if _, err := c.Send(ctx, e); err != nil {
		return "", fmt.Errorf("request task: %w", err)
	}
	return e.ID, nil
}

// AcceptTask publishes a kind 51 bid on t at priceUSD ("" or "0" for a
// credit task) and returns it; the earliest acceptable bid wins.
func (c *Client) AcceptTask(ctx context.Context, t *Task, priceUSD string, etaUnix int64) (*protocol.Event, error) {
	e := TaskAcceptEvent(t.TaskID, t.Requester, t.Capability, priceUSD, etaUnix)
	if _, err := c.Send(ctx, e); err != nil {
		return nil, fmt.Errorf("accept task: %w", err)
	}
	return e, nil
}

// SubmitResult publishes a kind 52 with output for the task t that c won
// with the accept acceptID; it counts only from the winning provider and
// before the deadline.
func (c *Client) SubmitResult(ctx context.Context, t *Task, acceptID string, output any, runtimeMS int64) (*protocol.Event, error) {
	e := TaskResultEvent(TaskResult{TaskID: t.TaskID, AcceptID: acceptID, Requester: t.Requester, Output: output, RuntimeMS: runtimeMS})
	if _, err := c.Send(ctx, e); err != nil {
		return nil, fmt.Errorf("submit result: %w", err)
	}
	return e, nil
}

// SubmitSealedResult is SubmitResult with the output sealed to the
// requester (SealTaskOutput; SPEC §10.4): only the requester and the
// provider can open it (OpenTaskOutput).
func (c *Client) SubmitSealedResult(ctx context.Context, t *Task, acceptID string, output []byte, runtimeMS int64) (*protocol.Event, error) {
	if c.Key == nil {
		return nil, ErrNoIdentity
	}
	sealed, tag, err := SealTaskOutput(c.Key, t.Requester, output, nil)
	if err != nil {
		return nil, err
	}
	e := TaskResultEvent(TaskResult{TaskID: t.TaskID, AcceptID: acceptID, Requester: t.Requester, Output: sealed,
		Format: "sealed", RuntimeMS: runtimeMS, Sealed: tag})
	if _, err := c.Send(ctx, e); err != nil {
		return nil, fmt.Errorf("submit result: %w", err)
	}
	return e, nil
}

// VerifyResult publishes a kind 53 verdict (protocol.VerdictPassed,
// VerdictFailed, VerdictDisputed) with score in [0, 1] on t's counting
// result. It fails when t has no result yet.
func (c *Client) VerifyResult(ctx context.Context, t *Task, verdict string, score float64, reasons ...string) (*protocol.Event, error) {
	if t.Result == nil {
		return nil, fmt.Errorf("verify task %s: no counting result yet", t.TaskID)
	}
	e := TaskVerifyEvent(t.TaskID, t.Result.EventID, t.Provider, verdict, score, reasons...)
	if _, err := c.Send(ctx, e); err != nil {
		return nil, fmt.Errorf("verify result: %w", err)
	}
	return e, nil
}

// ReleasePayment publishes the requester's kind 54 release of t's reward
// to its provider (disposition "refund" with Refund). It fails when t has
// no provider.
func (c *Client) ReleasePayment(ctx context.Context, t *Task, method, amount, currency string) (*protocol.Event, error) {
	return c.pay(ctx, t, protocol.DispositionRelease, method, amount, currency)
}

// Refund publishes the requester's kind 54 refund of t.
func (c *Client) Refund(ctx context.Context, t *Task, method, amount, currency string) (*protocol.Event, error) {
	return c.pay(ctx, t, protocol.DispositionRefund, method, amount, currency)
}

func (c *Client) pay(ctx context.Context, t *Task, disposition, method, amount, currency string) (*protocol.Event, error) {
	if t.Provider == "" {
		return nil, fmt.Errorf("pay task %s: no provider", t.TaskID)
	}
	e := PaymentEvent(Payment{TaskID: t.TaskID, Provider: t.Provider, Disposition: disposition,
		PaymentMethod: method, Amount: amount, Currency: currency})
	if _, err := c.Send(ctx, e); err != nil {
		return nil, fmt.Errorf("pay: %w", err)
	}
	return e, nil
}

// CancelTask publishes the requester's kind 55; it counts only before any
// accept.
func (c *Client) CancelTask(ctx context.Context, taskID, reason string) error {
	if _, err := c.Send(ctx, TaskCancelEvent(taskID, reason)); err != nil {
		return fmt.Errorf("cancel task: %w", err)
	}
	return nil
}

// WaitTask returns the task once cond holds. It reads the task, then
// re-reads it at each new event of its thread, learnt from a subscription
// (no polling), and once more when its deadline passes (timed_out needs
// no event). It returns ctx's error when ctx ends first, and the read's
// error when the task cannot be read.
func (c *Client) WaitTask(ctx context.Context, taskID string, cond func(*Task) bool) (*Task, error) {
	from, err := c.health(ctx) // events after this are delivered; before it, in the first read
	if err != nil {
		return nil, fmt.Errorf("wait task: %w", err)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	sub := c.Subscribe(ctx, Filter{Tags: map[string][]string{"e": {taskID}}}, from, SubOptions{})
	defer sub.Close()
	var deadline <-chan time.Time
	for {
		t, err := c.Task(ctx, taskID)
		if err != nil {
			return nil, fmt.Errorf("wait task: %w", err)
		}
		if cond(t) {
			return t, nil
		}
		if deadline == nil && t.Deadline > 0 {
			deadline = time.After(time.Until(time.Unix(t.Deadline+2, 0)))
		}
		select {
		case _, ok := <-sub.Events():
			if !ok {
				if err := sub.Err(); err != nil {
					return nil, fmt.Errorf("wait task: %w", err)
				}
				return nil, ctx.Err()
			}
		case <-deadline:
			deadline = time.After(time.Minute)
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// WaitAccepted waits until t has a winning accept (or has ended).
func (c *Client) WaitAccepted(ctx context.Context, taskID string) (*Task, error) {
	return c.WaitTask(ctx, taskID, func(t *Task) bool { return t.Accept != nil || t.Settled() })
}

// WaitResult waits until t has a counting result (or has ended).
func (c *Client) WaitResult(ctx context.Context, taskID string) (*Task, error) {
	return c.WaitTask(ctx, taskID, func(t *Task) bool { return t.Result != nil || t.Settled() })
}

// WaitVerdict waits until t's verification consensus is reached (passed,
// failed or disputed) or t has ended.
func (c *Client) WaitVerdict(ctx context.Context, taskID string) (*Task, error) {
	return c.WaitTask(ctx, taskID, func(t *Task) bool { return t.Consensus.Verdict != "" || t.Settled() })
}

// WaitSettled waits until t is paid, refunded, cancelled or timed out.
func (c *Client) WaitSettled(ctx context.Context, taskID string) (*Task, error) {
	return c.WaitTask(ctx, taskID, (*Task).Settled)
}
