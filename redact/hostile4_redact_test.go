package redact

import "testing"

// A credential in JSON text right after an escape that ends in a letter or
// digit (\n, \t, \u003c ...) is still a credential: the escape stands for
// a separator, so the word boundary the plain text has is there (SPEC 15:
// masked "also when it is JSON-escaped"). An HTTP auth scheme is
// case-insensitive, so BEARER is a Bearer token too.
func TestHostile4CredentialAfterJSONEscape(t *testing.T) {
	cases := []struct{ name, in, want string }{
		{"newline before sk", `"line\nsk-upstream-SECRET123456"`, `"line\nsk-ups****"`},
		{"html-escaped angle", `"\u003csk-upstream-SECRET123456 x"`, `"\u003csk-ups**** x"`},
		{"tab before aws", `x\tAKIAIOSFODNN7EXAMPLE`, `x\tAKIAIO****`},
		{"cr before bearer", `"\r\nBearer abcdefgh12345678"`, `"\r\nBearer****"`},
		{"newline before jwt", `\neyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiIxMjM0NSJ9.c2lnbmF0dXJlLXNpZw`, `\neyJhbG****`},
		{"escaped quote", `\u0022AIzaSyA-1234567890abcdefghijklmnopqrstu\u0022`, `\u0022AIzaSy****\u0022`},
		{"upper-case scheme", `Authorization: BEARER abcdefgh12345678`, `Authorization: BEARER****`},
		// still no key: a word character, plain or escaped, before it
		{"escaped letter before sk", `\u0074sk-0123456789abcdefghij`, `\u0074sk-0123456789abcdefghij`},
		{"word before sk", "task-0123456789abcdefghij", "task-0123456789abcdefghij"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := Credentials(c.in); got != c.want {
				t.Errorf("Credentials(%q) = %q, want %q", c.in, got, c.want)
			}
		})
	}
}
