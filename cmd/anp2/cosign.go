package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/anp2net/relay/protocol"
	"github.com/anp2net/relay/relay/governance"
)

// cosignCmd prints a cosign tag (SPEC §1.8) for content of a kind, for the
// event's author to attach with `anp2 publish --cosign FILE`.
type cosignCmd struct {
	out         io.Writer
	keyPath     string
	kind        int64
	content     string
	contentFile string
	pqKeyPath   string
}

func (c *cosignCmd) ParseFlags(args []string) error {
	fs := flag.NewFlagSet("cosign", flag.ContinueOnError)
	fs.StringVar(&c.keyPath, "key", "anp2.key", "the cosigner's key file (from anp2 keygen)")
	fs.Int64Var(&c.kind, "kind", 0, "kind of the event the content is for (e.g. 12 checkpoint, 13 rollback, 14 ban)")
	fs.StringVar(&c.content, "content", "", "the JSON content to endorse")
	fs.StringVar(&c.contentFile, "content-file", "", "read the JSON content from this file instead")
	fs.StringVar(&c.pqKeyPath, "pq-key", "", "also sign with this ML-DSA-65 key (anp2 pqkey): prints the cosign and pq_sig tags as a list")
	if err := parse(fs, args); err != nil {
		return err
	}
	if c.kind == 0 || (c.content == "") == (c.contentFile == "") {
		return fmt.Errorf("usage: anp2 cosign --key FILE --kind N (--content JSON | --content-file FILE)")
	}
	return nil
}

func (c *cosignCmd) Run(ctx context.Context) error {
	key, err := loadKey(c.keyPath)
	if err != nil {
		return err
	}
	content := c.content
	if c.contentFile != "" {
		b, err := os.ReadFile(c.contentFile)
		if err != nil {
			return err
		}
		content = string(b)
	}
	tag, err := protocol.Cosign(key, c.kind, content)
	if err != nil {
		return err
	}
	var out any = tag
	if c.pqKeyPath != "" {
		sk, err := loadPQKey(c.pqKeyPath)
		if err != nil {
			return err
		}
		pq, err := governance.PQSign(sk, protocol.AgentIDOf(key), c.kind, content)
		if err != nil {
			return err
		}
		out = [][]string{tag, pq}
	}
	b, _ := json.Marshal(out)
	fmt.Fprintln(c.out, string(b))
	return nil
}

// readCosigns reads cosign tags from files written by `anp2 cosign`: each
// file holds one tag (a JSON array of strings) or a list of them (cosign
// and, with --pq-key, pq_sig tags).
func readCosigns(paths []string) ([][]string, error) {
	var tags [][]string
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			return nil, err
		}
		var one []string
		if json.Unmarshal(b, &one) == nil && len(one) == 3 && one[0] == "cosign" {
			tags = append(tags, one)
			continue
		}
		var many [][]string
		if err := json.Unmarshal(b, &many); err != nil {
			return nil, fmt.Errorf("%s: not a cosign tag or a list of them", p)
		}
		for _, t := range many {
			if (len(t) != 3 || t[0] != "cosign") && (len(t) < 3 || t[0] != "pq_sig") {
				return nil, fmt.Errorf("%s: %v is not a cosign tag", p, t)
			}
		}
		tags = append(tags, many...)
	}
	return tags, nil
}
