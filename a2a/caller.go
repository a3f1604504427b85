package a2a

import (
	"context"
	"sync"

	"github.com/labstack/echo/v4"
)

// caller is who sent one HTTP request, found at most once and only when a
// method asks: most methods are public and never read the Authorization
// header, and a batch of push-config calls shares one check (a D4 header
// proves one request, and is charged once).
type caller struct {
	once  sync.Once
	find  func() (string, error)
	agent string
	err   error
}

// who returns the request's D4-authenticated agent, "" for an anonymous
// request, or the error of a header that proves nothing.
func (c *caller) who() (string, error) {
	if c == nil || c.find == nil {
		return "", nil
	}
	c.once.Do(func() { c.agent, c.err = c.find() })
	return c.agent, c.err
}

// callerOf returns the lazy caller of the request in c.
func (a *Adapter) callerOf(c echo.Context) *caller {
	if a.opts.Reader == nil {
		return nil
	}
	return &caller{find: func() (string, error) { return a.opts.Reader(c) }}
}

type callerKey struct{}

func withCaller(ctx context.Context, c *caller) context.Context {
	return context.WithValue(ctx, callerKey{}, c)
}

// callerFrom returns the caller stored in ctx (nil: anonymous).
func callerFrom(ctx context.Context) *caller {
	c, _ := ctx.Value(callerKey{}).(*caller)
	return c
}
