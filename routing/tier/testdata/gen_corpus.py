#!/usr/bin/env python3
"""Generates corpus.jsonl: labelled chat requests for the tier classifier.

Each line is {"name", "category", "tier", "format", "body"}. The tier is the
label a person would give under SPEC 4's intent (short chat to the cheap
model; reasoning-, code- or tool-heavy work to the strong one): "hard" when a
cheap model would likely give a noticeably worse answer (non-trivial code
work, multi-step tool use, reasoning beyond textbook material, long-document
analysis), "easy" otherwise, textbook proofs and single lookups included. Run from this directory:
    python3 gen_corpus.py > corpus.jsonl
"""
import json, random

rnd = random.Random(7)
out = []

def add(name, category, tier, messages=None, fmt="openai", **extra):
    body = {"model": "normal"}
    if fmt == "anthropic":
        body["max_tokens"] = extra.pop("max_tokens", 1024)
    if messages is not None:
        body["messages"] = messages
    body.update(extra)
    out.append({"name": name, "category": category, "tier": tier, "format": fmt, "body": body})

def u(t): return {"role": "user", "content": t}
def a(t): return {"role": "assistant", "content": t}
def s(t): return {"role": "system", "content": t}

SYS_ASSISTANT = "You are a helpful assistant. Answer concisely and accurately."

# ---------------------------------------------------------------- filler text
ARTICLE = [
    "The city council met on Tuesday to discuss the new bus routes that will connect the northern suburbs with the old town.",
    "Residents had complained for years that the last bus left too early, leaving shift workers without a way home.",
    "The proposal adds three night lines and moves two stops closer to the hospital and the university campus.",
    "Funding comes partly from the regional transport fund and partly from a small increase in parking fees downtown.",
    "Shop owners in the centre worried that higher parking fees would keep customers away during the busy holiday season.",
    "A survey of four hundred households found that most people would take the bus more often if it ran every ten minutes.",
    "The transport department expects ridership to grow by a fifth in the first year after the change.",
    "Cyclists asked for safer lanes along the river road, where trucks and buses share a narrow stretch of tarmac.",
    "The mayor said the council would publish the final timetable in the spring, after a second round of public meetings.",
    "Several speakers praised the drivers, who kept the service running through the winter storms last year.",
    "Older residents asked for more benches and shelters, since many stops offer no protection from rain or sun.",
    "The council also agreed to test electric buses on one line, with charging points at the main depot.",
    "Critics noted that the electric buses cost almost twice as much as diesel ones, although they are cheaper to run.",
    "A local school group presented drawings of how a greener bus station could look, with trees and a small cafe.",
    "The meeting ended late in the evening, and the vote on the budget was moved to the next session.",
]
def article(n):
    parts, total = [], 0
    while total < n:
        p = " ".join(rnd.choice(ARTICLE) for _ in range(5))
        parts.append(p)
        total += len(p) + 2
    return "\n\n".join(parts)[:n]

GO_HANDLER = '''func (s *Server) handleOrder(w http.ResponseWriter, r *http.Request) {
	var req OrderRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		http.Error(w, "bad request", http.StatusBadRequest)
		return
	}
	s.mu.Lock()
	order, ok := s.orders[req.ID]
	if !ok {
		order = &Order{ID: req.ID, Created: time.Now()}
		s.orders[req.ID] = order
	}
	order.Items = append(order.Items, req.Items...)
	s.mu.Unlock()
	go s.notify(order)
	total := 0.0
	for _, it := range order.Items {
		total += it.Price * float64(it.Qty)
	}
	order.Total = total
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(order)
}
'''
PY_ETL = '''import csv
import sqlite3
from datetime import datetime

def load_rows(path):
    with open(path, newline="") as f:
        reader = csv.DictReader(f)
        rows = []
        for row in reader:
            row["amount"] = float(row["amount"])
            row["date"] = datetime.strptime(row["date"], "%Y-%m-%d")
            rows.append(row)
    return rows

def save(rows, db="sales.db"):
    conn = sqlite3.connect(db)
    cur = conn.cursor()
    cur.execute("CREATE TABLE IF NOT EXISTS sales (id TEXT, amount REAL, date TEXT)")
    for r in rows:
        cur.execute("INSERT INTO sales VALUES (?, ?, ?)", (r["id"], r["amount"], r["date"].isoformat()))
    conn.commit()

def monthly_totals(rows):
    totals = {}
    for r in rows:
        key = r["date"].strftime("%Y-%m")
        totals[key] = totals.get(key, 0) + r["amount"]
    return totals

if __name__ == "__main__":
    rows = load_rows("sales.csv")
    save(rows)
    print(monthly_totals(rows))
'''
JS_COMPONENT = '''import React, { useEffect, useState } from "react";

export default function UserList({ teamId }) {
  const [users, setUsers] = useState([]);
  const [loading, setLoading] = useState(true);

  useEffect(() => {
    fetch(`/api/teams/${teamId}/users`)
      .then((res) => res.json())
      .then((data) => {
        setUsers(data.users);
        setLoading(false);
      });
  }, []);

  if (loading) return <p>Loading...</p>;
  return (
    <ul>
      {users.map((u) => (
        <li key={u.id}>{u.name} ({u.email})</li>
      ))}
    </ul>
  );
}
'''
JAVA_TRACE = '''Exception in thread "main" java.lang.NullPointerException: Cannot invoke "com.acme.billing.Invoice.getCustomer()" because "invoice" is null
	at com.acme.billing.InvoiceService.sendReminder(InvoiceService.java:88)
	at com.acme.billing.InvoiceService.lambda$remindAll$0(InvoiceService.java:61)
	at java.base/java.util.ArrayList.forEach(ArrayList.java:1511)
	at com.acme.billing.InvoiceService.remindAll(InvoiceService.java:60)
	at com.acme.billing.ReminderJob.run(ReminderJob.java:25)
	at java.base/java.util.concurrent.Executors$RunnableAdapter.call(Executors.java:539)
	at java.base/java.util.concurrent.FutureTask.run(FutureTask.java:264)
	at java.base/java.lang.Thread.run(Thread.java:833)'''
JAVA_CODE = '''public void remindAll(List<Long> ids) {
    List<Invoice> invoices = ids.stream().map(repo::findById).map(o -> o.orElse(null)).toList();
    invoices.forEach(invoice -> sendReminder(invoice));
}

private void sendReminder(Invoice invoice) {
    Customer c = invoice.getCustomer();
    if (c.getEmail() == null) {
        log.warn("no email for {}", c.getId());
        return;
    }
    mailer.send(c.getEmail(), template.render(invoice));
}'''
PY_TRACE = '''Traceback (most recent call last):
  File "/app/worker.py", line 142, in <module>
    main()
  File "/app/worker.py", line 131, in main
    process_batch(batch)
  File "/app/worker.py", line 97, in process_batch
    result = model.predict(features[idx])
  File "/usr/lib/python3.11/site-packages/sklearn/base.py", line 412, in predict
    X = self._validate_data(X, reset=False)
ValueError: Expected 2D array, got 1D array instead:
array=[0.2 0.7 1.3 0.4].
Reshape your data either using array.reshape(-1, 1) if your data has a single feature or array.reshape(1, -1) if it contains a single sample.'''
RUST_ERR = '''error[E0502]: cannot borrow `cache` as mutable because it is also borrowed as immutable
  --> src/main.rs:24:9
   |
22 |     let entry = cache.get(&key);
   |                 ----- immutable borrow occurs here
23 |     if entry.is_none() {
24 |         cache.insert(key.clone(), compute(&key));
   |         ^^^^^ mutable borrow occurs here
25 |     }
26 |     println!("{:?}", entry);
   |                      ----- immutable borrow later used here'''

def fence(lang, code): return "```" + lang + "\n" + code + "```"

# ---------------------------------------------------------------- greetings
add("hi", "greeting", "easy", [u("hi")])
add("hello with system", "greeting", "easy", [s(SYS_ASSISTANT), u("Hello there! How are you today?")])
add("good morning", "greeting", "easy", [u("good morning :)")])
add("thanks", "greeting", "easy", [u("thanks!")])
add("ok cool after answer", "greeting", "easy", [u("What time zone is Lisbon in?"), a("Lisbon uses Western European Time (UTC+0), and UTC+1 in summer."), u("ok cool, thx")])
add("anthropic hello", "greeting", "easy", [u("Hey Claude, quick hello from the team!")], fmt="anthropic", system="You are Claude, a friendly assistant.")

# ---------------------------------------------------------------- short Q&A
for name, q in [
    ("capital", "What is the capital of Australia?"),
    ("percent", "What's 15% of 80?"),
    ("units", "How many kilometres is 26.2 miles?"),
    ("author", "Who wrote One Hundred Years of Solitude?"),
    ("acronym", "What does HTTP stand for?"),
    ("cooking", "How long should I boil an egg for a runny yolk?"),
    ("grammar", "When do I use 'affect' vs 'effect'?"),
    ("synonyms", "Give me five synonyms for happy."),
    ("recommend", "Can you recommend a good book about the history of Rome for a beginner?"),
    ("dates", "What day of the week was 4 July 1976?"),
]:
    add("qa " + name, "short_qa", "easy", [s(SYS_ASSISTANT), u(q)])
add("qa git command", "short_qa", "easy", [u("What's the git command to undo my last commit but keep the changes?")])
add("qa regex meaning", "short_qa", "easy", [u("What does the regex `^\\d{3}-\\d{4}$` match?")])

# ---------------------------------------------------------------- translation
add("translate sentence de", "translation", "easy", [u("Translate to German: 'The meeting has been moved to Thursday afternoon.'")])
add("translate sentence es", "translation", "easy", [s("You are a professional translator."), u("Translate into Spanish: Please leave the keys at the front desk when you check out.")])
add("translate paragraph fr", "translation", "easy", [u("Translate this into French, keep the tone friendly:\n\n" + article(700))])
add("translate long doc", "translation", "easy", [s("You are a professional translator. Keep formatting."), u("Translate the following press release into Italian:\n\n" + article(3500))])
add("translate idiom", "translation", "easy", [u("How would you say 'it's raining cats and dogs' in Japanese, and what's the literal meaning?")])
add("translate email pt", "translation", "easy", [u("Can you translate this email to Portuguese?\n\nHi Marta,\nThanks for sending the samples so quickly. We liked the blue fabric best.\nCould you send a price list for 200 metres?\nBest,\nJonas")])

# ---------------------------------------------------------------- code: short (easy) and review (hard)
add("code what does line do", "code_short", "easy", [u("What does this line do?\n```python\nnums = [x * 2 for x in nums if x > 0]\n```")])
add("code snippet error", "code_short", "easy", [u("Why does this give an error?\n```js\nconst a = 1;\na = 2;\n```")])
add("code snippet rename", "code_short", "easy", [u("Rename the variable to something clearer:\n```go\nfor _, x := range xs {\n\ttotal += x\n}\n```")])
add("code sql short", "code_short", "easy", [u("Is this SQL correct?\nSELECT name, COUNT(*)\nFROM orders\nGROUP BY name;")])
add("review go handler", "code_review", "hard", [s("You are a senior Go reviewer."), u("Please review this handler for bugs, races and style issues. It is used in production and we saw occasional panics under load.\n\n" + fence("go", GO_HANDLER) + "\nAlso, is the JSON encoding at the end correct if the client disconnects? And is there anything wrong with how notify is started?")])
add("review python etl", "code_review", "hard", [u("Can you review this ETL script? I want it faster and safer before we run it on 50 million rows.\n\n" + fence("python", PY_ETL))])
add("review react component", "code_review", "hard", [u("Code review please. The list sometimes shows users from the previous team after switching teams. Here is the component:\n\n" + fence("jsx", JS_COMPONENT) + "\nWe render it inside a tab view that keeps components mounted. What's wrong, and how would you restructure the data fetching so it also handles errors and cancellation?")])
add("review unfenced python", "code_review", "hard", [u("review this pls, anything wrong?\n\n" + PY_ETL + "\n\nthe sales.csv is about 2GB btw and we run it every night")])
add("write function with tests", "code_review", "hard", [u("Write a Go function that merges overlapping intervals, with table-driven tests and benchmarks. Handle empty input, unsorted input and intervals that only touch. Explain the complexity."), ])

# ---------------------------------------------------------------- debugging with traces
add("debug java npe", "debugging", "hard", [u("Our nightly reminder job crashes with this:\n\n" + JAVA_TRACE + "\n\nHere is the service code:\n\n" + fence("java", JAVA_CODE) + "\n\nWhy is invoice null and what's the right fix?")])
add("debug python valueerror", "debugging", "hard", [u("Getting this when the worker runs, please help me debug:\n\n" + PY_TRACE)])
add("debug rust borrow", "debugging", "hard", [u("I can't get this to compile:\n\n" + RUST_ERR + "\n\nHow do I restructure it? The cache is a HashMap<String, Vec<u8>>.")])
add("debug go race", "debugging", "hard", [u("go test -race reports a data race in this code, I don't see why:\n\n" + fence("go", GO_HANDLER) + "\n\nWARNING: DATA RACE\nWrite at 0x00c0001a2f40 by goroutine 12:\n  main.(*Server).handleOrder()\n      /src/server.go:21 +0x3a4\nPrevious read at 0x00c0001a2f40 by goroutine 14:\n  main.(*Server).notify()\n      /src/notify.go:9 +0x64")])
add("debug short error meaning", "debugging", "easy", [u("What does 'TypeError: Cannot read properties of undefined' usually mean in JavaScript?")])
add("debug conversation follow-up", "debugging", "hard", [
    u("My Flask app returns 500 on /login.\n\n" + PY_TRACE),
    a("The traceback shows the model gets a 1D array. Reshape `features[idx]` with `.reshape(1, -1)` before calling predict."),
    u("Did that, now I get a different one:\n```\nValueError: X has 3 features, but LogisticRegression is expecting 4 features as input.\n```\nThe feature list is built in build_features() from the request form. What's the root cause?")])

# ---------------------------------------------------------------- agent tool loops
def fn_tool(name, desc, props):
    return {"type": "function", "function": {"name": name, "description": desc, "parameters": {"type": "object", "properties": {p: {"type": "string"} for p in props}, "required": props}}}
CODING_TOOLS = [fn_tool("read_file", "Read a file", ["path"]), fn_tool("write_file", "Write a file", ["path", "content"]),
                fn_tool("run_shell", "Run a shell command", ["command"]), fn_tool("search_code", "Search the repo", ["query"]),
                fn_tool("list_dir", "List a directory", ["path"]), fn_tool("apply_patch", "Apply a diff", ["patch"])]
AGENT_SYS = "You are a coding agent working in the user's repository. Use the tools to read, edit and test code. " * 40
def call(id_, name, args): return {"role": "assistant", "content": None, "tool_calls": [{"id": id_, "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}]}
def tres(id_, content): return {"role": "tool", "tool_call_id": id_, "content": content}

add("agent read and fix", "agent", "hard", [s(AGENT_SYS), u("The order total is wrong when an item is added twice. Fix it."),
    call("c1", "search_code", {"query": "order.Total"}), tres("c1", "server.go:28: order.Total = total"),
    call("c2", "read_file", {"path": "server.go"}), tres("c2", GO_HANDLER)], tools=CODING_TOOLS)
add("agent run tests", "agent", "hard", [s(AGENT_SYS), u("Run the tests and fix whatever fails."),
    call("c1", "run_shell", {"command": "go test ./..."}), tres("c1", "--- FAIL: TestTotal (0.00s)\n    order_test.go:31: total = 30, want 20\nFAIL\nFAIL\tshop/server\t0.012s"),
    call("c2", "read_file", {"path": "order_test.go"}), tres("c2", "func TestTotal(t *testing.T) {\n\ts := newServer()\n\tpost(t, s, `{\"id\":\"1\",\"items\":[{\"price\":10,\"qty\":2}]}`)\n\tif got := s.orders[\"1\"].Total; got != 20 {\n\t\tt.Fatalf(\"total = %v, want 20\", got)\n\t}\n}")], tools=CODING_TOOLS)
add("agent first turn", "agent", "hard", [s(AGENT_SYS), u("Add a --verbose flag to the CLI that prints each HTTP request it makes. The flag parsing lives in cmd/root.go.")], tools=CODING_TOOLS)
add("agent list dir loop", "agent", "hard", [s(AGENT_SYS), u("Refactor the config loading so it reads YAML instead of JSON."),
    call("c1", "list_dir", {"path": "config"}), tres("c1", "config.go\nconfig_test.go\nload.go\ndefaults.json"),
    call("c2", "read_file", {"path": "config/load.go"}), tres("c2", "package config\n\nimport (\n\t\"encoding/json\"\n\t\"os\"\n)\n\nfunc Load(path string) (*Config, error) {\n\tb, err := os.ReadFile(path)\n\tif err != nil {\n\t\treturn nil, err\n\t}\n\tvar c Config\n\treturn &c, json.Unmarshal(b, &c)\n}\n")], tools=CODING_TOOLS)
WEATHER = [fn_tool("get_weather", "Current weather for a city", ["city"])]
add("agent weather", "agent_simple", "easy", [u("What's the weather in Paris right now?"), call("w1", "get_weather", {"city": "Paris"}), tres("w1", '{"temp_c": 18, "conditions": "light rain", "wind_kmh": 12}')], tools=WEATHER)
add("agent weather first turn", "agent_simple", "easy", [u("Is it cold in Oslo today?")], tools=WEATHER)
SUPPORT_TOOLS = [fn_tool("lookup_order", "Find an order", ["order_id"]), fn_tool("refund", "Refund an order", ["order_id", "reason"])]
add("agent support order status", "agent_simple", "easy", [s("You are a support agent for a shoe shop."), u("Where is my order 88123?"), call("s1", "lookup_order", {"order_id": "88123"}), tres("s1", '{"status": "shipped", "carrier": "DHL", "eta": "2026-03-14"}')], tools=SUPPORT_TOOLS)
add("agent calendar", "agent_simple", "easy", [u("Add lunch with Sam on Friday at 1pm to my calendar.")], tools=[fn_tool("create_event", "Create a calendar event", ["title", "start"])])
# Anthropic, Claude Code-like: big system prompt, many tools, tool_result blocks with file contents.
CC_TOOLS = [{"name": n, "description": "Tool " + n + ". " * 50, "input_schema": {"type": "object", "properties": {"path": {"type": "string"}}}} for n in ["Read", "Edit", "Bash", "Grep", "Glob", "Write", "TodoWrite"]]
add("claude code edit loop", "agent", "hard", [
    {"role": "user", "content": [{"type": "text", "text": "Make the order handler return 400 when items is empty."}]},
    {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "Read", "input": {"path": "server.go"}}]},
    {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": GO_HANDLER}]}],
    fmt="anthropic", system="You are Claude Code, an interactive CLI tool that helps users with software engineering tasks. " * 60, tools=CC_TOOLS, max_tokens=32000)
add("claude code quick question", "agent", "easy", [{"role": "user", "content": "which file defines the Order struct?"}],
    fmt="anthropic", system="You are Claude Code, an interactive CLI tool that helps users with software engineering tasks. " * 60, tools=CC_TOOLS, max_tokens=32000)

# ---------------------------------------------------------------- long documents
add("summarise article 10k", "summarisation", "easy", [u("Summarise this article in five bullet points:\n\n" + article(10000))])
add("summarise article 40k", "summarisation", "easy", [s(SYS_ASSISTANT), u("Give me a one-paragraph summary of the following minutes:\n\n" + article(40000))])
add("summarise 3k tldr", "summarisation", "easy", [u("tl;dr please\n\n" + article(3000))])
add("long doc analysis", "summarisation", "hard", [u("Here are the minutes of the last three council meetings. Analyze how the council's position on the parking fees shifted, what trade-offs each faction argued, and which claims are not supported by the survey data.\n\n" + article(30000))])
add("long doc compare", "summarisation", "hard", [u("Compare these two drafts clause by clause and list every change in obligations, with the risk each change creates for us.\n\nDRAFT A\n\n" + article(12000) + "\n\nDRAFT B\n\n" + article(12000))], max_tokens=8000)
add("long doc questions", "summarisation", "easy", [u(article(9000) + "\n\nWhen will the final timetable be published?")])

# ---------------------------------------------------------------- math
add("math proof sqrt2", "math", "easy", [u("Prove that $\\sqrt{2}$ is irrational.")])
add("math induction", "math", "easy", [u("Prove by induction that $\\sum_{k=1}^{n} k^3 = \\left(\\frac{n(n+1)}{2}\\right)^2$ for all $n \\ge 1$. Show every step of the inductive step.")])
add("math derive quadratic", "math", "easy", [s("You are a patient math tutor."), u("Derive the quadratic formula from ax^2 + bx + c = 0 by completing the square, step by step.")])
add("math proof with attempt", "math", "hard", [u("I'm trying to prove that every bounded monotone sequence of reals converges. Here's my attempt, please check it rigorously:\n\n" + "Let $(a_n)$ be increasing and bounded above. By the completeness axiom, $s = \\sup\\{a_n\\}$ exists. Let $\\epsilon > 0$. Since $s - \\epsilon$ is not an upper bound, there is $N$ with $a_N > s - \\epsilon$. For $n \\ge N$, $a_n \\ge a_N$, so $|a_n - s| < \\epsilon$. " * 6 + "\n\nIs the argument complete? What about decreasing sequences?")])
add("math simple arithmetic", "math", "easy", [u("what is 17 * 23?")])
add("math solve linear", "math", "easy", [u("Solve for x: 2x + 3 = 11")])
add("math integral", "math", "hard", [u("Evaluate $$\\int_0^{\\infty} \\frac{\\sin x}{x}\\,dx$$ and prove your answer is correct, deriving it with a contour integral.")])

# ---------------------------------------------------------------- structured extraction
SCHEMA = {"type": "json_schema", "json_schema": {"name": "invoice", "schema": {"type": "object", "properties": {"vendor": {"type": "string"}, "total": {"type": "number"}, "date": {"type": "string"}}, "required": ["vendor", "total", "date"]}}}
add("extract invoice", "extraction", "easy", [s("Extract the fields."), u("Invoice from Blue Harbor Supplies, dated 3 March 2026, total due EUR 1,284.50, payable within 30 days.")], response_format=SCHEMA)
add("extract contact", "extraction", "easy", [u("Pull out name, phone and email: 'Call me - Dana Whitfield, 555-0142, dana.w@example.org'")], response_format={"type": "json_schema", "json_schema": {"name": "contact", "schema": {"type": "object"}}})
add("extract from 3k letter", "extraction", "easy", [u("Extract the sender, date and the main request from this letter:\n\n" + article(3000))], response_format=SCHEMA)
add("extract json_object mode", "extraction", "easy", [u("Return a JSON object with keys city and country for: 'I flew into Porto last week.'")], response_format={"type": "json_object"})
add("extract contract analysis", "extraction", "hard", [s("You are a contracts analyst."), u("Analyze this supply agreement and extract every obligation, its deadline, the penalty and the party responsible:\n\n" + article(20000))], response_format=SCHEMA, max_tokens=6000)
add("extract table from html", "extraction", "easy", [u("Extract the rows as JSON:\n<table>\n<tr><td>Apples</td><td>3</td></tr>\n<tr><td>Pears</td><td>5</td></tr>\n</table>")], response_format=SCHEMA)

# ---------------------------------------------------------------- design / reasoning / misc
add("design system", "reasoning", "hard", [u("Design the architecture for a chat service with 10 million daily users: storage, fan-out, presence and push notifications. Discuss the trade-offs of each choice.")])
add("reasoning effort flag", "reasoning", "hard", [u("Which of these two plans is better?")], reasoning_effort="high")
add("reasoning effort low", "reasoning", "easy", [u("Give me a name for a cat.")], reasoning_effort="low")
add("anthropic thinking", "reasoning", "hard", [u("Plan a 5-day itinerary for Kyoto.")], fmt="anthropic", thinking={"type": "enabled", "budget_tokens": 4000})
add("optimize query", "reasoning", "hard", [u("This query takes 40 seconds on a 200M row table. How do I optimize it?\n\nSELECT c.name, SUM(o.amount)\nFROM customers c\nJOIN orders o ON o.customer_id = c.id\nWHERE o.created_at > now() - interval '30 days'\nGROUP BY c.name\nORDER BY 2 DESC;")])
add("poem", "creative", "easy", [u("Write a short poem about autumn leaves.")])
add("long story", "creative", "easy", [u("Write a 3000-word bedtime story about a dragon who is afraid of the dark.")], max_tokens=6000)
add("rewrite email", "creative", "easy", [u("Make this email more polite: 'Send me the report today. It's late.'")])
deep = []
for q, r in [("Hi! Planning a trip to Spain.", "Great! Which cities?"), ("Madrid and Seville.", "Lovely choice."), ("How do I get between them?", "The AVE train takes about 2.5 hours."),
             ("Is it expensive?", "Usually 30 to 80 euros."), ("Ok and what to eat in Seville?", "Try salmorejo and tapas in Triana.")]:
    deep += [u(q), a(r)]
add("deep casual chat", "chat", "easy", [s(SYS_ASSISTANT)] + deep + [u("Any tips for the heat in summer?")])
add("explain concept", "short_qa", "easy", [u("Explain what a mutex is in two sentences.")])

for o in out:
    print(json.dumps(o, ensure_ascii=False))
