package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net/url"

	"github.com/anp2net/relay/client"
	"github.com/anp2net/relay/protocol"
)

type getCmd struct {
	out      io.Writer
	relayURL string
	params   map[string]*string
}

// getParams are the GET /events filters the command passes through.
var getParams = []string{"ids", "kinds", "authors", "e", "p", "t", "cap", "since", "until", "limit", "as_of", "include_revoked"}

func (c *getCmd) ParseFlags(args []string) error {
	fs := flag.NewFlagSet("get", flag.ContinueOnError)
	fs.StringVar(&c.relayURL, "relay", "http://127.0.0.1:8080", "relay base URL")
	c.params = map[string]*string{}
	for _, p := range getParams {
		c.params[p] = fs.String(p, "", "GET /events "+p+" filter")
	}
	return parse(fs, args)
}

func (c *getCmd) Run(ctx context.Context) error {
	q := url.Values{}
	for name, v := range c.params {
		if *v != "" {
			q.Set(name, *v)
		}
	}
	evs, err := client.New(c.relayURL).Events(ctx, q)
	if err != nil {
		return err
	}
	for _, e := range evs {
		fmt.Fprintln(c.out, string(protocol.AppendJSON(nil, e)))
	}
	return nil
}
