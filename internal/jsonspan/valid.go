package jsonspan

import (
	"encoding/binary"
	"encoding/json"
)

// maxValidDepth is how deep Valid follows objects and arrays itself; a
// deeper value is left to encoding/json.Valid, whose own limit then
// decides (a body nested that deep is never a provider's answer).
const maxValidDepth = 64

// Valid reports whether b is exactly one JSON value with optional
// surrounding whitespace: encoding/json.Valid's answer for every input
// (FuzzValid holds the two equal), in one pass of plain byte comparisons
// instead of the scanner's call per byte, so the walkers above may then
// read b. Like encoding/json it accepts any byte from 0x20 up in a string
// (invalid UTF-8 included) and no control byte.
func Valid(b []byte) bool {
	i := ValidValue(b, SkipSpace(b, 0))
	return i >= 0 && SkipSpace(b, i) == len(b)
}

// ValidValue returns the index after the JSON value that starts at b[i]
// (no space before it), or -1 when no valid value starts there: Valid's
// check of one value inside a larger text, so a reader that walks a body
// once can validate what it passes over as it goes.
func ValidValue(b []byte, i int) int {
	var stack [maxValidDepth]byte // '{' or '[' of each open container
	depth := 0
	start := i
value:
	if i >= len(b) {
		return -1
	}
	switch c := b[i]; c {
	case '{':
		i = SkipSpace(b, i+1)
		if i < len(b) && b[i] == '}' {
			i++
			break
		}
		if depth == maxValidDepth {
			return deepValue(b, start)
		}
		stack[depth] = '{'
		depth++
		if i = member(b, i); i < 0 {
			return -1
		}
		goto value
	case '[':
		i = SkipSpace(b, i+1)
		if i < len(b) && b[i] == ']' {
			i++
			break
		}
		if depth == maxValidDepth {
			return deepValue(b, start)
		}
		stack[depth] = '['
		depth++
		goto value
	case '"':
		if i = validString(b, i); i < 0 {
			return -1
		}
	case 't':
		if i = literal(b, i, "true"); i < 0 {
			return -1
		}
	case 'f':
		if i = literal(b, i, "false"); i < 0 {
			return -1
		}
	case 'n':
		if i = literal(b, i, "null"); i < 0 {
			return -1
		}
	default:
		if i = validNumber(b, i); i < 0 {
			return -1
		}
	}
	// after a value: the next member or element, or the end of containers
	for {
		if depth == 0 {
			return i
		}
		i = SkipSpace(b, i)
		if i >= len(b) {
			return -1
		}
		switch open := stack[depth-1]; {
		case b[i] == ',':
			i = SkipSpace(b, i+1)
			if open == '{' {
				if i = member(b, i); i < 0 {
					return -1
				}
			}
			goto value
		case open == '{' && b[i] == '}', open == '[' && b[i] == ']':
			depth--
			i++
		default:
			return -1
		}
	}
}

// deepValue is ValidValue for a value nested deeper than maxValidDepth:
// encoding/json decides over the span SkipValue finds (a container's span
// ends at its matching bracket, so a valid span is the value itself).
func deepValue(b []byte, start int) int {
	end := SkipValue(b, start)
	if end < 0 || !json.Valid(b[start:end]) {
		return -1
	}
	return end
}

// member reads an object member's key and colon at b[i] and returns the
// index of its value (-1: not a key and a colon).
func member(b []byte, i int) int {
	if i >= len(b) || b[i] != '"' {
		return -1
	}
	if i = validString(b, i); i < 0 {
		return -1
	}
	i = SkipSpace(b, i)
	if i >= len(b) || b[i] != ':' {
		return -1
	}
	return SkipSpace(b, i+1)
}

// validString returns the index after the string at b[i] == '"', or -1
// when it is not a valid JSON string: unterminated, a control byte, or an
// escape other than \" \\ \/ \b \f \n \r \t and \u with four hex digits.
func validString(b []byte, i int) int {
	for i++; i < len(b); i++ {
		// at the start and after each escape: eight plain bytes at a time
		// (no quote, backslash or control byte), so a long prompt's text
		// is crossed a word per step; then byte by byte to the special
		// byte the word held
		for i+8 <= len(b) && plain8(binary.LittleEndian.Uint64(b[i:])) {
			i += 8
		}
		for i < len(b) && b[i] >= 0x20 && b[i] != '"' && b[i] != '\\' {
			i++
		}
		if i >= len(b) {
			return -1
		}
		switch b[i] {
		case '"':
			return i + 1
		case '\\':
			if i+1 >= len(b) {
				return -1
			}
			i++
			switch b[i] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			case 'u':
				if i+4 >= len(b) {
					return -1
				}
				for _, h := range b[i+1 : i+5] {
					if !isHex(h) {
						return -1
					}
				}
				i += 4
			default:
				return -1
			}
		default: // a control byte
			return -1
		}
	}
	return -1
}

// plain8 reports whether none of the eight bytes in x is a quote, a
// backslash or below 0x20 (the classic "has a zero byte" test on x with
// each of those bytes XORed to zero, and on x minus 0x20 for the controls).
func plain8(x uint64) bool {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	q, bs := x^(ones*'"'), x^(ones*'\\')
	return ((q-ones)&^q|(bs-ones)&^bs|(x-ones*0x20)&^x)&highs == 0
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

// literal returns the index after lit at b[i], or -1.
func literal(b []byte, i int, lit string) int {
	if len(b)-i < len(lit) || string(b[i:i+len(lit)]) != lit {
		return -1
	}
	return i + len(lit)
}

// validNumber returns the index after the JSON number at b[i], or -1:
// -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func validNumber(b []byte, i int) int {
	if i < len(b) && b[i] == '-' {
		i++
	}
	switch {
	case i >= len(b):
		return -1
	case b[i] == '0':
		i++
	case '1' <= b[i] && b[i] <= '9':
		i = digits(b, i+1)
	default:
		return -1
	}
	if i < len(b) && b[i] == '.' {
		j := digits(b, i+1)
		if j == i+1 {
			return -1
		}
		i = j
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		j := digits(b, i)
		if j == i {
			return -1
		}
		i = j
	}
	return i
}

func digits(b []byte, i int) int {
	for i < len(b) && '0' <= b[i] && b[i] <= '9' {
		i++
	}
	return i
}
