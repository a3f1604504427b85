package main

import (
	"bufio"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
)

// docsExportedMetrics starts a real relay process and returns the names
// its GET /metrics declares (# TYPE lines), a histogram's _bucket, _sum
// and _count included.
func docsExportedMetrics(t *testing.T) map[string]bool {
	t.Helper()
	p := startProc(t, filepath.Join(t.TempDir(), "m.db"))
	resp, err := http.Get(p.base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	names := map[string]bool{}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 4 && f[0] == "#" && f[1] == "TYPE" {
			names[f[2]] = true
			if f[3] == "histogram" {
				for _, s := range []string{"_bucket", "_sum", "_count"} {
					names[f[2]+s] = true
				}
			}
		}
	}
	if len(names) < 20 {
		t.Fatalf("/metrics declares only %d metrics", len(names))
	}
	return names
}

// metricRe matches what a dashboard or rule names as a relay metric: the
// relay's own and Go's and the process's runtime figures.
var metricRe = regexp.MustCompile(`\b(?:anp2|go|process)_[a-z0-9_]+\b`)

// TestMonitoringNamesExported: every metric named by the Grafana
// dashboard and the Prometheus alert rules in docs/monitoring/ is one a
// real relay exports, every alert rule has an expression, a duration, a
// severity and a summary, and docs/monitoring.md describes every metric
// the relay exports.
func TestMonitoringNamesExported(t *testing.T) {
	exported := docsExportedMetrics(t)
	check := func(where, expr string) int {
		n := 0
		for _, m := range metricRe.FindAllString(expr, -1) {
			n++
			if !exported[m] {
				t.Errorf("%s names %s, which the relay's /metrics does not export", where, m)
			}
		}
		return n
	}

	// The dashboard: every panel has a query, every query names metrics.
	raw, err := os.ReadFile("../../docs/monitoring/dashboard.json")
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Title  string `json:"title"`
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
		Templating struct {
			List []struct {
				Query string `json:"query"`
			} `json:"list"`
		} `json:"templating"`
	}
	if err := json.Unmarshal(raw, &dash); err != nil {
		t.Fatalf("dashboard.json: %v", err)
	}
	if dash.Title == "" || len(dash.Panels) < 8 {
		t.Fatalf("dashboard.json: title %q, %d panels", dash.Title, len(dash.Panels))
	}
	for _, p := range dash.Panels {
		if len(p.Targets) == 0 {
			t.Errorf("dashboard panel %q has no query", p.Title)
		}
		for _, q := range p.Targets {
			if check("dashboard panel "+p.Title, q.Expr) == 0 {
				t.Errorf("dashboard panel %q: query %q names no relay metric", p.Title, q.Expr)
			}
		}
	}
	for _, v := range dash.Templating.List {
		check("dashboard variable", v.Query)
	}

	// The alert rules.
	rules := docsAlertRules(t, "../../docs/monitoring/alerts.yml")
	if len(rules) < 8 {
		t.Fatalf("alerts.yml holds %d rules", len(rules))
	}
	for name, r := range rules {
		for _, k := range []string{"expr", "for", "severity", "summary"} {
			if r[k] == "" {
				t.Errorf("alert %s has no %s", name, k)
			}
		}
		if check("alert "+name, r["expr"]) == 0 && !strings.HasPrefix(r["expr"], "up{") {
			t.Errorf("alert %s names no relay metric: %q", name, r["expr"])
		}
	}

	// The guide describes every exported metric.
	guide, err := os.ReadFile("../../docs/monitoring.md")
	if err != nil {
		t.Fatal(err)
	}
	var missing []string
	for m := range exported {
		if strings.HasSuffix(m, "_bucket") || strings.HasSuffix(m, "_sum") || strings.HasSuffix(m, "_count") {
			continue
		}
		if !strings.Contains(string(guide), "`"+m+"`") {
			missing = append(missing, m)
		}
	}
	sort.Strings(missing)
	if len(missing) > 0 {
		t.Errorf("docs/monitoring.md does not describe %v", missing)
	}
}

// docsAlertRules reads the rules of a Prometheus rule file written as
// docs/monitoring/alerts.yml is (one key per line, each expr on one
// line): alert name → {expr, for, severity, summary}.
func docsAlertRules(t *testing.T, path string) map[string]map[string]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b, err := io.ReadAll(f)
	if err != nil {
		t.Fatal(err)
	}
	rules := map[string]map[string]string{}
	var cur map[string]string
	for _, line := range strings.Split(string(b), "\n") {
		s := strings.TrimSpace(line)
		if s == "" || strings.HasPrefix(s, "#") {
			continue
		}
		if strings.ContainsRune(s, '\t') || strings.ContainsRune(line, '\t') {
			t.Fatalf("alerts.yml: a tab in %q (YAML indents with spaces)", line)
		}
		if name, ok := strings.CutPrefix(s, "- alert: "); ok {
			if rules[name] != nil {
				t.Errorf("alerts.yml: alert %s twice", name)
			}
			cur = map[string]string{}
			rules[name] = cur
			continue
		}
		k, v, ok := strings.Cut(s, ":")
		if !ok || cur == nil {
			continue
		}
		if _, want := map[string]bool{"expr": true, "for": true, "severity": true, "summary": true}[k]; want {
			cur[k] = strings.TrimSpace(v)
		}
	}
	return rules
}

// TestDocsLinksResolve: every relative link in README.md and docs/*.md
// names a file of the tree, and every #anchor into a Markdown page names
// one of its headings; the README's screenshots stay under 300 KB.
func TestDocsLinksResolve(t *testing.T) {
	pages, _ := filepath.Glob("../../docs/*.md")
	pages = append(pages, "../../README.md")
	linkRe := regexp.MustCompile(`\]\(([^)\s]+)\)`)
	headRe := regexp.MustCompile(`(?m)^#+ (.*)$`)
	slug := func(h string) string {
		h = strings.ToLower(h)
		var b strings.Builder
		for _, r := range h {
			switch {
			case r >= 'a' && r <= 'z', r >= '0' && r <= '9', r == '-':
				b.WriteRune(r)
			case r == ' ':
				b.WriteRune('-')
			}
		}
		return b.String()
	}
	links := 0
	for _, page := range pages {
		b, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range linkRe.FindAllStringSubmatch(string(b), -1) {
			l := m[1]
			if strings.Contains(l, "://") || strings.HasPrefix(l, "mailto:") {
				continue
			}
			links++
			path, anchor, _ := strings.Cut(l, "#")
			target := page
			if path != "" {
				target = filepath.Join(filepath.Dir(page), path)
			}
			st, err := os.Stat(target)
			if err != nil {
				t.Errorf("%s links to %s, which does not exist", page, l)
				continue
			}
			if strings.HasSuffix(target, ".png") && st.Size() > 300_000 {
				t.Errorf("%s: image %s is %d bytes, over 300 KB", page, l, st.Size())
			}
			if anchor != "" && strings.HasSuffix(target, ".md") {
				tb, _ := os.ReadFile(target)
				found := false
				for _, h := range headRe.FindAllStringSubmatch(string(tb), -1) {
					found = found || slug(h[1]) == anchor
				}
				if !found {
					t.Errorf("%s links to %s: no such heading", page, l)
				}
			}
		}
	}
	if links < 20 {
		t.Fatalf("found only %d relative links", links)
	}
}
