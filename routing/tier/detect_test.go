package tier

import "testing"

func TestFindCode(t *testing.T) {
	tests := []struct {
		name string
		text string
		want bool
	}{
		{"fenced", "look:\n```\nx\n```", true},
		{"tilde fence", "~~~\nls\n~~~", true},
		{"go unfenced", "func main() {\n\tx := 1\n\tfmt.Println(x)\n}", true},
		{"python unfenced", "def area(r):\n    pi = 3.14\n    return pi * r * r", true},
		{"python with bare statements", "for i in range(10):\n    if i == 3:\n        continue\n    total += i", true},
		{"js", "const x = require('x');\nx.on('data', (d) => {\n  console.log(d);\n});", true},
		{"sql", "SELECT name, email\nFROM users\nWHERE id = 3", true},
		{"c include", "#include <stdio.h>\nint main(void) {\n  return 0;\n}", true},
		{"java stack trace", "Exception in thread \"main\" java.lang.NullPointerException\n\tat com.acme.App.run(App.java:42)\n\tat com.acme.App.main(App.java:10)\n\tat java.base/java.lang.Thread.run(Thread.java:833)", true},
		{"python traceback", "Traceback (most recent call last):\n  File \"app.py\", line 3, in <module>\n    main()\n  File \"app.py\", line 2, in main\nValueError: bad", true},
		{"go panic", "panic: runtime error: index out of range\n\ngoroutine 1 [running]:\nmain.main()\n\t/home/u/main.go:12 +0x1d", true},
		{"html", "<div class=\"a\">\n  <p>Hello</p>\n</div>", true},
		{"shell session", "$ go build ./...\n$ ./app --port 8080\n$ curl localhost:8080", true},

		{"prose", "I went to the store today.\nThen I bought apples; they were fresh.\nIt was fun.", false},
		{"lowercase chat", "hey can you help me\nlet me know what you think\nfor example the thing\nif you can", false},
		{"bullets", "- item one (red);\n- item two {blue}\n- item three;\n* four;", false},
		{"numbered list ending in colons", "1. Preheat the oven:\n2. Mix flour (two cups):\n3. Bake:", false},
		{"two code lines are not enough", "x = 5\nprint(x)", false},
		{"email with prices", "Dear team,\nThe invoice totals $450 (plus tax).\nPlease pay by Friday.\nThanks, Ana", false},
		{"prose with arrows", "Login page leads to the dashboard.\nThen settings.\nThen profile.", false},
		{"recipe", "Ingredients:\n2 cups of flour\n1 cup of sugar\nMix well and bake for 30 minutes.", false},
		{"one long paragraph", "The quick brown fox jumps over the lazy dog; and then it runs away.", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got, d := findCode(tt.text); got != tt.want {
				t.Fatalf("findCode = %v (%s), want %v", got, d, tt.want)
			}
		})
	}
}

func TestFindMath(t *testing.T) {
	tests := []struct {
		text string
		want bool
	}{
		{`$$\int_0^1 x\,dx$$`, true},
		{`Show that \sum_{k=1}^n k = n(n+1)/2`, true},
		{"solve 2x + 3 = 7", true},
		{"f(x) = x + 1, find the inverse", true},
		{"x² + y² is a circle", true},
		{"compute dy/dx for y = sin x", true},
		{"∑ of all terms", true},
		{"e^{i pi} + 1", true},

		{"it costs $5 and $10 with tax", false},
		{"the 2x speedup was great", false},
		{"set mask = 0x1F in the config", false},
		{"hash = 3a7f9c", false},
		{`C:\Users\bob\Documents`, false},
		{"thanks — that’s great… really", false},
		{"use the regex [^a-z]+ here", false},
		{"timeout=5s", false},
	}
	for _, tt := range tests {
		if got := findMath(tt.text); (got != "") != tt.want {
			t.Errorf("findMath(%q) = %q, want match %v", tt.text, got, tt.want)
		}
	}
}

func TestFindReasoningWord(t *testing.T) {
	tests := []struct {
		text, want string
	}{
		{"Please ANALYZE the results", "analyze"},
		{"what's the root cause here?", "root cause"},
		{"walk me through it step by step", "step by step"},
		{"the trade-off between speed and size", "trade off"},
		{"Prove it.", "prove"},
		{"proven recipes for dinner", ""},
		{"designer shoes on sale", ""},
		{"thanks!", ""},
		{"debugger attached", ""},
	}
	for _, tt := range tests {
		if got := findReasoningWord(tt.text); got != tt.want {
			t.Errorf("findReasoningWord(%q) = %q, want %q", tt.text, got, tt.want)
		}
	}
	// only the head and the tail of a long message are read
	long := "Summarise this. " + prose(3*wordWindow) + " We must refactor. " + prose(3*wordWindow) + " Keep it short."
	if got := findReasoningWord(long); got != "" {
		t.Errorf("word in the middle of a paste matched %q", got)
	}
	if got := findReasoningWord(long + " Then optimize it."); got != "optimize" {
		t.Errorf("word in the tail: got %q", got)
	}
}
