package main

import (
	"strings"
	"testing"
)

func TestExpand(t *testing.T) {
	for _, c := range []struct{ in, want, err string }{
		{"Bearer sk-bench", "Bearer sk-bench", ""},
		{"Bearer sk-k{r}", "Bearer sk-k12345", ""},
		{"u{s}", "u7", ""},
		{"sk-t{r%10000}", "sk-t2345", ""},
		{"{r}-{s}-{r%10}", "12345-7-5", ""},
		{"{x}", "", "unknown placeholder"},
		{"{r%0}", "", "M > 0"},
		{"{r%a}", "", "M > 0"},
		{"sk-{r", "", "without its }"},
	} {
		got, err := expand(c.in, 12345, 7)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%q: error %v, want one saying %q", c.in, err, c.err)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("%q: got %q, %v; want %q", c.in, got, err, c.want)
		}
	}
}

func FuzzExpand(f *testing.F) {
	for _, s := range []string{"sk-t{r%10000}", "{r}{s}", "{", "}{", "{r%}"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		got, err := expand(v, 3, 4)
		if err == nil && !strings.Contains(v, "{") && got != v {
			t.Fatalf("%q without placeholders became %q", v, got)
		}
	})
}
