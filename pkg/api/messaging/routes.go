package messaging

import (
	"net/http"

	"github.com/parleyhq/parley/pkg/api"
)

// AdminRoutes are messaging's rpc endpoint "admin": parleyctl's and the
// console's channel calls, and the conversations' chat state, AI sends
// and suggestions (chat.go) that the flow-runner's chat runs and the
// console's inbox call. The GET and DELETE routes of a conversation name
// its workspace in the query (?workspace_id=), the others in the body.
var AdminRoutes = []api.Route{
	{Method: http.MethodPost, Path: "/admin/channels", Request: NewChannel{}, Response: AdminChannelAnswer{}},
	{Method: http.MethodGet, Path: "/admin/channels", Response: AdminChannelList{}},
	{Method: http.MethodGet, Path: "/admin/channels/:id", Response: AdminChannelAnswer{}},
	{Method: http.MethodPatch, Path: "/admin/channels/:id", Request: SetChannelAIMode{}, Response: AdminChannelAnswer{}},

	{Method: http.MethodGet, Path: "/admin/conversations", Response: InboxPage{}},
	{Method: http.MethodGet, Path: "/admin/conversations/:id", Response: ConversationStateAnswer{}},
	{Method: http.MethodGet, Path: "/admin/conversations/:id/messages", Response: MessagePage{}},
	{Method: http.MethodPost, Path: "/admin/conversations/:id/messages", Request: SendOperatorMessage{}, Response: MessageSent{}},
	{Method: http.MethodPost, Path: "/admin/conversations/:id/ai-messages", Request: SendAIMessage{}, Response: AIMessageSent{}},
	{Method: http.MethodPut, Path: "/admin/conversations/:id/suggestion", Request: DraftSuggestion{}, Response: SuggestionAnswer{}},
	{Method: http.MethodGet, Path: "/admin/conversations/:id/suggestion", Response: SuggestionAnswer{}},
	{Method: http.MethodPost, Path: "/admin/conversations/:id/suggestion/send", Request: SendSuggestion{}, Response: SuggestionSent{}},
	{Method: http.MethodDelete, Path: "/admin/conversations/:id/suggestion", Response: ConversationStateAnswer{}},
	{Method: http.MethodPost, Path: "/admin/conversations/:id/handover", Request: ChangeConversation{}, Response: ConversationStateAnswer{}},
	{Method: http.MethodPost, Path: "/admin/conversations/:id/resume-ai", Request: ChangeConversation{}, Response: ConversationStateAnswer{}},
	{Method: http.MethodPost, Path: "/admin/conversations/:id/tags", Request: ChangeConversation{}, Response: ConversationStateAnswer{}},
	{Method: http.MethodPut, Path: "/admin/conversations/:id/assignee", Request: ChangeConversation{}, Response: ConversationStateAnswer{}},
	{Method: http.MethodPost, Path: "/admin/conversations/:id/unanswered", Request: ChangeConversation{}, Response: ConversationStateAnswer{}},
}

// APIRoutes are messaging's rpc endpoint "api": the public /v1 routes the
// gateway forwards for an authenticated workspace.
var APIRoutes = []api.Route{
	{Method: http.MethodGet, Path: "/v1/channels", Response: ChannelList{}},
	{Method: http.MethodGet, Path: "/v1/conversations", Response: ConversationPage{}},
	{Method: http.MethodGet, Path: "/v1/conversations/:id/messages", Response: MessagePage{}},
	{Method: http.MethodPost, Path: "/v1/messages", Request: SendMessage{}, Response: MessageSent{}},
	{Method: http.MethodPost, Path: "/v1/image", Request: SendImage{}, Response: ImageSent{}},
	{Method: http.MethodPost, Path: "/v1/carousel", Request: SendCarousel{}, Response: MessageSent{}},
	{Method: http.MethodPost, Path: "/v1/typing", Request: SendTyping{}, Response: OK{}},
	{Method: http.MethodGet, Path: "/v1/comments/:id", Response: CommentAnswer{}},
	{Method: http.MethodPost, Path: "/v1/comments/:id/reply", Request: CommentReply{}, Response: PublicReplySent{}},
	{Method: http.MethodPost, Path: "/v1/comments/:id/private-reply", Request: CommentReply{}, Response: PrivateReplySent{}},
}

// PublicRoutes are what messaging serves on its own listener (besides the
// probes): platform ingress, whose bodies are Telegram's and Meta's own
// formats (nil here), and the website widget: its page and launcher
// (HTML, JavaScript), its JSON routes and its event stream.
var PublicRoutes = []api.Route{
	{Method: http.MethodPost, Path: "/ingress/telegram/:channel_id"},
	{Method: http.MethodGet, Path: "/ingress/meta"},
	{Method: http.MethodPost, Path: "/ingress/meta"},
	{Method: http.MethodGet, Path: "/webchat/:channel_id"},
	{Method: http.MethodGet, Path: "/webchat/:channel_id/embed.js"},
	{Method: http.MethodPost, Path: "/webchat/:channel_id/session", Response: WebchatSession{}},
	{Method: http.MethodGet, Path: "/webchat/:channel_id/history", Response: WebchatHistory{}},
	{Method: http.MethodPost, Path: "/webchat/:channel_id/messages", Request: VisitorMessage{}, Response: WebchatReceived{}},
	{Method: http.MethodPost, Path: "/webchat/:channel_id/postbacks", Request: VisitorPostback{}, Response: WebchatReceived{}},
	// Server-sent events: WebchatEventMessage frames carry a
	// WebchatMessage.
	{Method: http.MethodGet, Path: "/webchat/:channel_id/events"},
}
