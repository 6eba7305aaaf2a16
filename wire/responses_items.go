package wire

// The Responses API's input items (SPEC 10.1): decoded by the multi-pass
// path (parseInput) or by the one-pass reader (fastItems), both made Items
// by itemOf under one budget of content parts.

import (
	"bytes"
	"encoding/json"
	"fmt"

	"switchyard/internal/jsonspan"
)

// parseInput reads input: a string (one user message) or an array of items.
func parseInput(raw json.RawMessage, maxItems int) ([]Item, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	if raw[0] == '"' {
		s, ok := exactString(raw)
		if !ok && json.Unmarshal(raw, &s) != nil {
			return nil, badf("input", "input is not a valid JSON string")
		}
		return []Item{{Type: "message", Role: "user", Content: []Part{{Type: "input_text", Text: s}}}}, nil
	}
	if raw[0] != '[' {
		return nil, badf("input", "input must be a string or an array of input items")
	}
	// counted before anything is decoded, so the count bounds the
	// allocation (SPEC 14); content parts share one budget of maxItems
	n := countElements(raw)
	if n < 0 {
		return nil, badf("input", "input must be a string or an array of input items")
	}
	if n > maxItems {
		return nil, &Error{Param: "input", Code: "too_many_messages",
			Message: fmt.Sprintf("input has %d items; at most %d are allowed (server.max_messages)", n, maxItems)}
	}
	items := make([]Item, 0, n)
	parts := maxItems
	err := jsonspan.EachElement(raw, func(i int, ri []byte) error {
		it, err := parseItem(ri, i, &parts)
		if err != nil {
			return err
		}
		if it.Type != "" { // else a dropped item (reasoning)
			items = append(items, it)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return items, nil
}

// parseItem reads input item i; parts is what is left of the request's
// content-part budget.
func parseItem(raw json.RawMessage, i int, parts *int) (Item, error) {
	var ri rawItem
	if err := jsonspan.Decode(raw, &ri, fastItem); err != nil {
		return Item{}, badf(fmt.Sprintf("input[%d]", i), "input[%d] must be an object like {\"role\":\"user\",\"content\":\"...\"} or a typed item", i)
	}
	return itemOf(&ri, i, parts)
}

// itemOf is input item i, decoded as ri; parts is what is left of the
// request's content-part budget. A dropped item (reasoning) has no Type.
func itemOf(ri *rawItem, i int, parts *int) (Item, error) {
	typ := ri.Type
	switch {
	case typ != "":
	case ri.Role != "":
		typ = "message"
	case ri.ID != "":
		// an item reference's type is optional in OpenAI's reference
		// ("string or null"): {"id": ...} alone names a stored item
		typ = "item_reference"
	}
	it := Item{Type: typ, ID: ri.ID, Status: ri.Status}
	switch typ {
	case "message":
		switch ri.Role {
		case "user", "assistant", "system", "developer":
		case "":
			return Item{}, badf(fmt.Sprintf("input[%d].role", i), "input[%d].role is required for a message", i)
		default:
			return Item{}, badf(fmt.Sprintf("input[%d].role", i), "input[%d].role %q is not one of user, assistant, system, developer", i, ri.Role)
		}
		it.Role = ri.Role
		var content []Part
		var err error
		if ri.partsRead {
			content, err = partsOf(ri.parts, textTypeOf(ri.Role), i, parts)
		} else {
			content, err = parseParts(ri.Content, ri.Role, i, parts)
		}
		if err != nil {
			return Item{}, err
		}
		it.Content = content
	case "function_call":
		if ri.CallID == "" || ri.Name == "" {
			return Item{}, badf(fmt.Sprintf("input[%d]", i), "input[%d]: a function_call item needs \"call_id\" and \"name\"", i)
		}
		it.CallID, it.Name, it.Arguments = ri.CallID, ri.Name, ri.Arguments
	case "function_call_output":
		if ri.CallID == "" {
			return Item{}, badf(fmt.Sprintf("input[%d].call_id", i), "input[%d]: a function_call_output item needs \"call_id\"", i)
		}
		out, err := outputText(ri.Output)
		if err != nil {
			return Item{}, badf(fmt.Sprintf("input[%d].output", i), "input[%d].output must be a string or an array of input_text parts", i)
		}
		it.CallID, it.Output = ri.CallID, out
		if o := trimWS(ri.Output); len(o) > 0 && o[0] == '[' {
			it.OutputParts = true
		}
	case "item_reference":
		if ri.ID == "" {
			return Item{}, badf(fmt.Sprintf("input[%d].id", i), "input[%d]: an item_reference needs \"id\"", i)
		}
	case "reasoning":
		return Item{}, nil // reasoning items carry nothing a chat upstream can use
	case "":
		return Item{}, badf(fmt.Sprintf("input[%d].type", i), "input[%d] has neither \"type\" nor \"role\"", i)
	default:
		return Item{}, badf(fmt.Sprintf("input[%d].type", i), "input[%d].type %q is not supported: send message, function_call, function_call_output or item_reference items", i, typ)
	}
	return it, nil
}

func parseParts(raw json.RawMessage, role string, i int, budget *int) ([]Part, error) {
	raw = bytes.TrimSpace(raw)
	textType := textTypeOf(role)
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	if raw[0] == '"' {
		s, ok := exactString(raw)
		if !ok && json.Unmarshal(raw, &s) != nil {
			return nil, badf(fmt.Sprintf("input[%d].content", i), "input[%d].content is not a valid string", i)
		}
		return []Part{{Type: textType, Text: s}}, nil
	}
	n := countElements(raw)
	if n < 0 {
		return nil, badf(fmt.Sprintf("input[%d].content", i), "input[%d].content must be a string or an array of content parts", i)
	}
	if *budget -= n; *budget < 0 {
		return nil, errTooManyParts(i)
	}
	rps := make([]rawPart, 0, n) // exact: the decoder fills it without growing
	if err := decodeParts(raw, &rps); err != nil {
		return nil, badf(fmt.Sprintf("input[%d].content", i), "input[%d].content must be a string or an array of content parts", i)
	}
	return partsOf(rps, textType, i, nil)
}

// partsOf is the content of message item i from its parts, rps, with
// textType the type its text parts take; budget (nil when parseParts
// charged it already) is what is left of the request's content-part
// budget.
func partsOf(rps []rawPart, textType string, i int, budget *int) ([]Part, error) {
	if budget != nil {
		if *budget -= len(rps); *budget < 0 {
			return nil, errTooManyParts(i)
		}
	}
	parts := make([]Part, 0, len(rps))
	for j, p := range rps {
		param := fmt.Sprintf("input[%d].content[%d]", i, j)
		switch p.Type {
		case "input_text", "output_text", "text":
			parts = append(parts, Part{Type: textType, Text: p.Text})
		case "refusal":
			parts = append(parts, Part{Type: "refusal", Text: p.Refusal})
		case "input_image":
			if p.ImageURL == "" {
				return nil, badf(param, "%s: input_image needs \"image_url\" (an https or data: URL); file_id is not supported", param)
			}
			parts = append(parts, Part{Type: "input_image", ImageURL: p.ImageURL, Detail: p.Detail})
		default:
			return nil, badf(param+".type", "%s.type %q is not supported: use input_text, output_text or input_image", param, p.Type)
		}
	}
	return parts, nil
}

// textTypeOf is the type a text part of a message of role takes.
func textTypeOf(role string) string {
	if role == "assistant" {
		return "output_text"
	}
	return "input_text"
}

// errTooManyParts is the error of a request whose messages' content parts
// pass server.max_messages in all, at item i.
func errTooManyParts(i int) error {
	return &Error{Param: fmt.Sprintf("input[%d].content", i), Code: "too_many_messages",
		Message: "input has more content parts in all than server.max_messages allows: send fewer"}
}

// outputText flattens a function_call_output output.
func outputText(raw json.RawMessage) (string, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return "", nil
	}
	if raw[0] == '"' {
		if s, ok := exactString(raw); ok {
			return s, nil
		}
		var s string
		err := json.Unmarshal(raw, &s)
		return s, err
	}
	// only the text is kept: the parts are scanned in place, one at a time
	// (SPEC 14: no per-part allocation however many there are)
	text, _, err := messageText(raw, maxToolResultDepth)
	return text, err
}
