package relay

import "strings"

// SplitList splits a comma-separated list of tag values (GET /events and
// GET /stream tag parameters, filter= clauses). Inside a value, `\,` is a
// comma and `\\` a backslash, so every value a tag can hold can be asked
// for; any other backslash stands for itself, so a list without those two
// pairs splits exactly on its commas, as it always did. EscapeListValue is
// its inverse.
func SplitList(s string) []string {
	if !strings.Contains(s, `\`) {
		return strings.Split(s, ",")
	}
	var out []string
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '\\' && i+1 < len(s) && (s[i+1] == ',' || s[i+1] == '\\'):
			i++
			b.WriteByte(s[i])
		case c == ',':
			out = append(out, b.String())
			b.Reset()
		default:
			b.WriteByte(c)
		}
	}
	return append(out, b.String())
}

var listEscaper = strings.NewReplacer(`\`, `\\`, `,`, `\,`)

// EscapeListValue returns v written as one item of a SplitList list: its
// backslashes doubled and its commas preceded by a backslash.
func EscapeListValue(v string) string { return listEscaper.Replace(v) }
