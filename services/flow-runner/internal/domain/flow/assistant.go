package flow

import "sync"

// AssistantNodeID is the id of the assistant's ai_response node: its
// chat runs' trace shows it.
const AssistantNodeID = "assistant"

// assistantDocument is the built-in assistant as a flow: a channel without
// a chat flow runs it (docs/chat.md "The chat-only nodes").
const assistantDocument = `{
  "name": "Assistant",
  "description": "The built-in assistant: the knowledge base's top 3 passages and one LLM call answer the customer",
  "triggers": ["chat"],
  "nodes": [
    {"id": "start", "type": "start", "next": "assistant"},
    {"id": "assistant", "type": "ai_response", "knowledge": true, "top_k": 3, "next": "end"},
    {"id": "end", "type": "end"}
  ]
}`

var assistant = sync.OnceValue(func() *Definition {
	d, err := Parse([]byte(assistantDocument), ParseOptions{})
	if err != nil {
		panic("flow: the assistant's document: " + err.Error())
	}
	return d
})

// Assistant returns the built-in assistant's definition, start →
// ai_response (AssistantNodeID, knowledge on, top_k 3) → end, which the
// caller runs as a chat run's flow. It is shared: a Definition is
// immutable.
func Assistant() *Definition { return assistant() }
