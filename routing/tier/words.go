package tier

import "strings"

// Reasoning words (the "reasoning_words" row of SPEC 4): whole words,
// case-insensitive, in the last user message only. Hyphens separate words,
// so "step-by-step" and "trade-off" match their spaced forms.
//
// Only the first and the last wordWindow bytes of a longer message are
// read: the instruction of a prompt sits at its start or its end, while a
// pasted document in between ("summarise this design review") is material,
// not a request to reason. It also keeps the scan of a 1 MB paste cheap.
const wordWindow = 4096

// maxWordLen bounds the words looked up; longer words match nothing.
const maxWordLen = 16

// reasoningWords maps each single word to itself, so a match returns a
// string that does not pin the request's text.
var reasoningWords = toSet(
	"prove", "proving", "proof", "proofs", "derive", "deriving", "derivation",
	"analyze", "analyse", "analyzing", "analysing", "analysis",
	"debug", "debugging", "refactor", "refactoring",
	"optimize", "optimise", "optimizing", "optimising", "optimization", "optimisation",
	"architecture", "architectural", "tradeoff", "tradeoffs", "complexity",
	"design", "designing", "diagnose", "investigate", "rigorous", "rigorously",
	"theorem", "lemma", "algorithm", "deadlock", "scalability", "bottleneck",
	// analytical asks about given material: "review this handler", "compare the drafts"
	"review", "reviewing", "compare", "comparing", "comparison", "audit", "assess",
	"critique", "restructure", "redesign", "vulnerability", "vulnerabilities",
)

// reasoningPhrases are two- and three-word phrases, keyed with single spaces.
var reasoningPhrases = toSet(
	"step by step", "trade off", "trade offs", "root cause", "race condition",
	"edge cases", "first principles", "in depth", "deep dive", "pros and cons",
	"think through", "data race", "memory leak", "thread safe",
)

func toSet(words ...string) map[string]string {
	m := make(map[string]string, len(words))
	for _, w := range words {
		m[w] = w
	}
	return m
}

// wordFilter is a cheap pre-check before a map lookup: bit last of
// ends[len][first] is set when some listed word has that length, first and
// last letter, and bit second of seconds[len][first] likewise for its
// second letter. Most prose words fail it, so the scan rarely hashes.
type wordFilter struct {
	ends, seconds [maxWordLen + 1][26]uint32
}

func (f *wordFilter) add(w string) {
	if n := len(w); n > 1 && n <= maxWordLen {
		f.ends[n][w[0]-'a'] |= 1 << (w[n-1] - 'a')
		f.seconds[n][w[0]-'a'] |= 1 << (w[1] - 'a')
	}
}

// may reports whether the lower-case word w can be listed.
func (f *wordFilter) may(w []byte) bool {
	n := len(w)
	return n > 1 && n <= maxWordLen && f.ends[n][w[0]-'a']&(1<<(w[n-1]-'a')) != 0 &&
		f.seconds[n][w[0]-'a']&(1<<(w[1]-'a')) != 0
}

// lowerLetter maps an ASCII letter to its lower case and anything else to 0.
var lowerLetter = func() (t [256]byte) {
	for c := 'a'; c <= 'z'; c++ {
		t[c], t[c-'a'+'A'] = byte(c), byte(c)
	}
	return t
}()

// wordsFilter covers reasoningWords; lastWordsFilter covers the last word of
// each reasoning phrase.
var wordsFilter, lastWordsFilter = func() (w, l wordFilter) {
	for k := range reasoningWords {
		w.add(k)
	}
	for k := range reasoningPhrases {
		l.add(k[strings.LastIndexByte(k, ' ')+1:])
	}
	return w, l
}()

// findReasoningWord returns the first reasoning word or phrase in s, or "".
func findReasoningWord(s string) string {
	if len(s) > 2*wordWindow {
		if w := scanWords(s[:wordWindow]); w != "" {
			return w
		}
		return scanWords(s[len(s)-wordWindow:])
	}
	return scanWords(s)
}

// scanWords lower-cases each ASCII word into a stack buffer and looks it up,
// alone and with the one or two words before it. It does not allocate.
func scanWords(s string) string {
	var cur, p1, p2 [maxWordLen]byte
	var n1, n2 int // lengths of p1, p2 (the previous and the one before); 0 = none
	var phrase [3*maxWordLen + 2]byte
	i := 0
	for i < len(s) {
		for i < len(s) && lowerLetter[s[i]] == 0 {
			i++
		}
		n := 0
		for ; i < len(s); i++ {
			c := lowerLetter[s[i]]
			if c == 0 {
				break
			}
			if n < maxWordLen {
				cur[n] = c
			}
			n++
		}
		if n == 0 {
			break
		}
		if n > maxWordLen {
			n1, n2 = 0, 0
			continue
		}
		if wordsFilter.may(cur[:n]) {
			if w, ok := reasoningWords[string(cur[:n])]; ok {
				return w
			}
		}
		if n1 > 0 && lastWordsFilter.may(cur[:n]) {
			k := copy(phrase[:], p1[:n1])
			phrase[k] = ' '
			k++
			k += copy(phrase[k:], cur[:n])
			if w, ok := reasoningPhrases[string(phrase[:k])]; ok {
				return w
			}
			if n2 > 0 {
				k = copy(phrase[:], p2[:n2])
				phrase[k] = ' '
				k++
				k += copy(phrase[k:], p1[:n1])
				phrase[k] = ' '
				k++
				k += copy(phrase[k:], cur[:n])
				if w, ok := reasoningPhrases[string(phrase[:k])]; ok {
					return w
				}
			}
		}
		p2, n2 = p1, n1
		p1, n1 = cur, n
	}
	return ""
}

// Math (the "math" row of SPEC 4): LaTeX ($$, \frac, \int, \begin{...}),
// Unicode math operators (∑ ∫ √ ≤ ≠ ...), exponents (x^2, e^{i}, x²),
// derivatives (dy/dx) or an equation: a line with "=" and a coefficient
// term such as "3x" or a function "f(x)".

// latexCommands are the commands after a backslash that mean math.
var latexCommands = toSet(
	"frac", "dfrac", "tfrac", "int", "iint", "oint", "sum", "prod", "sqrt", "lim",
	"infty", "partial", "nabla", "cdot", "times", "leq", "geq", "neq", "approx",
	"equiv", "alpha", "beta", "gamma", "delta", "epsilon", "varepsilon", "theta",
	"lambda", "mu", "sigma", "omega", "pi", "phi", "mathbb", "mathcal", "mathbf",
	"mathrm", "vec", "hat", "binom", "begin", "left", "right", "forall", "exists",
	"in", "subset", "subseteq", "cup", "cap", "mapsto", "rightarrow", "Rightarrow",
	"implies", "iff", "pmod", "ldots", "cdots", "le", "ge", "ne",
)

// findMath returns what made s look like math, or "".
func findMath(s string) string {
	if strings.Contains(s, "$$") {
		return "LaTeX $$"
	}
	for i := 0; ; {
		j := strings.IndexByte(s[i:], '\\')
		if j < 0 {
			break
		}
		i += j + 1
		k := i
		for k < len(s) && isLetter(s[k]) {
			k++
		}
		if _, ok := latexCommands[s[i:k]]; ok && k > i {
			return "LaTeX command"
		}
	}
	for i := 0; ; {
		j := strings.IndexByte(s[i:], 0xE2)
		if j < 0 || i+j+1 >= len(s) {
			break
		}
		i += j + 1
		if c := s[i]; c >= 0x88 && c <= 0x8B { // U+2200..U+22FF Mathematical Operators
			return "math symbol"
		}
	}
	for i := 0; ; {
		j := strings.IndexByte(s[i:], '^')
		if j < 0 {
			break
		}
		i += j
		if i > 0 && i+1 < len(s) && isOperand(s[i-1]) && (isOperand(s[i+1]) || s[i+1] == '{' || s[i+1] == '(' || s[i+1] == '-') {
			return "exponent"
		}
		i++
	}
	for i := 0; ; {
		j := strings.IndexByte(s[i:], 0xC2)
		if j < 0 || i+j+1 >= len(s) {
			break
		}
		i += j + 1
		if c := s[i]; (c == 0xB2 || c == 0xB3) && i >= 2 && isOperand(s[i-2]) { // ² ³
			return "exponent"
		}
	}
	for i := 0; ; {
		j := strings.Index(s[i:], "/d")
		if j < 0 {
			break
		}
		i += j
		if isDerivative(s, i) {
			return "derivative"
		}
		i += 2
	}
	for i := 0; ; {
		j := strings.IndexByte(s[i:], '=')
		if j < 0 {
			break
		}
		eq := i + j
		start := strings.LastIndexByte(s[:eq], '\n') + 1
		end := strings.IndexByte(s[eq:], '\n')
		if end < 0 {
			end = len(s)
		} else {
			end += eq
		}
		if isEquation(s[start:end]) {
			return "equation"
		}
		i = end
		if i >= len(s) {
			break
		}
	}
	return ""
}

func isOperand(c byte) bool { return isLetter(c) || isDigit(c) || c == ')' || c == '}' }

// isEquation reports a line holding a coefficient term ("3x", "2n") or a
// function definition ("f(x) =").
func isEquation(line string) bool {
	for i := 0; i+1 < len(line); i++ {
		c := line[i]
		if isDigit(c) && isVariable(line[i+1]) && (i+2 >= len(line) || !isWordByte(line[i+2])) {
			// a digit run starting at a word boundary: "3x", not "mp3x";
			// "0x1F" and "3a7f" fail the boundary after the letter.
			k := i
			for k > 0 && isDigit(line[k-1]) {
				k--
			}
			if k == 0 || !isWordByte(line[k-1]) {
				return true
			}
		}
		if c == '(' && i >= 1 && i+3 < len(line) && isLetter(line[i-1]) && (i == 1 || !isWordByte(line[i-2])) &&
			isVariable(line[i+1]) && line[i+2] == ')' && strings.HasPrefix(strings.TrimLeft(line[i+3:], " "), "=") {
			return true
		}
	}
	return false
}

// isDerivative reports "d/dx", "dy/dx" or "dx/dt" around the "/d" at s[i].
func isDerivative(s string, i int) bool {
	if i == 0 || i+2 >= len(s) || !isLower(s[i+2]) || (i+3 < len(s) && isLetter(s[i+3])) {
		return false
	}
	k := i
	for k > 0 && isLetter(s[k-1]) {
		k--
	}
	w := s[k:i]
	return w == "d" || (len(w) == 2 && w[0] == 'd')
}

func isWordByte(c byte) bool { return isLetter(c) || isDigit(c) || c == '_' || c == '.' }

// isVariable reports the letters an equation's unknown is usually named.
func isVariable(c byte) bool {
	switch c {
	case 'x', 'y', 'z', 'n', 't', 'a', 'b', 'c':
		return true
	}
	return false
}
