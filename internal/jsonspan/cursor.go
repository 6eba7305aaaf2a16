package jsonspan

// Cursor reads one JSON text in a single pass and validates everything it
// crosses, the values it skips included: a reader of a known shape walks
// objects and arrays with Object and Array and takes or skips each value
// with Value, so a body is scanned once where Valid followed by
// EachMember's nested walks scans a deep value once per level.
//
// A Cursor accepts exactly what Valid accepts: a reader that walks a whole
// text with it and ends with End has checked that the text is valid JSON.
type Cursor struct {
	b       []byte
	i       int
	trusted bool // b is valid JSON: values and keys are skipped, not validated
}

// NewCursor returns a cursor at the start of b.
func NewCursor(b []byte) Cursor { return Cursor{b: b} }

// NewTrustedCursor returns a cursor at the start of b, which the caller
// knows to be valid JSON (it was validated once already): the values it
// skips or takes are measured (SkipValue), not validated again, which is
// what a second reader of a validated body would otherwise pay for on
// every byte. On bytes that are not valid JSON it reads some garbage
// (never past b) rather than refusing it.
func NewTrustedCursor(b []byte) Cursor { return Cursor{b: b, trusted: true} }

// at skips space and reports whether the next byte is c.
func (c *Cursor) at(ch byte) bool {
	c.i = SkipSpace(c.b, c.i)
	return c.i < len(c.b) && c.b[c.i] == ch
}

// Value returns the next value's bytes (validated, without the space
// around it) and moves past it; ok is false when no valid value is next.
func (c *Cursor) Value() (v []byte, ok bool) {
	c.i = SkipSpace(c.b, c.i)
	s := c.i
	var e int
	if c.trusted {
		e = SkipValue(c.b, s)
		if e == s {
			e = -1
		}
	} else {
		e = ValidValue(c.b, s)
	}
	if e < 0 {
		return nil, false
	}
	c.i = e
	return c.b[s:e], true
}

// Null reads the next value when it is null and reports whether it was;
// anything else is left unread (and unscanned: only its first byte is
// looked at).
func (c *Cursor) Null() bool {
	if !c.at('n') {
		return false
	}
	if e := literal(c.b, c.i, "null"); e > 0 {
		c.i = e
		return true
	}
	return false
}

// Object reads the object that comes next: for each member it calls
// member with the key's bytes between its quotes (escapes undecoded) and
// the cursor at the member's value, which member must read (Value, Object
// or Array) before it returns true. It returns false when the next value
// is not a valid object or member returns false.
func (c *Cursor) Object(member func(key []byte) bool) bool {
	more, ok := c.open('{', '}')
	for ok && more {
		if !c.at('"') {
			return false
		}
		ks := c.i
		var ke int
		if c.trusted {
			ke = SkipString(c.b, ks)
		} else {
			ke = validString(c.b, ks)
		}
		if ke < 0 {
			return false
		}
		c.i = ke
		if !c.at(':') {
			return false
		}
		c.i++
		if !member(c.b[ks+1 : ke-1]) {
			return false
		}
		more, ok = c.next('}')
	}
	return ok
}

// Array reads the array that comes next, calling elem with the cursor at
// each element, which elem must read before it returns true. It returns
// false when the next value is not a valid array or elem returns false.
func (c *Cursor) Array(elem func() bool) bool {
	more, ok := c.open('[', ']')
	for ok && more {
		if !elem() {
			return false
		}
		more, ok = c.next(']')
	}
	return ok
}

// open reads the opening bracket of a container (ok false when the next
// value does not start with it) and reports whether a member or element
// follows (more), or the container closes at once (read too).
func (c *Cursor) open(opening, closing byte) (more, ok bool) {
	if !c.at(opening) {
		return false, false
	}
	c.i++
	if c.at(closing) {
		c.i++
		return false, true
	}
	return true, true
}

// next reads what follows a member or an element: a comma (more follows)
// or the container's closing bracket; ok false for anything else.
func (c *Cursor) next(closing byte) (more, ok bool) {
	switch {
	case c.at(','):
		c.i++
		return true, true
	case c.at(closing):
		c.i++
		return false, true
	}
	return false, false
}

// Peek returns the first byte of the next value (after space), 0 at the
// end, without reading it.
func (c *Cursor) Peek() byte {
	c.i = SkipSpace(c.b, c.i)
	if c.i < len(c.b) {
		return c.b[c.i]
	}
	return 0
}

// Span runs read, which reads the next value (Object, Array or Value), and
// returns that value's bytes: a reader that walks a value also gets its
// extent without a second scan.
func (c *Cursor) Span(read func() bool) ([]byte, bool) {
	c.i = SkipSpace(c.b, c.i)
	s := c.i
	if !read() {
		return nil, false
	}
	return c.b[s:c.i], true
}

// End reports whether only space is left.
func (c *Cursor) End() bool { return SkipSpace(c.b, c.i) == len(c.b) }
