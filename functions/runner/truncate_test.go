package runner

import (
	"strings"
	"testing"
	"unicode/utf8"
)

// A reason cut for a NATS header or ack fits its bytes, says it was cut and stays UTF-8 even
// when the cut falls inside a character.
func TestTruncateKeepsBytesAndCharacters(t *testing.T) {
	for _, s := range []string{strings.Repeat("a", 300), strings.Repeat("ä", 300), "short"} {
		got := truncate(s, 256)
		if len(got) > 256 || !utf8.ValidString(got) {
			t.Errorf("truncate(%q…, 256) = %d bytes, valid UTF-8 %v", s[:8], len(got), utf8.ValidString(got))
		}
		if cut := len(s) > 256; cut != strings.HasSuffix(got, "…") || !cut && got != s {
			t.Errorf("truncate(%q…, 256) = %q", s[:min(8, len(s))], got)
		}
	}
}
