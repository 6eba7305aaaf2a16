package tier

import "strings"

// Code detection (the "code" row of SPEC 4). A message holds code when it
// has a fenced block (``` or ~~~), or a run of minCodeLines lines that each
// look like code. A run is broken by a non-blank, unindented line that does
// not look like code; blank lines and indented lines that do not look like
// code (a "continue", a wrapped argument) neither break nor extend it.
//
// A line looks like code when its shape does: it ends in { } or ;, starts
// with a closing bracket, starts with a language keyword used the way code
// uses it ("def f(...):", "return x;", "import os", "#include"), is an
// assignment ("x = ...", "x += 1") or a call ("fmt.Println(x)"), carries an
// operator prose does not use (=> == != && || :: :=), is a comment ("//",
// "/*"), markup ("<div ...>"), SQL (SELECT ... FROM), a stack-trace frame
// ("at f(file.js:3:9)", `File "x.py", line 3`, "main.go:12"), or is indented
// and carries code punctuation. Prose rarely does any of that three lines in
// a row, which is why one line is never enough.

// minCodeLines is how many code-like lines in a run make a message code.
const minCodeLines = 3

// findCode reports whether s holds code, and how it was recognised.
func findCode(s string) (bool, string) {
	if strings.Contains(s, "```") || strings.Contains(s, "~~~") {
		return true, "fenced block"
	}
	run := 0
	for len(s) > 0 {
		var line string
		if i := strings.IndexByte(s, '\n'); i >= 0 {
			line, s = s[:i], s[i+1:]
		} else {
			line, s = s, ""
		}
		t, indented := trimLine(line)
		switch {
		case t == "":
			// blank: keeps the run
		case isCodeLine(t, indented):
			run++
			if run >= minCodeLines {
				return true, "code-like lines"
			}
		case indented:
			// an indented line inside a block: keeps the run
		default:
			run = 0
		}
	}
	return false, ""
}

// trimLine strips surrounding whitespace (and a trailing \r) and reports
// whether the line was indented by a tab or at least two spaces.
func trimLine(line string) (string, bool) {
	i := 0
	for i < len(line) && (line[i] == ' ' || line[i] == '\t') {
		i++
	}
	indented := i >= 2 || (i == 1 && line[0] == '\t')
	j := len(line)
	for j > i && (line[j-1] == ' ' || line[j-1] == '\t' || line[j-1] == '\r') {
		j--
	}
	return line[i:j], indented
}

// Byte classes for the one pass over a line.
const (
	cPlain   = 0
	cOpen    = 1 << iota // ( [ {
	cPunct               // ) ] } ; = < >
	cOpChar              // = ! & | : > (first or second byte of an operator)
	cIdent               // letters, digits, _
	cColon               // :
	cQuote               // " '
	cPathEnd             // . (before a file extension)
)

var byteClass = func() (t [256]uint8) {
	for c := 'a'; c <= 'z'; c++ {
		t[c] |= cIdent
		t[c-'a'+'A'] |= cIdent
	}
	for c := '0'; c <= '9'; c++ {
		t[c] |= cIdent
	}
	t['_'] |= cIdent
	for _, c := range "([{" {
		t[c] |= cOpen
	}
	for _, c := range ")]};=<>" {
		t[c] |= cPunct
	}
	for _, c := range "=!&|:>" {
		t[c] |= cOpChar
	}
	t[':'] |= cColon
	t['"'] |= cQuote
	t['\''] |= cQuote
	t['.'] |= cPathEnd
	return t
}()

// lineShape is what one pass over a line finds.
type lineShape struct {
	punct    bool // any of ( [ { ) ] } ; = < >
	operator bool // => == != && || :: := or ();
	fileLine bool // name.ext:123, as in stack traces and compiler errors
}

func shapeOf(t string) lineShape {
	var sh lineShape
	for i := 0; i < len(t); i++ {
		c := t[i]
		k := byteClass[c]
		if k == cPlain || k == cIdent {
			continue
		}
		if k&(cOpen|cPunct) != 0 {
			sh.punct = true
		}
		if k&cOpChar != 0 && i+1 < len(t) {
			switch d := t[i+1]; {
			case c == '=' && (d == '>' || d == '='),
				c == '!' && d == '=',
				c == '&' && d == '&',
				c == '|' && d == '|',
				c == ':' && (d == ':' || d == '='):
				sh.operator = true
			}
		}
		if c == '(' && i+2 < len(t) && t[i+1] == ')' && t[i+2] == ';' {
			sh.operator = true
		}
		if c == ':' && i+1 < len(t) && isDigit(t[i+1]) && hasExtBefore(t, i) {
			sh.fileLine = true
		}
	}
	return sh
}

// hasExtBefore reports whether t[:i] ends in ".ext" with a 1-4 letter
// extension preceded by a file name character.
func hasExtBefore(t string, i int) bool {
	j := i
	for j > 0 && i-j < 5 && isLower(t[j-1]) {
		j--
	}
	n := i - j
	return n >= 1 && n <= 4 && j >= 2 && t[j-1] == '.' && byteClass[t[j-2]]&cIdent != 0
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }
func isLower(c byte) bool { return c >= 'a' && c <= 'z' }
func isLetter(c byte) bool {
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')
}

// isCodeLine reports whether the trimmed, non-empty line t looks like code.
func isCodeLine(t string, indented bool) bool {
	if isBullet(t) {
		return false
	}
	first, last := t[0], t[len(t)-1]
	if last == '{' || last == '}' || last == ';' {
		return true
	}
	if first == '}' || first == ')' || first == ']' {
		return true
	}
	if strings.HasPrefix(t, "//") || strings.HasPrefix(t, "/*") || strings.HasPrefix(t, "#include") ||
		strings.HasPrefix(t, "#define") || strings.HasPrefix(t, "#!/") || strings.HasPrefix(t, "<?php") {
		return true
	}
	if first == '<' && len(t) > 2 && (isLetter(t[1]) || t[1] == '/') && last == '>' {
		return true // markup
	}
	if last == ':' && len(t) > 1 && t[len(t)-2] == ')' {
		return true // def f(x):  if (a):  for i in range(3):
	}
	if keywordLine(t) {
		return true
	}
	sh := shapeOf(t)
	if sh.operator || sh.fileLine {
		return true
	}
	if assignment(t) || call(t) {
		return true
	}
	return indented && sh.punct
}

// isBullet reports a Markdown list item ("- x", "* x", "+ x", "1. x"),
// which is prose however it ends.
func isBullet(t string) bool {
	if len(t) >= 2 && (t[0] == '-' || t[0] == '*' || t[0] == '+') && t[1] == ' ' {
		return true
	}
	i := 0
	for i < len(t) && isDigit(t[i]) {
		i++
	}
	return i > 0 && i+1 < len(t) && (t[i] == '.' || t[i] == ')') && t[i+1] == ' '
}

// firstWord splits t at its first space.
func firstWord(t string) (string, string) {
	if i := strings.IndexByte(t, ' '); i >= 0 {
		return t[:i], t[i+1:]
	}
	return t, ""
}

// keywordLine reports a line that starts with a language keyword and has
// the shape code gives it. Bare keywords are not enough: "let me know" and
// "for example" are prose.
func keywordLine(t string) bool {
	w, rest := firstWord(t)
	last := t[len(t)-1]
	has := func(sub string) bool { return strings.Contains(rest, sub) }
	switch w {
	case "func", "def", "fn", "function":
		return strings.IndexByte(rest, '(') > 0
	case "class", "interface":
		return rest != "" && (last == ':' || has("(") || has(" extends ") || has(" implements "))
	case "return":
		return rest == "" || !strings.Contains(rest, " ") || strings.ContainsAny(rest, "()[]+-*/<>=!&|.\"'_")
	case "import":
		return rest != "" && (strings.Count(rest, " ") <= 3 || strings.ContainsAny(rest, "\"'{"))
	case "from":
		return has(" import ")
	case "package":
		return rest != "" && !strings.Contains(rest, " ")
	case "let", "var", "const", "val", "auto":
		return has("=") || has(":")
	case "if", "for", "while", "elif", "switch", "catch", "except", "with":
		return strings.HasPrefix(rest, "(") || last == ':' || has(" := ")
	case "else", "else:", "try", "try:", "finally", "finally:", "do", "end", "fi", "done", "esac",
		"break", "continue", "pass", "break;", "continue;", "pass;":
		return rest == "" || last == ':'
	case "case", "default:":
		return last == ':'
	case "type":
		return has(" struct") || has(" interface") || has(" = ")
	case "public", "private", "protected", "static", "export", "async", "pub", "impl", "struct", "enum", "union", "typedef", "template", "namespace", "using", "use":
		return strings.ContainsAny(rest, "(=<:;") || strings.HasPrefix(rest, "fn ") || strings.HasPrefix(rest, "class ") ||
			strings.HasPrefix(rest, "function ") || strings.HasPrefix(rest, "def ") || strings.HasPrefix(rest, "default ")
	case "SELECT", "INSERT", "UPDATE", "DELETE", "CREATE", "ALTER", "DROP", "FROM", "WHERE", "JOIN", "LEFT",
		"INNER", "GROUP", "ORDER", "HAVING", "LIMIT", "VALUES", "SET", "UNION":
		return true // upper-case SQL at the start of a line
	case "select":
		return has(" from ") || has("*")
	case "at":
		return has("(") && has(":") // Java / JavaScript stack frame
	case "File":
		return strings.HasPrefix(rest, "\"") && has(", line ") // Python traceback frame
	case "Traceback", "goroutine":
		return has("(") || has("[")
	case "$", ">>>", "%":
		return rest != "" // shell or REPL prompt
	}
	if w[0] == '.' && len(w) > 1 && isLetter(w[1]) && strings.IndexByte(t, '(') > 0 {
		return true // chained method call
	}
	if w[0] == '@' && len(w) > 1 && isLetter(w[1]) && (rest == "" || strings.HasPrefix(rest, "(") || strings.IndexByte(w, '(') > 0) {
		return true // decorator or annotation
	}
	return false
}

// assignment reports "lhs = ..." / "lhs += ..." / "lhs := ..." where lhs is
// one identifier-like token (a.b, x[i], self.count).
func assignment(t string) bool {
	i := 0
	for i < len(t) && (byteClass[t[i]]&cIdent != 0 || t[i] == '.' || t[i] == '[' || t[i] == ']' || t[i] == '$' || t[i] == '"' || t[i] == '\'') {
		i++
	}
	if i == 0 || !isLetter(t[0]) && t[0] != '_' && t[0] != '$' {
		return false
	}
	for i < len(t) && t[i] == ' ' {
		i++
	}
	if i < len(t) && strings.IndexByte("+-*/%|&^:", t[i]) >= 0 {
		i++
	}
	return i+1 < len(t) && t[i] == '=' && t[i+1] != '='
}

// call reports "name(...)" or "a.b.c(...)" with nothing after the closing
// parenthesis but punctuation.
func call(t string) bool {
	i := 0
	for i < len(t) && (byteClass[t[i]]&cIdent != 0 || t[i] == '.' || t[i] == '$') {
		i++
	}
	if i == 0 || i >= len(t) || t[i] != '(' || !isLetter(t[0]) && t[0] != '_' && t[0] != '$' {
		return false
	}
	j := strings.LastIndexByte(t, ')')
	if j < i {
		return false
	}
	for _, c := range []byte(t[j+1:]) {
		if c != ';' && c != ':' && c != ',' && c != ')' && c != '.' {
			return false
		}
	}
	return true
}
